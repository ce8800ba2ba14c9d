/* Dense matrix products: CBLAS when nabla was built with it, and otherwise a
 * blocked kernel in the manner of BLIS/GotoBLAS.
 *
 * The blocked kernel copies a KC x NC slab of op(B) and an MC x KC block of
 * op(A) into "packed" buffers laid out exactly in the order the micro-kernel
 * reads them (MR-row and NR-column strips, zero padded at the edges), so the
 * inner loop streams through memory with unit stride whatever the transpose
 * flags and leading dimensions were. The micro-kernel keeps an MR x NR tile
 * of C in registers for a whole KC run. Block sizes aim at the usual cache
 * hierarchy: a packed A block (MC x KC) stays in L2, a strip of packed B
 * (KC x NR) in L1, the B slab in L3.
 *
 * The whole file is compiled at -O3 whatever the build type, because a Debug
 * build of an unvectorised GEMM is slow enough to make tests of larger
 * models crawl. On x86-64 the macro-kernel is also compiled for AVX2+FMA and
 * picked at run time, so a generic build still uses the wide units. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=fast")
#endif

#include <stdatomic.h>
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "gemm.h"
#include "simd.h"

#ifdef NABLA_HAVE_CBLAS
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#endif
#include "team.h"
#include "../../comm/comm_internal.h"

/* On x86-64 a second copy of the inner kernels is compiled for AVX2+FMA and
 * chosen at run time, so that a generic build still uses the wide units. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(NABLA_NO_AVX2)
#define GEMM_X86_AVX2 1
#define GEMM_AVX2_ATTR __attribute__((target("avx2,fma")))
#define GEMM_AVX512_ATTR __attribute__((target("avx512f,avx512vl,avx2,fma")))
#endif

/* The widest instruction set the kernels may use: what the CPU has, capped
 * by NABLA_ISA (generic, avx2 or avx512) or by nb_gemm_limit_isa, so that
 * each variant can be tested, and timed, on the one machine. */
static int gemm_isa_cap = -1; /* -1: not read yet */

static int gemm_isa(void)
{
    int cap = __atomic_load_n(&gemm_isa_cap, __ATOMIC_RELAXED);
    if (cap < 0) {
        const char *e = getenv("NABLA_ISA");
        cap = !e                    ? NB_ISA_AVX512
            : !strcmp(e, "generic") ? NB_ISA_GENERIC
            : !strcmp(e, "avx2")    ? NB_ISA_AVX2
                                    : NB_ISA_AVX512;
        __atomic_store_n(&gemm_isa_cap, cap, __ATOMIC_RELAXED);
    }
    /* What the CPU has, asked once: the packing asks for every strip. */
    static int have = -1;
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        h = NB_ISA_GENERIC;
#ifdef GEMM_X86_AVX2
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) h = NB_ISA_AVX2;
        if (h == NB_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
            h = NB_ISA_AVX512;
#endif
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h < cap ? h : cap;
}

void nb_gemm_limit_isa(int isa) { __atomic_store_n(&gemm_isa_cap, isa, __ATOMIC_RELAXED); }

int nb_gemm_isa(void) { return gemm_isa(); }

/* Whether products go to the BLAS nabla was built with (none: never). By
 * default only where the blocked kernel would run its generic variant: with
 * AVX2 it was level with OpenBLAS or faster on the training steps of
 * bench_train (LeNet, whose convolutions it packs itself, 1.13x at one
 * thread and 1.18x at two; Zen 3), and AVX-512 does twice its work a cycle.
 * NABLA_BLAS=1 or 0, or nb_gemm_use_blas, decides instead, so that the
 * tests check both providers and either can be timed. */
#ifdef NABLA_HAVE_CBLAS
static int gemm_blas_mode = -1; /* -1: not read yet */

static bool gemm_blas(void)
{
    int mode = __atomic_load_n(&gemm_blas_mode, __ATOMIC_RELAXED);
    if (mode < 0) {
        const char *e = getenv("NABLA_BLAS");
        mode = e && !strcmp(e, "0") ? NB_GEMM_BLAS_OFF : e && !strcmp(e, "1") ? NB_GEMM_BLAS_ON : NB_GEMM_BLAS_AUTO;
        __atomic_store_n(&gemm_blas_mode, mode, __ATOMIC_RELAXED);
    }
    return mode == NB_GEMM_BLAS_AUTO ? gemm_isa() == NB_ISA_GENERIC : mode == NB_GEMM_BLAS_ON;
}
#else
static bool gemm_blas(void) { return false; }
#endif

bool nb_gemm_use_blas(int mode)
{
#ifdef NABLA_HAVE_CBLAS
    __atomic_store_n(&gemm_blas_mode, mode, __ATOMIC_RELAXED);
    return true;
#else
    (void)mode;
    return false;
#endif
}

#ifdef GEMM_X86_AVX2
static bool gemm_have_avx2(void) { return gemm_isa() >= NB_ISA_AVX2; }
#endif

/* Threads come from the kernels' team (team.h). One thread enters no team
 * run at all: attention makes thousands of small products a step. */
#define GEMM_INLINE static inline __attribute__((always_inline))

/* Problems below this many multiply-adds skip packing: its fixed cost would
 * dominate. */
#define GEMM_SMALL_WORK (24 * 24 * 24)
/* And below this many the blocked kernel runs on one thread, as it does
 * when its threads would get fewer than GEMM_PARALLEL_ROWS rows of C each
 * (the team shares C out by rows: a short share runs its micro-kernel on
 * partly empty tiles, and the packing of B does not shrink with it). The
 * bound is one of time: with AVX-512 a thread does twice the work in the
 * same time, and at 128^3 the MLP step at batch 16 (two products of 3.2
 * million multiply-adds) took longer at two threads than at one there:
 * 0.39-0.79 ms against 0.23-0.27. With AVX2 (Zen 3), from 128^3 the
 * LSTM's per-step products (32 x 512 x 128) split, and at two threads its
 * step went from 29.8 to 22.3 ms (static; eager 32.7 to 23.6), the MLP step
 * at batch 16 from 0.247 to 0.153 (alternated builds, medians of four). */
#define GEMM_PARALLEL_WORK_AVX512 (192.0 * 192 * 192)
#define GEMM_PARALLEL_WORK_AVX2 (128.0 * 128 * 128)
#define GEMM_PARALLEL_ROWS 24
/* Then it splits C by columns instead when each thread gets this many. */
#define GEMM_PARALLEL_COLS 64
/* Split by columns, C goes out in this many chunks a thread, taken in turn:
 * a fixed half each left the main thread waiting for the other in 12% of
 * the 784-1024-1024-10 step at two threads (perf), whenever the host slowed
 * one of the two. Each thread then keeps the whole of A packed, when A needs
 * packing and that takes at most GEMM_A_WHOLE_BYTES; otherwise the split is
 * fixed, each share packing A once. */
#define GEMM_COL_CHUNKS 4
/* Split by rows, the tail's blocks are this many times shorter (blocked_team). */
#define GEMM_TAIL_DIV 4
#define GEMM_A_WHOLE_BYTES ((int64_t)1 << 20)
/* Products of at most this many rows read B in place (blocked_team). */
#define GEMM_B_IN_PLACE_ROWS NB_GEMM_B_IN_PLACE_ROWS

/* A row of zeros as long as any packed slice of K (KC is 256 for every
 * instance; doubles need twice the bytes): what the packing reads for the
 * rows of A and columns of B past the edge of a partial strip. */
#define GEMM_ZEROS_KC 256
static const double gemm_zeros[GEMM_ZEROS_KC] __attribute__((aligned(64)));

