/* VJP rules of the shape family's layout and join ops: reshape, flatten,
 * squeeze, unsqueeze, reshape_as, transpose, expand, expand_as, concat,
 * split and stack. Each rule is one or two ops of the family (or sum_to)
 * applied to dOut. */
#include <stdlib.h>
#include "nabla/device.h"
#include "nabla/ops.h"
#include "shape_grad.h"

#define INFO_STR(buf, info) nb_shape_str((buf), sizeof(buf), (info).ndim, (info).shape)

/* v with the shape of `like` (same element count, same order). A static
 * reshape when like's shape is known up to one dim, which reshape's -1 then
 * works out; otherwise reshape_as, which reads like's shape when it runs.
 * A zero-size dim goes to reshape_as too, since 0 in reshape's attribute
 * means "copy that dim". */
static nb_value reshape_like(nb_builder *b, nb_value v, nb_value like)
{
    nb_var_info l = nb_value_info(b, like);
    int unknown = 0;
    bool zero = false;
    for (int d = 0; d < l.ndim; d++) {
        unknown += l.shape[d] < 0;
        zero |= l.shape[d] == 0;
    }
    if (unknown <= 1 && !zero) return nb_reshape(b, v, l.ndim, l.shape);
    return nb_emit1(b, "reshape_as", NB_VALUES(v, like), NB_NO_ATTRS);
}

/* Ops that keep the elements in order and change only the shape:
 * dX = dOut reshaped back to the shape of X. */
nb_status nb_reshape_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, reshape_like(b, dy, nb_grad_x(g, 0, 0)));
    return nb_builder_status(b);
}

/* dX = dOut transposed by the inverse permutation. */
nb_status nb_transpose_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    const nb_attr_value *perm = nb_grad_attr(g, "perm");
    int64_t inv[NB_MAX_DIMS];
    int n = perm->n;
    for (int i = 0; i < n; i++) {
        int64_t p = perm->ints[i];
        inv[p < 0 ? p + n : p] = i;
    }
    nb_grad_set_dx(g, 0, 0, nb_transpose(b, dy, n, inv));
    return nb_builder_status(b);
}

/* expand and expand_as broadcast X: dX = dOut summed back to X's shape. */
nb_status nb_expand_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, dy, nb_grad_x(g, 0, 0)));
    return nb_builder_status(b);
}

/* dX[k] = the k-th piece of dOut along axis: one split with each input's
 * size along axis as its section. Split infers one unknown (-1) section
 * from the size of dOut at run time; with two or more unknown, the cuts
 * cannot be placed when the program is built. */
nb_status nb_concat_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    int n = nb_grad_in_count(g, 0);
    bool any = false;
    for (int k = 0; k < n; k++) any |= nb_grad_wants_dx(g, 0, k);
    if (nb_is_none(dy) || !any) return nb_builder_status(b);
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_var_info x0 = nb_value_info(b, nb_grad_x(g, 0, 0));
    if (axis < 0) axis += x0.ndim;
    int64_t *sections = nb_malloc((size_t)n * sizeof *sections);
    nb_value *pieces = nb_calloc((size_t)n, sizeof *pieces);
    if (!sections || !pieces) {
        nb_free(sections);
        nb_free(pieces);
        return nb_builder_fail(b, NB_ERR_NOMEM, "concat: out of memory for its gradient");
    }
    int unknown = -1;
    for (int k = 0; k < n; k++) {
        nb_var_info xk = nb_value_info(b, nb_grad_x(g, 0, k));
        sections[k] = xk.shape[axis];
        if (sections[k] >= 0) continue;
        if (unknown >= 0) {
            char a[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
            nb_var_info xu = nb_value_info(b, nb_grad_x(g, 0, unknown));
            nb_builder_fail(b, NB_ERR_UNSUPPORTED,
                            "concat: its gradient splits dOut along axis %lld at the sizes of the inputs there, but "
                            "X[%d] (shape %s) and X[%d] (shape %s) both have an unknown size along it",
                            (long long)axis, unknown, INFO_STR(a, xu), k, INFO_STR(c, xk));
            break;
        }
        unknown = k;
    }
    if (!nb_builder_status(b))
        nb_emit(b, "split", NB_VALUES(dy), NB_ATTRS(NB_ATTR_INT("axis", axis), NB_ATTR_INTS_N("sections", n, sections)),
                n, pieces);
    for (int k = 0; k < n && !nb_builder_status(b); k++) nb_grad_set_dx(g, 0, k, pieces[k]);
    nb_free(sections);
    nb_free(pieces);
    return nb_builder_status(b);
}

/* dX = the pieces' gradients joined again along axis, with zeros for the
 * pieces that received none. */
nb_status nb_split_vjp(nb_builder *b, nb_grad_ctx *g)
{
    int n = nb_grad_out_count(g, 0);
    bool any = false;
    for (int k = 0; k < n; k++) any |= !nb_is_none(nb_grad_dy(g, 0, k));
    if (!any || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_value *pieces = nb_malloc((size_t)n * sizeof *pieces);
    if (!pieces) return nb_builder_fail(b, NB_ERR_NOMEM, "split: out of memory for its gradient");
    for (int k = 0; k < n; k++) pieces[k] = nb_grad_dy_or_zeros(b, g, 0, k);
    nb_grad_set_dx(g, 0, 0, nb_concat(b, n, pieces, (int)nb_grad_attr(g, "axis")->i));
    nb_free(pieces);
    return nb_builder_status(b);
}

/* dX[k] = dOut at index k along the stacked axis: dOut split into n pieces
 * of size 1 there, each squeezed. */
nb_status nb_stack_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    int n = nb_grad_in_count(g, 0);
    bool any = false;
    for (int k = 0; k < n; k++) any |= nb_grad_wants_dx(g, 0, k);
    if (nb_is_none(dy) || !any) return nb_builder_status(b);
    int64_t axis = nb_grad_attr(g, "axis")->i;
    if (axis < 0) axis += nb_value_info(b, dy).ndim;
    nb_value *pieces = nb_calloc((size_t)n, sizeof *pieces);
    if (!pieces) return nb_builder_fail(b, NB_ERR_NOMEM, "stack: out of memory for its gradient");
    nb_emit(b, "split", NB_VALUES(dy), NB_ATTRS(NB_ATTR_INT("axis", axis)), n, pieces);
    for (int k = 0; k < n && !nb_builder_status(b); k++)
        if (nb_grad_wants_dx(g, 0, k)) nb_grad_set_dx(g, 0, k, nb_squeeze(b, pieces[k], 1, &axis));
    nb_free(pieces);
    return nb_builder_status(b);
}
