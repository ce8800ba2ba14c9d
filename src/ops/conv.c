/* Convolution and pooling over NCHW images, with their fused gradient ops.
 * Shape rules, validation and the parameter structs' filling live here; the
 * arithmetic is in kernels/cpu/conv.c and kernels/cpu/pool.c. */
#include <stdio.h>
#include <string.h>
#include "conv_grad.h"
#include "families.h"
#include "batch_rules.h"
#include "infer_check.h"
#include "kernels/params/conv.h"

/* Strides, dilations and paddings above this are refused: sizes made from
 * them (in + p0 + p1, dilation * (k - 1)) must stay far from overflow. */
#define NB_CONV_ATTR_MAX ((int64_t)1 << 31)

static nb_status check_rank(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, int ndim, const char *what)
{
    char a[NB_SHAPE_STR_MAX];
    if (v->ndim != ndim)
        return nb_error(NB_ERR_SHAPE, "%s: %s has shape %s but must be %d-D (%s)", ctx->label, slot,
                        nb_info_shape(a, v), ndim, what);
    return NB_OK;
}

/* v must have `shape` (ndim dims); unknown (-1) dims on either side pass. */
static nb_status check_shape(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, int ndim,
                             const int64_t *shape, const char *why)
{
    bool ok = v->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = v->shape[i] < 0 || shape[i] < 0 || v->shape[i] == shape[i];
    if (!ok) {
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

/* Two values, each at least `min`: strides, dilations, ksize. */
static nb_status int_pair(const nb_op_ctx *ctx, const char *name, int64_t min, int64_t out[2])
{
    const nb_attr_value *v = nb_attr_get(ctx, name);
    char buf[128];
    if (v->n != 2)
        return nb_error(NB_ERR_ARG, "%s: attribute %s must hold 2 values (h, w), got %s", ctx->label, name,
                        nb_attr_value_str(buf, sizeof buf, v));
    for (int i = 0; i < 2; i++)
        if (v->ints[i] < min || v->ints[i] > NB_CONV_ATTR_MAX)
            return nb_error(NB_ERR_ARG, "%s: attribute %s must lie in [%lld, %lld], got %s", ctx->label, name,
                            (long long)min, (long long)NB_CONV_ATTR_MAX, nb_attr_value_str(buf, sizeof buf, v));
    out[0] = v->ints[0];
    out[1] = v->ints[1];
    return NB_OK;
}

/* paddings: (h, w) for both sides, or (top, bottom, left, right). */
static nb_status read_paddings(const nb_op_ctx *ctx, int64_t p[4])
{
    const nb_attr_value *v = nb_attr_get(ctx, "paddings");
    char buf[128];
    if (v->n == 2) {
        p[0] = p[1] = v->ints[0];
        p[2] = p[3] = v->ints[1];
    } else if (v->n == 4) {
        memcpy(p, v->ints, 4 * sizeof *p);
    } else {
        return nb_error(NB_ERR_ARG,
                        "%s: attribute paddings must hold 2 values (h, w) or 4 (top, bottom, left, right), got %s",
                        ctx->label, nb_attr_value_str(buf, sizeof buf, v));
    }
    for (int i = 0; i < 4; i++)
        if (p[i] < 0 || p[i] > NB_CONV_ATTR_MAX)
            return nb_error(NB_ERR_ARG, "%s: attribute paddings must lie in [0, %lld], got %s", ctx->label,
                            (long long)NB_CONV_ATTR_MAX, nb_attr_value_str(buf, sizeof buf, v));
    return NB_OK;
}

/* ---- conv2d ----------------------------------------------------------------- */

static char *conv_attr_str(char *buf, size_t size, const nb_conv2d_params *a)
{
    snprintf(buf, size, "strides [%lld, %lld], paddings [%lld, %lld, %lld, %lld], dilations [%lld, %lld], groups %lld",
             (long long)a->strides[0], (long long)a->strides[1], (long long)a->paddings[0], (long long)a->paddings[1],
             (long long)a->paddings[2], (long long)a->paddings[3], (long long)a->dilations[0],
             (long long)a->dilations[1], (long long)a->groups);
    return buf;
}

/* Reads and checks the attributes of conv2d and conv2d_grad: for inference
 * and, once per prepared op, for the kernels (nb_op_def.params). */
static nb_status conv_params(const nb_op_ctx *ctx, void *params)
{
    nb_conv2d_params *a = params;
    nb_status st;
    if ((st = int_pair(ctx, "strides", 1, a->strides)) || (st = int_pair(ctx, "dilations", 1, a->dilations)) ||
        (st = read_paddings(ctx, a->paddings)))
        return st;
    a->groups = nb_attr_int(ctx, "groups");
    if (a->groups < 1)
        return nb_error(NB_ERR_ARG, "%s: groups must be >= 1, got %lld", ctx->label, (long long)a->groups);
    return NB_OK;
}

/* Validates Input, Filter and Bias (NULL if absent) against the attributes
 * and gives the output shape. */
static nb_status conv_check(const nb_op_ctx *ctx, const nb_var_info *x, const nb_var_info *f, const nb_var_info *bias,
                            int64_t out[4])
{
    nb_status st;
    nb_conv2d_params a = {0};
    char sx[NB_SHAPE_STR_MAX], sf[NB_SHAPE_STR_MAX], sa[256];
    if ((st = nb_check_float(ctx, "Input", x)) || (st = nb_check_same_dtype(ctx, "Filter", f, "Input", x)) ||
        (st = check_rank(ctx, "Input", x, 4, "N, C, H, W")) ||
        (st = check_rank(ctx, "Filter", f, 4, "M, C/groups, kh, kw")))
        return st;
    if ((st = conv_params(ctx, &a))) return st;
    conv_attr_str(sa, sizeof sa, &a);
    const int64_t C = x->shape[1], M = f->shape[0], Cg = f->shape[1];
    if (C >= 0 && C % a.groups)
        return nb_error(NB_ERR_SHAPE, "%s: Input has shape %s: its %lld channels are not divisible by groups %lld (%s)",
                        ctx->label, nb_info_shape(sx, x), (long long)C, (long long)a.groups, sa);
    if (M >= 0 && M % a.groups)
        return nb_error(NB_ERR_SHAPE,
                        "%s: Filter has shape %s: its %lld output channels are not divisible by groups %lld (%s)",
                        ctx->label, nb_info_shape(sf, f), (long long)M, (long long)a.groups, sa);
    if (C >= 0 && Cg >= 0 && C != Cg * a.groups)
        return nb_error(NB_ERR_SHAPE,
                        "%s: Input has shape %s (%lld channels) but Filter has shape %s: channels must equal "
                        "Filter.shape[1] * groups = %lld (%s)",
                        ctx->label, nb_info_shape(sx, x), (long long)C, nb_info_shape(sf, f),
                        (long long)(Cg * a.groups), sa);
    for (int i = 2; i < 4; i++)
        if (f->shape[i] == 0)
            return nb_error(NB_ERR_SHAPE, "%s: Filter has shape %s: its kernel is empty", ctx->label,
                            nb_info_shape(sf, f));
    if (bias) {
        const int64_t want[1] = {M};
        if ((st = nb_check_same_dtype(ctx, "Bias", bias, "Input", x)) ||
            (st = check_shape(ctx, "Bias", bias, 1, want, "Filter's output channels need")))
            return st;
    }
    out[0] = x->shape[0];
    out[1] = M;
    for (int i = 0; i < 2; i++) {
        const int64_t in = x->shape[2 + i], k = f->shape[2 + i], p0 = a.paddings[2 * i], p1 = a.paddings[2 * i + 1];
        if (in < 0 || k < 0) {
            out[2 + i] = -1;
            continue;
        }
        const int64_t keff = a.dilations[i] * (k - 1) + 1, padded = in + p0 + p1;
        if (padded < keff)
            return nb_error(NB_ERR_SHAPE,
                            "%s: Input has shape %s and Filter %s: the dilated kernel (%lld) is bigger than the padded "
                            "input (%lld) along %s (%s)",
                            ctx->label, nb_info_shape(sx, x), nb_info_shape(sf, f), (long long)keff, (long long)padded,
                            i ? "W" : "H", sa);
        out[2 + i] = (padded - keff) / a.strides[i] + 1;
    }
    return NB_OK;
}

static nb_status conv2d_infer(nb_op_ctx *ctx)
{
    int64_t out[4];
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    nb_status st = conv_check(ctx, x, nb_in_info(ctx, 1, 0), nb_has_in(ctx, 2) ? nb_in_info(ctx, 2, 0) : NULL, out);
    if (st) return st;
    set_out(ctx, 0, x->dtype, 4, out);
    return NB_OK;
}

static nb_status conv2d_grad_infer(nb_op_ctx *ctx)
{
    int64_t out[4];
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *f = nb_in_info(ctx, 1, 0), *dy = nb_in_info(ctx, 2, 0);
    nb_status st = conv_check(ctx, x, f, NULL, out);
    if (st || (st = nb_check_same_dtype(ctx, "DOutput", dy, "Input", x)) ||
        (st = check_shape(ctx, "DOutput", dy, 4, out, "the convolution's output has shape")))
        return st;
    set_out(ctx, 0, x->dtype, 4, x->shape);
    set_out(ctx, 1, x->dtype, 4, f->shape);
    set_out(ctx, 2, x->dtype, 1, f->shape);
    return NB_OK;
}

/* ---- pool2d ------------------------------------------------------------------ */

/* Reads and checks the attributes of pool2d and pool2d_grad: for inference
 * and, once per prepared op, for the kernels (nb_op_def.params). */
static nb_status pool_params(const nb_op_ctx *ctx, void *params)
{
    nb_pool2d_params *a = params;
    nb_status st;
    const char *type = nb_attr_string(ctx, "pooling_type");
    a->is_max = !strcmp(type, "max");
    if (!a->is_max && strcmp(type, "avg"))
        return nb_error(NB_ERR_ARG, "%s: pooling_type must be \"max\" or \"avg\", got \"%s\"", ctx->label, type);
    if ((st = int_pair(ctx, "ksize", 1, a->ksize)) || (st = int_pair(ctx, "strides", 1, a->strides)) ||
        (st = read_paddings(ctx, a->paddings)))
        return st;
    a->global_pooling = nb_attr_bool(ctx, "global_pooling");
    a->exclusive = nb_attr_bool(ctx, "exclusive");
    return NB_OK;
}

/* Validates X against the attributes and gives the output shape. */
static nb_status pool_check(const nb_op_ctx *ctx, const nb_var_info *x, int64_t out[4])
{
    nb_status st;
    nb_pool2d_params a = {0};
    char sx[NB_SHAPE_STR_MAX], buf[128];
    if ((st = nb_check_float(ctx, "X", x)) || (st = check_rank(ctx, "X", x, 4, "N, C, H, W"))) return st;
    if ((st = pool_params(ctx, &a))) return st;
    const int64_t *k = a.ksize, *s = a.strides, *p = a.paddings;
    const bool ceil_mode = nb_attr_bool(ctx, "ceil_mode");
    out[0] = x->shape[0];
    out[1] = x->shape[1];
    if (a.global_pooling) {
        /* One window covering the image, whatever ksize, strides and paddings say. */
        out[2] = out[3] = 1;
    } else {
        for (int i = 0; i < 2; i++) {
            const int64_t in = x->shape[2 + i], p0 = p[2 * i], p1 = p[2 * i + 1];
            /* A padding as wide as the window would give windows with no
             * image element in them. */
            if (p0 >= k[i] || p1 >= k[i])
                return nb_error(NB_ERR_ARG, "%s: paddings %s must be smaller than ksize [%lld, %lld]", ctx->label,
                                nb_attr_value_str(buf, sizeof buf, nb_attr_get(ctx, "paddings")), (long long)k[0],
                                (long long)k[1]);
            if (in < 0) {
                out[2 + i] = -1;
                continue;
            }
            const int64_t padded = in + p0 + p1;
            if (padded < k[i])
                return nb_error(NB_ERR_SHAPE,
                                "%s: X has shape %s: ksize %lld is bigger than the padded input (%lld) along %s",
                                ctx->label, nb_info_shape(sx, x), (long long)k[i], (long long)padded, i ? "W" : "H");
            int64_t o = (padded - k[i]) / s[i] + 1;
            if (ceil_mode) {
                o = (padded - k[i] + s[i] - 1) / s[i] + 1;
                /* The last window must start on the image or its top/left padding. */
                if ((o - 1) * s[i] >= in + p0) o--;
            }
            out[2 + i] = o;
        }
    }
    return NB_OK;
}

static nb_status pool2d_infer(nb_op_ctx *ctx)
{
    int64_t out[4];
    const nb_var_info *x = nb_in_info(ctx, 0, 0);
    nb_status st = pool_check(ctx, x, out);
    if (st) return st;
    set_out(ctx, 0, x->dtype, 4, out);
    return NB_OK;
}

static nb_status pool2d_grad_infer(nb_op_ctx *ctx)
{
    int64_t out[4];
    const nb_var_info *x = nb_in_info(ctx, 0, 0), *o = nb_in_info(ctx, 1, 0), *d = nb_in_info(ctx, 2, 0);
    nb_status st = pool_check(ctx, x, out);
    if (st || (st = nb_check_same_dtype(ctx, "Out", o, "X", x)) || (st = nb_check_same_dtype(ctx, "DOut", d, "X", x)) ||
        (st = check_shape(ctx, "Out", o, 4, out, "the pooling's output has shape")) ||
        (st = check_shape(ctx, "DOut", d, 4, out, "the pooling's output has shape")))
        return st;
    set_out(ctx, 0, x->dtype, 4, x->shape);
    return NB_OK;
}

/* ---- definitions --------------------------------------------------------------- */

#define CONV_ATTRS                                                                         \
    NB_ADEF_INTS("strides", 1, 1), NB_ADEF_INTS("paddings", 0, 0), NB_ADEF_INTS("dilations", 1, 1), \
        NB_ADEF_INT("groups", 1)

#define POOL_ATTRS                                                                                   \
    NB_ADEF_STRING("pooling_type", "max"), NB_ADEF_REQUIRED("ksize", NB_ATTR_INTS),                  \
        NB_ADEF_INTS("strides", 1, 1), NB_ADEF_INTS("paddings", 0, 0), NB_ADEF_BOOL("global_pooling", false), \
        NB_ADEF_BOOL("ceil_mode", false), NB_ADEF_BOOL("exclusive", true)

static const nb_op_def op_conv2d = {
    .name = "conv2d",
    .batch = nb_batch_conv,
    .doc = "2-D convolution (NCHW) of Input [N, C, H, W] with Filter [M, C/groups, kh, kw], plus Bias [M] if given",
    .inputs = {{"Input", 0}, {"Filter", 0}, {"Bias", NB_SLOT_OPTIONAL}},
    .outputs = {{"Output", 0}},
    .attrs = {CONV_ATTRS},
    .infer = conv2d_infer,
    .params_size = sizeof(nb_conv2d_params),
    .params = conv_params,
    .grad_uses_inputs = (1u << 0) | (1u << 1),
    .vjp = nb_conv2d_vjp,
    .jvp = nb_conv2d_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_conv2d_grad = {
    .name = "conv2d_grad",
    .batch = nb_batch_conv,
    .doc = "Gradients of conv2d: DInput, DFilter and DBias (DOutput summed over N, H, W) from DOutput",
    .inputs = {{"Input", 0}, {"Filter", 0}, {"DOutput", 0}},
    .outputs = {{"DInput", NB_SLOT_OPTIONAL}, {"DFilter", NB_SLOT_OPTIONAL}, {"DBias", NB_SLOT_OPTIONAL}},
    .attrs = {CONV_ATTRS},
    .infer = conv2d_grad_infer,
    .params_size = sizeof(nb_conv2d_params),
    .params = conv_params,
    .grad_uses_inputs = (1u << 0) | (1u << 1) | (1u << 2),
    .vjp = nb_conv2d_grad_vjp,
    .jvp = nb_conv2d_grad_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_pool2d = {
    .name = "pool2d",
    .batch = nb_batch_fold,
    .doc = "2-D max or average pooling (NCHW) over ksize windows, or over the whole image with global_pooling",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {POOL_ATTRS},
    .infer = pool2d_infer,
    .params_size = sizeof(nb_pool2d_params),
    .params = pool_params,
    .grad_uses_inputs = 1u << 0,
    .grad_uses_outputs = 1u << 0,
    .vjp = nb_pool2d_vjp,
    .jvp = nb_pool2d_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_pool2d_grad = {
    .name = "pool2d_grad",
    .batch = nb_batch_fold,
    .doc = "Gradient of pool2d: DX from DOut (max: to each window's first maximum; avg: spread over the window)",
    .inputs = {{"X", 0}, {"Out", 0}, {"DOut", 0}},
    .outputs = {{"DX", 0}},
    .attrs = {POOL_ATTRS},
    .infer = pool2d_grad_infer,
    .params_size = sizeof(nb_pool2d_params),
    .params = pool_params,
    /* X and Out place max pooling's picks; DOut is not read (DX is linear in it). */
    .grad_uses_inputs = (1u << 0) | (1u << 1),
    .vjp = nb_pool2d_grad_vjp,
    .jvp = nb_pool2d_grad_jvp,
    .flags = NB_OP_WRITES_ALL, /* the 2x2 path sets every element, the others clear each plane first */
};

const nb_op_def *const nb_ops_conv[] = {&op_conv2d, &op_conv2d_grad, &op_pool2d, &op_pool2d_grad, NULL};
