/* Batching rules of reductions and shape ops: the batch dim goes first and
 * every axis attribute moves up by one (negative axes resolved against the
 * example's rank first); shapes get the batch prepended. */
#include "nabla/ops.h"
#include "batch_rules.h"

#define INTS(nm, n, p) NB_ATTR_INTS_N(nm, n, p)

/* Outputs of an op whose inputs were all put batch first. */
static nb_status emit_front(nb_builder *b, nb_batch_ctx *c, const nb_value *in, int n_set, const nb_attr *set)
{
    nb_status st = nb_batch_reemit(b, c, in, n_set, set, c->n_out, c->y);
    nb_batch_set_all(c, 0);
    return st;
}

/* An int-list attribute of axes of a rank-`rank` value, each made
 * non-negative and moved up by one. */
static int shifted_axes(const nb_attr_value *a, int rank, int64_t *out)
{
    for (int k = 0; k < a->n && k < NB_MAX_DIMS; k++) out[k] = nb_batch_axis(a->ints[k], rank) + 1;
    return a->n < NB_MAX_DIMS ? a->n : NB_MAX_DIMS;
}

/* The batch stays where it is: each axis a moves past it (a + 1 from the
 * batch dim d on), and the batch dim moves down by the reduced axes before
 * it unless keepdim. */
nb_status nb_batch_reduce(nb_builder *b, nb_batch_ctx *c)
{
    int r = c->x_info[0].ndim, d = c->x_bdim[0], before = 0;
    int64_t axes[NB_MAX_DIMS];
    const nb_attr_value *a = nb_batch_attr(c, "axes");
    int n = a->n < NB_MAX_DIMS ? a->n : NB_MAX_DIMS;
    for (int k = 0; k < n; k++) axes[k] = nb_batch_axis(a->ints[k], r);
    if (!a->n)
        for (n = 0; n < r; n++) axes[n] = n;
    for (int k = 0; k < n; k++) {
        before += axes[k] < d;
        if (axes[k] >= d) axes[k]++;
    }
    if (n == 0) { /* a scalar example: nothing to reduce, but the op runs (reduce_mean of one value) */
        c->y[0] = nb_emit1(b, "assign", NB_VALUES(c->x[0]), NB_NO_ATTRS);
        c->y_bdim[0] = d;
        return nb_builder_status(b);
    }
    nb_status st = nb_batch_reemit(b, c, c->x, 1, (nb_attr[]){INTS("axes", n, axes)}, 1, c->y);
    c->y_bdim[0] = nb_batch_attr(c, "keepdim")->b ? d : d - before;
    return st;
}

nb_status nb_batch_arg_reduce(nb_builder *b, nb_batch_ctx *c)
{
    int r = c->x_info[0].ndim;
    if (r == 0) return nb_batch_loop(b, c);
    nb_value x = nb_batch_front(b, c, 0);
    return emit_front(b, c, &x, 1, (nb_attr[]){NB_ATTR_INT("axis", nb_batch_axis(nb_batch_attr(c, "axis")->i, r) + 1)});
}

/* The batch first, then the example's output shape (reshape's 0 copies the
 * batch dim of X: known or not). */
nb_status nb_batch_reshape(nb_builder *b, nb_batch_ctx *c)
{
    int64_t shape[NB_MAX_DIMS];
    const nb_var_info *o = &c->y_info[0];
    if (o->ndim + 1 > NB_MAX_DIMS) return nb_batch_loop(b, c);
    shape[0] = 0;
    for (int k = 0; k < o->ndim; k++) shape[k + 1] = o->shape[k];
    nb_value x = nb_batch_materialize(b, c, 0);
    c->y[0] = nb_reshape(b, x, o->ndim + 1, shape);
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}

nb_status nb_batch_flatten(nb_builder *b, nb_batch_ctx *c)
{
    int r = c->x_info[0].ndim;
    if (r == 0) return nb_batch_reshape(b, c);
    nb_value x = nb_batch_front(b, c, 0);
    return emit_front(b, c, &x, 2,
                      (nb_attr[]){NB_ATTR_INT("start_axis", nb_batch_axis(nb_batch_attr(c, "start_axis")->i, r) + 1),
                                  NB_ATTR_INT("stop_axis", nb_batch_axis(nb_batch_attr(c, "stop_axis")->i, r) + 1)});
}

