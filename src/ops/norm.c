/* Batch and layer normalisation, with their fused gradient ops. Shape rules,
 * validation and the parameter structs' filling live here; the arithmetic is
 * in kernels/cpu/norm.c. */
#include <math.h>
#include <string.h>
#include "families.h"
#include "batch_rules.h"
#include "infer_check.h"
#include "norm_grad.h"
#include "kernels/params/norm.h"

static bool dims_fit(int nda, const int64_t *a, int ndb, const int64_t *b)
{
    if (nda != ndb) return false;
    for (int i = 0; i < nda; i++)
        if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
    return true;
}

/* v must have `shape`; unknown (-1) dims on either side pass. */
static nb_status check_shape(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, int ndim,
                             const int64_t *shape, const char *why)
{
    if (!dims_fit(v->ndim, v->shape, ndim, shape)) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: %s has shape %s but %s %s", ctx->label, slot, nb_info_shape(a, v), why,
                        nb_shape_str(b, sizeof b, ndim, shape));
    }
    return NB_OK;
}

static void set_out(nb_op_ctx *ctx, int slot, nb_dtype dt, int ndim, const int64_t *shape)
{
    if (nb_out_count(ctx, slot) < 1) return;
    nb_var_info *o = nb_out_info(ctx, slot, 0);
    o->dtype = dt;
    o->ndim = ndim;
    memcpy(o->shape, shape, (size_t)ndim * sizeof *shape);
}

/* Product of dims [from, to); -1 if any is unknown. */
static int64_t dims_prod(const nb_var_info *v, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) {
        if (v->shape[i] < 0) return -1;
        p *= v->shape[i];
    }
    return p;
}

static nb_status check_epsilon(const nb_op_ctx *ctx)
{
    double eps = nb_attr_float(ctx, "epsilon");
    if (!(eps >= 0) || isinf(eps))
        return nb_error(NB_ERR_ARG, "%s: epsilon must be finite and >= 0, got %g", ctx->label, eps);
    return NB_OK;
}

/* ---- batch_norm ------------------------------------------------------------- */

static bool bn_global(const nb_op_ctx *ctx)
{
    return nb_attr_bool(ctx, "is_test") || nb_attr_bool(ctx, "use_global_stats");
}

/* The kernels' parameters; inference checks the values. batch_norm_grad has
 * no momentum (it stays 0). */
static nb_status batch_norm_grad_params(const nb_op_ctx *ctx, void *params)
{
    nb_batch_norm_params *p = params;
    p->epsilon = nb_attr_float(ctx, "epsilon");
    p->global_stats = bn_global(ctx);
    return NB_OK;
}

static nb_status batch_norm_params(const nb_op_ctx *ctx, void *params)
{
    ((nb_batch_norm_params *)params)->momentum = nb_attr_float(ctx, "momentum");
    return batch_norm_grad_params(ctx, params);
}

/* X must be [N, C, ...] and each per-channel slot in `slots` (NULL names
 * skip absent optional slots) [C]; gives C (-1 while unknown). */
static nb_status bn_check(const nb_op_ctx *ctx, int n_slots, const int *slots, const char *const *names, int64_t *C)
{
    nb_status st;
    char sx[NB_SHAPE_STR_MAX];
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    if ((st = nb_check_float(ctx, "X", x)) || (st = check_epsilon(ctx))) return st;
    if (x->ndim < 2)
        return nb_error(NB_ERR_SHAPE, "%s: X has shape %s but must be [N, C] or [N, C, H, W] (at least 2-D)",
                        ctx->label, nb_info_shape(sx, x));
    *C = x->shape[1];
    for (int k = 0; k < n_slots && *C < 0; k++)
        if (nb_has_in(ctx, slots[k]) && nb_in_info(ctx, slots[k], 0)->ndim == 1)
            *C = nb_in_info(ctx, slots[k], 0)->shape[0];
    for (int k = 0; k < n_slots; k++) {
        if (!nb_has_in(ctx, slots[k])) continue;
        const nb_var_info *v = nb_in_info(ctx, slots[k], 0);
        if ((st = nb_check_same_dtype(ctx, names[k], v, "X", x)) ||
            (st = check_shape(ctx, names[k], v, 1, C, "X's channels need")))
            return st;
    }
    return NB_OK;
}

