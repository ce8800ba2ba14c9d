/* Single-precision exp, tanh, erf, erfc and the normal CDF that compilers
 * can vectorise.
 *
 * libm's expf, tanhf and erff are calls the compiler cannot turn into SIMD
 * code (gcc maps them to vector versions only under -ffast-math), which
 * leaves sigmoid, silu, tanh and both forms of gelu at several (erf: over
 * ten) nanoseconds per element. These are straight-line code: the edges (overflow, underflow,
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
 * 1 (tanh). The erf family has its own note below. */
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

/* p(r) * 2^n for the reduced argument r of exp (|r| <= ln(2)/2, and a
 * rounding more) and the integer n (a float in [-245, 129]): the tail of
 * nb_fast_expf and nb_fast_expf_sum. */
static inline float nb_fast_exp_reduced(float n, float r)
{
    const float MAGIC = 12582912.0f;
    const uint32_t MAGIC_BITS = 0x4B400000u;
    /* Taylor series to r^7: the first omitted term is below 6e-9 relative. */
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as 2^n1 * 2^n2 with n1 ~ n/2: n is in [-245, 129], too wide for
     * one normal float, while the halves fit, and multiplying by the second
     * rounds a subnormal result only once. */
    float t1 = n * 0.5f + MAGIC;
    float n2 = n - (t1 - MAGIC);
    float t2 = n2 + MAGIC;
    float s1 = nb_bits_f32((nb_f32_bits(t1) - MAGIC_BITS + 127u) << 23);
    float s2 = nb_bits_f32((nb_f32_bits(t2) - MAGIC_BITS + 127u) << 23);
    return p * s1 * s2;
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
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float t = xc * LOG2E + MAGIC;
    float n = t - MAGIC;
    float r = xc - n * LN2_HI;
    r = r - n * LN2_LO;
    return nb_fast_exp_reduced(n, r);
}

/* exp(hi + lo) for an argument held as two floats, hi in [-170, 0] and lo
 * in [-1/4, 0]: lo is what hi could not hold (the rounding error of the
 * caller's arithmetic, kept apart), and goes into the reduced argument, so
 * the result's error is nb_fast_expf's whatever rounding hi + lo would have
 * cost. There is no clamp: in that range 2^n's halves are normal floats and
 * the product rounds to 0 below the subnormals. (A clamp to a constant would
 * let gcc thread the constant through a caller's code and, vectorising,
 * compute that copy too, deep in the subnormals, at several times the
 * cost: callers clamp their own argument where nothing after it branches.) */
static inline float nb_fast_expf_sum(float hi, float lo)
{
    const float MAGIC = 12582912.0f, LOG2E = 1.44269504088896341f;
    const float LN2_HI = 0.693359375f, LN2_LO = -2.12194440054690583e-4f;
    float t = (hi + lo) * LOG2E + MAGIC;
    float n = t - MAGIC;
    float r = hi - n * LN2_HI; /* exact, as in nb_fast_expf */
    r = r + lo;
    r = r - n * LN2_LO;
    return nb_fast_exp_reduced(n, r);
}

/* exp(-c x^2) for c = 1 or 1/2 and c x^2 <= 169 (the result is 0 from
 * 104), accurate in the result: rounding x^2 would cost up to 2^-24 x^2
 * relative (several ulp once x^2 is past 8), so x is split into xh, its
 * first 12 significant bits (xh * xh is exact), and the rest xl:
 * c x^2 = c xh^2 + c xl (x + xh). A NaN gives NaN. */
