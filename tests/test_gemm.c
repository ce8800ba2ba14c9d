/* The shared GEMM against a naive triple loop: every transpose combination,
 * odd sizes that leave partial register tiles and cache blocks, padded
 * leading dimensions, alpha/beta, and the degenerate sizes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/gemm.h"
#include "nabla/device.h"
#include "test.h"

/* A small deterministic generator, so failures reproduce. */
static uint32_t lcg_state = 12345;
static double rnd(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (double)(lcg_state >> 8) / (double)(1u << 24) - 0.5;
}

/* C = alpha * op(A) op(B) + beta * C in double, with beta == 0 meaning
 * "overwrite". */
static void naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                  const double *B, int64_t ldb, double beta, double *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = alpha * acc + (beta == 0 ? 0 : beta * C[i * ldc + j]);
        }
}

/* Runs one case in f32 and f64 with leading dimensions padded by `pad`;
 * returns the number of mismatches. C starts as NaN when beta == 0 to
 * check that it is ignored. */
static int check_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, double beta, int64_t pad)
{
    int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
    size_t na = (size_t)(a_rows * lda) + 1, nb = (size_t)(b_rows * ldb) + 1, nc = (size_t)(M * ldc) + 1;
    double *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C0 = malloc(nc * sizeof *C0);
    double *Cr = malloc(nc * sizeof *Cr), *Cd = malloc(nc * sizeof *Cd);
    float *Af = malloc(na * sizeof *Af), *Bf = malloc(nb * sizeof *Bf), *Cf = malloc(nc * sizeof *Cf);
    for (size_t i = 0; i < na; i++) Af[i] = (float)(A[i] = (float)rnd());
    for (size_t i = 0; i < nb; i++) Bf[i] = (float)(B[i] = (float)rnd());
    for (size_t i = 0; i < nc; i++) C0[i] = beta == 0 ? NAN : (float)rnd();
    memcpy(Cr, C0, nc * sizeof *Cr);
    memcpy(Cd, C0, nc * sizeof *Cd);
    for (size_t i = 0; i < nc; i++) Cf[i] = (float)C0[i];
    /* Inputs are floats, so the reference and both runs see the same values. */
    naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, ldc);
    nb_gemm_f64(&(nb_gemm_args_f64){.ta = ta,
                                    .tb = tb,
                                    .M = M,
                                    .N = N,
                                    .K = K,
                                    .alpha = alpha,
                                    .A = A,
                                    .lda = lda,
                                    .B = B,
                                    .ldb = ldb,
                                    .beta = beta,
                                    .C = Cd,
                                    .ldc = ldc});
    nb_gemm_f32(&(nb_gemm_args_f32){.ta = ta,
                                    .tb = tb,
                                    .M = M,
                                    .N = N,
                                    .K = K,
                                    .alpha = (float)alpha,
                                    .A = Af,
                                    .lda = lda,
                                    .B = Bf,
                                    .ldb = ldb,
                                    .beta = (float)beta,
                                    .C = Cf,
                                    .ldc = ldc});
    int bad = 0;
    double tol64 = 1e-12 * (double)(K + 1), tol32 = 2e-6 * (double)(K + 1);
    for (int64_t i = 0; i < M && bad < 3; i++)
        for (int64_t j = 0; j < N && bad < 3; j++) {
            double want = Cr[i * ldc + j];
            double got64 = Cd[i * ldc + j], got32 = Cf[i * ldc + j];
            if (!(fabs(got64 - want) <= tol64) || !(fabs(got32 - want) <= tol32)) {
                fprintf(stderr,
                        "  ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%lld: C[%lld,%lld] "
                        "= %.9g (f64) %.9g (f32), want %.9g\n",
                        ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)pad, (long long)i,
                        (long long)j, got64, got32, want);
                bad++;
            }
        }
    /* Padding columns of C must be left alone. */
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < ldc; j++) {
            double c0 = C0[i * ldc + j];
            if (!(Cd[i * ldc + j] == c0 || (isnan(c0) && isnan(Cd[i * ldc + j])))) bad++;
        }
    free(A), free(B), free(C0), free(Cr), free(Cd), free(Af), free(Bf), free(Cf);
    return bad;
}

