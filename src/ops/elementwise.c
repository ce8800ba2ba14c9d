/* The elementwise family: broadcasting arithmetic, unary math, activations,
 * clip, scale and cast. The definitions of the ops listed in
 * nabla/elementwise_ops.h are made from the list; gelu (with its fused
 * gradient gelu_grad), clip, scale and cast are written out below. Shape
 * inference and parameters live here; the kernels are in
 * kernels/cpu/elementwise_kernels.c. */
#include <float.h>
#include <math.h>
#include <string.h>
#include "families.h"
#include "batch_rules.h"
#include "broadcast_infer.h"
#include "elementwise_grad.h"
#include "infer_check.h"
#include "kernels/params/elementwise.h"

#define X (1u << 0)
#define Y (1u << 1)
#define OUT (1u << 0)
#define FLOAT NB_DT_FLOAT
#define NUMERIC NB_DT_NUMERIC

static nb_status check_dtype(const nb_op_ctx *c, const char *what, nb_dtype dt, unsigned dtypes)
{
    if (dtypes & NB_DT(dt)) return NB_OK;
    char list[128];
    return nb_error(NB_ERR_DTYPE, "%s: %s %s %s but it takes %s", c->label, what, what[1] ? "are" : "is",
                    nb_dtype_name(dt), nb_dtype_list(list, sizeof list, dtypes));
}

/* ---- binary: X, Y broadcast -> Out ------------------------------------------ */

static nb_status infer_binary(nb_op_ctx *c, unsigned dtypes)
{
    nb_status st = nb_infer_same_dtype(c, 0, 1);
    if (st) return st;
    nb_dtype dt = nb_in_info(c, 0, 0)->dtype;
    if ((st = check_dtype(c, "X and Y", dt, dtypes))) return st;
    nb_var_info *out = nb_out_info(c, 0, 0);
    out->dtype = dt;
    return nb_infer_broadcast(c, 2, (const int[]){0, 1}, out);
}

/* ---- unary: X -> Out, same shape and dtype ----------------------------------- */