static nb_status batch_norm_infer(nb_op_ctx *ctx)
{
    static const int slots[] = {1, 2, 3, 4};
    static const char *const names[] = {"Scale", "Bias", "Mean", "Variance"};
    int64_t C;
    nb_status st = bn_check(ctx, 4, slots, names, &C);
    if (st) return st;
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    const double momentum = nb_attr_float(ctx, "momentum");
    if (!(momentum >= 0 && momentum <= 1))
        return nb_error(NB_ERR_ARG, "%s: momentum must lie in [0, 1], got %g", ctx->label, momentum);
    const int64_t spatial = dims_prod(x, 2, x->ndim);
    const int64_t per_channel = x->shape[0] < 0 || spatial < 0 ? -1 : x->shape[0] * spatial;
    if (!bn_global(ctx) && per_channel >= 0 && per_channel < 2) {
        char sx[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE,
                        "%s: X has shape %s: training needs more than one value per channel (or set is_test)",
                        ctx->label, nb_info_shape(sx, x));
    }
    set_out(ctx, 0, x->dtype, x->ndim, x->shape);
    for (int s = 1; s <= 4; s++) set_out(ctx, s, x->dtype, 1, &C);
    return NB_OK;
}

/* batch_norm_grad inputs: X 0, Scale 1, SavedMean 2, SavedVariance 3, DY 4,
 * Mean 5, Variance 6. */
static nb_status batch_norm_grad_infer(nb_op_ctx *ctx)
{
    static const int slots[] = {1, 2, 3, 5, 6};
    static const char *const names[] = {"Scale", "SavedMean", "SavedVariance", "Mean", "Variance"};
    int64_t C;
    nb_status st = bn_check(ctx, 5, slots, names, &C);
    if (st) return st;
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *dy = nb_in_info(ctx, 4, 0);
    if ((st = nb_check_same_dtype(ctx, "DY", dy, "X", x)) ||
        (st = check_shape(ctx, "DY", dy, x->ndim, x->shape, "X has shape")))
        return st;
    if (nb_has_in(ctx, 5) != nb_has_in(ctx, 6))
        return nb_error(NB_ERR_ARG, "%s: Mean and Variance must be given together", ctx->label);
    set_out(ctx, 0, x->dtype, x->ndim, x->shape);
    set_out(ctx, 1, x->dtype, 1, &C);
    set_out(ctx, 2, x->dtype, 1, &C);
    return NB_OK;
}

/* ---- layer_norm ------------------------------------------------------------ */

/* layer_norm and layer_norm_grad. begin_norm_axis stays as given (inference
 * checks it against X): a negative one needs X's rank. */
static nb_status layer_norm_params(const nb_op_ctx *ctx, void *params)
{
    nb_layer_norm_params *p = params;
    p->begin_norm_axis = nb_attr_int(ctx, "begin_norm_axis");
    p->epsilon = nb_attr_float(ctx, "epsilon");
    return NB_OK;
}

/* The normalised dims of X are [axis, ndim): rows = the product of the
 * leading dims, cols = the product of the others (-1 while unknown). */
static nb_status ln_axis(const nb_op_ctx *ctx, const nb_var_info *x, int *axis, int64_t *rows, int64_t *cols)
{
    nb_status st;
    char sx[NB_SHAPE_STR_MAX];
    if ((st = nb_check_float(ctx, "X", x)) || (st = check_epsilon(ctx))) return st;
    int64_t a = nb_attr_int(ctx, "begin_norm_axis");
    if (a < 0) a += x->ndim;
    if (x->ndim < 1 || a < 0 || a >= x->ndim)
        return nb_error(NB_ERR_ARG, "%s: begin_norm_axis %lld is out of range for X of shape %s", ctx->label,
                        (long long)nb_attr_int(ctx, "begin_norm_axis"), nb_info_shape(sx, x));
    *axis = (int)a;
    *rows = dims_prod(x, 0, *axis);
    *cols = dims_prod(x, *axis, x->ndim);
    return NB_OK;
}

