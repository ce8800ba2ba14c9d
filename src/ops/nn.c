/* The nn family: softmax and log_softmax, the classification and regression
 * losses, dropout, embedding, accuracy, and the fused gradient ops that the
 * gradient rules of softmax_with_cross_entropy and embedding emit.
 *
 * Shape inference here validates everything the kernels rely on; label and
 * id values can only be checked at run time, so the kernels do that. The
 * params functions fill the structs of kernels/params/nn.h that the kernels
 * (src/kernels/cpu/nn*.c) read. */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include "families.h"
#include "batch_rules.h"
#include "kernels/params/nn.h"
#include "nn_grad.h"

/* ---- helpers ------------------------------------------------------------- */

/* At build time a dim may be -1 (unknown): it matches anything. */
static bool dim_match(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

static bool shape_match(int nda, const int64_t *a, int ndb, const int64_t *b)
{
    if (nda != ndb) return false;
    for (int d = 0; d < nda; d++)
        if (!dim_match(a[d], b[d])) return false;
    return true;
}

static void set_info(nb_var_info *o, nb_dtype dt, int ndim, const int64_t *shape)
{
    o->dtype = dt;
    o->ndim = ndim;
    if (ndim) memcpy(o->shape, shape, (size_t)ndim * sizeof *shape);
}

static const char *shape_str(char *buf, const nb_var_info *v)
{
    return nb_shape_str(buf, NB_SHAPE_STR_MAX, v->ndim, v->shape);
}

static nb_status need_float(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v)
{
    if (v->dtype == NB_F32 || v->dtype == NB_F64) return NB_OK;
    return nb_error(NB_ERR_DTYPE, "%s: %s must be float32 or float64, got %s", ctx->label, slot,
                    nb_dtype_name(v->dtype));
}

static nb_status need_index(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v)
{
    if (v->dtype == NB_I32 || v->dtype == NB_I64) return NB_OK;
    return nb_error(NB_ERR_DTYPE, "%s: %s must be int32 or int64, got %s", ctx->label, slot, nb_dtype_name(v->dtype));
}

static nb_status same_dtype(const nb_op_ctx *ctx, const char *a, const nb_var_info *va, const char *b,
                            const nb_var_info *vb)
{
    if (va->dtype == vb->dtype) return NB_OK;
    return nb_error(NB_ERR_DTYPE, "%s: %s is %s but %s is %s; they must match", ctx->label, a, nb_dtype_name(va->dtype),
                    b, nb_dtype_name(vb->dtype));
}

/* Range-checks the "axis" attribute against x and returns it made
 * non-negative. A 0-d x counts as one class, along axis 0 or -1. */
static nb_status get_axis(const nb_op_ctx *ctx, const char *slot, const nb_var_info *x, int *axis)
{
    int64_t a = nb_attr_int(ctx, "axis");
    int64_t n = x->ndim ? x->ndim : 1;
    if (a < -n || a >= n)
        return nb_error(NB_ERR_ARG,
                        "%s: axis %" PRId64 " is out of range for %s of rank %d (allowed %" PRId64 "..%" PRId64 ")",
                        ctx->label, a, slot, x->ndim, -n, n - 1);
    *axis = nb_nn_axis(a, x->ndim);
    return NB_OK;
}

/* Checks Label against x, whose classes lie along `axis`, and writes the
 * shape of the per-row loss (x's shape with the class dim set to 1).
 * Hard labels come in two layouts, both accepted: Paddle's keeps the class
 * dim as 1, PyTorch's drops it. They index the same rows in the same order,
 * so kernels need not tell them apart. */
static nb_status check_label(const nb_op_ctx *ctx, const char *xname, const nb_var_info *x, int axis,
                             const nb_var_info *lab, bool soft, nb_var_info *loss)
{
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX], d[NB_SHAPE_STR_MAX];
    nb_status st;
    nb_var_info row = *x, flat = {.dtype = lab->dtype, .ndim = x->ndim - 1};
    row.shape[axis] = 1;
    for (int k = 0, j = 0; k < x->ndim; k++)
        if (k != axis) flat.shape[j++] = x->shape[k];
    if (soft) {
        if ((st = same_dtype(ctx, "Label (soft)", lab, xname, x))) return st;
        if (!shape_match(lab->ndim, lab->shape, x->ndim, x->shape))
            return nb_error(NB_ERR_SHAPE, "%s: Label has shape %s but %s has shape %s: soft labels need the same shape",
                            ctx->label, shape_str(a, lab), xname, shape_str(b, x));
    } else {
        if (lab->dtype != NB_I32 && lab->dtype != NB_I64)
            return nb_error(NB_ERR_DTYPE,
                            "%s: hard labels must be int32 or int64, got %s (set soft_label for "
                            "probability labels)",
                            ctx->label, nb_dtype_name(lab->dtype));
        if (!shape_match(lab->ndim, lab->shape, row.ndim, row.shape) &&
            !shape_match(lab->ndim, lab->shape, flat.ndim, flat.shape))
            return nb_error(NB_ERR_SHAPE, "%s: Label has shape %s but %s has shape %s: hard labels need shape %s or %s",
                            ctx->label, shape_str(a, lab), xname, shape_str(b, x), shape_str(c, &row),
                            shape_str(d, &flat));
    }
    set_info(loss, x->dtype, row.ndim, row.shape);
    return NB_OK;
}

