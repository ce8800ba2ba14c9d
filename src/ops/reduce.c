/* The reduction family: reductions over axes (sum, mean, max, min, prod,
 * logsumexp), arg-reductions, the variadic sum that adds up gradients, and
 * sum_to, which undoes a broadcast. Kernels: src/kernels/cpu/reduce.c. */
#include <stddef.h>
#include <string.h>
#include "families.h"
#include "batch_rules.h"
#include "kernels/cpu/reduce.h"
#include "reduce_grad.h"

/* ---- helpers ------------------------------------------------------------------ */

static bool is_float(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64; }
static bool is_num(nb_dtype dt) { return is_float(dt) || dt == NB_I32 || dt == NB_I64; }

static nb_status check_dtype(const nb_op_ctx *ctx, const char *slot, nb_dtype dt, bool float_only)
{
    if (float_only ? is_float(dt) : is_num(dt)) return NB_OK;
    return nb_error(NB_ERR_DTYPE, "%s: %s has dtype %s but it takes %s", ctx->label, slot, nb_dtype_name(dt),
                    float_only ? "float32 or float64" : "float32, float64, int32 or int64");
}

/* Out's shape: X's with the masked dims dropped, or set to 1 with keepdim.
 * Unknown (-1) dims that are kept stay unknown. */
static void reduced_shape(const nb_var_info *x, const bool *mask, bool keepdim, nb_var_info *out)
{
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!mask[d]) out->shape[out->ndim++] = x->shape[d];
        else if (keepdim) out->shape[out->ndim++] = 1;
    }
}

/* ---- reductions over axes ---------------------------------------------------- */

static nb_status infer_reduce_common(nb_op_ctx *ctx, bool float_only)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    nb_status st = check_dtype(ctx, "X", x->dtype, float_only);
    if (st) return st;
    bool mask[NB_MAX_DIMS];
    const nb_attr_value *axes = nb_attr_get(ctx, "axes");
    if ((st = nb_reduce_axes_mask(ctx->label, axes->n, axes->ints, x->ndim, x->shape, mask))) return st;
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    out->dtype = x->dtype;
    reduced_shape(x, mask, nb_attr_bool(ctx, "keepdim"), out);
    return NB_OK;
}

static nb_status infer_reduce(nb_op_ctx *ctx) { return infer_reduce_common(ctx, false); }
static nb_status infer_reduce_float(nb_op_ctx *ctx) { return infer_reduce_common(ctx, true); }

static nb_status reduce_params(const nb_op_ctx *ctx, void *params)
{
    nb_reduce_params *p = params;
    const nb_attr_value *axes = nb_attr_get(ctx, "axes");
    if (axes->n > NB_MAX_DIMS)
        return nb_error(NB_ERR_ARG, "%s: %d axes, more than a tensor has dims", ctx->label, axes->n);
    p->n_axes = axes->n;
    for (int i = 0; i < axes->n; i++) p->axes[i] = axes->ints[i];
    p->keepdim = nb_attr_bool(ctx, "keepdim");
    return NB_OK;
}

/* Sum and mean read only X's shape in their gradient; max, min, prod and
 * logsumexp compare or divide by X and Out. */
#define REDUCE_OP(NAME, DOC, INFER, USES_IN, USES_OUT, VJP, JVP)                     \
    static const nb_op_def op_##NAME = {                                             \
        .name = #NAME,                                                               \
        .doc = DOC,                                                                  \
        .inputs = {{"X", 0}},                                                        \
        .outputs = {{"Out", 0}},                                                     \
        .attrs = {NB_ADEF_INTS_EMPTY("axes"), NB_ADEF_BOOL("keepdim", false)},      \
        .infer = INFER,                                                              \
        .params_size = sizeof(nb_reduce_params),                                     \
        .params = reduce_params,                                                     \
        .grad_uses_inputs = USES_IN,                                                 \
        .grad_uses_outputs = USES_OUT,                                               \
        .vjp = VJP,                                                                  \
        .jvp = JVP,                                                                  \
        .batch = nb_batch_reduce,                                                    \
    };

REDUCE_OP(reduce_sum, "Sum over axes (all if empty); keepdim keeps them as size 1", infer_reduce, 1u << 0, 0,
          nb_vjp_reduce_sum, nb_jvp_reduce_sum)
REDUCE_OP(reduce_mean, "Mean over axes (all if empty); the mean of nothing is NaN", infer_reduce_float, 1u << 0, 0,
          nb_vjp_reduce_mean, nb_jvp_reduce_mean)
REDUCE_OP(reduce_max, "Maximum over axes (all if empty); NaN propagates", infer_reduce, 1u << 0, 1u << 0,
          nb_vjp_reduce_max, nb_jvp_reduce_max)
REDUCE_OP(reduce_min, "Minimum over axes (all if empty); NaN propagates", infer_reduce, 1u << 0, 1u << 0,
          nb_vjp_reduce_max, nb_jvp_reduce_max)
REDUCE_OP(reduce_prod, "Product over axes (all if empty)", infer_reduce, 1u << 0, 1u << 0, nb_vjp_reduce_prod,
          nb_jvp_reduce_prod)
REDUCE_OP(logsumexp, "log(sum(exp(X))) over axes (all if empty), computed without overflow", infer_reduce_float,
          1u << 0, 1u << 0, nb_vjp_logsumexp, nb_jvp_logsumexp)

/* ---- argmax / argmin ------------------------------------------------------------ */