/* Scale and Bias: [cols] or the normalised dims as they are. */
static nb_status ln_param(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, const nb_var_info *x, int axis,
                          int64_t cols)
{
    nb_status st = nb_check_same_dtype(ctx, slot, v, "X", x);
    if (st) return st;
    if (dims_fit(v->ndim, v->shape, x->ndim - axis, x->shape + axis) || dims_fit(v->ndim, v->shape, 1, &cols))
        return NB_OK;
    char sv[NB_SHAPE_STR_MAX], sx[NB_SHAPE_STR_MAX], sn[NB_SHAPE_STR_MAX];
    return nb_error(NB_ERR_SHAPE,
                    "%s: %s has shape %s but X has shape %s with begin_norm_axis %d: it must be [%lld] or %s",
                    ctx->label, slot, nb_info_shape(sv, v), nb_info_shape(sx, x), axis, (long long)cols,
                    nb_shape_str(sn, sizeof sn, x->ndim - axis, x->shape + axis));
}

static nb_status layer_norm_infer(nb_op_ctx *ctx)
{
    int axis;
    int64_t rows, cols;
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    nb_status st = ln_axis(ctx, x, &axis, &rows, &cols);
    if (st) return st;
    if (nb_has_in(ctx, 1) && (st = ln_param(ctx, "Scale", nb_in_info(ctx, 1, 0), x, axis, cols))) return st;
    if (nb_has_in(ctx, 2) && (st = ln_param(ctx, "Bias", nb_in_info(ctx, 2, 0), x, axis, cols))) return st;
    /* One form for both, so that DScale and DBias, which layer_norm_grad
     * shapes like Scale, fit both. */
    if (nb_has_in(ctx, 1) && nb_has_in(ctx, 2) && nb_in_info(ctx, 1, 0)->ndim != nb_in_info(ctx, 2, 0)->ndim) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE,
                        "%s: Scale has shape %s but Bias has shape %s: give both flat or both as the normalised dims",
                        ctx->label, nb_info_shape(a, nb_in_info(ctx, 1, 0)), nb_info_shape(b, nb_in_info(ctx, 2, 0)));
    }
    set_out(ctx, 0, x->dtype, x->ndim, x->shape);
    set_out(ctx, 1, x->dtype, 1, &rows);
    set_out(ctx, 2, x->dtype, 1, &rows);
    return NB_OK;
}

/* layer_norm_grad inputs: X 0, Scale 1, Mean 2, Variance 3, DY 4. */
static nb_status layer_norm_grad_infer(nb_op_ctx *ctx)
{
    int axis;
    int64_t rows, cols;
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *dy = nb_in_info(ctx, 4, 0);
    nb_status st = ln_axis(ctx, x, &axis, &rows, &cols);
    if (st) return st;
    if (nb_has_in(ctx, 1) && (st = ln_param(ctx, "Scale", nb_in_info(ctx, 1, 0), x, axis, cols))) return st;
    if ((st = nb_check_same_dtype(ctx, "Mean", nb_in_info(ctx, 2, 0), "X", x)) ||
        (st = check_shape(ctx, "Mean", nb_in_info(ctx, 2, 0), 1, &rows, "X's leading dims need")) ||
        (st = nb_check_same_dtype(ctx, "Variance", nb_in_info(ctx, 3, 0), "X", x)) ||
        (st = check_shape(ctx, "Variance", nb_in_info(ctx, 3, 0), 1, &rows, "X's leading dims need")) ||
        (st = nb_check_same_dtype(ctx, "DY", dy, "X", x)) ||
        (st = check_shape(ctx, "DY", dy, x->ndim, x->shape, "X has shape")))
        return st;
    set_out(ctx, 0, x->dtype, x->ndim, x->shape);
    /* DScale and DBias take Scale's shape (layer_norm gives Bias the same
     * form); without Scale they are flat [cols], which a gradient rule
     * reshapes if Bias came as the normalised dims. */
    const nb_var_info *scale = nb_has_in(ctx, 1) ? nb_in_info(ctx, 1, 0) : NULL;
    for (int s = 1; s <= 2; s++) {
        if (scale) set_out(ctx, s, x->dtype, scale->ndim, scale->shape);
        else set_out(ctx, s, x->dtype, 1, &cols);
    }
    return NB_OK;
}

/* ---- definitions --------------------------------------------------------------- */

