/* Dense matrix products for CPU kernels (matmul, fc, conv2d via im2col).
 *
 * C = alpha * op(A) * op(B) + beta * C, row-major, where op(A) is M x K (A
 * itself, or its transpose when trans_a) and op(B) is K x N. lda, ldb and ldc
 * are the row strides (in elements) of A, B and C as stored. Goes through
 * CBLAS when nabla was built with it, and otherwise through a blocked,
 * kernel of our own that runs on the thread team (team.h). */
#ifndef NABLA_GEMM_H
#define NABLA_GEMM_H

#include <stdbool.h>
#include <stdint.h>

void nb_gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void nb_gemm_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                 const double *A, int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);

/* The instruction sets the blocked kernel has variants for, in order. */
enum { NB_ISA_GENERIC = 0, NB_ISA_AVX2 = 1, NB_ISA_AVX512 = 2 };

/* Caps the variant the GEMM picks at isa (one of the above) for the whole
 * process, over NABLA_ISA: tests check each variant the machine runs. */
void nb_gemm_limit_isa(int isa);

#endif
