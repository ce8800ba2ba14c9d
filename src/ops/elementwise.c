/* The elementwise family: broadcasting arithmetic, unary math, activations,
 * clip, scale and cast. Definitions and shape inference live here; the loops
 * are in kernels/cpu/elementwise.h. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include "families.h"
#include "broadcast_infer.h"
#include "elementwise_grad.h"
#include "kernels/cpu/elementwise.h"

/* "float32, float64, int32" : the dtypes accepted by `ok`. */
static const char *dtype_list(char *buf, size_t size, bool (*ok)(int op, nb_dtype dt), int op)
{
    size_t u = 0;
    buf[0] = '\0';
    for (int t = 0; t < NB_DTYPE_COUNT && u < size; t++)
        if (ok(op, (nb_dtype)t))
            u += (size_t)snprintf(buf + u, size - u, "%s%s", u ? ", " : "", nb_dtype_name((nb_dtype)t));
    return buf;
}

static bool binary_ok(int op, nb_dtype dt) { return nb_ew_binary_supports((nb_ew_binary_op)op, dt); }
static bool unary_ok(int op, nb_dtype dt) { return nb_ew_unary_supports((nb_ew_unary_op)op, dt); }

/* ---- binary: X, Y broadcast -> Out ------------------------------------------ */

static nb_status infer_binary(nb_op_ctx *c, nb_ew_binary_op op)
{
    nb_status st = nb_infer_same_dtype(c, 0, 1);
    if (st) return st;
    nb_dtype dt = nb_in_info(c, 0, 0)->dtype;
    if (!nb_ew_binary_supports(op, dt)) {
        char list[128];
        return nb_error(NB_ERR_DTYPE, "%s: X and Y are %s but it takes %s", c->label, nb_dtype_name(dt),
                        dtype_list(list, sizeof list, binary_ok, op));
    }
    nb_var_info *out = nb_out_info(c, 0, 0);
    out->dtype = dt;
    return nb_infer_broadcast(c, 2, (const int[]){0, 1}, out);
}

#define BINARY_OP(id, ENUM, DOC, USES_IN, USES_OUT)                                                    \
    static nb_status infer_##id(nb_op_ctx *c) { return infer_binary(c, ENUM); }                       \
    static nb_status cpu_##id(nb_op_ctx *c)                                                           \
    {                                                                                                 \
        return nb_ew_binary(ENUM, nb_in(c, 0, 0), nb_in(c, 1, 0), nb_out(c, 0, 0), c->label);          \
    }                                                                                                 \
    static const nb_op_def op_##id = {                                                                \
        .name = #id, .doc = DOC, .inputs = {{"X", 0}, {"Y", 0}}, .outputs = {{"Out", 0}},             \
        .infer = infer_##id, .cpu = cpu_##id, .grad_uses_inputs = (USES_IN), .grad_uses_outputs = (USES_OUT), \
        .vjp = nb_##id##_vjp, .jvp = nb_##id##_jvp};

#define IN_X (1u << 0)
#define IN_Y (1u << 1)
#define OUT_0 (1u << 0)

/* The gradient masks match the rules in elementwise_grad*.c. Every binary
 * rule reads X and Y, if only for their shapes (to sum a broadcast gradient
 * back); unary rules read X or Out, whichever is cheaper. */
BINARY_OP(add, NB_EW_ADD, "X + Y, broadcasting", IN_X | IN_Y, 0)
BINARY_OP(sub, NB_EW_SUB, "X - Y, broadcasting", IN_X | IN_Y, 0)
BINARY_OP(mul, NB_EW_MUL, "X * Y, broadcasting", IN_X | IN_Y, 0)
BINARY_OP(div, NB_EW_DIV, "X / Y, broadcasting; integers truncate toward zero and reject a zero divisor",
          IN_X | IN_Y, OUT_0)
BINARY_OP(pow, NB_EW_POW, "X raised to the power Y, broadcasting", IN_X | IN_Y, OUT_0)
BINARY_OP(maximum, NB_EW_MAXIMUM, "Larger of X and Y, broadcasting; NaN if either is NaN", IN_X | IN_Y, 0)
BINARY_OP(minimum, NB_EW_MINIMUM, "Smaller of X and Y, broadcasting; NaN if either is NaN", IN_X | IN_Y, 0)

/* ---- unary: X -> Out, same shape and dtype ----------------------------------- */

static nb_status infer_unary(nb_op_ctx *c, nb_ew_unary_op op)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    if (!nb_ew_unary_supports(op, x->dtype)) {
        char list[128];
        return nb_error(NB_ERR_DTYPE, "%s: X is %s but it takes %s", c->label, nb_dtype_name(x->dtype),
                        dtype_list(list, sizeof list, unary_ok, op));
    }
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

static nb_status run_unary(nb_op_ctx *c, nb_ew_unary_op op, const nb_ew_params *p)
{
    return nb_ew_unary(op, nb_in(c, 0, 0), nb_out(c, 0, 0), p, c->label);
}