/* Device memory: 64-byte aligned. */
static void *gemm_alloc(size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63;
    return nb_device_alloc(NB_DEVICE_CPU, bytes ? bytes : 64);
}

static double gemm_parallel_work(void)
{
    return gemm_isa() >= NB_ISA_AVX512 ? GEMM_PARALLEL_WORK_AVX512 : GEMM_PARALLEL_WORK_AVX2;
}

static int gemm_threads(int64_t M, int64_t N, int64_t K)
{
    /* A GEMM called from inside a parallel loop (batched matmul) runs on
     * the calling thread: nested teams would only oversubscribe. */
    if (nb_team_busy()) return 1;
    if ((double)M * (double)N * (double)K < gemm_parallel_work()) return 1;
    int nt = nb_team_size();
    while (nt > 1 && M < (int64_t)nt * GEMM_PARALLEL_ROWS) nt--;
    return nt;
}

/* ---- everything below is stamped out once per element type --------------- */

/* C := beta * C for the degenerate products (K == 0 or alpha == 0). With
 * beta == 0, C is overwritten, so NaNs already in C do not survive. */
#define GEMM_SCALE(T, SUF)                                                                     \
    static void scale_##SUF(int64_t M, int64_t N, T beta, T *C, int64_t ldc)                    \
    {                                                                                          \
        for (int64_t i = 0; i < M; i++) {                                                      \
            T *c = C + i * ldc;                                                                \
            if (beta == 0)                                                                     \
                for (int64_t j = 0; j < N; j++) c[j] = 0;                                      \
            else if (beta != 1)                                                                \
                for (int64_t j = 0; j < N; j++) c[j] *= beta;                                  \
        }                                                                                      \
    }

/* Dot product of a (stride sa) and b (stride sb). Eight partial sums let
 * the compiler vectorise without reassociating one sum, and are a little
 * more accurate than a single running total. */
#define GEMM_DOT(T, SUF)                                                                       \
    GEMM_INLINE T dot_##SUF(const T *a, int64_t sa, const T *b, int64_t sb, int64_t K)          \
    {                                                                                          \
        T s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                     \
        int64_t k = 0;                                                                         \
        if (sa == 1 && sb == 1) {                                                              \
            for (; k + 8 <= K; k += 8)                                                         \
                for (int u = 0; u < 8; u++) s[u] += a[k + u] * b[k + u];                       \
        }                                                                                      \
        for (; k < K; k++) s[0] += a[k * sa] * b[k * sb];                                      \
        return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));              \
    }

/* Row i of C. Element (i, k) of op(A) is A[i * ar + k * ak]; (k, j) of op(B) is
 * B[k * bk + j * bj]. Stamped out per instruction set: the row loop of a
 * vector-matrix product is most of a step at batch 1, and compiled for the
 * baseline it ran four floats at a time, its speed moving by a third with where
 * the loop fell against the 64-byte lines of the code. */
#define GEMM_SMALL_ROWS(T, SUF, NAME, ATTR)                                                    \
    ATTR GEMM_INLINE void NAME##_row(const small_job_##SUF *j, int64_t i)                      \
    {                                                                                          \
        const int64_t N = j->N, K = j->K, ak = j->ak, bk = j->bk, bj = j->bj;                  \
        const T alpha = j->alpha, beta = j->beta, *B = j->B;                                   \
        T *restrict c = j->C + i * j->ldc;                                                     \
        const T *a = j->A + i * j->ar;                                                         \
        if (j->axpy) {                                                                         \
            if (beta == 0)                                                                     \
                for (int64_t j = 0; j < N; j++) c[j] = 0;                                      \
            else if (beta != 1)                                                                \
                for (int64_t j = 0; j < N; j++) c[j] *= beta;                                  \
            for (int64_t k = 0; k < K; k++) {                                                  \
                T aik = alpha * a[k * ak];                                                     \
                const T *restrict b = B + k * bk;                                              \
                NB_OMP_SIMD                                                                    \
                for (int64_t j = 0; j < N; j++) c[j] += aik * b[j];                            \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t jj = 0; jj < N; jj++) {                                               \
                T d = alpha * dot_##SUF(a, ak, B + jj * bj, bk, K);                             \
                c[jj] = beta == 0 ? d : d + beta * c[jj];                                      \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    ATTR static void NAME##_rows(void *arg, int64_t lo, int64_t hi)                            \
    {                                                                                          \
        const small_job_##SUF *j = arg;                                                        \
        for (int64_t i = lo; i < hi; i++) NAME##_row(j, i);                                    \
    }
#ifdef GEMM_X86_AVX2
#define GEMM_SMALL_AVX2(T, SUF) GEMM_SMALL_ROWS(T, SUF, avx2_small_##SUF, GEMM_AVX2_ATTR)
#define GEMM_SMALL_PICK(SUF) (gemm_have_avx2() ? avx2_small_##SUF##_rows : gen_small_##SUF##_rows)
#else
#define GEMM_SMALL_AVX2(T, SUF)
#define GEMM_SMALL_PICK(SUF) gen_small_##SUF##_rows
#endif

/* Small products, matrix-vector and vector-matrix shapes: no packing, loops
 * ordered so the innermost one walks memory with unit stride when it can.
 * Rows are independent, so big matrix-vector products split them among
 * threads. */
#define GEMM_SMALL(T, SUF)                                                                     \
    typedef struct small_job_##SUF {                                                           \
        int64_t N, K;                                                                          \
        T alpha;                                                                               \
        const T *A;                                                                            \
        int64_t ar, ak;                                                                        \
        const T *B;                                                                            \
        int64_t bk, bj;                                                                        \
        bool axpy;                                                                             \
        T beta;                                                                                \
        T *C;                                                                                  \
        int64_t ldc;                                                                           \
    } small_job_##SUF;                                                                         \
    GEMM_SMALL_ROWS(T, SUF, gen_small_##SUF, )                                                 \
    GEMM_SMALL_AVX2(T, SUF)                                                                    \
    static void small_##SUF(const gemm_args_##SUF *g)                                          \
    {                                                                                          \
        const int64_t M = g->M, N = g->N, K = g->K, lda = g->lda, ldb = g->ldb;                \
        int64_t ar = g->ta ? 1 : lda, ak = g->ta ? lda : 1;                                    \
        int64_t bk = g->tb ? 1 : ldb, bj = g->tb ? ldb : 1;                                    \
        bool axpy = !g->tb && N > 1; /* rows of B are contiguous: stream them */               \
        small_job_##SUF j = {N, K, g->alpha, g->A, ar, ak, g->B, bk, bj, axpy, g->beta, g->C, g->ldc}; \
        nb_team_for(M, M > 1 && gemm_threads(M, N, K) > 1, GEMM_SMALL_PICK(SUF), &j);          \
    }

/* The packing of full strips from rows of A (6 or 8 of them, times alpha)
 * and of transposed B (nr streams, also nb_gemm_pack_streams), the k-th
 * element of every row side by side: eight k at a time through an 8 x 8
 * transpose in AVX2 registers. Each returns how many k it did (0 without
 * AVX2 or for doubles; A's a multiple of 8), and the scalar loop does the
 * rest. */
#ifdef GEMM_X86_AVX2
#include <immintrin.h>

/* r[j] becomes column j of the 8 x 8 block whose rows r holds. */
GEMM_AVX2_ATTR GEMM_INLINE void transpose8_ps(__m256 r[8])
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

GEMM_AVX2_ATTR static int64_t pack_a_avx2(const float **src, int64_t kc, float alpha, int mr, float *restrict dst)
{
    /* Each column goes out as 8 floats, mr (6 or 8) of them k's run and the
     * rest what the next store overwrites (a masked store is microcoded on
     * AMD cores), so the last group stops short of kc: the scalar loop
     * writes over the spill of the last store. */
    const __m256 va = _mm256_set1_ps(alpha);
    int64_t k = 0;
    for (; k + 8 < kc; k += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++)
            r[i] = i < mr ? _mm256_mul_ps(_mm256_loadu_ps(src[i] + k), va) : _mm256_setzero_ps();
        transpose8_ps(r);
        for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (k + j) * mr, r[j]);
    }
    return k;
}

/* Streams g..g+7 at k..k+7 into rows k..k+7 of the strip, columns g..g+7. */
GEMM_AVX2_ATTR static inline void pack_bt_block(const float **src, int64_t k, int g, int nr, float *restrict dst)
{
    __m256 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_loadu_ps(src[g + j] + k);
    transpose8_ps(a);
    for (int u = 0; u < 8; u++) _mm256_storeu_ps(dst + (k + u) * nr + g, a[u]);
}

/* nr (16 or 32) column streams, eight at a time, sixteen of k (a cache line
 * of each stream) before the next eight streams: rows of a 1024-wide matrix
 * are 4 KiB apart, so the 32 streams' lines all fall in one set of the L1,
 * and eight k at a time each line was evicted before its second half was
 * read (the 128 x 1024 x 1024 product with B transposed ran 1-2% faster). */
GEMM_AVX2_ATTR static int64_t pack_bt_avx2(const float **src, int64_t kc, int nr, float *restrict dst)
{
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16)
        for (int g = 0; g < nr; g += 8) {
            pack_bt_block(src, k, g, nr, dst);
            pack_bt_block(src, k + 8, g, nr, dst);
        }
    for (; k + 8 <= kc; k += 8)
        for (int g = 0; g < nr; g += 8) pack_bt_block(src, k, g, nr, dst);
    return k;
}

