/* Loops compiled three times, for the baseline x86-64, for x86-64-v3 (AVX2
 * and FMA) and for x86-64-v4 (AVX-512), the copy picked when the library
 * loads by what the CPU has (GCC's target_clones, an ifunc): a generic build
 * still runs 8 or 16 wide with fused multiply-adds, and one machine's build
 * runs on another. (The AVX-512 copies made the transformer block's training
 * step 8% faster at one thread on a Xeon of model 207.)
 * The GEMM does the same by hand (gemm.c). Off where ifuncs are not
 * available, under ThreadSanitizer, and with Clang, whose clones of a static
 * function come with an exported resolver symbol (tests/test_abi.sh). */
#ifndef NABLA_KERNELS_CPU_SIMD_H
#define NABLA_KERNELS_CPU_SIMD_H

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(NABLA_NO_AVX2) && !defined(__SANITIZE_THREAD__)
#define NB_SIMD_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define NB_SIMD_CLONES
#endif

/* OpenMP's `omp simd` on a loop, where CMake's NABLA_USE_OPENMP turned on
 * -fopenmp-simd; nothing where it is off, since there the pragma is an
 * unknown one, which -Wall -Werror refuses. Every kernel's omp pragma goes
 * through here (`make test-no-openmp` builds them without). */
#ifdef NABLA_HAVE_OMP_SIMD
#define NB_OMP_SIMD _Pragma("omp simd")
#else
#define NB_OMP_SIMD
#endif

#endif