static nb_status get_reduction(const nb_op_ctx *ctx, nb_nn_reduction *r)
{
    const char *s = nb_attr_string(ctx, "reduction");
    *r = nb_nn_parse_reduction(s);
    if (*r == NB_RED_BAD)
        return nb_error(NB_ERR_ARG, "%s: reduction must be \"mean\", \"sum\" or \"none\", got \"%s\"", ctx->label, s);
    return NB_OK;
}

/* ---- softmax, log_softmax -------------------------------------------------- */

static nb_status infer_softmax(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    int axis = 0;
    nb_status st;
    if ((st = need_float(ctx, "X", x)) || (st = get_axis(ctx, "X", x, &axis))) return st;
    *nb_out_info(ctx, 0, 0) = *x;
    return NB_OK;
}

static nb_status params_softmax(const nb_op_ctx *ctx, void *params)
{
    ((nb_softmax_params *)params)->axis = nb_attr_int(ctx, "axis");
    return NB_OK;
}

/* softmax and log_softmax: one input and output, normalised along axis,
 * their rules reading the output. */
#define SOFTMAX_LIKE                                                                                      \
    .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .attrs = {NB_ADEF_INT("axis", -1)}, .infer = infer_softmax, \
    .params_size = sizeof(nb_softmax_params), .params = params_softmax, .grad_uses_outputs = 1 << 0