nb_status nb_batch_transpose(nb_builder *b, nb_batch_ctx *c)
{
    const nb_attr_value *p = nb_batch_attr(c, "perm");
    int r = c->x_info[0].ndim;
    int64_t perm[NB_MAX_DIMS];
    if (p->n != r || r + 1 > NB_MAX_DIMS) return nb_batch_loop(b, c);
    perm[0] = 0;
    for (int k = 0; k < r; k++) perm[k + 1] = nb_batch_axis(p->ints[k], r) + 1;
    nb_value x = nb_batch_front(b, c, 0);
    return emit_front(b, c, &x, 1, (nb_attr[]){INTS("perm", r + 1, perm)});
}

/* No axes: the example's size-1 dims, named, so that a batch of one stays. */
nb_status nb_batch_squeeze(nb_builder *b, nb_batch_ctx *c)
{
    const nb_attr_value *a = nb_batch_attr(c, "axes");
    const nb_var_info *in = &c->x_info[0];
    int64_t axes[NB_MAX_DIMS];
    int n = 0;
    if (a->n) n = shifted_axes(a, in->ndim, axes);
    else
        for (int k = 0; k < in->ndim; k++)
            if (in->shape[k] == 1) axes[n++] = k + 1;
    nb_value x = nb_batch_front(b, c, 0);
    if (n == 0) {
        c->y[0] = x;
        c->y_bdim[0] = 0;
        return nb_builder_status(b);
    }
    return emit_front(b, c, &x, 1, (nb_attr[]){INTS("axes", n, axes)});
}

/* X batch first and its "axes" moved up, resolved against rank. */
static nb_status with_axes_shifted(nb_builder *b, nb_batch_ctx *c, int rank)
{
    int64_t axes[NB_MAX_DIMS];
    int n = shifted_axes(nb_batch_attr(c, "axes"), rank, axes);
    nb_value x = nb_batch_front(b, c, 0);
    return emit_front(b, c, &x, 1, (nb_attr[]){INTS("axes", n, axes)});
}

/* unsqueeze's axes are positions in its output. */
nb_status nb_batch_unsqueeze(nb_builder *b, nb_batch_ctx *c) { return with_axes_shifted(b, c, c->y_info[0].ndim); }

/* expand and expand_as, both as expand to the batch and the example's
 * output shape. */
nb_status nb_batch_expand(nb_builder *b, nb_batch_ctx *c)
{
    const nb_var_info *o = &c->y_info[0];
    int64_t shape[NB_MAX_DIMS];
    if (o->ndim + 1 > NB_MAX_DIMS) return nb_batch_loop(b, c);
    shape[0] = c->batch;
    for (int k = 0; k < o->ndim; k++) shape[k + 1] = o->shape[k];
    nb_value x;
    if (nb_batch_is(c, 0)) {
        x = nb_batch_front_padded(b, c, 0, o->ndim);
        shape[0] = -1;
    } else {
        int64_t axes[NB_MAX_DIMS];
        int pad = o->ndim + 1 - c->x_info[0].ndim;
        for (int k = 0; k < pad; k++) axes[k] = k;
        x = nb_unsqueeze(b, c->x[0], pad, axes);
    }
    c->y[0] = nb_expand(b, x, o->ndim + 1, shape);
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}

/* sum_to(X, Like): the example's extra leading dims summed first, then
 * sum_to a Like that has the batch (Like is read for its shape only). */
nb_status nb_batch_sum_to(nb_builder *b, nb_batch_ctx *c)
{
    int rx = c->x_info[0].ndim, rl = c->x_info[1].ndim;
    if (!nb_batch_is(c, 0)) { /* the same for every example: against one example's Like */
        int64_t ax = c->x_bdim[1], lo = 0, hi = 1;
        nb_value like = nb_squeeze(b, nb_slice(b, c->x[1], 1, &ax, &lo, &hi), 1, &ax);
        c->y[0] = nb_sum_to(b, c->x[0], like);
        c->y_bdim[0] = -1;
        return nb_builder_status(b);
    }
    nb_value x = nb_batch_front(b, c, 0);
    if (rx > rl) {
        int64_t axes[NB_MAX_DIMS];
        for (int k = 0; k < rx - rl; k++) axes[k] = k + 1;
        x = nb_reduce_sum(b, x, rx - rl, axes, false);
    }
    nb_value like = nb_batch_is(c, 1) ? nb_batch_front(b, c, 1) : nb_batch_materialize(b, c, 1);
    c->y[0] = nb_sum_to(b, x, like);
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}

