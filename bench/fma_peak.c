/* fma_peak: the machine's single-precision FMA peak, measured, so that the
 * benchmarks can quote a fraction of it rather than of a data sheet.
 *
 * Each thread runs independent chains of vector FMAs (enough of them to
 * cover the FMA latency on every current x86 core) for a fixed count and
 * the best of several timings is kept. The widest instruction set the CPU
 * has is chosen at run time: AVX-512, then AVX2+FMA; without either (or off
 * x86) a plain loop the compiler vectorises as it can. Prints
 *
 *     fma_peak isa avx2 threads 1 gflops 102.3
 *     fma_peak isa avx2 threads 2 gflops 204.1
 *
 *     fma_peak [THREADS...]   (default: 1 and the OpenMP maximum) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define X86 1
#endif

enum { CHAINS = 12, ITERS = 20 * 1000 * 1000 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each returns the multiply-adds done (per lane) and leaves a value that
 * depends on every chain in *sink, so nothing is optimised away. */
#ifdef X86
__attribute__((target("avx512f"))) static double run_avx512(long iters, float *sink)
{
    __m512 acc[CHAINS];
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    __m512 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_ps(s, acc[c]);
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * CHAINS * 16;
}

__attribute__((target("avx2,fma"))) static double run_avx2(long iters, float *sink)
{
    __m256 acc[CHAINS];
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    __m256 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm256_add_ps(s, acc[c]);
    float v[8];
    _mm256_storeu_ps(v, s);
    *sink = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    return (double)iters * CHAINS * 8;
}
#endif

static double run_plain(long iters, float *sink)
{
    float acc[CHAINS * 8];
    for (int c = 0; c < CHAINS * 8; c++) acc[c] = (float)c;
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS * 8; c++) acc[c] = acc[c] * 0.999999f + 1e-7f;
    float s = 0;
    for (int c = 0; c < CHAINS * 8; c++) s += acc[c];
    *sink = s;
    return (double)iters * CHAINS * 8;
}

typedef double (*kernel)(long, float *);

/* GFLOP/s of `threads` threads each running k (two flops per multiply-add). */
static double measure(kernel k, int threads)
{
    double best = 0;
    float sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now(), flops = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : flops)
#endif
        {
            float s;
            flops += 2 * k(ITERS / 10, &s);
#ifdef _OPENMP
#pragma omp critical
#endif
            sink += s;
        }
        double g = flops / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    if (sink == 12345.f) printf("#");
    (void)threads;
    return best;
}

int main(int argc, char **argv)
{
    kernel k = run_plain;
    const char *isa = "plain";
#ifdef X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) k = run_avx512, isa = "avx512";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) k = run_avx2, isa = "avx2";
    /* Some cores run 512-bit FMAs at half rate (two 256-bit halves): the
     * peak is the better of the two widths. */
    if (k == run_avx512 && __builtin_cpu_supports("fma") && measure(run_avx2, 1) > measure(run_avx512, 1))
        k = run_avx2, isa = "avx2";
#endif
    int max_threads = 1;
#ifdef _OPENMP
    max_threads = omp_get_max_threads();
#endif
    int list[16], n = 0;
    for (int i = 1; i < argc && n < 16; i++) list[n++] = atoi(argv[i]);
    if (!n) {
        list[n++] = 1;
        if (max_threads > 1) list[n++] = max_threads;
    }
    for (int i = 0; i < n; i++)
        if (list[i] > 0) printf("fma_peak isa %s threads %d gflops %.1f\n", isa, list[i], measure(k, list[i]));
    return 0;
}