static void test_all_transposes_odd_sizes(void)
{
    static const int64_t sizes[] = {1, 7, 33, 130};
    for (int t = 0; t < 4; t++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                for (int c = 0; c < 4; c++) {
                    /* The 130^3 case once per transpose pair is plenty. */
                    if (a == 3 && b == 3 && c == 3 && t % 2) continue;
                    CHECK(check_case(t & 1, t & 2, sizes[a], sizes[b], sizes[c], 1.0, 0.0, 0) == 0);
                }
}

static void test_alpha_beta_and_padding(void)
{
    for (int t = 0; t < 4; t++) {
        CHECK(check_case(t & 1, t & 2, 33, 130, 7, 0.5, 0.0, 3) == 0);
        CHECK(check_case(t & 1, t & 2, 130, 33, 33, -2.0, 1.0, 5) == 0);
        CHECK(check_case(t & 1, t & 2, 7, 7, 130, 1.5, -0.25, 1) == 0);
        CHECK(check_case(t & 1, t & 2, 1, 130, 33, 2.0, 0.5, 2) == 0);
        CHECK(check_case(t & 1, t & 2, 130, 1, 33, 2.0, 0.5, 2) == 0);
    }
}

/* Crosses the NC (2048) and KC (256) block edges and uses several MC row
 * blocks, so the packing of later slices and the beta = 1 accumulation of
 * K slices are exercised. */
static void test_cache_block_edges(void)
{
    CHECK(check_case(false, false, 13, 2060, 260, 1.0, 0.0, 0) == 0);
    CHECK(check_case(true, true, 13, 2060, 260, 1.0, 0.5, 1) == 0);
    CHECK(check_case(false, true, 200, 40, 300, 1.0, 0.0, 0) == 0);
    CHECK(check_case(true, false, 200, 40, 300, -1.0, 2.0, 0) == 0);
}

/* Products large enough to split over the team (192^3 multiply-adds and
 * more): by rows of C (enough rows for every thread, and shares of several
 * row blocks, uneven at the last strip) and by columns (short,
 * or at least four times as wide as tall; chunks of columns taken in turn,
 * each thread keeping A packed across its chunks, and across NC blocks
 * within one), at three threads so that the shares are uneven, every
 * transpose. */
static void test_splits_over_threads(void)
{
    int was = nb_num_threads();
    nb_set_num_threads(3);
    for (int t = 0; t < 4; t++) {
        CHECK(check_case(t & 1, t & 2, 200, 131, 300, 1.0, 0.0, 0) == 0);  /* rows */
        CHECK(check_case(t & 1, t & 2, 1001, 70, 200, 1.0, 0.5, 0) == 0);  /* rows, several blocks a share */
        CHECK(check_case(t & 1, t & 2, 1001, 40, 600, 1.0, 0.0, 0) == 0);  /* and the short tail blocks, three slabs */
        CHECK(check_case(t & 1, t & 2, 16, 1501, 300, 1.0, 0.5, 2) == 0);  /* columns */
        CHECK(check_case(t & 1, t & 2, 5, 2500, 600, -1.0, 0.0, 1) == 0);  /* columns, past NC and KC */
        CHECK(check_case(t & 1, t & 2, 100, 1501, 300, 0.5, 1.0, 2) == 0); /* rows enough, but 4x as wide */
        CHECK(check_case(t & 1, t & 2, 5, 25000, 60, 2.0, 0.0, 0) == 0);   /* chunks of columns wider than NC */
        CHECK(check_case(t & 1, t & 2, 32, 520, 130, 1.0, 0.5, 1) == 0);   /* columns, AVX2's bound (128^3) only */
    }
    nb_set_num_threads(was);
}

/* Products of up to 32 rows read B in place, but for a narrower last strip
 * of columns, which is packed: on one thread, past the NC and KC block edges,
 * at and beyond the row limit. */
static void test_short_products_read_b_in_place(void)
{
    int was = nb_num_threads();
    nb_set_num_threads(1);
    CHECK(check_case(false, false, 13, 2060, 260, 1.0, 0.0, 0) == 0);
    CHECK(check_case(true, false, 32, 2061, 300, -0.5, 1.5, 3) == 0);
    CHECK(check_case(false, false, 33, 2063, 100, 1.0, 0.0, 1) == 0);
    CHECK(check_case(false, false, 6, 48, 600, 2.0, 0.0, 0) == 0);
    nb_set_num_threads(was);
}

/* C narrower than one AVX-512 strip but wider than an AVX2 one (9 to 31
 * columns): the AVX-512 variant runs on a single partial strip, with B read
 * in place (up to 32 rows) and packed (more). */
static void test_narrow_products(void)
{
    static const int64_t widths[] = {9, 17, 27};
    for (int t = 0; t < 4; t++)
        for (int w = 0; w < 3; w++) {
            CHECK(check_case(t & 1, t & 2, 20, widths[w], 70, 1.0, 0.0, 0) == 0);
            CHECK(check_case(t & 1, t & 2, 100, widths[w], 300, 0.5, 1.0, 2) == 0);
        }
}

static void test_degenerate_sizes(void)
{
    float C[6] = {NAN, NAN, NAN, 1, 2, 3}, A[1] = {1}, B[1] = {1};
    /* K = 0: C = beta * C, and beta == 0 clears NaNs. */
    nb_gemm_f32(&(nb_gemm_args_f32){
        .M = 1, .N = 3, .K = 0, .alpha = 1.0f, .A = A, .lda = 1, .B = B, .ldb = 3, .beta = 0.0f, .C = C, .ldc = 3});
    CHECK(C[0] == 0 && C[1] == 0 && C[2] == 0 && C[3] == 1);
    nb_gemm_f32(&(nb_gemm_args_f32){
        .M = 1, .N = 3, .K = 0, .alpha = 1.0f, .A = A, .lda = 1, .B = B, .ldb = 3, .beta = 2.0f, .C = C + 3, .ldc = 3});
    CHECK(C[3] == 2 && C[4] == 4 && C[5] == 6);
    /* M = 0 or N = 0: nothing is touched. */
    nb_gemm_f32(&(nb_gemm_args_f32){
        .M = 0, .N = 3, .K = 4, .alpha = 1.0f, .A = A, .lda = 1, .B = B, .ldb = 3, .beta = 0.0f, .C = C, .ldc = 3});
    nb_gemm_f32(&(nb_gemm_args_f32){
        .M = 2, .N = 0, .K = 4, .alpha = 1.0f, .A = A, .lda = 1, .B = B, .ldb = 3, .beta = 0.0f, .C = C, .ldc = 3});
    CHECK(C[3] == 2);
    /* alpha == 0 is beta * C too. */
    double D[2] = {NAN, 5}, E[2] = {1, 1};
    nb_gemm_f64(&(nb_gemm_args_f64){
        .M = 1, .N = 2, .K = 1, .alpha = 0.0, .A = E, .lda = 1, .B = E, .ldb = 2, .beta = 0.0, .C = D, .ldc = 2});
    CHECK(D[0] == 0 && D[1] == 0);
    /* 1 x 1 x 1. */
    double x = 3, y = 4, z = 100;
    nb_gemm_f64(&(nb_gemm_args_f64){.ta = true,
                                    .tb = true,
                                    .M = 1,
                                    .N = 1,
                                    .K = 1,
                                    .alpha = 2.0,
                                    .A = &x,
                                    .lda = 1,
                                    .B = &y,
                                    .ldb = 1,
                                    .beta = 0.5,
                                    .C = &z,
                                    .ldc = 1});
    CHECK_NEAR(z, 74, 0);
}

static void zero_packer(void *ctx, const nb_gemm_panel *pn, float *dst)
{
    (void)ctx;
    memset(dst + pn->q0 * pn->kc * pn->nr, 0, (size_t)((pn->q1 - pn->q0) * pn->kc * pn->nr) * sizeof *dst);
}

/* C = A times the zero packer's B plus beta C, 64 x 64 x 64: true where
 * the blocked kernel ran (the BLAS cannot take a packer). */
static bool packed_64(const float *A, float beta, float *C)
{
    return nb_gemm_f32_packed(&(nb_gemm_args_f32){.M = 64,
                                                  .N = 64,
                                                  .K = 64,
                                                  .alpha = 1,
                                                  .A = A,
                                                  .lda = 64,
                                                  .pack = zero_packer,
                                                  .beta = beta,
                                                  .C = C,
                                                  .ldc = 64});
}

/* In a build with a BLAS, AUTO gives products to it only where the blocked
 * kernel would run its generic variant. The packed entry, which only the
 * blocked kernel runs, shows which provider is in use. */
static void test_blas_auto(void)
{
    if (!nb_gemm_use_blas(NB_GEMM_BLAS_AUTO)) {
        printf("  (no BLAS in this build: nothing to choose)\n");
        return;
    }
    float A[64 * 64], C[64 * 64];
    for (int i = 0; i < 64 * 64; i++) A[i] = 1, C[i] = 2;
    nb_gemm_limit_isa(NB_ISA_GENERIC);
    CHECK(!packed_64(A, 0, C));
    CHECK(C[0] == 2);
    nb_gemm_limit_isa(NB_ISA_AVX512);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        CHECK(packed_64(A, 0.5f, C));
        CHECK(C[0] == 1 && C[64 * 64 - 1] == 1);
    }
#endif
    nb_gemm_use_blas(NB_GEMM_BLAS_ON);
    CHECK(!packed_64(A, 0, C));
    nb_gemm_use_blas(NB_GEMM_BLAS_AUTO);
}

