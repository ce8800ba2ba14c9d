/* Reference GEMM; the linalg family replaces it with a fast one. */
#include "gemm.h"

#define GEMM_REF(NAME, T)                                                                         \
    void NAME(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, \
              const T *B, int64_t ldb, T beta, T *C, int64_t ldc)                                  \
    {                                                                                             \
        for (int64_t i = 0; i < M; i++)                                                           \
            for (int64_t j = 0; j < N; j++) {                                                     \
                T acc = 0;                                                                        \
                for (int64_t k = 0; k < K; k++)                                                   \
                    acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]); \
                C[i * ldc + j] = alpha * acc + (beta == 0 ? 0 : beta * C[i * ldc + j]);           \
            }                                                                                     \
    }

GEMM_REF(nb_gemm_f32, float)
GEMM_REF(nb_gemm_f64, double)