/* An op without attributes. */
#define UNARY_OP(id, ENUM, DOC, USES_IN, USES_OUT)                                     \
    static nb_status infer_##id(nb_op_ctx *c) { return infer_unary(c, ENUM); }        \
    static nb_status cpu_##id(nb_op_ctx *c) { return run_unary(c, ENUM, NULL); }      \
    static const nb_op_def op_##id = {                                                \
        .name = #id, .doc = DOC, .inputs = {{"X", 0}}, .outputs = {{"Out", 0}},       \
        .infer = infer_##id, .cpu = cpu_##id, .grad_uses_inputs = (USES_IN), .grad_uses_outputs = (USES_OUT), \
        .vjp = nb_##id##_vjp, .jvp = nb_##id##_jvp};

UNARY_OP(neg, NB_EW_NEG, "-X", 0, 0)
UNARY_OP(abs, NB_EW_ABS, "|X|", IN_X, 0)
UNARY_OP(sign, NB_EW_SIGN, "-1, 0 or 1 by the sign of X (NaN stays NaN)", 0, 0)
UNARY_OP(square, NB_EW_SQUARE, "X * X", IN_X, 0)
UNARY_OP(sqrt, NB_EW_SQRT, "Square root of X", 0, OUT_0)
UNARY_OP(rsqrt, NB_EW_RSQRT, "1 / sqrt(X)", 0, OUT_0)
UNARY_OP(exp, NB_EW_EXP, "e to the power X", 0, OUT_0)
UNARY_OP(log, NB_EW_LOG, "Natural logarithm of X", IN_X, 0)
UNARY_OP(log1p, NB_EW_LOG1P, "log(1 + X), accurate for small X", IN_X, 0)
UNARY_OP(sin, NB_EW_SIN, "Sine of X (radians)", IN_X, 0)
UNARY_OP(cos, NB_EW_COS, "Cosine of X (radians)", IN_X, 0)
UNARY_OP(tan, NB_EW_TAN, "Tangent of X (radians)", 0, OUT_0)
UNARY_OP(tanh, NB_EW_TANH, "Hyperbolic tangent of X", 0, OUT_0)
UNARY_OP(sigmoid, NB_EW_SIGMOID, "1 / (1 + exp(-X)), computed without overflow", 0, OUT_0)
UNARY_OP(relu, NB_EW_RELU, "max(X, 0)", 0, OUT_0)
UNARY_OP(silu, NB_EW_SILU, "X * sigmoid(X) (swish)", IN_X, 0)

/* ---- unary ops with attributes ----------------------------------------------- */

static nb_status infer_leaky_relu(nb_op_ctx *c) { return infer_unary(c, NB_EW_LEAKY_RELU); }
static nb_status cpu_leaky_relu(nb_op_ctx *c)
{
    nb_ew_params p = {.alpha = nb_attr_float(c, "alpha")};
    return run_unary(c, NB_EW_LEAKY_RELU, &p);
}
static const nb_op_def op_leaky_relu = {
    .name = "leaky_relu", .doc = "X if X > 0, else alpha * X",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .attrs = {NB_ADEF_FLOAT("alpha", 0.01)},
    .infer = infer_leaky_relu, .cpu = cpu_leaky_relu, .grad_uses_inputs = IN_X, .vjp = nb_leaky_relu_vjp,
    .jvp = nb_leaky_relu_jvp};

static nb_status infer_elu(nb_op_ctx *c) { return infer_unary(c, NB_EW_ELU); }
static nb_status cpu_elu(nb_op_ctx *c)
{
    nb_ew_params p = {.alpha = nb_attr_float(c, "alpha")};
    return run_unary(c, NB_EW_ELU, &p);
}
static const nb_op_def op_elu = {
    .name = "elu", .doc = "X if X > 0, else alpha * (exp(X) - 1)",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .attrs = {NB_ADEF_FLOAT("alpha", 1.0)},
    .infer = infer_elu, .cpu = cpu_elu, .grad_uses_inputs = IN_X, .grad_uses_outputs = OUT_0,
    .vjp = nb_elu_vjp, .jvp = nb_elu_jvp};

static nb_status infer_gelu(nb_op_ctx *c)
{
    return infer_unary(c, nb_attr_bool(c, "approximate") ? NB_EW_GELU_TANH : NB_EW_GELU);
}
static nb_status cpu_gelu(nb_op_ctx *c)
{
    return run_unary(c, nb_attr_bool(c, "approximate") ? NB_EW_GELU_TANH : NB_EW_GELU, NULL);
}
static const nb_op_def op_gelu = {
    .name = "gelu", .doc = "X * Phi(X) with the normal CDF Phi; approximate: its tanh form",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .attrs = {NB_ADEF_BOOL("approximate", false)},
    .infer = infer_gelu, .cpu = cpu_gelu, .grad_uses_inputs = IN_X, .grad_uses_outputs = OUT_0,
    .vjp = nb_gelu_vjp, .jvp = nb_gelu_jvp};