/* NABLA_BLAS, read at the first product: 1 sends products to the BLAS, 0 to
 * the blocked kernel (ctest runs this file once with each, and once without:
 * then test_blas_auto has the say). Must run before anything sets the mode. */
static void test_blas_env(void)
{
    const char *e = getenv("NABLA_BLAS");
    if (!e || (strcmp(e, "0") && strcmp(e, "1"))) {
        printf("  (NABLA_BLAS is not 0 or 1: the automatic choice, checked by test_blas_auto)\n");
        return;
    }
    bool on = !strcmp(e, "1");
    float A[64 * 64], C[64 * 64];
    for (int i = 0; i < 64 * 64; i++) A[i] = 1, C[i] = 2;
    bool blocked = packed_64(A, 0, C);
    bool have_blas = nb_gemm_use_blas(on ? NB_GEMM_BLAS_ON : NB_GEMM_BLAS_OFF);
    CHECK(blocked == !(on && have_blas));
}

static void run_case_set(void)
{
    test_all_transposes_odd_sizes();
    test_alpha_beta_and_padding();
    test_cache_block_edges();
    test_splits_over_threads();
    test_short_products_read_b_in_place();
    test_narrow_products();
}

/* Every provider of this build: the BLAS, where nabla has one, and each
 * variant of the blocked kernel this CPU runs, the GEMM capped at each
 * instruction set. The tests above ran one of them already: the BLAS with
 * NABLA_BLAS=1, else the widest variant (or, automatically, the BLAS on a
 * CPU the blocked kernel has no variant for). */
