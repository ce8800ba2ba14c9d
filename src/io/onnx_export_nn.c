/* nabla's ops that ONNX has as one big op or none, as ONNX nodes of opset
 * 13: conv2d's input gradient as ConvTranspose (how an imported
 * ConvTranspose comes back), and scaled_dot_product_attention as the
 * products and softmax it fuses. */
#ifdef NABLA_HAVE_ONNX
#include <math.h>
#include <string.h>
#include "onnx_export_form.h"

/* Whether one of output slots [from, NB_MAX_SLOTS) holds a var that the
 * export needs: outputs ONNX's form of the op does not make. */
static bool extra_needed(ox_export *e, const nb_op *op, int from)
{
    for (int s = from; s < NB_MAX_SLOTS; s++)
        for (int k = 0; k < nb_op_out_count(op, s); k++)
            if (ox_needed(e, nb_op_out_name(op, s, k))) return true;
    return false;
}

/* conv2d_grad's Input gives DInput its shape: the export makes no
 * initializer of it, nor of what computes it. */
unsigned ox_export_unread(const nb_op *op) { return !strcmp(op->def->name, "conv2d_grad") ? 1u << 0 : 0; }

/* conv2d_grad's DInput is ConvTranspose of DOutput by the same filter
 * ([M, C/groups, kh, kw] is ConvTranspose's [C_in, C_out/group, kh, kw]).
 * ONNX gets the output's size from pads and output_padding, nabla from
 * Input's shape: the rows a strided conv2d's window never reached are
 * output padding, less than a stride. */
static nb_status x_conv2d_grad(ox_export *e, const nb_op *op)
{
    if (!nb_op_out_count(op, 0) || extra_needed(e, op, 1))
        return unsupported(op, "computes the filter's or the bias's gradient, which ONNX has no op for");
    const nb_var *x = var(e, IN(0)), *w = var(e, IN(1)), *dy = var(e, IN(2));
    const nb_attr_value *p = nb_op_attr(op, "paddings"), *s = nb_op_attr(op, "strides"),
                        *d = nb_op_attr(op, "dilations");
    int64_t pads[4]; /* ONNX: top, left, bottom, right; nabla: (h, w) or (top, bottom, left, right) */
    if (p->n == 2) pads[0] = pads[2] = p->ints[0], pads[1] = pads[3] = p->ints[1];
    else pads[0] = p->ints[0], pads[2] = p->ints[1], pads[1] = p->ints[2], pads[3] = p->ints[3];
    int64_t extra[2];
    for (int i = 0; i < 2; i++) {
        int64_t h = x->shape[2 + i], in = dy->shape[2 + i], k = w->shape[2 + i];
        if (h < 0 || in < 0 || k < 0) return unsupported(op, "has spatial sizes only a run knows");
        extra[i] = h + pads[i] + pads[2 + i] - (d->ints[i] * (k - 1) + 1) - s->ints[i] * (in - 1);
        if (extra[i] < 0 || extra[i] >= s->ints[i])
            return unsupported(op, "has an Input shape no stride of DOutput makes");
    }
    Onnx__NodeProto *n = NODE("ConvTranspose", OUT(0), IN(2), IN(1));
    ox_attr_ints(e, n, "strides", 2, s->ints);
    ox_attr_ints(e, n, "dilations", 2, d->ints);
    ox_attr_ints(e, n, "pads", 4, pads);
    ox_attr_ints(e, n, "output_padding", 2, extra);
    ox_attr_int(e, n, "group", nb_op_attr(op, "groups")->i);
    return done(e);
}

/* x [lead..., L, H * W] as [lead..., H, L, W], or with `keys_t` as
 * [lead..., H, W, L] (K transposed for the product); heads 0: x as it is,
 * K with its last two dims swapped. */
static const char *heads_apart(ox_export *e, const char *x, int lead, int64_t heads, bool keys_t)
{
    int64_t perm[NB_MAX_DIMS + 1], shape[NB_MAX_DIMS + 1] = {0};
    if (!heads && !keys_t) return x;
    for (int i = 0; i < lead; i++) perm[i] = i;
    const char *t = ox_tmp(e, x);
    if (!heads) {
        perm[lead] = lead + 1, perm[lead + 1] = lead;
        ox_attr_ints(e, NODE("Transpose", t, x), "perm", lead + 2, perm);
        return t;
    }
    /* Reshape's 0s copy the leading dims and L, whatever their sizes. */
    shape[lead + 1] = heads, shape[lead + 2] = -1;
    const char *split = ox_tmp(e, x);
    NODE("Reshape", split, x, ox_int64s(e, lead + 3, shape));
    perm[lead] = lead + 1;
    perm[lead + 1] = keys_t ? lead + 2 : lead;
    perm[lead + 2] = keys_t ? lead : lead + 2;
    ox_attr_ints(e, NODE("Transpose", t, split), "perm", lead + 3, perm);
    return t;
}