static int64_t pack_a_fast_f32(const float **src, int64_t kc, float alpha, float *dst)
{
    return gemm_have_avx2() ? pack_a_avx2(src, kc, alpha, 6, dst) : 0;
}
/* The AVX-512 instance's strips: 8 rows of A, 32 columns of B. */
static int64_t pack_a_fast_f32x(const float **src, int64_t kc, float alpha, float *dst)
{
    return pack_a_avx2(src, kc, alpha, 8, dst);
}
/* pack_bt_avx2, and then the last kc % 8 of each stream through the same
 * transpose, read with a masked load (which touches nothing masked off):
 * the convolution's filter gradient packs runs of 30 (a 32-wide output row
 * less its padded edges), and the scalar loop over their last six was 2%
 * of the conv net's step. */
GEMM_AVX2_ATTR static int64_t pack_streams_avx2(const float *const *src, int64_t kc, int nr, float *restrict dst)
{
    int64_t k = pack_bt_avx2((const float **)src, kc, nr, dst), left = kc - k;
    if (!left) return k;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int g = 0; g < nr; g += 8) {
        __m256 a[8];
        for (int j = 0; j < 8; j++) a[j] = _mm256_maskload_ps(src[g + j] + k, mask);
        transpose8_ps(a);
        for (int64_t u = 0; u < left; u++) _mm256_storeu_ps(dst + (k + u) * nr + g, a[u]);
    }
    return kc;
}

static int64_t pack_streams_fast_f32(const float *const *src, int64_t kc, int nr, float *dst)
{
    return nr % 8 == 0 && gemm_have_avx2() ? pack_streams_avx2(src, kc, nr, dst) : 0;
}
/* Doubles have no fast packing, at either width. */
#define pack_a_fast_f64x pack_a_fast_f64
#else
static int64_t pack_a_fast_f32(const float **src, int64_t kc, float alpha, float *dst)
{
    (void)src, (void)kc, (void)alpha, (void)dst;
    return 0;
}
static int64_t pack_streams_fast_f32(const float *const *src, int64_t kc, int nr, float *dst)
{
    (void)src, (void)kc, (void)nr, (void)dst;
    return 0;
}
#endif
static int64_t pack_streams_fast_f64(const double *const *src, int64_t kc, int nr, double *dst)
{
    (void)src, (void)kc, (void)nr, (void)dst;
    return 0;
}
/* The AVX-512 instances' transposed B goes the same way. */
#define pack_streams_fast_f32x pack_streams_fast_f32
#define pack_streams_fast_f64x pack_streams_fast_f64
static int64_t pack_a_fast_f64(const double **src, int64_t kc, double alpha, double *dst)
{
    (void)src, (void)kc, (void)alpha, (void)dst;
    return 0;
}

/* op(A)[i0:i0+mc, p0:p0+kc] times alpha into MR-row strips: within a strip,
 * element (i, k) sits at k * MR + i. Rows past mc are zero. */