static void test_each_variant(void)
{
    const char *e = getenv("NABLA_BLAS");
    int widest = nb_gemm_isa();
    bool have_blas = nb_gemm_use_blas(NB_GEMM_BLAS_ON);
    bool on = e && !strcmp(e, "1"), off = e && !strcmp(e, "0");
    bool blas_ran = have_blas && (on || (!off && widest == NB_ISA_GENERIC));
    if (have_blas && !blas_ran) run_case_set();
    nb_gemm_use_blas(NB_GEMM_BLAS_OFF);
    for (int isa = NB_ISA_GENERIC; isa <= (blas_ran ? widest : widest - 1); isa++) {
        nb_gemm_limit_isa(isa);
        run_case_set();
    }
    nb_gemm_limit_isa(NB_ISA_AVX512);
    nb_gemm_use_blas(NB_GEMM_BLAS_AUTO);
}

/* --blas-env: test_blas_env alone (ctest's runs with NABLA_BLAS set). */
int main(int argc, char **argv)
{
    RUN(test_blas_env);
    if (argc > 1 && !strcmp(argv[1], "--blas-env")) return test_report();
    RUN(test_all_transposes_odd_sizes);
    RUN(test_alpha_beta_and_padding);
    RUN(test_cache_block_edges);
    RUN(test_degenerate_sizes);
    RUN(test_splits_over_threads);
    RUN(test_short_products_read_b_in_place);
    RUN(test_narrow_products);
    RUN(test_each_variant);
    RUN(test_blas_auto);
    return test_report();
}