static nb_status infer_unary(nb_op_ctx *c, unsigned dtypes)
{
    const nb_var_info *x = nb_in_info(c, 0, 0);
    nb_status st = check_dtype(c, "X", x->dtype, dtypes);
    if (st) return st;
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

/* Float attributes of the listed ops become fields of nb_ew_params of the
 * same name; none may be NaN, and softplus divides by beta. */
static nb_status infer_attrs(nb_op_ctx *c, unsigned dtypes)
{
    for (int i = 0; i < NB_MAX_ATTRS && c->def->attrs[i].name; i++)
        if (isnan(c->attrs[i].f)) return nb_error(NB_ERR_ARG, "%s: %s is NaN", c->label, c->def->attrs[i].name);
    if (!strcmp(c->def->name, "softplus") && (!(c->attrs[0].f != 0) || !isfinite(c->attrs[0].f)))
        return nb_error(NB_ERR_ARG, "%s: beta must be finite and nonzero, got %g", c->label, c->attrs[0].f);
    return infer_unary(c, dtypes);
}

#define DEF_BINARY(op, dtypes, uses_in, uses_out, doc_) DEF_BINARY_(op, dtypes, uses_in, uses_out, doc_, nb_batch_broadcast)
#define DEF_BINARY_(op, dtypes, uses_in, uses_out, doc_, BATCH_RULE)                                              \
    static nb_status infer_##op(nb_op_ctx *c) { return infer_binary(c, dtypes); }                   \
    static const nb_op_def op_##op = {                                                              \
        .name = #op, .doc = doc_, .inputs = {{"X", 0}, {"Y", 0}}, .outputs = {{"Out", 0}},          \
        .infer = infer_##op, .grad_uses_inputs = (uses_in), .grad_uses_outputs = (uses_out),        \
        .vjp = nb_##op##_vjp, .jvp = nb_##op##_jvp, .batch = BATCH_RULE, .flags = NB_OP_INPLACE};
#define DEF_UNARY(op, dtypes, uses_in, uses_out, doc_) DEF_UNARY_(op, dtypes, uses_in, uses_out, doc_, nb_batch_unary)
#define DEF_UNARY_(op, dtypes, uses_in, uses_out, doc_, BATCH_RULE)                                               \
    static nb_status infer_##op(nb_op_ctx *c) { return infer_unary(c, dtypes); }                    \
    static const nb_op_def op_##op = {                                                              \
        .name = #op, .doc = doc_, .inputs = {{"X", 0}}, .outputs = {{"Out", 0}},                    \
        .infer = infer_##op, .grad_uses_inputs = (uses_in), .grad_uses_outputs = (uses_out),        \
        .vjp = nb_##op##_vjp, .jvp = nb_##op##_jvp, .batch = BATCH_RULE, .flags = NB_OP_INPLACE};
/* With float attributes: the kernels read them from nb_ew_params. */
#define DEF_UNARY_ATTRS(op, dtypes, uses_in, uses_out, doc_, FILL, ...)                              \
    static nb_status infer_##op(nb_op_ctx *c) { return infer_attrs(c, dtypes); }                    \
    static nb_status params_##op(const nb_op_ctx *c, void *params)                                  \
    {                                                                                                 \
        nb_ew_params *p = params;                                                                     \
        FILL;                                                                                         \
        return NB_OK;                                                                                 \
    }                                                                                                 \
    static const nb_op_def op_##op = {                                                              \
        .name = #op, .doc = doc_, .inputs = {{"X", 0}}, .outputs = {{"Out", 0}},                    \
        .attrs = {__VA_ARGS__}, .infer = infer_##op, .params_size = sizeof(nb_ew_params),           \
        .params = params_##op, .grad_uses_inputs = (uses_in), .grad_uses_outputs = (uses_out),      \
        .vjp = nb_##op##_vjp, .jvp = nb_##op##_jvp, .batch = nb_batch_unary, .flags = NB_OP_INPLACE};

#define NB_BINARY(name, dtypes, cost, uses_in, uses_out, doc) DEF_BINARY(name, dtypes, uses_in, uses_out, doc)
#define NB_UNARY(name, dtypes, cost, uses_in, uses_out, doc) DEF_UNARY(name, dtypes, uses_in, uses_out, doc)
#define NB_UNARY_A1(name, dtypes, cost, uses_in, uses_out, a, a_default, doc) \
    DEF_UNARY_ATTRS(name, dtypes, uses_in, uses_out, doc, p->a = c->attrs[0].f, NB_ADEF_FLOAT(#a, a_default))
#define NB_UNARY_A2(name, dtypes, cost, uses_in, uses_out, a, a_default, b, b_default, doc)         \
    DEF_UNARY_ATTRS(name, dtypes, uses_in, uses_out, doc, (p->a = c->attrs[0].f, p->b = c->attrs[1].f), \
                    NB_ADEF_FLOAT(#a, a_default), NB_ADEF_FLOAT(#b, b_default))
#include "nabla/elementwise_ops.h"

/* ---- the ops written out in full ------------------------------------------------ */

static nb_status infer_gelu(nb_op_ctx *c) { return infer_unary(c, FLOAT); }
static nb_status params_gelu(const nb_op_ctx *c, void *p)
{
    ((nb_ew_params *)p)->approximate = nb_attr_bool(c, "approximate");
    return NB_OK;
}
/* gelu's rules read only X: its gradient is the fused gelu_grad(X, DOut). */
static const nb_op_def op_gelu = {.name = "gelu",
                                  .batch = nb_batch_unary,
                                  .doc = "X * Phi(X) with the normal CDF Phi; approximate: its tanh form",
                                  .inputs = {{"X", 0}},
                                  .outputs = {{"Out", 0}},
                                  .attrs = {NB_ADEF_BOOL("approximate", false)},
                                  .infer = infer_gelu,
                                  .params_size = sizeof(nb_ew_params),
                                  .params = params_gelu,
                                  .grad_uses_inputs = X,
                                  .vjp = nb_gelu_vjp,
                                  .jvp = nb_gelu_jvp,
                                  .flags = NB_OP_INPLACE};

/* X and DOut of one float dtype and one shape (a -1 dim matches any). */
static nb_status infer_gelu_grad(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *d = nb_in_info(c, 1, 0);
    nb_status st = check_dtype(c, "X", x->dtype, FLOAT);
    if (st || (st = nb_check_same_dtype(c, "DOut", d, "X", x))) return st;
    nb_var_info out = *x;
    bool same = d->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) {
        same = x->shape[i] < 0 || d->shape[i] < 0 || x->shape[i] == d->shape[i];
        if (out.shape[i] < 0) out.shape[i] = d->shape[i];
    }
    if (!same) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: DOut has shape %s but X has shape %s; they must be the same", c->label,
                        nb_info_shape(a, d), nb_info_shape(b, x));
    }
    *nb_out_info(c, 0, 0) = out;
    return NB_OK;
}
/* The kernel may write DX over X or DOut. */
static const nb_op_def op_gelu_grad = {
    .name = "gelu_grad",
    .batch = nb_batch_same_shape,
    .doc = "DX = DOut * gelu'(X), gelu's gradient in one pass; approximate: the tanh form's",
    .inputs = {{"X", 0}, {"DOut", 0}},
    .outputs = {{"DX", 0}},
    .attrs = {NB_ADEF_BOOL("approximate", false)},
    .infer = infer_gelu_grad,
    .params_size = sizeof(nb_ew_params),
    .params = params_gelu,
    .grad_uses_inputs = X | Y,
    .vjp = nb_gelu_grad_vjp,
    .jvp = nb_gelu_grad_jvp,
    .flags = NB_OP_INPLACE};

static nb_status infer_clip(nb_op_ctx *c)
{
    double lo = nb_attr_float(c, "min"), hi = nb_attr_float(c, "max");
    if (isnan(lo) || isnan(hi)) return nb_error(NB_ERR_ARG, "%s: min and max must not be NaN", c->label);
    if (lo > hi) return nb_error(NB_ERR_ARG, "%s: min (%g) is greater than max (%g)", c->label, lo, hi);
    return infer_unary(c, NUMERIC);
}
static nb_status params_clip(const nb_op_ctx *c, void *params)
{
    nb_ew_params *p = params;
    p->min = nb_attr_float(c, "min");
    p->max = nb_attr_float(c, "max");
    return NB_OK;
}
/* The defaults leave a side unbounded while keeping attributes finite (and
 * so printable and serialisable). */
static const nb_op_def op_clip = {.name = "clip",
                                  .batch = nb_batch_unary,
                                  .doc = "X limited to [min, max]; NaN stays NaN",
                                  .inputs = {{"X", 0}},
                                  .outputs = {{"Out", 0}},
                                  .attrs = {NB_ADEF_FLOAT("min", -DBL_MAX), NB_ADEF_FLOAT("max", DBL_MAX)},
                                  .infer = infer_clip,
                                  .params_size = sizeof(nb_ew_params),
                                  .params = params_clip,
                                  .grad_uses_inputs = X,
                                  .grad_uses_outputs = OUT,
                                  .vjp = nb_clip_vjp,
                                  .jvp = nb_clip_jvp,
                                  .flags = NB_OP_INPLACE};

static nb_status infer_scale(nb_op_ctx *c) { return infer_unary(c, NUMERIC); }
static nb_status params_scale(const nb_op_ctx *c, void *params)
{
    nb_ew_params *p = params;
    p->scale = nb_attr_float(c, "scale");
    p->bias = nb_attr_float(c, "bias");
    p->bias_after_scale = nb_attr_bool(c, "bias_after_scale");
    return NB_OK;
}
static const nb_op_def op_scale = {
    .name = "scale",
    .batch = nb_batch_unary,
    .doc = "scale * X + bias, or scale * (X + bias) unless bias_after_scale",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("scale", 1.0), NB_ADEF_FLOAT("bias", 0.0), NB_ADEF_BOOL("bias_after_scale", true)},
    .infer = infer_scale,
    .params_size = sizeof(nb_ew_params),
    .params = params_scale,
    .vjp = nb_scale_vjp,
    .jvp = nb_scale_jvp,
    .flags = NB_OP_INPLACE};

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
static const nb_op_def op_cast = {
    .name = "cast",
    .batch = nb_batch_unary,
    .doc = "X converted to dtype (floats to integers truncate and saturate; to bool: X != 0)",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("dtype", NB_ATTR_INT)},
    .infer = infer_cast,
    .grad_uses_inputs = X,
    .vjp = nb_cast_vjp,
    .jvp = nb_cast_jvp};

const nb_op_def *const nb_ops_elementwise[] = {
#define NB_BINARY(name, ...) &op_##name,
#define NB_UNARY(name, ...) &op_##name,
#define NB_UNARY_A1(name, ...) &op_##name,
#define NB_UNARY_A2(name, ...) &op_##name,
#include "nabla/elementwise_ops.h"
    &op_gelu, &op_gelu_grad, &op_clip, &op_scale, &op_cast, NULL,
};