static nb_status infer_softplus(nb_op_ctx *c)
{
    double beta = nb_attr_float(c, "beta"), threshold = nb_attr_float(c, "threshold");
    if (!(beta != 0) || !isfinite(beta))
        return nb_error(NB_ERR_ARG, "%s: beta must be finite and nonzero, got %g", c->label, beta);
    if (isnan(threshold)) return nb_error(NB_ERR_ARG, "%s: threshold is NaN", c->label);
    return infer_unary(c, NB_EW_SOFTPLUS);
}
static nb_status cpu_softplus(nb_op_ctx *c)
{
    nb_ew_params p = {.beta = nb_attr_float(c, "beta"), .threshold = nb_attr_float(c, "threshold")};
    return run_unary(c, NB_EW_SOFTPLUS, &p);
}
static const nb_op_def op_softplus = {
    .name = "softplus", .doc = "log(1 + exp(beta * X)) / beta; X itself where beta * X > threshold",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("beta", 1.0), NB_ADEF_FLOAT("threshold", 20.0)},
    .infer = infer_softplus, .cpu = cpu_softplus, .grad_uses_inputs = IN_X, .vjp = nb_softplus_vjp,
    .jvp = nb_softplus_jvp};

static nb_status infer_clip(nb_op_ctx *c)
{
    double lo = nb_attr_float(c, "min"), hi = nb_attr_float(c, "max");
    if (isnan(lo) || isnan(hi)) return nb_error(NB_ERR_ARG, "%s: min and max must not be NaN", c->label);
    if (lo > hi) return nb_error(NB_ERR_ARG, "%s: min (%g) is greater than max (%g)", c->label, lo, hi);
    return infer_unary(c, NB_EW_CLIP);
}
static nb_status cpu_clip(nb_op_ctx *c)
{
    nb_ew_params p = {.lo = nb_attr_float(c, "min"), .hi = nb_attr_float(c, "max")};
    return run_unary(c, NB_EW_CLIP, &p);
}
/* The defaults leave a side unbounded while keeping attributes finite (and
 * so printable and serialisable). */
static const nb_op_def op_clip = {
    .name = "clip", .doc = "X limited to [min, max]; NaN stays NaN",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("min", -DBL_MAX), NB_ADEF_FLOAT("max", DBL_MAX)},
    .infer = infer_clip, .cpu = cpu_clip, .grad_uses_inputs = IN_X, .grad_uses_outputs = OUT_0,
    .vjp = nb_clip_vjp, .jvp = nb_clip_jvp};

static nb_ew_unary_op scale_kind(const nb_op_ctx *c)
{
    return nb_attr_bool(c, "bias_after_scale") ? NB_EW_SCALE : NB_EW_SCALE_FIRST_BIAS;
}
static nb_status infer_scale(nb_op_ctx *c) { return infer_unary(c, scale_kind(c)); }
static nb_status cpu_scale(nb_op_ctx *c)
{
    nb_ew_params p = {.scale = nb_attr_float(c, "scale"), .bias = nb_attr_float(c, "bias")};
    return run_unary(c, scale_kind(c), &p);
}
static const nb_op_def op_scale = {
    .name = "scale", .doc = "scale * X + bias, or scale * (X + bias) unless bias_after_scale",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("scale", 1.0), NB_ADEF_FLOAT("bias", 0.0), NB_ADEF_BOOL("bias_after_scale", true)},
    .infer = infer_scale, .cpu = cpu_scale, .vjp = nb_scale_vjp, .jvp = nb_scale_jvp};

/* ---- cast ----------------------------------------------------------------------- */

static nb_status infer_cast(nb_op_ctx *c)
{
    int64_t dt = nb_attr_int(c, "dtype");
    if (dt < 0 || dt >= NB_DTYPE_COUNT)
        return nb_error(NB_ERR_ARG, "%s: dtype %lld is not a dtype (0 to %d)", c->label, (long long)dt,
                        NB_DTYPE_COUNT - 1);
    nb_var_info *out = nb_out_info(c, 0, 0);
    *out = *nb_in_info(c, 0, 0);
    out->dtype = (nb_dtype)dt;
    return NB_OK;
}
static nb_status cpu_cast(nb_op_ctx *c) { return nb_ew_cast(nb_in(c, 0, 0), nb_out(c, 0, 0), c->label); }
static const nb_op_def op_cast = {
    .name = "cast", .doc = "X converted to dtype (floats to integers truncate and saturate; to bool: X != 0)",
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .attrs = {NB_ADEF_REQUIRED("dtype", NB_ATTR_INT)},
    .infer = infer_cast, .cpu = cpu_cast, .grad_uses_inputs = IN_X, .vjp = nb_cast_vjp, .jvp = nb_cast_jvp};

const nb_op_def *const nb_ops_elementwise[] = {
    &op_add, &op_sub, &op_mul, &op_div, &op_pow, &op_maximum, &op_minimum,
    &op_neg, &op_abs, &op_sign, &op_square, &op_sqrt, &op_rsqrt, &op_exp, &op_log, &op_log1p,
    &op_sin, &op_cos, &op_tan, &op_tanh, &op_sigmoid, &op_relu, &op_leaky_relu, &op_elu,
    &op_gelu, &op_softplus, &op_silu, &op_clip, &op_scale, &op_cast,
    NULL,
};
