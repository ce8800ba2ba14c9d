/* JVP rules of the shape family (see nabla/autodiff.h). Every op of the
 * family is linear in its differentiable inputs, so each output tangent is
 * the op itself applied to the input tangents, with the forward op's
 * attributes and its other inputs (Like, Index) as they are. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/ops.h"
#include "shape_grad.h"
#include "nabla/op.h"

static int slot_count(const nb_slot_def *slots)
{
    int n = 0;
    while (n < NB_MAX_SLOTS && slots[n].name) n++;
    return n;
}

/* Emits the forward op again on `in` (flat, in slot order) with the forward
 * op's attributes, pad_value set to 0 (a tangent pads with zeros), and
 * stores its outputs as the output tangents. */
static nb_status reemit(nb_builder *b, nb_grad_ctx *g, const nb_value *in)
{
    const nb_op_def *def = g->def;
    nb_attr attrs[NB_MAX_ATTRS];
    int n_attrs = 0;
    for (; n_attrs < NB_MAX_ATTRS && def->attrs[n_attrs].name; n_attrs++) {
        attrs[n_attrs] = (nb_attr){def->attrs[n_attrs].name, g->attrs[n_attrs]};
        if (!strcmp(attrs[n_attrs].name, "pad_value")) attrs[n_attrs].value.f = 0.0;
    }
    int n_in = g->in_begin[slot_count(def->inputs)], n_out = g->out_begin[slot_count(def->outputs)];
    return nb_emit(b, def->name, NB_VALUES_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), n_out, g->ty);
}

/* Ops linear in their first input alone (reshape, flatten, squeeze,
 * unsqueeze, reshape_as, transpose, expand, expand_as, split, slice, pad,
 * pad_grad, gather, index_select): tOut = op(tX, other inputs). */
nb_status nb_shape_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return nb_builder_status(b);
    int n_in = g->in_begin[slot_count(g->def->inputs)];
    nb_value in[NB_MAX_SLOTS];
    if (n_in > NB_MAX_SLOTS) return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "%s: too many inputs", g->def->name);
    memcpy(in, g->x, (size_t)n_in * sizeof *in);
    in[0] = t;
    reemit(b, g, in);
    return nb_builder_status(b);
}

/* concat and stack: the op on the tangents, with zeros shaped like X[k] for
 * the inputs whose tangent is zero (none at all: tOut stays zero). */
nb_status nb_join_jvp(nb_builder *b, nb_grad_ctx *g)
{
    int n = nb_grad_in_count(g, 0);
    bool any = false;
    for (int k = 0; k < n; k++) any |= !nb_is_none(nb_grad_tx(g, 0, k));
    if (!any) return nb_builder_status(b);
    nb_value *in = nb_malloc((size_t)n * sizeof *in);
    if (!in) return nb_builder_fail(b, NB_ERR_NOMEM, "%s: out of memory for its tangent", g->def->name);
    for (int k = 0; k < n; k++) {
        nb_value t = nb_grad_tx(g, 0, k);
        in[k] = nb_is_none(t) ? nb_fill_zeros_like(b, nb_grad_x(g, 0, k)) : t;
    }
    reemit(b, g, in);
    nb_free(in);
    return nb_builder_status(b);
}

/* Out = X + Updates added at Index: tOut = tX with tUpdates added at Index
 * (tX alone when tUpdates is zero; zeros like X under tUpdates when tX is). */
nb_status nb_scatter_add_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = nb_grad_tx(g, 0, 0), tu = nb_grad_tx(g, 2, 0);
    if (nb_is_none(tu)) {
        if (!nb_is_none(tx)) nb_grad_set_ty(g, 0, 0, tx);
        return nb_builder_status(b);
    }
    if (nb_is_none(tx)) tx = nb_fill_zeros_like(b, nb_grad_x(g, 0, 0));
    nb_grad_set_ty(g, 0, 0, nb_scatter_add(b, tx, nb_grad_x(g, 1, 0), tu, (int)nb_grad_attr(g, "axis")->i));
    return nb_builder_status(b);
}