static const nb_op_def op_softmax = {
    .name = "softmax",
    .batch = nb_batch_softmax,
    .doc = "Out = exp(X - max) / sum(exp(X - max)) along axis",
    SOFTMAX_LIKE,
    .vjp = nb_nn_softmax_vjp,
    .jvp = nb_nn_softmax_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_log_softmax = {
    .name = "log_softmax",
    .batch = nb_batch_softmax,
    .doc = "Out = X - max - log(sum(exp(X - max))) along axis",
    SOFTMAX_LIKE,
    .vjp = nb_nn_log_softmax_vjp,
    .jvp = nb_nn_log_softmax_jvp,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- softmax_with_cross_entropy and its gradient ----------------------------- */

static nb_status infer_swce(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *lab = nb_in_info(ctx, 1, 0);
    int axis = 0;
    nb_status st;
    if ((st = need_float(ctx, "Logits", x))) return st;
    if (x->ndim < 1)
        return nb_error(NB_ERR_SHAPE, "%s: Logits must have at least 1 dimension (the classes), got a scalar",
                        ctx->label);
    if ((st = get_axis(ctx, "Logits", x, &axis))) return st;
    nb_var_info loss;
    if ((st = check_label(ctx, "Logits", x, axis, lab, nb_attr_bool(ctx, "soft_label"), &loss))) return st;
    *nb_out_info(ctx, 0, 0) = *x;
    *nb_out_info(ctx, 1, 0) = loss;
    return NB_OK;
}

/* Also the params of softmax_with_cross_entropy_grad, which has the same
 * attributes. */
static nb_status params_swce(const nb_op_ctx *ctx, void *params)
{
    nb_softmax_with_cross_entropy_params *p = params;
    p->axis = nb_attr_int(ctx, "axis");
    p->soft_label = nb_attr_bool(ctx, "soft_label");
    p->ignore_index = nb_attr_int(ctx, "ignore_index");
    return NB_OK;
}

static const nb_op_def op_softmax_with_cross_entropy = {
    .name = "softmax_with_cross_entropy",
    .batch = nb_batch_cross_entropy,
    .doc = "Softmax = softmax(Logits); Loss = logsumexp(Logits) - Logits[Label] (or -sum(Label*log Softmax))",
    .inputs = {{"Logits", 0}, {"Label", NB_SLOT_NO_GRAD}},
    .outputs = {{"Softmax", 0}, {"Loss", 0}},
    .attrs = {NB_ADEF_INT("axis", -1), NB_ADEF_BOOL("soft_label", false), NB_ADEF_INT("ignore_index", -100)},
    .infer = infer_swce,
    .params_size = sizeof(nb_softmax_with_cross_entropy_params),
    .params = params_swce,
    .grad_uses_inputs = 1 << 1,
    .grad_uses_outputs = 1 << 0,
    .vjp = nb_nn_softmax_with_cross_entropy_vjp,
    .jvp = nb_nn_softmax_with_cross_entropy_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static nb_status infer_swce_grad(nb_op_ctx *ctx)
{
    const nb_var_info *s = nb_in_info(ctx, 0, 0), *lab = nb_in_info(ctx, 1, 0), *dl = nb_in_info(ctx, 2, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
    int axis = 0;
    nb_status st;
    if ((st = need_float(ctx, "Softmax", s)) || (st = same_dtype(ctx, "DLoss", dl, "Softmax", s))) return st;
    if (s->ndim < 1)
        return nb_error(NB_ERR_SHAPE, "%s: Softmax must have at least 1 dimension (the classes), got a scalar",
                        ctx->label);
    if ((st = get_axis(ctx, "Softmax", s, &axis))) return st;
    nb_var_info loss;
    if ((st = check_label(ctx, "Softmax", s, axis, lab, nb_attr_bool(ctx, "soft_label"), &loss))) return st;
    nb_var_info flat = {.ndim = s->ndim - 1};
    for (int k = 0, j = 0; k < s->ndim; k++)
        if (k != axis) flat.shape[j++] = s->shape[k];
    if (!shape_match(dl->ndim, dl->shape, loss.ndim, loss.shape) &&
        !shape_match(dl->ndim, dl->shape, flat.ndim, flat.shape))
        return nb_error(NB_ERR_SHAPE, "%s: DLoss has shape %s but the loss of Softmax %s has shape %s", ctx->label,
                        shape_str(a, dl), shape_str(b, s), shape_str(c, &loss));
    *nb_out_info(ctx, 0, 0) = *s;
    return NB_OK;
}

static const nb_op_def op_softmax_with_cross_entropy_grad = {
    .name = "softmax_with_cross_entropy_grad",
    .batch = nb_batch_cross_entropy,
    .doc = "DLogits = (Softmax*sum(Label) - Label) * DLoss, Label one-hot for hard labels; 0 for ignored rows",
    .inputs = {{"Softmax", 0}, {"Label", NB_SLOT_NO_GRAD}, {"DLoss", 0}},
    .outputs = {{"DLogits", 0}},
    .attrs = {NB_ADEF_INT("axis", -1), NB_ADEF_BOOL("soft_label", false), NB_ADEF_INT("ignore_index", -100)},
    .infer = infer_swce_grad,
    .params_size = sizeof(nb_softmax_with_cross_entropy_params),
    .params = params_swce,
    .grad_uses_inputs = (1 << 0) | (1 << 1) | (1 << 2),
    .vjp = nb_nn_softmax_with_cross_entropy_grad_vjp,
    .jvp = nb_nn_softmax_with_cross_entropy_grad_jvp,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- cross_entropy ------------------------------------------------------------- */

static nb_status infer_cross_entropy(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *lab = nb_in_info(ctx, 1, 0);
    nb_status st;
    if ((st = need_float(ctx, "X", x))) return st;
    if (x->ndim < 1)
        return nb_error(NB_ERR_SHAPE, "%s: X must have at least 1 dimension (the classes), got a scalar", ctx->label);
    return check_label(ctx, "X", x, x->ndim - 1, lab, nb_attr_bool(ctx, "soft_label"), nb_out_info(ctx, 0, 0));
}

static nb_status params_cross_entropy(const nb_op_ctx *ctx, void *params)
{
    nb_cross_entropy_params *p = params;
    p->soft_label = nb_attr_bool(ctx, "soft_label");
    p->ignore_index = nb_attr_int(ctx, "ignore_index");
    return NB_OK;
}

static const nb_op_def op_cross_entropy = {
    .name = "cross_entropy",
    .batch = nb_batch_cross_entropy,
    .doc = "Y = -log(X[Label]) per row of probabilities X (or -sum(Label*log X)), classes on the last axis",
    .inputs = {{"X", 0}, {"Label", NB_SLOT_NO_GRAD}},
    .outputs = {{"Y", 0}},
    .attrs = {NB_ADEF_BOOL("soft_label", false), NB_ADEF_INT("ignore_index", -100)},
    .infer = infer_cross_entropy,
    .params_size = sizeof(nb_cross_entropy_params),
    .params = params_cross_entropy,
    .grad_uses_inputs = (1 << 0) | (1 << 1),
    .vjp = nb_nn_cross_entropy_vjp,
    .jvp = nb_nn_cross_entropy_jvp,
};

/* ---- mse_loss, bce_with_logits -------------------------------------------------- */

static nb_status infer_pointwise_loss(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *lab = nb_in_info(ctx, 1, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    nb_nn_reduction r;
    nb_status st;
    if ((st = need_float(ctx, "X", x)) || (st = same_dtype(ctx, "Label", lab, "X", x)) || (st = get_reduction(ctx, &r)))
        return st;
    if (!shape_match(x->ndim, x->shape, lab->ndim, lab->shape))
        return nb_error(NB_ERR_SHAPE, "%s: X has shape %s but Label has shape %s; they must be the same", ctx->label,
                        shape_str(a, x), shape_str(b, lab));
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    if (r == NB_RED_NONE) {
        /* Where one side knows a dim the other leaves -1, keep the known one. */
        *o = *x;
        for (int d = 0; d < x->ndim; d++)
            if (o->shape[d] < 0) o->shape[d] = lab->shape[d];
    } else {
        set_info(o, x->dtype, 0, NULL);
    }
    return NB_OK;
}

/* Inference has checked the reduction; a program whose attributes were
 * changed since fails here, before its kernel runs. */
static nb_status params_pointwise_loss(const nb_op_ctx *ctx, void *params)
{
    const char *s = nb_attr_string(ctx, "reduction");
    nb_nn_reduction r = nb_nn_parse_reduction(s);
    if (r == NB_RED_BAD) return nb_error(NB_ERR_ARG, "%s: bad reduction \"%s\"", ctx->label, s);
    ((nb_pointwise_loss_params *)params)->reduction = r;
    return NB_OK;
}

static const nb_op_def op_mse_loss = {
    .name = "mse_loss",
    .batch = nb_batch_pointwise_loss,
    .doc = "Out = (X - Label)^2, reduced by \"mean\" (default), \"sum\" or \"none\"",
    .inputs = {{"X", 0}, {"Label", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_STRING("reduction", "mean")},
    .infer = infer_pointwise_loss,
    .params_size = sizeof(nb_pointwise_loss_params),
    .params = params_pointwise_loss,
    .grad_uses_inputs = (1 << 0) | (1 << 1),
    .vjp = nb_nn_mse_loss_vjp,
    .jvp = nb_nn_mse_loss_jvp,
};

static const nb_op_def op_bce_with_logits = {
    .name = "bce_with_logits",
    .batch = nb_batch_pointwise_loss,
    .doc = "Out = max(X,0) - X*Label + log1p(exp(-|X|)) (binary cross-entropy of sigmoid(X)), reduced",
    .inputs = {{"X", 0}, {"Label", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_STRING("reduction", "mean")},
    .infer = infer_pointwise_loss,
    .params_size = sizeof(nb_pointwise_loss_params),
    .params = params_pointwise_loss,
    .grad_uses_inputs = (1 << 0) | (1 << 1),
    .vjp = nb_nn_bce_with_logits_vjp,
    .jvp = nb_nn_bce_with_logits_jvp,
};

/* ---- dropout ---------------------------------------------------------------------- */

static nb_status infer_dropout(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    double p = nb_attr_float(ctx, "dropout_prob");
    const char *mode = nb_attr_string(ctx, "mode");
    nb_status st;
    if ((st = need_float(ctx, "X", x))) return st;
    if (!(p >= 0 && p < 1)) return nb_error(NB_ERR_ARG, "%s: dropout_prob must be in [0, 1), got %g", ctx->label, p);
    if (strcmp(mode, "upscale_in_train") && strcmp(mode, "downgrade_in_infer"))
        return nb_error(NB_ERR_ARG, "%s: mode must be \"upscale_in_train\" or \"downgrade_in_infer\", got \"%s\"",
                        ctx->label, mode);
    *nb_out_info(ctx, 0, 0) = *x;
    set_info(nb_out_info(ctx, 1, 0), NB_U8, x->ndim, x->shape);
    return NB_OK;
}

/* Inference has checked dropout_prob and mode; a program whose attributes
 * were changed since fails here, before its kernel runs. */
static nb_status params_dropout(const nb_op_ctx *ctx, void *params)
{
    nb_dropout_params *p = params;
    p->prob = nb_attr_float(ctx, "dropout_prob");
    p->is_test = nb_attr_bool(ctx, "is_test");
    p->upscale = !strcmp(nb_attr_string(ctx, "mode"), "upscale_in_train");
    if (!(p->prob >= 0 && p->prob < 1))
        return nb_error(NB_ERR_ARG, "%s: dropout_prob must be in [0, 1), got %g", ctx->label, p->prob);
    return NB_OK;
}

static const nb_op_def op_dropout = {
    .name = "dropout",
    .batch = nb_batch_unary,
    .doc = "Zeroes each element of X with probability dropout_prob; Mask (uint8) marks the kept ones",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}, {"Mask", NB_SLOT_NO_GRAD}},
    .attrs = {NB_ADEF_FLOAT("dropout_prob", 0.5), NB_ADEF_BOOL("is_test", false), NB_ADEF_INT("seed", 0),
              NB_ADEF_STRING("mode", "upscale_in_train")},
    .infer = infer_dropout,
    .params_size = sizeof(nb_dropout_params),
    .params = params_dropout,
    .flags = NB_OP_RANDOM,
    .grad_uses_outputs = 1 << 1,
    .vjp = nb_nn_dropout_vjp,
    .jvp = nb_nn_dropout_jvp,
};

/* ---- embedding and its gradient ------------------------------------------------------- */

static nb_status check_padding_idx(const nb_op_ctx *ctx, const nb_var_info *w)
{
    int64_t pad = nb_attr_int(ctx, "padding_idx");
    if (pad < -1 || (w->shape[0] >= 0 && pad >= w->shape[0]))
        return nb_error(NB_ERR_ARG,
                        "%s: padding_idx %" PRId64 " is out of range: it must be -1 (none) or a row of W "
                        "(0..%" PRId64 ")",
                        ctx->label, pad, w->shape[0] - 1);
    return NB_OK;
}

static nb_status check_table(const nb_op_ctx *ctx, const nb_var_info *w)
{
    char a[NB_SHAPE_STR_MAX];
    if (w->ndim != 2)
        return nb_error(NB_ERR_SHAPE, "%s: W must be a [V, D] table, got shape %s", ctx->label, shape_str(a, w));
    return check_padding_idx(ctx, w);
}

static nb_status infer_embedding(nb_op_ctx *ctx)
{
    const nb_var_info *w = nb_in_info(ctx, 0, 0), *ids = nb_in_info(ctx, 1, 0);
    nb_status st;
    if ((st = check_table(ctx, w)) || (st = need_index(ctx, "Ids", ids))) return st;
    if (ids->ndim + 1 > NB_MAX_DIMS)
        return nb_error(NB_ERR_SHAPE, "%s: Ids has %d dimensions; Out would exceed the maximum of %d", ctx->label,
                        ids->ndim, NB_MAX_DIMS);
    nb_var_info *o = nb_out_info(ctx, 0, 0);
    set_info(o, w->dtype, ids->ndim, ids->shape);
    o->shape[o->ndim++] = w->shape[1];
    return NB_OK;
}

/* Also the params of embedding_grad. */
static nb_status params_embedding(const nb_op_ctx *ctx, void *params)
{
    ((nb_embedding_params *)params)->padding_idx = nb_attr_int(ctx, "padding_idx");
    return NB_OK;
}

static const nb_op_def op_embedding = {
    .name = "embedding",
    .batch = nb_batch_embedding,
    .doc = "Out[i..., :] = W[Ids[i...], :], zero for ids equal to padding_idx (-1: none)",
    .inputs = {{"W", 0}, {"Ids", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("padding_idx", -1)},
    .infer = infer_embedding,
    .params_size = sizeof(nb_embedding_params),
    .params = params_embedding,
    /* The rule reads Ids, and W for the shape of its gradient. */
    .grad_uses_inputs = (1 << 0) | (1 << 1),
    .vjp = nb_nn_embedding_vjp,
    .jvp = nb_nn_embedding_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static nb_status infer_embedding_grad(nb_op_ctx *ctx)
{
    const nb_var_info *ids = nb_in_info(ctx, 0, 0), *dout = nb_in_info(ctx, 1, 0), *w = nb_in_info(ctx, 2, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
    nb_status st;
    if ((st = need_index(ctx, "Ids", ids)) || (st = check_table(ctx, w)) || (st = need_float(ctx, "DOut", dout)) ||
        (st = same_dtype(ctx, "DOut", dout, "W", w)))
        return st;
    bool ok = dout->ndim == ids->ndim + 1 && dim_match(dout->shape[ids->ndim], w->shape[1]);
    for (int d = 0; ok && d < ids->ndim; d++) ok = dim_match(dout->shape[d], ids->shape[d]);
    if (!ok)
        return nb_error(NB_ERR_SHAPE,
                        "%s: DOut has shape %s but Ids has shape %s and W %s: DOut must be "
                        "Ids.shape + [D]",
                        ctx->label, shape_str(a, dout), shape_str(b, ids), shape_str(c, w));
    *nb_out_info(ctx, 0, 0) = *w;
    return NB_OK;
}

static const nb_op_def op_embedding_grad = {
    .name = "embedding_grad",
    .batch = nb_batch_embedding_grad,
    .doc = "DW = zeros like W, then DW[Ids[i...], :] += DOut[i..., :] (rows of padding_idx stay zero)",
    .inputs = {{"Ids", NB_SLOT_NO_GRAD}, {"DOut", 0}, {"W", NB_SLOT_NO_GRAD}},
    .outputs = {{"DW", 0}},
    .attrs = {NB_ADEF_INT("padding_idx", -1)},
    .infer = infer_embedding_grad,
    .params_size = sizeof(nb_embedding_params),
    .params = params_embedding,
    .grad_uses_inputs = 1 << 0,
    .vjp = nb_nn_embedding_grad_vjp,
    .jvp = nb_nn_embedding_grad_jvp,
};

/* ---- accuracy ----------------------------------------------------------------------------- */

static nb_status infer_accuracy(nb_op_ctx *ctx)
{
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *lab = nb_in_info(ctx, 1, 0);
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    int64_t k = nb_attr_int(ctx, "k");
    nb_status st;
    if ((st = need_float(ctx, "Out", x)) || (st = need_index(ctx, "Label", lab))) return st;
    if (x->ndim != 2)
        return nb_error(NB_ERR_SHAPE, "%s: Out must be [N, C] scores, got shape %s", ctx->label, shape_str(a, x));
    bool ok =
        (lab->ndim == 1 || (lab->ndim == 2 && dim_match(lab->shape[1], 1))) && dim_match(lab->shape[0], x->shape[0]);
    if (!ok)
        return nb_error(NB_ERR_SHAPE, "%s: Label has shape %s but Out has shape %s: Label must be [N] or [N, 1]",
                        ctx->label, shape_str(a, lab), shape_str(b, x));
    if (k < 1 || (x->shape[1] >= 0 && k > x->shape[1]))
        return nb_error(NB_ERR_ARG, "%s: k = %" PRId64 " must be in 1..C, and C = %" PRId64, ctx->label, k,
                        x->shape[1]);
    set_info(nb_out_info(ctx, 0, 0), NB_F32, 0, NULL);
    set_info(nb_out_info(ctx, 1, 0), NB_I64, 0, NULL);
    set_info(nb_out_info(ctx, 2, 0), NB_I64, 0, NULL);
    return NB_OK;
}

static nb_status params_accuracy(const nb_op_ctx *ctx, void *params)
{
    ((nb_accuracy_params *)params)->k = nb_attr_int(ctx, "k");
    return NB_OK;
}

static const nb_op_def op_accuracy = {
    .name = "accuracy",
    .doc = "Fraction of rows of scores Out whose Label is among the k highest (ties go to the lower class)",
    .inputs = {{"Out", 0}, {"Label", NB_SLOT_NO_GRAD}},
    .outputs = {{"Accuracy", 0}, {"Correct", 0}, {"Total", 0}},
    .attrs = {NB_ADEF_INT("k", 1)},
    .infer = infer_accuracy,
    .params_size = sizeof(nb_accuracy_params),
    .params = params_accuracy,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};

const nb_op_def *const nb_ops_nn[] = {
    &op_softmax,
    &op_log_softmax,
    &op_softmax_with_cross_entropy,
    &op_softmax_with_cross_entropy_grad,
    &op_cross_entropy,
    &op_mse_loss,
    &op_bce_with_logits,
    &op_dropout,
    &op_embedding,
    &op_embedding_grad,
    &op_accuracy,
    NULL,
};
