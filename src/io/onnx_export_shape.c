/* nabla's slicing, splitting and stacking ops as ONNX nodes of opset 13, where their
 * bounds and sizes are inputs (constant initializers) rather than
 * attributes. */
#ifdef NABLA_HAVE_ONNX
#include <string.h>
#include "onnx_export_form.h"

/* slice: Python's bounds (negative from the end, clamped, positive steps)
 * are what ONNX's Slice means by its own. */
static nb_status x_slice(ox_export *e, const nb_op *op)
{
    const nb_attr_value *axes = nb_op_attr(op, "axes"), *starts = nb_op_attr(op, "starts"),
                        *ends = nb_op_attr(op, "ends"), *strides = nb_op_attr(op, "strides");
    const char *in[5] = {IN(0), ox_int64s(e, starts->n, starts->ints), ox_int64s(e, ends->n, ends->ints),
                         ox_int64s(e, axes->n, axes->ints), NULL};
    int n_in = 4;
    if (strides->n) in[n_in++] = ox_int64s(e, strides->n, strides->ints);
    if (e->a.failed) return done(e);
    ox_node(e, "Slice", n_in, in, OUT(0));
    return done(e);
}

/* split: ONNX's sizes must be explicit where nabla's sections infer one
 * (-1), so they are read off the pieces; equal parts need none. */
static nb_status x_split(ox_export *e, const nb_op *op)
{
    const int n = nb_op_out_count(op, 0);
    const nb_var *x = var(e, IN(0));
    int axis = (int)nb_op_attr(op, "axis")->i;
    if (axis < 0) axis += x->ndim;
    int64_t *sizes = ox_alloc(&e->a, (size_t)n * sizeof *sizes);
    const char **outs = ox_alloc(&e->a, (size_t)n * sizeof *outs);
    if (!sizes || !outs) return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    bool known = true;
    for (int k = 0; k < n; k++) {
        outs[k] = nb_op_out_name(op, 0, k);
        sizes[k] = var(e, outs[k])->shape[axis];
        known = known && sizes[k] >= 0;
    }
    const char *in[2] = {IN(0), NULL};
    if (nb_op_attr(op, "sections")->n) {
        if (!known) return unsupported(op, "splits a dim whose pieces' sizes only a run knows");
        in[1] = ox_int64s(e, n, sizes);
    }
    Onnx__NodeProto *node = e->a.failed ? NULL : ox_node_outs(e, "Split", in[1] ? 2 : 1, in, n, outs);
    ox_attr_int(e, node, "axis", axis);
    return done(e);
}

/* stack: each input given its new dim, then joined along it. */
static nb_status x_stack(ox_export *e, const nb_op *op)
{
    const int n = nb_op_in_count(op, 0);
    const int64_t axis = nb_op_attr(op, "axis")->i;
    const char **parts = ox_alloc(&e->a, (size_t)n * sizeof *parts), *axes = ox_int64s(e, 1, &axis);
    if (!parts || !axes) return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    for (int k = 0; k < n; k++) {
        parts[k] = ox_tmp(e, OUT(0));
        NODE("Unsqueeze", parts[k], nb_op_in_name(op, 0, k), axes);
    }
    if (e->a.failed) return done(e);
    ox_attr_int(e, ox_node(e, "Concat", n, parts, OUT(0)), "axis", axis);
    return done(e);
}

const ox_exporter ox_exports_shape[] = {
    {"slice", 0, x_slice},
    {"split", 0, x_split},
    {"stack", 0, x_stack},
    {0},
};

#endif
