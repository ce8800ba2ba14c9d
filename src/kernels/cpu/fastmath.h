/* Single-precision exp and tanh that compilers can vectorise.
 *
 * libm's expf and tanhf are calls the compiler cannot turn into SIMD code
 * (gcc maps them to vector versions only under -ffast-math), which leaves
 * sigmoid, silu, tanh and the tanh form of gelu at several nanoseconds per
 * element. These are straight-line code: the edges (overflow, underflow,
 * NaN) come out of the arithmetic or a final ?: select, and the power of two
 * is built from the bits of a float rather than by a float-to-int
 * conversion.
 *
 * gcc vectorises a select with arithmetic around it only when it may assume
 * that floating-point operations do not trap, so a file whose loops use
 * these should be compiled with -fno-trapping-math; see the pragma at the
 * top of unary.c. Without it they are still correct, just scalar.
 *
 * Accuracy, measured against double-precision libm over all floats:
 * nb_fast_expf within 1.2 ulp (subnormal results included), nb_fast_tanhf
 * within 2.1 ulp. NaN gives NaN; -inf and +inf give 0 and inf (exp), -1 and
 * 1 (tanh). */
#ifndef NABLA_KERNELS_CPU_FASTMATH_H
#define NABLA_KERNELS_CPU_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The float whose bits are b, and back. */
static inline float nb_bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static inline uint32_t nb_f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float nb_fast_expf(float x)
{
    /* exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln(2) / 2.
     * Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits
     * of the sum. ln 2 is split into a part with few significant bits (so
     * n * LN2_HI is exact) and the rest.
     *
     * Clamping to [-104, 89] lets the edges come out of the arithmetic:
     * beyond 89 the result overflows to inf, below -104 it rounds to 0, and
     * a NaN passes through both comparisons and every step. */
    const float MAGIC = 12582912.0f, LOG2E = 1.44269504088896341f;
    const float LN2_HI = 0.693359375f, LN2_LO = -2.12194440054690583e-4f;
    const uint32_t MAGIC_BITS = 0x4B400000u;
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float t = xc * LOG2E + MAGIC;
    float n = t - MAGIC;
    float r = xc - n * LN2_HI;
    r = r - n * LN2_LO;
    /* Taylor series to r^7: the first omitted term is below 6e-9 relative. */
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as 2^n1 * 2^n2 with n1 ~ n/2: n is in [-150, 129], too wide for
     * one normal float, while the halves fit, and multiplying by the second
     * rounds a subnormal result only once. */
    float t1 = n * 0.5f + MAGIC;
    float n2 = n - (t1 - MAGIC);
    float t2 = n2 + MAGIC;
    float s1 = nb_bits_f32((nb_f32_bits(t1) - MAGIC_BITS + 127u) << 23);
    float s2 = nb_bits_f32((nb_f32_bits(t2) - MAGIC_BITS + 127u) << 23);
    return p * s1 * s2;
}

static inline float nb_fast_tanhf(float x)
{
    /* Work on |x| and put the sign back at the end (which also keeps -0;
     * a NaN goes through the exp branch and stays NaN). */
    float ax = fabsf(x);
    /* Away from 0: 1 - 2 / (exp(2|x|) + 1), exactly 1 once exp overflows. */
    float big = 1.0f - 2.0f / (nb_fast_expf(2.0f * ax) + 1.0f);
    /* Near 0 that form cancels; use the Taylor series of tanh there. */
    float z = ax * ax;
    float q = (float)(-929569.0 / 638512875.0); /* quotients rounded once, from double */
    q = q * z + (float)(21844.0 / 6081075.0);
    q = q * z - (float)(1382.0 / 155925.0);
    q = q * z + (float)(62.0 / 2835.0);
    q = q * z - (float)(17.0 / 315.0);
    q = q * z + (float)(2.0 / 15.0);
    q = q * z - (float)(1.0 / 3.0);
    float small = ax + ax * z * q;
    float y = ax < 0.45f ? small : big;
    return copysignf(y, x);
}

#endif
