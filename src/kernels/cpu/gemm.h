/* Dense matrix products for CPU kernels (matmul, fc, conv2d via im2col).
 *
 * C = alpha * op(A) * op(B) + beta * C, row-major, where op(A) is M x K (A
 * itself, or its transpose when ta) and op(B) is K x N. lda, ldb and ldc
 * are the row strides (in elements) of A, B and C as stored. Goes through a
 * blocked kernel of our own that runs on the thread team (team.h), or
 * through CBLAS when nabla was built with it and nb_gemm_use_blas says so. */
#ifndef NABLA_GEMM_H
#define NABLA_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* op(B) packed by the caller, for a product whose B is never stored whole
 * (a convolution's column matrix, made from the image as it is packed):
 * fills strips [q0, q1) of the slab of op(B)'s rows [p0, p0 + kc) and
 * columns [j0, j0 + nc), nr columns a strip, element (k, j) of strip q at
 * dst[(q * kc + k) * nr + j], with zeros in the columns of the last strip at
 * or past nc. Threads may call it at once for different strips. */
typedef struct nb_gemm_panel {
    int64_t p0, kc; /* op(B)'s rows [p0, p0 + kc) */
    int64_t j0, nc; /* and columns [j0, j0 + nc) */
    int64_t q0, q1; /* the strips to fill */
    int nr;         /* columns a strip */
} nb_gemm_panel;

/* A product's arguments, named at the call: C (M x N, row stride ldc) =
 * alpha op(A) op(B) + beta C, with op(A) = A, or its transpose when ta;
 * op(B) likewise with tb. Set alpha: left 0 it makes C = beta C. pack and
 * pack_ctx are for nb_gemm_*_packed only (B is not read there). */
#define NB_GEMM_ARGS(T, SUF)                                                                   \
    typedef void (*nb_gemm_packer_##SUF)(void *ctx, const nb_gemm_panel *pn, T *dst);  \
    typedef struct nb_gemm_args_##SUF {                                                        \
        bool ta, tb;                                                                           \
        int64_t M, N, K;                                                                       \
        T alpha;                                                                               \
        const T *A;                                                                            \
        int64_t lda;                                                                           \
        const T *B;                                                                            \
        int64_t ldb;                                                                           \
        T beta;                                                                                \
        T *C;                                                                                  \
        int64_t ldc;                                                                           \
        nb_gemm_packer_##SUF pack; /* fills op(B)'s strips (see below) */                      \
        void *pack_ctx;                                                                        \
    } nb_gemm_args_##SUF;
NB_GEMM_ARGS(float, f32)
NB_GEMM_ARGS(double, f64)
#undef NB_GEMM_ARGS

void nb_gemm_f32(const nb_gemm_args_f32 *g);
void nb_gemm_f64(const nb_gemm_args_f64 *g);

/* C = A * B + beta * C ([M, K] times [K, N]: alpha 1, no transposes,
 * g->B unread) with B given by g->pack, on the blocked kernel. Returns
 * false, having done nothing, where that kernel would not run the product
 * (a BLAS in use, a product too small for it, no memory for its buffers):
 * the caller then makes B and calls nb_gemm. (A
 * product of at most NB_GEMM_B_IN_PLACE_ROWS rows whose B is stored, not
 * transposed, reads it in place, unpacked: there a packing function only
 * adds work.) */
#define NB_GEMM_B_IN_PLACE_ROWS 32
bool nb_gemm_f32_packed(const nb_gemm_args_f32 *g);
bool nb_gemm_f64_packed(const nb_gemm_args_f64 *g);

/* dst[k * nr + j] = src[j][k] for j < nr, k < kc: nr streams side by side,
 * as a strip of op(B) lies when B is stored transposed; for packers whose
 * B is a transpose (nr 8, 16 or 32: the strips' widths). With AVX2, eight
 * k at a time through an 8 x 8 transpose in registers. */
void nb_gemm_pack_streams_f32(const float *const *src, int64_t kc, int nr, float *dst);
void nb_gemm_pack_streams_f64(const double *const *src, int64_t kc, int nr, double *dst);

/* The instruction sets the blocked kernel has variants for, in order. */
enum { NB_ISA_GENERIC = 0, NB_ISA_AVX2 = 1, NB_ISA_AVX512 = 2 };

/* Caps the variant the GEMM picks at isa (one of the above) for the whole
 * process, over NABLA_ISA: tests check each variant the machine runs. */
void nb_gemm_limit_isa(int isa);
/* The variant products run on now: the widest the CPU has, capped as above. */
int nb_gemm_isa(void);

/* Where products go in a build with a BLAS, for the whole process, over
 * NABLA_BLAS (0 off, 1 on, else auto): OFF, nabla's blocked kernel; ON,
 * the BLAS; AUTO, the BLAS only where the blocked kernel has no variant for
 * the CPU's vector units (it has for AVX2 and AVX-512). Returns false, and
 * changes nothing, in a build without a BLAS. Tests check both providers. */
enum { NB_GEMM_BLAS_OFF = 0, NB_GEMM_BLAS_ON = 1, NB_GEMM_BLAS_AUTO = 2 };
bool nb_gemm_use_blas(int mode);

#endif
