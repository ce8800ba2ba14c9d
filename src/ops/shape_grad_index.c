/* VJP rules of the shape family's positional and index ops: slice, pad,
 * pad_grad, gather, index_select and scatter_add. */
#include <stdint.h>
#include <string.h>
#include "nabla/ops.h"
#include "shape_grad.h"
#include "shape_internal.h"

static nb_value emit_pad(nb_builder *b, nb_value v, int n, const int64_t *paddings, const char *mode)
{
    return nb_emit1(b, "pad", NB_VALUES(v),
                    NB_ATTRS(NB_ATTR_INTS_N("paddings", n, paddings), NB_ATTR_STRING("mode", mode)));
}

/* dInput is dOut put back where slice took it from, zeros elsewhere: a pad
 * with zeros by the elements slice skipped before and after each dim. A
 * stride s > 1 first spreads dOut out along its dim: a new dim of size 1
 * after it, padded to s, merged back (flatten) gives each element s - 1
 * zeros after it, and the zeros after the last element that run past
 * Input's end are cut off.
 *
 * The pad sizes need the size of Input along every sliced dim when the
 * program is built; slicing a dim of unknown size cannot be differentiated. */
nb_status nb_slice_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0), x = nb_grad_x(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    const nb_attr_value *axes = nb_grad_attr(g, "axes"), *starts = nb_grad_attr(g, "starts"),
                        *ends = nb_grad_attr(g, "ends"), *strides = nb_grad_attr(g, "strides");
    nb_var_info xi = nb_value_info(b, x);
    int64_t pads[2 * NB_MAX_DIMS] = {0}, step[NB_MAX_DIMS], span[NB_MAX_DIMS];
    int dims[NB_MAX_DIMS], n_dims = 0;
    bool empty = false;
    for (int k = 0; k < axes->n && k < NB_MAX_DIMS; k++) {
        int64_t a = axes->ints[k];
        int d = (int)(a < 0 ? a + xi.ndim : a);
        int64_t n = xi.shape[d], first, count, s = strides->n ? strides->ints[k] : 1;
        if (n < 0) {
            char buf[NB_SHAPE_STR_MAX];
            return nb_builder_fail(b, NB_ERR_UNSUPPORTED,
                                   "slice: its gradient pads dOut back to the shape of Input, but Input (shape %s) "
                                   "has an unknown size along the sliced dim %d",
                                   SHAPE_STR(buf, &xi), d);
        }
        nb_shapeop_slice_range(n, starts->ints[k], ends->ints[k], s, &first, &count);
        empty |= count == 0;
        dims[n_dims] = d;
        step[n_dims] = count > 1 ? s : 1;
        span[n_dims] = count ? (count - 1) * step[n_dims] + 1 : 0;
        pads[2 * d] = first;
        pads[2 * d + 1] = n - first - span[n_dims];
        n_dims++;
    }
    if (empty) {
        nb_grad_set_dx(g, 0, 0, nb_fill_zeros_like(b, x));
        return nb_builder_status(b);
    }
    nb_value v = dy;
    int64_t cut_axes[NB_MAX_DIMS], cut_starts[NB_MAX_DIMS], cut_ends[NB_MAX_DIMS];
    int n_cut = 0;
    for (int i = 0; i < n_dims; i++) {
        if (step[i] == 1) continue;
        int64_t d = dims[i], p[2 * (NB_MAX_DIMS + 1)] = {0};
        if (xi.ndim + 1 > NB_MAX_DIMS)
            return nb_builder_fail(b, NB_ERR_UNSUPPORTED,
                                   "slice: its gradient for strides needs one more dim than the %d of Input", xi.ndim);
        p[2 * (d + 1) + 1] = step[i] - 1;
        int64_t after = d + 1;
        v = nb_unsqueeze(b, v, 1, &after);
        v = emit_pad(b, v, 2 * (xi.ndim + 1), p, "constant");
        v = nb_flatten(b, v, (int)d, (int)d + 1);
        /* Now span + step - 1 long: the zeros past the last element fill
         * the pad after it if there is room, or are cut. */
        if (pads[2 * d + 1] >= step[i] - 1) {
            pads[2 * d + 1] -= step[i] - 1;
        } else {
            cut_axes[n_cut] = d;
            cut_starts[n_cut] = 0;
            cut_ends[n_cut++] = span[i];
        }
    }
    if (n_cut) v = nb_slice(b, v, n_cut, cut_axes, cut_starts, cut_ends);
    bool any_pad = false;
    for (int d = 0; d < 2 * xi.ndim; d++) any_pad |= pads[d] != 0;
    if (any_pad) v = emit_pad(b, v, 2 * xi.ndim, pads, "constant");
    nb_grad_set_dx(g, 0, 0, v);
    return nb_builder_status(b);
}

/* Constant padding: dX is the middle of dOut, a slice (its ends counted
 * from the end of dOut, so unknown sizes do not matter). Reflect and edge
 * padding also add the border back onto the elements it copied: the fused
 * pad_grad op does both. */
nb_status nb_pad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    const nb_attr_value *p = nb_grad_attr(g, "paddings");
    const char *mode = nb_grad_attr(g, "mode")->s;
    if (strcmp(mode, "constant")) {
        nb_grad_set_dx(g, 0, 0,
                       nb_emit1(b, "pad_grad", NB_VALUES(dy),
                                NB_ATTRS(NB_ATTR_INTS_N("paddings", p->n, p->ints), NB_ATTR_STRING("mode", mode))));
        return nb_builder_status(b);
    }
    int64_t axes[NB_MAX_DIMS], starts[NB_MAX_DIMS], ends[NB_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < p->n / 2 && d < NB_MAX_DIMS; d++) {
        int64_t before = p->ints[2 * d], after = p->ints[2 * d + 1];
        if (!before && !after) continue;
        axes[n] = d;
        starts[n] = before;
        ends[n++] = after ? -after : INT64_MAX;
    }
    nb_grad_set_dx(g, 0, 0, n ? nb_slice(b, dy, n, axes, starts, ends) : dy);
    return nb_builder_status(b);
}

/* pad_grad is the transpose of pad (a linear map), so its gradient is pad
 * itself, with zeros for the constant. */
nb_status nb_pad_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    const nb_attr_value *p = nb_grad_attr(g, "paddings");
    nb_grad_set_dx(g, 0, 0, emit_pad(b, dy, p->n, p->ints, nb_grad_attr(g, "mode")->s));
    return nb_builder_status(b);
}

/* gather and index_select: each slice of dOut goes back to the slice of X it
 * came from, summed where an index repeats: scatter_add into zeros. */
nb_status nb_gather_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0), x = nb_grad_x(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    int64_t axis = nb_grad_attr(g, strcmp(g->def->name, "index_select") ? "axis" : "dim")->i;
    nb_value zeros = nb_fill_zeros_like(b, x);
    nb_grad_set_dx(g, 0, 0, nb_scatter_add(b, zeros, nb_grad_x(g, 1, 0), dy, (int)axis));
    return nb_builder_status(b);
}

/* Out = X + Updates added at Index: dX = dOut, and dUpdates = the slices of
 * dOut at Index (a gather). */
nb_status nb_scatter_add_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, dy);
    if (nb_grad_wants_dx(g, 2, 0))
        nb_grad_set_dx(g, 2, 0, nb_gather(b, dy, nb_grad_x(g, 1, 0), (int)nb_grad_attr(g, "axis")->i));
    return nb_builder_status(b);
}