static inline float nb_fast_expf_nsq(float x, float c)
{
    float xh = nb_bits_f32(nb_f32_bits(x) & 0xFFFFF000u);
    float xl = x - xh;
    return nb_fast_expf_sum(-c * (xh * xh), -c * (xl * (x + xh)));
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

/* erf, erfc and the normal CDF Phi.
 *
 * Near 0, erf(x) = x + x Q(x^2), with Q a minimax polynomial for
 * erf(x)/x - 1 on |x| < 1 (error 1.3e-9; adding x last keeps the rounding
 * of the sum at half an ulp). Elsewhere everything comes from the scaled
 * complement erfcx(a) = exp(a^2) erfc(a), a >= 0: (a + 3) erfcx(a) is smooth
 * on [0, inf) and, as a function of q = (a - 3) / (a + 3) in [-1, 1), is
 * fitted by a degree-9 polynomial (minimax on a in [0, 10.75], relative
 * error 7e-9; after M. M. Shepherd and J. G. Laframboise, Math. Comp. 36
 * (1981), who use (1 + 2a) erfcx(a)). Then erfc(a) = exp(-a^2) erfcx(a) with
 * exp(-a^2) from nb_fast_expf_nsq, so that erfc and Phi keep their relative
 * accuracy down into the subnormals instead of cancelling in 1 + erf(x) (or
 * losing it to the rounding of x / sqrt 2: gelu as x erfcf(-x / sqrt 2) / 2
 * with glibc's erfcf is off by up to 190 ulp near x = -13). The rounding
 * of q and of the polynomial's sum leaves erfcx within 3.4e-7 relative. The
 * coefficients were fitted with mpmath's chebyfit in 40-digit arithmetic and
 * rounded to float.
 *
 * Accuracy is measured against double-precision libm over every float (the
 * figures on each function; tests/test_ops_unary.c sweeps every 997th float
 * and [-8, 8] densely). NaN gives NaN, erf(+-inf) = +-1, erfc(-inf) = 2,
 * erfc(inf) = 0, Phi(-inf) = 0, Phi(inf) = 1. */

/* erf(x) for |x| < 1 (about 1.3 ulp at worst). */
static inline float nb_fast_erf_small(float x)
{
    float s = x * x;
    float q = 7.875874871e-05f;
    q = q * s - 8.016864303e-04f;
    q = q * s + 5.189087242e-03f;
    q = q * s - 2.685421146e-02f;
    q = q * s + 1.128359437e-01f;
    q = q * s - 3.761262596e-01f;
    q = q * s + 1.283791661e-01f;
    return x + x * q;
}

/* erfcx(a) = exp(a^2) erfc(a) for a in [0, 10.75]; finite and slowly
 * falling beyond, where callers' exp factor is 0. */
static inline float nb_fast_erfcx_pos(float a)
{
    float r = 1.0f / (a + 3.0f);
    float q = (a - 3.0f) * r;
    float h = -3.325295111e-04f;
    h = h * q - 4.954247852e-04f;
    h = h * q + 3.080913099e-03f;
    h = h * q - 1.217529294e-03f;
    h = h * q - 2.683809400e-02f;
    h = h * q + 1.195269823e-01f;
    h = h * q - 3.104664385e-01f;
    h = h * q + 5.902284384e-01f;
    h = h * q - 8.833944798e-01f;
    h = h * q + 1.074006915e+00f;
    return h * r;
}

/* x clamped to [-m, m] (m > 0), on the bits: |x|'s bits order like |x|,
 * and an integer min is no branch for gcc to thread a constant through
 * (see nb_fast_expf_sum), and fewer SSE2 instructions than a float select.
 * A NaN comes out as +-m: callers keep NaN apart. */
static inline float nb_fast_clamp_abs(float x, float m)
{
    uint32_t b = nb_f32_bits(x);
    int32_t a = (int32_t)(b & 0x7FFFFFFFu), ma = (int32_t)nb_f32_bits(m);
    a = a > ma ? ma : a;
    return nb_bits_f32((uint32_t)a | (b & 0x80000000u));
}

/* erf: within 1.4 ulp over all floats; the absolute error is at most
 * 8.2e-8. */
static inline float nb_fast_erff(float x)
{
    float a = fabsf(x);
    /* |x| >= 1: 1 - erfc(|x|), with erfc(|x|) <= 0.16, so that its relative
     * error counts for a sixth and rounding |x|^2 costs nothing visible;
     * past 4, erf rounds to +-1 (a NaN passes the clamp: the comparison is
     * false). nb_fast_expf_sum, not nb_fast_expf, whose clamps gcc would
     * thread this one's constant through (see nb_fast_expf_sum). */
    float ac = a > 4.0f ? 4.0f : a;
    float big = 1.0f - nb_fast_expf_sum(-ac * ac, 0.0f) * nb_fast_erfcx_pos(ac);
    return a < 1.0f ? nb_fast_erf_small(x) : copysignf(big, x);
}

/* erfc: within 5.3 ulp over all floats (subnormal results in units of the
 * smallest subnormal). 1 - erf for |x| < 3/4, where erf's
 * error counts for at most 2.5 times as much; 2 - erfc(|x|) below -3/4. */
static inline float nb_fast_erfcf(float x)
{
    float a = fabsf(x);
    a = a > 13.0f ? 13.0f : a; /* erfc(x) is 0 in float from 10.06 */
    float t = nb_fast_expf_nsq(a, 1.0f) * nb_fast_erfcx_pos(a);
    float tail = x < 0 ? 2.0f - t : t;
    return a < 0.75f ? 1.0f - nb_fast_erf_small(x) : tail;
}

/* |x| clamped at 15, where exp(-x^2 / 2) is 0 in float (a NaN passes). */
static inline float nb_fast_normcdf_abs(float x)
{
    float a = fabsf(x);
    return a > 15.0f ? 15.0f : a;
}

/* The normal CDF Phi(x) = erfc(-x / sqrt 2) / 2 given a = |x| clamped by
 * nb_fast_normcdf_abs and e = exp(-a^2 / 2) from nb_fast_expf_nsq(a, 0.5f),
 * which the normal density phi(x) = e / sqrt(2 pi) shares:
 * 1/2 + erf(x / sqrt 2) / 2 for |x| < 3/4 sqrt 2, else
 * erfcx(|x| / sqrt 2) e / 2, or 1 minus that for x > 0. Within 5.6 ulp
 * over all floats. */
static inline float nb_fast_normcdff_ae(float x, float a, float e)
{
    const float SQRT1_2 = 0.707106781186547524f;
    float t = 0.5f * nb_fast_erfcx_pos(a * SQRT1_2) * e;
    float tail = x < 0 ? t : 1.0f - t;
    return a < 0.75f / SQRT1_2 ? 0.5f + 0.5f * nb_fast_erf_small(x * SQRT1_2) : tail;
}

static inline float nb_fast_normcdff(float x)
{
    float a = nb_fast_normcdf_abs(x);
    return nb_fast_normcdff_ae(x, a, nb_fast_expf_nsq(a, 0.5f));
}

#endif
