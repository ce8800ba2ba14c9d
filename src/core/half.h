/* 16-bit floating-point storage formats, as bit patterns in a uint16_t:
 *
 *   f16  (IEEE 754 binary16): 1 sign, 5 exponent (bias 15), 10 fraction bits;
 *        largest finite 65504, smallest normal 2^-14, smallest subnormal 2^-24;
 *   bf16 (bfloat16): the top half of an IEEE single: 1 sign, 8 exponent
 *        (bias 127), 7 fraction bits; the range of an f32 with less precision.
 *
 * nabla computes in f32 and f64 only; these formats are for files (safetensors
 * F16/BF16 tensors, ONNX initialisers). Widening (to f32) is exact for every
 * value. Narrowing rounds once to nearest, ties to even, as IEEE 754 and the
 * hardware conversions (F16C, CUDA, PyTorch) do: a value too large for the
 * format becomes an infinity of its sign, a value too small becomes a
 * subnormal or a signed zero. Narrowing from f64 rounds directly from the
 * double: going through f32 first would round twice, and a double just past
 * a halfway point of the 16-bit format can round to an f32 exactly on it,
 * which then ties to even the wrong way.
 *
 * NaNs stay NaNs of the same sign: narrowing keeps the top bits of the
 * payload and sets the quiet bit (so a signalling NaN never becomes an
 * infinity); widening keeps the bits as they are.
 *
 * The _n forms convert arrays of n elements; `in` and `out` must not overlap. */
#ifndef NABLA_CORE_HALF_H
#define NABLA_CORE_HALF_H

#include <stddef.h>
#include <stdint.h>

float nb_f16_to_f32(uint16_t h);
uint16_t nb_f32_to_f16(float f);
uint16_t nb_f64_to_f16(double d);

float nb_bf16_to_f32(uint16_t h);
uint16_t nb_f32_to_bf16(float f);
uint16_t nb_f64_to_bf16(double d);

void nb_f16_to_f32_n(const uint16_t *in, float *out, size_t n);
void nb_f32_to_f16_n(const float *in, uint16_t *out, size_t n);
void nb_f64_to_f16_n(const double *in, uint16_t *out, size_t n);
void nb_bf16_to_f32_n(const uint16_t *in, float *out, size_t n);
void nb_f32_to_bf16_n(const float *in, uint16_t *out, size_t n);
void nb_f64_to_bf16_n(const double *in, uint16_t *out, size_t n);

#endif