nb_status nb_batch_concat(nb_builder *b, nb_batch_ctx *c)
{
    nb_value in[64];
    if (c->n_in > 64) return nb_batch_loop(b, c);
    for (int i = 0; i < c->n_in; i++) in[i] = nb_batch_materialize(b, c, i);
    int axis = (int)nb_batch_axis(nb_batch_attr(c, "axis")->i, c->x_info[0].ndim) + 1;
    return emit_front(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("axis", axis)});
}

nb_status nb_batch_stack(nb_builder *b, nb_batch_ctx *c)
{
    nb_value in[64];
    if (c->n_in > 64) return nb_batch_loop(b, c);
    for (int i = 0; i < c->n_in; i++) in[i] = nb_batch_materialize(b, c, i);
    int axis = (int)nb_batch_axis(nb_batch_attr(c, "axis")->i, c->x_info[0].ndim + 1) + 1;
    return emit_front(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("axis", axis)});
}

nb_status nb_batch_split(nb_builder *b, nb_batch_ctx *c)
{
    nb_value x = nb_batch_front(b, c, 0);
    int axis = (int)nb_batch_axis(nb_batch_attr(c, "axis")->i, c->x_info[0].ndim) + 1;
    return emit_front(b, c, &x, 1, (nb_attr[]){NB_ATTR_INT("axis", axis)});
}

nb_status nb_batch_slice(nb_builder *b, nb_batch_ctx *c) { return with_axes_shifted(b, c, c->x_info[0].ndim); }

/* gather (axis) and index_select (dim) with a batched X and shared indices;
 * batched indices take the loop. */
nb_status nb_batch_gather(nb_builder *b, nb_batch_ctx *c)
{
    if (nb_batch_is(c, 1)) return nb_batch_loop(b, c);
    const char *name = nb_batch_attr(c, "axis")->type != NB_ATTR_NONE ? "axis" : "dim";
    nb_value in[2] = {nb_batch_front(b, c, 0), c->x[1]};
    int axis = (int)nb_batch_axis(nb_batch_attr(c, name)->i, c->x_info[0].ndim) + 1;
    return emit_front(b, c, in, 1, (nb_attr[]){NB_ATTR_INT(name, axis)});
}

nb_status nb_batch_scatter_add(nb_builder *b, nb_batch_ctx *c)
{
    if (nb_batch_is(c, 1)) return nb_batch_loop(b, c);
    nb_value in[3] = {nb_batch_materialize(b, c, 0), c->x[1], nb_batch_materialize(b, c, 2)};
    int axis = (int)nb_batch_axis(nb_batch_attr(c, "axis")->i, c->x_info[0].ndim) + 1;
    return emit_front(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("axis", axis)});
}

/* fill_constant_batch_size_like reads only the example's shape: the same
 * constant for every example, made by fill_constant at the inferred shape. */
nb_status nb_batch_shape_like(nb_builder *b, nb_batch_ctx *c)
{
    const nb_var_info *o = &c->y_info[0];
    for (int k = 0; k < o->ndim; k++)
        if (o->shape[k] < 0) return nb_batch_loop(b, c);
    c->y[0] = nb_fill_constant(b, o->dtype, o->ndim, o->shape, nb_batch_attr(c, "value")->f);
    c->y_bdim[0] = -1;
    return nb_builder_status(b);
}

/* pad and pad_grad: no padding on the batch dim. */
nb_status nb_batch_pad(nb_builder *b, nb_batch_ctx *c)
{
    const nb_attr_value *p = nb_batch_attr(c, "paddings");
    int64_t pads[2 * NB_MAX_DIMS];
    if (p->n + 2 > 2 * NB_MAX_DIMS) return nb_batch_loop(b, c);
    pads[0] = pads[1] = 0;
    for (int k = 0; k < p->n; k++) pads[k + 2] = p->ints[k];
    nb_value x = nb_batch_front(b, c, 0);
    return emit_front(b, c, &x, 1, (nb_attr[]){INTS("paddings", p->n + 2, pads)});
}
