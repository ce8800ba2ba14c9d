/* Conversions between f32/f64 and the 16-bit storage formats f16 and bf16,
 * on bit patterns, so that they are exact and independent of the compiler's
 * own _Float16 support and of the floating-point rounding mode. */
#include <string.h>
#include "half.h"

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static float f32_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Rounds d to the 16-bit format with `frac` fraction bits and exponent bias
 * `bias` (f16: 10, 15; bf16: 7, 127), to nearest, ties to even. One function
 * for both formats and for f32 inputs too (an f32 widens to f64 exactly), so
 * there is one rounding to get right. */
static uint16_t narrow(double d, int frac, int bias)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    uint16_t sign = (uint16_t)(b >> 48 & 0x8000);
    int e = (int)(b >> 52 & 0x7ff);
    uint64_t m = b & ((UINT64_C(1) << 52) - 1);
    uint32_t inf = (uint32_t)(2 * bias + 1) << frac; /* the all-ones exponent */
    if (e == 0x7ff) {
        if (!m) return (uint16_t)(sign | inf);
        /* NaN: the payload's top bits, and the quiet bit, which also keeps
         * the fraction non-zero. */
        return (uint16_t)(sign | inf | 1u << (frac - 1) | (uint32_t)(m >> (52 - frac)));
    }
    /* Zero, or a double subnormal (below 2^-1022): far under half the
     * smallest subnormal of either format, so a zero of its sign. */
    if (e == 0) return sign;
    int exp = e - 1023, emin = 1 - bias;
    /* 2^(bias+1) and above is past the largest finite value plus half an
     * ulp: an infinity. (Checked here so the shifts below stay small.) */
    if (exp > bias) return (uint16_t)(sign | inf);
    uint64_t sig = m | UINT64_C(1) << 52;
    /* Bits of sig below the result's last place: more under the normal
     * range, where the last place stays that of the smallest subnormal. */
    int shift = 52 - frac + (exp < emin ? emin - exp : 0);
    if (shift > 53) return sign; /* under half the smallest subnormal */
    uint64_t q = sig >> shift, rem = sig & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    /* A normal q holds the implicit bit, so adding it to the exponent field
     * less one places it; a carry out of the fraction (q = 2^(frac+1), or a
     * subnormal rounding up to 2^frac) moves into the exponent as it must. */
    uint32_t bits = exp < emin ? (uint32_t)q : ((uint32_t)(exp + bias - 1) << frac) + (uint32_t)q;
    if (bits >= inf) return (uint16_t)(sign | inf); /* rounded up past the largest finite value */
    return (uint16_t)(sign | bits);
}

float nb_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (uint32_t)h >> 10 & 0x1f, m = h & 0x3ffu;
    if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | m << 13); /* inf, NaN (payload kept) */
    if (e) return f32_from_bits(sign | (e + 127 - 15) << 23 | m << 13);
    /* Zero or subnormal: m * 2^-24, a normal f32 (or zero), computed exactly. */
    float f = (float)m * 0x1p-24f;
    return sign ? -f : f;
}

uint16_t nb_f32_to_f16(float f) { return narrow((double)f, 10, 15); }
uint16_t nb_f64_to_f16(double d) { return narrow(d, 10, 15); }

float nb_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t nb_f32_to_bf16(float f)
{
    /* bf16 is the top half of an f32: round the bottom half away, to nearest
     * even. Adding 0x7fff plus the last kept bit carries into the top half
     * exactly when the bottom half is over the halfway point, or on it with
     * an odd last bit; a carry out of the fraction bumps the exponent, up to
     * infinity. NaNs would carry into the sign or lose their payload, so
     * they are done apart. */
    uint32_t b = f32_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(b >> 16 | 0x40);
    return (uint16_t)((b + 0x7fffu + (b >> 16 & 1)) >> 16);
}

uint16_t nb_f64_to_bf16(double d) { return narrow(d, 7, 127); }

void nb_f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nb_f16_to_f32(in[i]);
}

void nb_f32_to_f16_n(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nb_f32_to_f16(in[i]);
}

void nb_f64_to_f16_n(const double *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nb_f64_to_f16(in[i]);
}

void nb_bf16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nb_bf16_to_f32(in[i]);
}

void nb_f32_to_bf16_n(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nb_f32_to_bf16(in[i]);
}

void nb_f64_to_bf16_n(const double *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = nb_f64_to_bf16(in[i]);
}
