/* nabla's ops whose ONNX twin reads them another way, as ONNX nodes of
 * opset 13: conv2d's input gradient as ConvTranspose (how an imported
 * ConvTranspose comes back). */
#ifdef NABLA_HAVE_ONNX
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
    const nb_attr_value *p = nb_op_attr(op, "paddings"), *s = nb_op_attr(op, "strides"), *d = nb_op_attr(op, "dilations");
    int64_t pads[4]; /* ONNX: top, left, bottom, right; nabla: (h, w) or (top, bottom, left, right) */
    if (p->n == 2) pads[0] = pads[2] = p->ints[0], pads[1] = pads[3] = p->ints[1];
    else pads[0] = p->ints[0], pads[2] = p->ints[1], pads[1] = p->ints[2], pads[3] = p->ints[3];
    int64_t extra[2];
    for (int i = 0; i < 2; i++) {
        int64_t h = x->shape[2 + i], in = dy->shape[2 + i], k = w->shape[2 + i];
        if (h < 0 || in < 0 || k < 0) return unsupported(op, "has spatial sizes only a run knows");
        extra[i] = h + pads[i] + pads[2 + i] - (d->ints[i] * (k - 1) + 1) - s->ints[i] * (in - 1);
        if (extra[i] < 0 || extra[i] >= s->ints[i]) return unsupported(op, "has an Input shape no stride of DOutput makes");
    }
    Onnx__NodeProto *n = NODE("ConvTranspose", OUT(0), IN(2), IN(1));
    ox_attr_ints(e, n, "strides", 2, s->ints);
    ox_attr_ints(e, n, "dilations", 2, d->ints);
    ox_attr_ints(e, n, "pads", 4, pads);
    ox_attr_ints(e, n, "output_padding", 2, extra);
    ox_attr_int(e, n, "group", nb_op_attr(op, "groups")->i);
    return done(e);
}

const ox_exporter ox_exports_nn[] = {
    {"conv2d_grad", 0, x_conv2d_grad},
    {0},
};

#endif