/* Where(j > i, -inf, scores): the causal mask of [..., T, S] scores, query
 * i seeing keys j <= i, built from their run-time sizes. */
static const char *causal(ox_export *e, const char *scores, nb_dtype dt)
{
    const char *shape = ox_tmp(e, scores), *t = ox_tmp(e, scores), *s = ox_tmp(e, scores), *i = ox_tmp(e, scores),
               *i_col = ox_tmp(e, scores), *j = ox_tmp(e, scores), *later = ox_tmp(e, scores), *out = ox_tmp(e, scores),
               *zero = ox_scalar(e, NB_I64, 0), *one = ox_scalar(e, NB_I64, 1);
    NODE("Shape", shape, scores);
    ox_attr_int(e, NODE("Gather", t, shape, ox_scalar(e, NB_I64, -2)), "axis", 0);
    ox_attr_int(e, NODE("Gather", s, shape, ox_scalar(e, NB_I64, -1)), "axis", 0);
    NODE("Range", i, zero, t, one);
    NODE("Unsqueeze", i_col, i, ox_int64s(e, 1, (int64_t[]){1}));
    NODE("Range", j, zero, s, one);
    NODE("Greater", later, j, i_col); /* [T, S] */
    NODE("Where", out, later, ox_scalar(e, dt, -INFINITY), scores);
    return out;
}

/* softmax(scale * Q K^T + Mask) V, with the heads side by side taken apart
 * and put back. Dropout is left out, as the dropout op's: an export is for
 * inference. */
static nb_status x_attention(ox_export *e, const nb_op *op)
{
    if (extra_needed(e, op, 1)) return unsupported(op, "has its LSE or Key read, which ONNX's form does not make");
    const nb_var *q = var(e, IN(0));
    const int lead = q->ndim - 2;
    const int64_t heads = nb_op_attr(op, "heads")->i, width = q->shape[q->ndim - 1];
    double scale = nb_op_attr(op, "scale")->f;
    if (scale == 0) {
        if (width < 0) return unsupported(op, "scales by 1/sqrt(D) of a D only a run knows");
        scale = 1 / sqrt((double)(heads ? width / heads : width));
    }
    const char *o = OUT(0), *qs = heads_apart(e, IN(0), lead, heads, false),
               *kt = heads_apart(e, IN(1), lead, heads, true), *vs = heads_apart(e, IN(2), lead, heads, false),
               *prod = ox_tmp(e, o), *scores = ox_tmp(e, o), *w = ox_tmp(e, o), *ctx = heads ? ox_tmp(e, o) : o;
    NODE("MatMul", prod, qs, kt);
    NODE("Mul", scores, prod, ox_scalar(e, q->dtype, scale));
    if (HAS_IN(3)) {
        const char *masked = ox_tmp(e, o);
        NODE("Add", masked, scores, IN(3));
        scores = masked;
    }
    if (nb_op_attr(op, "causal")->b) scores = causal(e, scores, q->dtype);
    ox_attr_int(e, NODE("Softmax", w, scores), "axis", -1);
    NODE("MatMul", ctx, w, vs);
    if (heads) {
        int64_t perm[NB_MAX_DIMS + 1], shape[NB_MAX_DIMS] = {0};
        for (int i = 0; i < lead; i++) perm[i] = i;
        perm[lead] = lead + 1, perm[lead + 1] = lead, perm[lead + 2] = lead + 2;
        const char *side = ox_tmp(e, o);
        ox_attr_ints(e, NODE("Transpose", side, ctx), "perm", lead + 3, perm);
        shape[lead + 1] = -1;
        NODE("Reshape", o, side, ox_int64s(e, lead + 2, shape));
    }
    return done(e);
}

const ox_exporter ox_exports_nn[] = {
    {"conv2d_grad", 0, x_conv2d_grad},
    {"scaled_dot_product_attention", 0, x_attention},
    {0},
};

#endif