static const nb_op_def op_batch_norm = {
    .name = "batch_norm",
    .batch = nb_batch_batch_norm,
    .doc = "Batch normalisation per channel of X [N, C, ...]; in training also updates the running Mean/Variance",
    .inputs = {{"X", 0}, {"Scale", 0}, {"Bias", 0}, {"Mean", NB_SLOT_NO_GRAD}, {"Variance", NB_SLOT_NO_GRAD}},
    .outputs = {{"Y", 0}, {"MeanOut", 0}, {"VarianceOut", 0}, {"SavedMean", 0}, {"SavedVariance", 0}},
    .attrs = {NB_ADEF_FLOAT("momentum", 0.9), NB_ADEF_FLOAT("epsilon", 1e-5), NB_ADEF_BOOL("is_test", false),
              NB_ADEF_BOOL("use_global_stats", false)},
    .infer = batch_norm_infer,
    .params_size = sizeof(nb_batch_norm_params),
    .params = batch_norm_params,
    /* Mean and Variance: the statistics with is_test or use_global_stats. */
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 3) | (1u << 4),
    .grad_uses_outputs = (1u << 3) | (1u << 4),
    .vjp = nb_batch_norm_vjp,
    .jvp = nb_batch_norm_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_batch_norm_grad = {
    .name = "batch_norm_grad",
    .batch = nb_batch_batch_norm,
    .doc =
        "Gradients of batch_norm (DX, DScale, DBias) from DY; batch statistics recomputed from X, global ones as given",
    /* The statistics take no gradient: the batch's are functions of X (and
     * recomputed from it), global ones are constants. */
    .inputs = {{"X", 0},
               {"Scale", 0},
               {"SavedMean", NB_SLOT_NO_GRAD},
               {"SavedVariance", NB_SLOT_NO_GRAD},
               {"DY", 0},
               {"Mean", NB_SLOT_OPTIONAL | NB_SLOT_NO_GRAD},
               {"Variance", NB_SLOT_OPTIONAL | NB_SLOT_NO_GRAD}},
    .outputs = {{"DX", NB_SLOT_OPTIONAL}, {"DScale", NB_SLOT_OPTIONAL}, {"DBias", NB_SLOT_OPTIONAL}},
    .attrs = {NB_ADEF_FLOAT("epsilon", 1e-5), NB_ADEF_BOOL("is_test", false), NB_ADEF_BOOL("use_global_stats", false)},
    .infer = batch_norm_grad_infer,
    .params_size = sizeof(nb_batch_norm_params),
    .params = batch_norm_grad_params,
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 6),
    .vjp = nb_batch_norm_grad_vjp,
    .jvp = nb_batch_norm_grad_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_layer_norm = {
    .name = "layer_norm",
    .batch = nb_batch_layer_norm,
    .doc = "Layer normalisation of X over dims [begin_norm_axis, ndim), then * Scale + Bias; Mean/Variance per row",
    .inputs = {{"X", 0}, {"Scale", NB_SLOT_OPTIONAL}, {"Bias", NB_SLOT_OPTIONAL}},
    .outputs = {{"Y", 0}, {"Mean", 0}, {"Variance", 0}},
    .attrs = {NB_ADEF_INT("begin_norm_axis", 1), NB_ADEF_FLOAT("epsilon", 1e-5)},
    .infer = layer_norm_infer,
    .params_size = sizeof(nb_layer_norm_params),
    .params = layer_norm_params,
    /* Bias: only its shape, which DBias takes. */
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2),
    .grad_uses_outputs = (1u << 1) | (1u << 2),
    .vjp = nb_layer_norm_vjp,
    .jvp = nb_layer_norm_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_layer_norm_grad = {
    .name = "layer_norm_grad",
    .batch = nb_batch_layer_norm_grad,
    .doc = "Gradients of layer_norm (DX, DScale, DBias) from DY; the row statistics are recomputed from X",
    .inputs =
        {{"X", 0}, {"Scale", NB_SLOT_OPTIONAL}, {"Mean", NB_SLOT_NO_GRAD}, {"Variance", NB_SLOT_NO_GRAD}, {"DY", 0}},
    .outputs = {{"DX", NB_SLOT_OPTIONAL}, {"DScale", NB_SLOT_OPTIONAL}, {"DBias", NB_SLOT_OPTIONAL}},
    .attrs = {NB_ADEF_INT("begin_norm_axis", 1), NB_ADEF_FLOAT("epsilon", 1e-5)},
    .infer = layer_norm_grad_infer,
    .params_size = sizeof(nb_layer_norm_params),
    .params = layer_norm_params,
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4),
    .vjp = nb_layer_norm_grad_vjp,
    .jvp = nb_layer_norm_grad_jvp,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def *const nb_ops_norm[] = {&op_batch_norm, &op_batch_norm_grad, &op_layer_norm, &op_layer_norm_grad, NULL};