static nb_status infer_arg(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    nb_status st = check_dtype(ctx, "X", x->dtype, false);
    if (st) return st;
    int64_t axis = nb_attr_int(ctx, "axis");
    /* A 0-d X counts as one element along axis 0 (or -1). */
    int nd = x->ndim ? x->ndim : 1;
    if (axis < -nd || axis >= nd) {
        char xs[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_ARG, "%s: axis %lld is out of range for X of shape %s (rank %d)", ctx->label,
                        (long long)axis, nb_shape_str(xs, sizeof xs, x->ndim, x->shape), x->ndim);
    }
    if (axis < 0) axis += nd;
    bool mask[NB_MAX_DIMS] = {false};
    if (x->ndim) mask[axis] = true;
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    out->dtype = NB_I64;
    reduced_shape(x, mask, nb_attr_bool(ctx, "keepdim"), out);
    return NB_OK;
}

static nb_status arg_params(const nb_op_ctx *ctx, void *params)
{
    nb_arg_params *p = params;
    p->axis = nb_attr_int(ctx, "axis");
    p->keepdim = nb_attr_bool(ctx, "keepdim");
    p->last = nb_attr_bool(ctx, "select_last");
    return NB_OK;
}

#define ARG_OP(NAME, DOC)                                                          \
    static const nb_op_def op_##NAME = {                                           \
        .name = #NAME,                                                             \
        .doc = DOC,                                                                \
        .inputs = {{"X", 0}},                                                      \
        .outputs = {{"Out", 0}},                                                   \
        .attrs = {NB_ADEF_INT("axis", -1), NB_ADEF_BOOL("keepdim", false), NB_ADEF_BOOL("select_last", false)}, \
        .infer = infer_arg,                                                        \
        .params_size = sizeof(nb_arg_params),                                      \
        .params = arg_params,                                                      \
        .flags = NB_OP_NOT_DIFFERENTIABLE,                                         \
        .batch = nb_batch_arg_reduce,                                              \
    };

ARG_OP(argmax, "Index (int64) of the largest value along axis; the first wins ties (the last with select_last)")
ARG_OP(argmin, "Index (int64) of the smallest value along axis; the first wins ties (the last with select_last)")

/* ---- sum of several tensors -------------------------------------------------------- */

static nb_status infer_sum(nb_op_ctx *ctx)
{
    int n = nb_in_count(ctx, 0);
    const nb_var_info *x0 = nb_in_info(ctx, 0, 0);
    nb_status st = check_dtype(ctx, "X[0]", x0->dtype, false);
    if (st) return st;
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    *out = *x0;
    for (int k = 1; k < n; k++) {
        const nb_var_info *xk = nb_in_info(ctx, 0, k);
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        if (xk->dtype != x0->dtype)
            return nb_error(NB_ERR_DTYPE, "%s: X[%d] has dtype %s but X[0] has dtype %s", ctx->label, k,
                            nb_dtype_name(xk->dtype), nb_dtype_name(x0->dtype));
        bool same = xk->ndim == x0->ndim;
        for (int d = 0; same && d < xk->ndim; d++) {
            int64_t u = xk->shape[d], v = out->shape[d];
            if (u != v && u != -1 && v != -1) same = false;
            else if (v == -1) out->shape[d] = u; /* the first known size */
        }
        if (!same)
            return nb_error(NB_ERR_SHAPE, "%s: X[%d] has shape %s but X[0] has shape %s", ctx->label, k,
                            nb_shape_str(a, sizeof a, xk->ndim, xk->shape),
                            nb_shape_str(b, sizeof b, x0->ndim, x0->shape));
    }
    return NB_OK;
}

static const nb_op_def op_sum = {
    .name = "sum",
    .batch = nb_batch_same_shape,
    .doc = "Elementwise sum of any number of tensors of one shape and dtype (adds up gradients)",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", 0}},
    .infer = infer_sum,
    .vjp = nb_vjp_sum,
    .jvp = nb_jvp_sum,
    .flags = NB_OP_INPLACE,
};

/* ---- sum_to ---------------------------------------------------------------------- */

static nb_status infer_sum_to(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *like = nb_in_info(ctx, 1, 0);
    nb_status st = check_dtype(ctx, "X", x->dtype, false);
    if (st) return st;
    bool mask[NB_MAX_DIMS];
    if (!nb_sum_to_mask(x->ndim, x->shape, like->ndim, like->shape, mask)) {
        char xs[NB_SHAPE_STR_MAX], ls[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: Like has shape %s, which does not broadcast to X's shape %s", ctx->label,
                        nb_shape_str(ls, sizeof ls, like->ndim, like->shape),
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    }
    nb_var_info *out = nb_out_info(ctx, 0, 0);
    out->dtype = x->dtype;
    out->ndim = like->ndim;
    memcpy(out->shape, like->shape, sizeof out->shape);
    return NB_OK;
}

/* The gradient broadcasts dOut back to X's shape, so it needs X (for its
 * shape) and nothing of Like. */
static const nb_op_def op_sum_to = {
    .name = "sum_to",
    .batch = nb_batch_sum_to,
    .doc = "Sums X over the dims along which Like's shape was broadcast to X's, giving Like's shape",
    .inputs = {{"X", 0}, {"Like", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}},
    .outputs = {{"Out", 0}},
    .infer = infer_sum_to,
    .grad_uses_inputs = 1u << 0,
    .vjp = nb_vjp_sum_to,
    .jvp = nb_jvp_sum_to,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def *const nb_ops_reduce[] = {
    &op_reduce_sum,
    &op_reduce_mean,
    &op_reduce_max,
    &op_reduce_min,
    &op_reduce_prod,
    &op_logsumexp,
    &op_argmax,
    &op_argmin,
    &op_sum,
    &op_sum_to,
    &nb_op_topk,
    &nb_op_gather_elements,
    &nb_op_scatter_elements,
    NULL,
};