#define GEMM_PACK_A(T, SUF, MR)                                                                \
    static void pack_a_##SUF(const gemm_args_##SUF *g, const gemm_block *bk, T *restrict Ap)   \
    {                                                                                          \
        const bool ta = g->ta;                                                                 \
        const T *A = g->A, alpha = g->alpha;                                                   \
        const int64_t lda = g->lda, i0 = bk->ic, p0 = bk->pc, mc = bk->mc, kc = bk->kc;         \
        int64_t full = ta ? mc / MR * MR : 0;                                                  \
        /* Transposed, the full strips go k outermost: row k of A is read once, in     \
         * order, and handed out a fixed-width run to each strip (strip by strip, each \
         * k would fetch a new line and use MR elements of it). */                     \
        for (int64_t k = 0; k < kc && full; k++) {                                             \
            const T *src = A + (p0 + k) * lda + i0;                                            \
            for (int64_t ir = 0; ir < full; ir += MR) {                                        \
                T *restrict dst = Ap + ir * kc + k * MR;                                       \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) dst[i] = alpha * src[ir + i]; \
            }                                                                                  \
        }                                                                                      \
        for (int64_t ir = full; ir < mc; ir += MR) {                                           \
            int64_t mr = mc - ir < MR ? mc - ir : MR;                                          \
            T *restrict dst = Ap + ir * kc;                                                    \
            if (ta) {                                                                          \
                for (int64_t k = 0; k < kc; k++) {                                             \
                    const T *src = A + (p0 + k) * lda + i0 + ir;                               \
                    int64_t i = 0;                                                             \
                    for (; i < mr; i++) dst[k * MR + i] = alpha * src[i];                      \
                    for (; i < MR; i++) dst[k * MR + i] = 0;                                   \
                }                                                                              \
            } else {                                                                           \
                /* k outermost: MR row streams in, one contiguous MR-run out per k (a row \
                 * at a time would store with stride MR, the slowest way round); rows    \
                 * past mr stream zeros. */                                               \
                const T *src[MR];                                                              \
                for (int64_t i = 0; i < MR; i++)                                               \
                    src[i] = i < mr ? A + (i0 + ir + i) * lda + p0 : (const T *)gemm_zeros;   \
                for (int64_t k = pack_a_fast_##SUF(src, kc, alpha, dst); k < kc; k++) {        \
                    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                      \
                        dst[k * MR + i] = alpha * src[i][k];                                   \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* op(B)[p0:p0+kc, j0:j0+nc] into NR-column strips: element (k, j) of a
 * strip sits at k * NR + j. Columns past nc are zero. Strips [q0, q1) only,
 * so that threads can share the work. ATTR: the instruction set it is
 * compiled for (the AVX-512 instance's 128-byte runs are two moves). */
#define GEMM_PACK_B(T, SUF, NR, ATTR)                                                          \
    ATTR static void pack_b_##SUF(const gemm_args_##SUF *g, const nb_gemm_panel *pn, T *restrict Bp) \
    {                                                                                          \
        const bool tb = g->tb;                                                                 \
        const T *B = g->B;                                                                     \
        const int64_t ldb = g->ldb, p0 = pn->p0, j0 = pn->j0, kc = pn->kc, nc = pn->nc;        \
        const int64_t q0 = pn->q0, q1 = pn->q1;                                                \
        /* Full strips of B as it is stored go k outermost, as pack_a's transposed     \
         * ones: row k read once, in order, a fixed-width run to each strip (a        \
         * variable-width copy would become a call to memmove). */                   \
        int64_t q_full = tb ? q0 : (nc / NR < q1 ? (nc / NR > q0 ? nc / NR : q0) : q1);        \
        for (int64_t k = 0; k < kc && q_full > q0; k++) {                                      \
            const T *src = B + (p0 + k) * ldb + j0;                                            \
            /* One fixed-size copy, which the compiler makes moves (a loop of elements   \
             * GCC made a call to memmove per run). */                                  \
            for (int64_t q = q0; q < q_full; q++)                                              \
                __builtin_memcpy(Bp + q * NR * kc + k * NR, src + q * NR, NR * sizeof(T));     \
        }                                                                                      \
        for (int64_t q = q_full; q < q1; q++) {                                                \
            int64_t jr = q * NR, nr = nc - jr < NR ? nc - jr : NR;                             \
            T *restrict dst = Bp + jr * kc;                                                    \
            if (!tb) {                                                                         \
                for (int64_t k = 0; k < kc; k++) {                                             \
                    const T *src = B + (p0 + k) * ldb + j0 + jr;                               \
                    int64_t j = 0;                                                             \
                    for (; j < nr; j++) dst[k * NR + j] = src[j];                              \
                    for (; j < NR; j++) dst[k * NR + j] = 0;                                   \
                }                                                                              \
            } else {                                                                           \
                /* As pack_a: NR column streams in, contiguous runs out; the columns   \
                 * past nr stream zeros (a column at a time, the stores went NR apart: \
                 * a 25-wide weight gradient of LeNet ran at 19 GFLOP/s). */           \
                const T *src[NR];                                                              \
                for (int64_t j = 0; j < NR; j++)                                               \
                    src[j] = j < nr ? B + (j0 + jr + j) * ldb + p0 : (const T *)gemm_zeros;   \
                for (int64_t k = pack_streams_fast_##SUF(src, kc, NR, dst); k < kc; k++) {          \
                    _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++)                      \
                        dst[k * NR + j] = src[j][k];                                           \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* Where a block lies for the macro- and micro-kernels: element (i, k) of
 * A's strip at i * rs + k * ks, its strips `strip` apart; the strip of B
 * at column j at j * bj, its row k at k * bks; C's rows ldc apart. */
typedef struct gemm_lay {
    int64_t rs, ks, strip;
    int64_t bj, bks;
    int64_t ldc;
} gemm_lay;

/* A block's extent: m rows and n columns of C, k of the inner dimension. */
typedef struct gemm_dims {
    int64_t m, n, k;
} gemm_dims;

/* Row strides of A, B and C as stored (0: packed). */
typedef struct gemm_ld {
    int64_t lda, ldb, ldc;
} gemm_ld;

/* The register tile: acc = Ap-strip * Bp-strip over kc, then
 * C[0:mr, 0:nr] = acc + beta * C. Accumulators are GCC/Clang vector values
 * of VB bytes, which the compiler maps onto vector registers (plain loops
 * over a 2-D array were not reliably kept in registers). Each pass holds
 * MR x 2 vectors, twelve registers; with 16-byte vectors the NR columns take
 * two passes over the same A strip. Packed strips are 64-byte aligned. The k
 * loop is unrolled four times: rolled, GCC stepped each row's pointer of A
 * once per k, integer adds that share the issue ports of the FMAs, and the
 * products ran 2-7% slower (17% with 16 rows, B read in place). */
#define GEMM_MICRO(T, NAME, MR, NR, VB, ATTR)                                                  \
    typedef T NAME##_v __attribute__((vector_size(VB), may_alias));                            \
    typedef T NAME##_vu __attribute__((vector_size(VB), aligned(sizeof(T)), may_alias));       \
    enum { NAME##_VL = (int)(VB / sizeof(T)), NAME##_NG = NR / (2 * NAME##_VL) };              \
    ATTR GEMM_INLINE void NAME##_micro(int64_t kc, const T *restrict a, const T *restrict b,    \
                                       T *restrict C, gemm_lay lay, int64_t mr, int64_t nr,    \
                                       T beta)                                                 \
    {                                                                                          \
        const int64_t rs = lay.rs, ks = lay.ks, bks = lay.bks, ldc = lay.ldc;                  \
        enum { VL = NAME##_VL };                                                               \
        T tile[MR][NR] __attribute__((aligned(64)));                                           \
        bool full = mr == MR && nr == NR;                                                      \
        /* Element (i, k) of the A strip is a[i * rs + k * ks]; rows past mr repeat row 0 \
         * (their results are never stored), so that A read in place is never read past \
         * its end. */                                                                   \
        const T *ar[MR];                                                                       \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) ar[i] = a + (i < mr ? i : 0) * rs; \
        /* C's tile is read or written only after the k loop: fetched now, its lines   \
         * come in during the loop (a product with a short k and a large C, as a      \
         * weight gradient's, otherwise waits for them: with A transposed, 1024 x 1024 x \
         * 128 ran 6-13% faster with it on Zen 3, 1024 x 784 x 128 13-20%). */           \
        for (int64_t i = 0; i < mr; i++) {                                                     \
            for (int64_t j = 0; j < nr; j += 64 / (int64_t)sizeof(T))                          \
                __builtin_prefetch(C + i * ldc + j, 1, 3);                                     \
            __builtin_prefetch(C + i * ldc + nr - 1, 1, 3);                                    \
        }                                                                                      \
        for (int g = 0; g < NAME##_NG; g++) {                                                  \
            const T *bg = b + g * 2 * VL;                                                      \
            NAME##_v acc[MR][2];                                                               \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] =      \
                (NAME##_v){0};                                                                 \
            _Pragma("GCC unroll 4") for (int64_t k = 0; k < kc; k++) {                         \
                NAME##_v b0 = *(const NAME##_vu *)(bg + k * bks);                              \
                NAME##_v b1 = *(const NAME##_vu *)(bg + k * bks + VL);                         \
                _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                        \
                    T ai = ar[i][k * ks];                                                      \
                    acc[i][0] += ai * b0;                                                      \
                    acc[i][1] += ai * b1;                                                      \
                }                                                                              \
            }                                                                                  \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                            \
                if (full) {                                                                    \
                    NAME##_vu *c0 = (NAME##_vu *)(C + i * ldc + g * 2 * VL);                   \
                    NAME##_vu *c1 = (NAME##_vu *)(C + i * ldc + g * 2 * VL + VL);              \
                    if (beta == 0) {                                                           \
                        *c0 = acc[i][0];                                                       \
                        *c1 = acc[i][1];                                                       \
                    } else {                                                                   \
                        *c0 = acc[i][0] + beta * *c0;                                          \
                        *c1 = acc[i][1] + beta * *c1;                                          \
                    }                                                                          \
                } else {                                                                       \
                    *(NAME##_v *)&tile[i][g * 2 * VL] = acc[i][0];                             \
                    *(NAME##_v *)&tile[i][g * 2 * VL + VL] = acc[i][1];                        \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        if (!full)                                                                             \
            for (int64_t i = 0; i < mr; i++)                                                   \
                for (int64_t j = 0; j < nr; j++) {                                             \
                    T *c = &C[i * ldc + j];                                                    \
                    *c = beta == 0 ? tile[i][j] : tile[i][j] + beta * *c;                      \
                }                                                                              \
    }                                                                                          \
                                                                                               \
    /* A is a packed block (lda == 0), or the block of A read in place (element    \
     * (i, k) at i * lda + k), which saves packing A when it needs no transposing   \
     * or scaling: its rows stream through the cache as well as a packed strip. (A  \
     * transposed read in place touches a new cache line at every k, and is slower \
     * than packing it.) Each layout gets its own copy of the loop, its strides     \
     * known. */                                                                     \
    ATTR GEMM_INLINE void NAME##_macro_impl(gemm_dims d, const T *A, const T *B, T *C,          \
                                            gemm_lay lay, T beta)                              \
    {                                                                                          \
        for (int64_t jr = 0; jr < d.n; jr += NR)                                               \
            for (int64_t ir = 0; ir < d.m; ir += MR)                                           \
                NAME##_micro(d.k, A + ir / MR * lay.strip, B + jr * lay.bj, C + ir * lay.ldc + jr, \
                             lay, d.m - ir < MR ? d.m - ir : MR, d.n - jr < NR ? d.n - jr : NR, beta); \
    }                                                                                          \
    /* lay gives B's strides and C's; A's follow from lda. */                                  \
    ATTR GEMM_INLINE void NAME##_macro_a(gemm_dims d, const T *A, int64_t lda, const T *B,      \
                                         gemm_lay lay, T *C, T beta)                           \
    {                                                                                          \
        if (!lda) {                                                                            \
            lay.rs = 1, lay.ks = MR, lay.strip = MR * d.k;                                     \
            NAME##_macro_impl(d, A, B, C, lay, beta);                                          \
        } else {                                                                               \
            lay.rs = lda, lay.ks = 1, lay.strip = MR * lda;                                    \
            NAME##_macro_impl(d, A, B, C, lay, beta);                                          \
        }                                                                                      \
    }                                                                                          \
    /* B is packed strips (ldb == 0), or its full NR-wide strips are read in    \
     * place (row k of the block at k * ldb) and the last, narrower one from   \
     * Bp_tail, packed: read in place it would run past the row's end. */       \
    ATTR static void NAME##_macro(gemm_dims d, const T *A, const T *B, const T *Bp_tail, T *C, \
                                  gemm_ld ld, T beta)                                          \
    {                                                                                          \
        if (!ld.ldb) {                                                                         \
            NAME##_macro_a(d, A, ld.lda, B, (gemm_lay){.bj = d.k, .bks = NR, .ldc = ld.ldc}, C, beta); \
            return;                                                                            \
        }                                                                                      \
        int64_t full = d.n / NR * NR;                                                          \
        if (full)                                                                              \
            NAME##_macro_a((gemm_dims){d.m, full, d.k}, A, ld.lda, B,                          \
                           (gemm_lay){.bj = 1, .bks = ld.ldb, .ldc = ld.ldc}, C, beta);        \
        if (d.n > full)                                                                        \
            NAME##_macro_a((gemm_dims){d.m, d.n - full, d.k}, A, ld.lda, Bp_tail,              \
                           (gemm_lay){.bj = d.k, .bks = NR, .ldc = ld.ldc}, C + full, beta);   \
    }

/* Picks the widest macro-kernel the CPU runs. */
#ifdef GEMM_X86_AVX2
#define GEMM_MACRO(T, SUF, MR, NR)                                                             \
    GEMM_MICRO(T, gen_##SUF, MR, NR, 16, )                                                     \
    GEMM_MICRO(T, avx2_##SUF, MR, NR, 32, GEMM_AVX2_ATTR)                                      \
    static void macro_##SUF(gemm_dims d, const T *A, const T *B, const T *Bp_tail, T *C,       \
                            gemm_ld ld, T beta)                                                \
    {                                                                                          \
        if (gemm_have_avx2()) avx2_##SUF##_macro(d, A, B, Bp_tail, C, ld, beta); \
        else gen_##SUF##_macro(d, A, B, Bp_tail, C, ld, beta);             \
    }
/* The AVX-512 instance: its tile is 8 rows by two 512-bit vectors, sixteen of
 * the 32 registers, twice the FMA work per k of the AVX2 tile for one more
 * load of A. Only called when the CPU has AVX-512. Its A is packed when its
 * rows are a multiple of 4 KiB apart: eight rows read in place at a stride
 * of 4 KiB (a 1024-wide layer) share one set of an Intel L1, and the product
 * ran 10% slower (Xeon, model 207). At other strides it is read in place,
 * and the transformer's products (rows of 128 and 512 floats) ran 1-12%
 * faster than packed. */
#define GEMM_MACRO_512(T, SUF, MR, NR)                                                         \
    GEMM_MICRO(T, avx512_##SUF, MR, NR, 64, GEMM_AVX512_ATTR)                                  \
    static void macro_##SUF(gemm_dims d, const T *A, const T *B, const T *Bp_tail, T *C,       \
                            gemm_ld ld, T beta)                                                \
    {                                                                                          \
        avx512_##SUF##_macro(d, A, B, Bp_tail, C, ld, beta);               \
    }
#else
#define GEMM_MACRO(T, SUF, MR, NR)                                                             \
    GEMM_MICRO(T, gen_##SUF, MR, NR, 16, )                                                     \
    static void macro_##SUF(gemm_dims d, const T *A, const T *B, const T *Bp_tail, T *C,       \
                            gemm_ld ld, T beta)                                                \
    {                                                                                          \
        gen_##SUF##_macro(d, A, B, Bp_tail, C, ld, beta);                  \
    }
#endif

/* A product's arguments, as the team's shares receive them. */
typedef nb_gemm_args_f32 gemm_args_f32;
typedef nb_gemm_args_f64 gemm_args_f64;

/* The blocked driver. Loop order (outer to inner): NC columns of C, KC
 * slices of the inner dimension (B slab packed once, shared by all threads),
 * MC rows of C (each thread packs its own A block, or with A_IN_PLACE (1:
 * always, 2: when its rows are not a multiple of 4 KiB apart) reads
 * A as it is stored when it needs no transposing or scaling), then the
 * macro-kernel. Returns false if it could not allocate its buffers. */
/* A block of the blocked product: rows [ic, ic + mc) and columns [jc, jc +
 * nc) of C, over slice [pc, pc + kc) of the inner dimension. */
typedef struct gemm_block {
    int64_t ic, mc, jc, nc, pc, kc;
} gemm_block;

#define GEMM_BLOCKED(T, SUF, MR, NR, MC, KC, NC, A_IN_PLACE)                                   \
    _Static_assert((KC) * sizeof(T) <= sizeof gemm_zeros, "gemm_zeros is shorter than a slice");  \
    /* One thread's part of the blocked product: its buffers for the packed B    \
     * slab and A, share t of n_t, where its columns start in B as a packer     \
     * sees it (j_off), A packed whole (a_whole) and already (a_ready), and the  \
     * row block tickets of a gang (n_t > 1). */                                  \
    typedef struct blocked_part_##SUF {                                                        \
        T *Bp, *myAp;                                                                          \
        int t, n_t;                                                                            \
        int64_t j_off;                                                                         \
        bool a_whole, a_ready;                                                                 \
        _Atomic int64_t *tickets;                                                              \
    } blocked_part_##SUF;                                                                      \
    /* Whether the macro-kernel reads A as it is stored (see the macro-kernel). */           \
    GEMM_INLINE bool a_in_place_##SUF(bool ta, T alpha, int64_t lda)                           \
    {                                                                                          \
        return (A_IN_PLACE == 1 || (A_IN_PLACE == 2 && lda * (int64_t)sizeof(T) % 4096)) && !ta && \
               alpha == (T)1 && lda > 0;                                                       \
    }                                                                                          \
    /* Rows [ic, ic + mc) of C's columns [jc, jc + nc), inner slice [pc, pc + kc); A's    \
     * block packed into myAp, or already there (a_ready). */                          \
    GEMM_INLINE void blocked_rows_##SUF(const gemm_args_##SUF *g, const gemm_block *bk,         \
                                        const T *Bs, int64_t bld, const T *Bp, T beta,         \
                                        T *myAp, bool a_ready)                                 \
    {                                                                                          \
        const int64_t ic = bk->ic, mc = bk->mc, jc = bk->jc, nc = bk->nc, pc = bk->pc, kc = bk->kc; \
        const bool ta = g->ta;                                                                 \
        const T alpha = g->alpha, *A = g->A;                                                   \
        const int64_t lda = g->lda, ldc = g->ldc;                                              \
        T *c = g->C + ic * ldc + jc;                                                           \
        const T *tail = Bp + nc / NR * NR * kc;                                                \
        if (a_in_place_##SUF(ta, alpha, lda)) {                                                \
            macro_##SUF((gemm_dims){mc, nc, kc}, A + ic * lda + pc, Bs, tail, c, (gemm_ld){lda, bld, ldc}, beta); \
        } else {                                                                               \
            if (!a_ready) pack_a_##SUF(g, bk, myAp);                                           \
            macro_##SUF((gemm_dims){mc, nc, kc}, myAp, Bs, tail, c, (gemm_ld){0, bld, ldc}, beta); \
        }                                                                                      \
    }                                                                                          \
    /* Share t of nt threads (nt > 1, a gang: the B slab is packed together and \
     * row blocks taken in turn, with tickets, and every thread of the run must  \
     * call), or the whole product on the calling thread (nt == 1). With         \
     * a_whole (nt == 1), myAp holds all of A packed, slice by slice (slice      \
     * [pc, pc + kc) at pc * m_pad, its row block ic at ic * kc within), packed  \
     * here unless a_ready. */                                                    \
    GEMM_INLINE void blocked_team_##SUF(const gemm_args_##SUF *g, const blocked_part_##SUF *sh)  \
    {                                                                                          \
        const bool tb = g->tb;                                                                 \
        const int64_t M = g->M, N = g->N, K = g->K, ldb = g->ldb;                              \
        const T *B = g->B, beta = g->beta;                                                     \
        const nb_gemm_packer_##SUF pack = g->pack;                                             \
        void *pack_ctx = g->pack_ctx;                                                          \
        T *Bp = sh->Bp, *myAp = sh->myAp;                                                      \
        const int t = sh->t, n_t = sh->n_t;                                                    \
        const int64_t j_off = sh->j_off;                                                       \
        const bool a_whole = sh->a_whole, a_ready = sh->a_ready;                               \
        _Atomic int64_t *tickets = sh->tickets;                                                \
        /* Row blocks of at most MC, as many as a multiple of the threads: shared out \
         * as whole MC blocks, 1024 rows went 480 and 544 at two threads (eleven    \
         * blocks of 96). Taken in turn, a thread the host slows hands work to the    \
         * others. Each slab's blocks come with n_t tickets more, one for each       \
         * thread to learn that none are left, so that the next slab's tickets start \
         * where the count stands after the barrier. */                               \
        const int64_t m_pad = (M + MR - 1) / MR * MR;                                          \
        int64_t n_blk = (M + MC - 1) / MC;                                                     \
        n_blk = (n_blk + n_t - 1) / n_t * n_t;                                                 \
        const int64_t blk = ((M + n_blk - 1) / n_blk + MR - 1) / MR * MR;                      \
        /* The last n_t blocks' rows go out in blocks a quarter as tall: a thread the  \
         * host slowed then holds the others back by a short block at the end, not a  \
         * whole one (weight gradients at two threads, 1024 x 1024 x 128 and 784 x    \
         * 1024 x 128 with A transposed: 0.3-2.6% faster, medians of 100). */         \
        int64_t n_big = n_t > 1 && n_blk > n_t ? n_blk - n_t : n_blk;                          \
        if (n_big * blk > M) n_big = M / blk;                                                  \
        const int64_t sblk = n_big == n_blk ? blk : (blk / GEMM_TAIL_DIV + MR - 1) / MR * MR;  \
        const int64_t n_all = n_big == n_blk ? n_blk : n_big + (M - n_big * blk + sblk - 1) / sblk; \
        int64_t slab = 0;                                                                      \
        /* A short product reads B's rows in place: packed, each strip would    \
         * serve a few row tiles only, and packing took a sixth of the MLP step  \
         * at batch 16. Only a narrower last strip is packed. */                 \
        bool b_in_place = !tb && !pack && M <= GEMM_B_IN_PLACE_ROWS;                           \
        /* K in even slices of at most KC: 784 as 256, 256, 256 and 16 left a slice \
         * that stored and reloaded every tile of C for 16 multiply-adds. */          \
        int64_t n_kblk = (K + KC - 1) / KC, kc_blk = ((K + n_kblk - 1) / n_kblk + 7) / 8 * 8; \
        if (kc_blk > KC) kc_blk = KC;                                                          \
        for (int64_t jc = 0; jc < N; jc += NC) {                                               \
            int64_t nc = N - jc < NC ? N - jc : NC;                                            \
            int64_t nq = (nc + NR - 1) / NR, q0 = b_in_place ? nc / NR : 0;                    \
            for (int64_t pc = 0; pc < K; pc += kc_blk) {                                       \
                int64_t kc = K - pc < kc_blk ? K - pc : kc_blk;                                \
                const T *Bs = b_in_place ? B + pc * ldb + jc : Bp;                             \
                int64_t bld = b_in_place ? ldb : 0;                                            \
                /* Later K slices add onto what the first one wrote. */                        \
                T b_eff = pc == 0 ? beta : (T)1;                                               \
                /* Every share packs its part of the slab (nt == 1: all of it); with   \
                 * others, the slab is whole before anyone reads it, and read by all      \
                 * before the next one is packed. */                                      \
                int64_t qa = q0 + (nq - q0) * t / n_t, qb = q0 + (nq - q0) * (t + 1) / n_t;       \
                nb_gemm_panel pn = {pc, kc, jc, nc, qa, qb, NR};                               \
                if (pack) {                                                                    \
                    pn.j0 += j_off; /* where the columns start for the packer */              \
                    pack(pack_ctx, &pn, Bp);                                                   \
                } else pack_b_##SUF(g, &pn, Bp);                                               \
                if (n_t > 1) nb_team_barrier(n_t);                                             \
                for (int64_t b = 0;; b++) {                                                    \
                    if (n_t > 1)                                                               \
                        b = atomic_fetch_add_explicit(tickets, 1, memory_order_relaxed) - slab * (n_all + n_t); \
                    if (b >= n_all) break;                                                     \
                    const int64_t ic = b < n_big ? b * blk : n_big * blk + (b - n_big) * sblk; \
                    const int64_t bl = b < n_big ? blk : sblk;                                 \
                    if (ic >= M) continue; /* a trailing block past a short M */               \
                    const gemm_block bk = {ic, M - ic < bl ? M - ic : bl, jc, nc, pc, kc};     \
                    blocked_rows_##SUF(g, &bk, Bs, bld, Bp, b_eff,                             \
                                       a_whole ? myAp + pc * m_pad + ic * kc : myAp,           \
                                       a_whole && (a_ready || jc > 0));                        \
                    /* All-reduces open behind this product move on (a load when none are). */ \
                    if (t == 0) nb_comm_progress();                                            \
                }                                                                              \
                slab++;                                                                        \
                if (n_t > 1) nb_team_barrier(n_t);                                             \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    typedef struct blocked_job_##SUF {                                                         \
        gemm_args_##SUF g;                                                                     \
        T *Bp, *Ap;                                                                            \
        int64_t a_size; /* each thread's packed A (a block, or all of it: a_whole) */          \
        int64_t b_size; /* split by columns: each thread's packed B slab */                    \
        int64_t n_chunks; /* split by columns: chunks of C's columns */                        \
        bool a_whole;                                                                          \
        _Atomic int64_t next; /* the next chunk to take, or (split by rows) row block ticket */ \
    } blocked_job_##SUF;                                                                       \
    /* Split by columns: share t takes chunks of C's column strips in turn and   \
     * runs the whole product on each, with slabs of its own. */                 \
    static void blocked_cols_share_##SUF(void *arg, int t, int nt)                             \
    {                                                                                          \
        blocked_job_##SUF *j = arg;                                                            \
        const gemm_args_##SUF *g = &j->g;                                                      \
        const int64_t nq = (g->N + NR - 1) / NR, n_chunks = j->n_chunks;                      \
        bool a_ready = false;                                                                  \
        (void)nt;                                                                              \
        for (int64_t c; (c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < n_chunks;) { \
            int64_t j0 = nq * c / n_chunks * NR, j1 = nq * (c + 1) / n_chunks * NR;            \
            if (j1 > g->N) j1 = g->N;                                                          \
            if (j1 <= j0) continue;                                                            \
            gemm_args_##SUF cols = *g; /* columns [j0, j1) of the product */                   \
            cols.N = j1 - j0;                                                                  \
            cols.B = !g->B ? NULL : g->tb ? g->B + j0 * g->ldb : g->B + j0;                    \
            cols.C = g->C + j0;                                                                \
            const blocked_part_##SUF sh = {j->Bp + (size_t)t * (size_t)j->b_size,              \
                                           j->Ap + (size_t)t * (size_t)j->a_size, 0, 1, j0,   \
                                           j->a_whole, a_ready, NULL};                         \
            blocked_team_##SUF(&cols, &sh);                                                    \
            a_ready = j->a_whole;                                                              \
        }                                                                                      \
    }                                                                                          \
    static void blocked_share_##SUF(void *arg, int t, int nt)                                  \
    {                                                                                          \
        blocked_job_##SUF *j = arg;                                                            \
        const gemm_args_##SUF *g = &j->g;                                                      \
        const blocked_part_##SUF sh = {j->Bp, j->Ap + (size_t)t * (size_t)j->a_size, t, nt, 0, \
                                       false, false, &j->next};                                \
        blocked_team_##SUF(g, &sh);                                                            \
    }                                                                                          \
    static bool blocked_##SUF(const gemm_args_##SUF *g)                                        \
    {                                                                                          \
        const int64_t M = g->M, N = g->N, K = g->K;                                            \
        int nt = gemm_threads(M, N, K);                                                        \
        /* Too few rows to share out, or a product at least four times as wide as it is  \
         * tall, and columns enough: split those. Each thread then packs its own B and   \
         * needs no barrier; split by rows, the threads waited for each other at every  \
         * slab of B (8% of the 784-1024-1024-10 step at two threads), and 128 x 1024 x \
         * 1024 ran at 182 GFLOP/s against 230 by columns. */                            \
        bool by_cols = (nt == 1 || 4 * M <= N) && nb_team_size() > 1 && !nb_team_busy() &&       \
                       (double)M * (double)N * (double)K >= gemm_parallel_work() &&            \
                       N >= (int64_t)nb_team_size() * GEMM_PARALLEL_COLS;                      \
        if (by_cols) nt = nb_team_size();                                                      \
        int64_t kc_max = K < KC ? K : KC;                                                      \
        int64_t nc_max = N < NC ? N : NC;                                                      \
        nc_max = (nc_max + NR - 1) / NR * NR;                                                  \
        /* Split by columns, chunks in turn when each A is packed once (or not at all). */   \
        const int64_t m_pad = (M + MR - 1) / MR * MR, nq = (N + NR - 1) / NR;                 \
        const bool a_read = a_in_place_##SUF(g->ta, g->alpha, g->lda);                        \
        const bool a_whole = by_cols && !a_read && m_pad * K * (int64_t)sizeof(T) <= GEMM_A_WHOLE_BYTES; \
        int64_t n_chunks = !by_cols ? 0 : a_whole || a_read ? GEMM_COL_CHUNKS * nt : nt;      \
        if (n_chunks > nq) n_chunks = nq;                                                      \
        const int64_t a_size = a_whole ? m_pad * K : MC * kc_max;                              \
        T *Bp = gemm_alloc((size_t)(by_cols ? nt : 1) * (size_t)(kc_max * nc_max) * sizeof(T)); \
        T *Ap = gemm_alloc((size_t)nt * (size_t)a_size * sizeof(T));                           \
        if (!Bp || !Ap) {                                                                      \
            nb_device_free(NB_DEVICE_CPU, Bp);                                                 \
            nb_device_free(NB_DEVICE_CPU, Ap);                                                 \
            return false;                                                                      \
        }                                                                                      \
        blocked_job_##SUF j = {*g, Bp, Ap, a_size, kc_max * nc_max, n_chunks, a_whole, 0};         \
        if (by_cols) nb_team_run(nt, blocked_cols_share_##SUF, &j);                            \
        else if (nt > 1) nb_team_gang(nt, blocked_share_##SUF, &j);                           \
        else blocked_share_##SUF(&j, 0, 1);                                                    \
        nb_device_free(NB_DEVICE_CPU, Bp);                                                     \
        nb_device_free(NB_DEVICE_CPU, Ap);                                                     \
        return true;                                                                           \
    }

#ifdef NABLA_HAVE_CBLAS
/* A threaded BLAS (OpenBLAS) runs threads of its own, and nabla's kernels
 * already run on its team: two owners of the same cores spin against each
 * other (LeNet took six times as long at two threads as at one). So the
 * BLAS is told to use one thread, and a product large enough to split runs
 * on the team, each share calling the BLAS on its rows of C; a product
 * called from inside a share (conv's per-image GEMMs) is one call. The
 * weak reference is NULL for a BLAS without this function, whose threads
 * are then its own business (OPENBLAS_NUM_THREADS and the like). */
extern void openblas_set_num_threads(int n) __attribute__((weak));
/* Below this many multiply-adds a product is one BLAS call: the BLAS's own
 * calls from two threads at once cost more on smaller ones than the split
 * gains (the MLP step at batch 16 took 0.30 ms at two threads against 0.19
 * at one with a split from 128^3). */
#define BLAS_PARALLEL_WORK (192.0 * 192 * 192)
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_one_thread(void)
{
    if (openblas_set_num_threads) openblas_set_num_threads(1);
}

/* GEMM_CBLAS: cblas_call_<suffix> computes rows [i0, i1) of C, from rows of
 * A (its columns when ta). */
#define GEMM_CBLAS(T, SUF, FN)                                                                 \
    static bool cblas_call_##SUF(const gemm_args_##SUF *g, int64_t i0, int64_t i1)              \
    {                                                                                          \
        const bool ta = g->ta, tb = g->tb;                                                     \
        const int64_t M = i1 - i0, N = g->N, K = g->K;                                         \
        int64_t lda = g->lda, ldb = g->ldb, ldc = g->ldc;                                      \
        const T *A = ta ? g->A + i0 : g->A + i0 * lda;                                         \
        /* CBLAS insists on leading dimensions of at least the stored row length,             \
         * even when there is a single row and the stride never matters. */                  \
        int64_t a_cols = ta ? M : K, a_rows = ta ? K : M;                                      \
        int64_t b_cols = tb ? K : N, b_rows = tb ? N : K;                                      \
        if (a_rows == 1 && lda < a_cols) lda = a_cols;                                         \
        if (b_rows == 1 && ldb < b_cols) ldb = b_cols;                                         \
        if (M == 1 && ldc < N) ldc = N;                                                        \
        if (lda < 1) lda = 1;                                                                  \
        if (ldb < 1) ldb = 1;                                                                  \
        if (ldc < 1) ldc = 1;                                                                  \
        if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||     \
            ldc > INT_MAX)                                                                     \
            return false;                                                                      \
        FN(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,      \
           (int)M, (int)N, (int)K, g->alpha, A, (int)lda, g->B, (int)ldb, g->beta, g->C + i0 * g->ldc, \
           (int)ldc);                                                                          \
        return true;                                                                           \
    }                                                                                          \
    /* Share t: its rows of C. */                                                              \
    static void cblas_share_##SUF(void *arg, int t, int nt)                                    \
    {                                                                                          \
        const gemm_args_##SUF *g = arg;                                                        \
        int64_t i0 = g->M * t / nt, i1 = g->M * (t + 1) / nt;                                  \
        if (i1 > i0) cblas_call_##SUF(g, i0, i1);                                              \
    }                                                                                          \
    static bool cblas_##SUF(const gemm_args_##SUF *g)                                          \
    {                                                                                          \
        const int64_t M = g->M, N = g->N, K = g->K;                                            \
        pthread_once(&blas_once, blas_one_thread);                                             \
        int nt = (double)M * (double)N * (double)K < BLAS_PARALLEL_WORK ? 1 : gemm_threads(M, N, K); \
        if (nt <= 1) return cblas_call_##SUF(g, 0, M);                                         \
        if (M > INT_MAX || N > INT_MAX || K > INT_MAX) return false;                           \
        nb_team_run(nt, cblas_share_##SUF, (void *)g);                                         \
        return true;                                                                           \
    }
#define GEMM_TRY_CBLAS(SUF)                                                                    \
    if (gemm_blas() && cblas_##SUF(g)) return;
#else
#define GEMM_CBLAS(T, SUF, FN)
#define GEMM_TRY_CBLAS(SUF)
#endif

#define GEMM_ENTRY(T, SUF)                                                                     \
    void nb_gemm_##SUF(const gemm_args_##SUF *g)                                               \
    {                                                                                          \
        const int64_t M = g->M, N = g->N, K = g->K;                                            \
        if (M <= 0 || N <= 0) return;                                                          \
        if (K <= 0 || g->alpha == 0) {                                                         \
            scale_##SUF(M, N, g->beta, g->C, g->ldc);                                          \
            return;                                                                            \
        }                                                                                      \
        GEMM_TRY_CBLAS(SUF)                                                                    \
        double work = (double)M * (double)N * (double)K;                                       \
        if (work <= GEMM_SMALL_WORK || M == 1 || N == 1 || !blocked_pick_##SUF(g)) small_##SUF(g);    \
    }                                                                                          \
    bool nb_gemm_##SUF##_packed(const gemm_args_##SUF *p)                                      \
    {                                                                                          \
        const int64_t M = p->M, N = p->N, K = p->K;                                            \
        if (N <= 1 || K <= 0 || gemm_blas() || (double)M * (double)N * (double)K <= GEMM_SMALL_WORK)  \
            return false;                                                                      \
        /* What the packer gives is A B, whatever else the caller set. */                      \
        const gemm_args_##SUF g = {false, false, M, N, K, 1, p->A, p->lda, NULL, 0, p->beta, p->C, p->ldc, p->pack, p->pack_ctx}; \
        return blocked_pick_##SUF(&g);                                                         \
    }                                                                                          \
    void nb_gemm_pack_streams_##SUF(const T *const *src, int64_t kc, int nr, T *restrict dst)   \
    {                                                                                          \
        int64_t k = pack_streams_fast_##SUF(src, kc, nr, dst);                                 \
        for (; k < kc; k++)                                                                    \
            for (int j = 0; j < nr; j++) dst[k * nr + j] = src[j][k];                          \
    }

/* The blocked instance for the CPU: AVX-512's when it has it, unless C fits
 * in one AVX2 strip (16 floats, 8 doubles). There a 32-wide strip is more
 * than half empty, so both do the same useful work per cycle, and AVX2's
 * reads A in place. From 17 columns on, AVX-512's is the faster: a 27-column
 * convolution weight gradient ran at 37-38 GFLOP/s with AVX2 and 53-61 with
 * it (M 1024, K 64). */
#ifdef GEMM_X86_AVX2
#define GEMM_PICK(T, SUF, NR_AVX2)                                                              \
    static bool blocked_pick_##SUF(const gemm_args_##SUF *g)                                   \
    {                                                                                          \
        if (g->N > NR_AVX2 && gemm_isa() >= NB_ISA_AVX512) return blocked_##SUF##x(g);         \
        return blocked_##SUF(g);                                                               \
    }
#else
#define GEMM_PICK(T, SUF, NR_AVX2)                                                              \
    static bool blocked_pick_##SUF(const gemm_args_##SUF *g) { return blocked_##SUF(g); }
#endif

/* Tile shapes: 6 x 16 floats and 6 x 8 doubles are twelve 256-bit
 * accumulators, which leaves registers for a row of B and a broadcast of A;
 * with AVX-512, 8 x 32 floats and 8 x 16 doubles are sixteen 512-bit ones. */
GEMM_SCALE(float, f32)
GEMM_DOT(float, f32)
GEMM_SMALL(float, f32)
GEMM_PACK_A(float, f32, 6)
GEMM_PACK_B(float, f32, 16, )
GEMM_MACRO(float, f32, 6, 16)
GEMM_BLOCKED(float, f32, 6, 16, 96, 256, 2048, 1)
GEMM_CBLAS(float, f32, cblas_sgemm)

GEMM_SCALE(double, f64)
GEMM_DOT(double, f64)
GEMM_SMALL(double, f64)
GEMM_PACK_A(double, f64, 6)
GEMM_PACK_B(double, f64, 8, )
GEMM_MACRO(double, f64, 6, 8)
GEMM_BLOCKED(double, f64, 6, 8, 96, 256, 2048, 1)
GEMM_CBLAS(double, f64, cblas_dgemm)

#ifdef GEMM_X86_AVX2
typedef gemm_args_f32 gemm_args_f32x;
typedef nb_gemm_packer_f32 nb_gemm_packer_f32x;
GEMM_PACK_A(float, f32x, 8)
GEMM_PACK_B(float, f32x, 32, GEMM_AVX512_ATTR)
GEMM_MACRO_512(float, f32x, 8, 32)
GEMM_BLOCKED(float, f32x, 8, 32, 96, 256, 2048, 2)

typedef gemm_args_f64 gemm_args_f64x;
typedef nb_gemm_packer_f64 nb_gemm_packer_f64x;
GEMM_PACK_A(double, f64x, 8)
GEMM_PACK_B(double, f64x, 16, GEMM_AVX512_ATTR)
GEMM_MACRO_512(double, f64x, 8, 16)
GEMM_BLOCKED(double, f64x, 8, 16, 96, 256, 2048, 2)
#endif

GEMM_PICK(float, f32, 16)
GEMM_ENTRY(float, f32)
GEMM_PICK(double, f64, 8)
GEMM_ENTRY(double, f64)
