/* ONNX's linear quantization: DequantizeLinear, QuantizeLinear,
 * DynamicQuantizeLinear and MatMulInteger, computed in float (exact for 8-bit values) and stored as
 * uint8, or int8 held widened as int32. */
#ifdef NABLA_HAVE_ONNX
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

/* A per-axis scale or zero point (1-D) shaped to broadcast along `axis` of
 * a rank-r tensor; a scalar one as it is. */
static nb_value along(ox_import *im, nb_value v, int r, int64_t axis)
{
    nb_var_info info = nb_value_info(B, v);
    if (info.ndim == 0 || (info.ndim == 1 && r <= 1)) return v;
    if (axis < 0) axis += r;
    int64_t shape[NB_MAX_DIMS];
    for (int d = 0; d < r; d++) shape[d] = d == axis ? -1 : 1;
    return nb_reshape(B, v, r, shape);
}

static nb_value as_f32(ox_import *im, nb_value v) { return nb_cast(B, v, NB_F32); }

/* y = (x - zero_point) * scale. */
static nb_status i_dequantize(ox_import *im)
{
    nb_value x = ox_in(im, 0), scale = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    int r = ox_rank(im, x);
    int64_t axis = ox_attr_i(im, "axis", 1);
    nb_value y = as_f32(im, x);
    if (ox_has_in(im, 2)) y = nb_sub(B, y, along(im, as_f32(im, ox_in(im, 2)), r, axis));
    return ox_out(im, 0, nb_mul(B, y, along(im, scale, r, axis)));
}

/* y = saturate(round(x / scale) + zero_point), in the zero point's type
 * (uint8 without one). */
static nb_status i_quantize(ox_import *im)
{
    nb_value x = ox_in(im, 0), scale = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    int r = ox_rank(im, x);
    int64_t axis = ox_attr_i(im, "axis", 1);
    nb_value y = nb_round(B, nb_div(B, as_f32(im, x), along(im, scale, r, axis)));
    nb_dtype out = NB_U8;
    if (ox_has_in(im, 2)) {
        nb_value zp = ox_in(im, 2);
        out = nb_value_info(B, zp).dtype;
        y = nb_add(B, y, along(im, as_f32(im, zp), r, axis));
    }
    if (out != NB_U8 && out != NB_I32) return ox_unsupported(im, "quantizes to a type other than uint8 or int8");
    /* An int32 zero point here is an int8 one, held widened. */
    return ox_out(im, 0, nb_cast(B, out == NB_U8 ? nb_clip(B, y, 0, 255) : nb_clip(B, y, -128, 127), out));
}

/* DynamicQuantizeLinear: uint8 over the range of x widened to hold 0,
 * scale = range / 255, zero point = saturate(round(-min / scale)). */
static nb_status i_dynamic_quantize(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_value zero = ox_const_scalar(im, NB_F32, 0);
    nb_value hi = nb_maximum(B, nb_reduce_max(B, x, 0, NULL, false), zero);
    nb_value lo = nb_minimum(B, nb_reduce_min(B, x, 0, NULL, false), zero);
    nb_value scale = nb_div(B, nb_sub(B, hi, lo), ox_const_scalar(im, NB_F32, 255));
    nb_value zp = nb_clip(B, nb_round(B, nb_div(B, nb_neg(B, lo), scale)), 0, 255);
    nb_value y = nb_clip(B, nb_add(B, nb_round(B, nb_div(B, x, scale)), zp), 0, 255);
    nb_status st = ox_out(im, 0, nb_cast(B, y, NB_U8));
    if (!st) st = ox_out(im, 1, scale);
    if (!st) st = ox_out(im, 2, nb_cast(B, zp, NB_U8));
    return st;
}

/* MatMulInteger: (a - a_zero_point) (b - b_zero_point) in int32; products
 * of 8-bit values summed in float are exact below 2^24. */
static nb_status i_matmul_integer(ox_import *im)
{
    nb_value a = as_f32(im, ox_in(im, 0)), b = as_f32(im, ox_in(im, 1));
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (ox_has_in(im, 2)) {
        nb_value za = as_f32(im, ox_in(im, 2));
        if (nb_value_info(B, za).ndim == 1) za = nb_reshape(B, za, 2, (const int64_t[]){-1, 1});
        a = nb_sub(B, a, za);
    }
    if (ox_has_in(im, 3)) b = nb_sub(B, b, as_f32(im, ox_in(im, 3)));
    return ox_out(im, 0, nb_cast(B, nb_matmul(B, a, b, 0), NB_I32));
}

/* clang-format off */
const ox_importer ox_imports_quant[] = {
    OX_FN(DequantizeLinear, dequantize), OX_FN(QuantizeLinear, quantize), OX_FN(MatMulInteger, matmul_integer),
    OX_FN(DynamicQuantizeLinear, dynamic_quantize),
    {0},
};
/* clang-format on */

#endif
