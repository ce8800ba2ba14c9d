/* Gradient rules of the reduction family (reduce.c), written as
 * compositions of differentiable ops, so that their own gradients come for
 * free.
 *
 * Every rule works on Out-sized values for as long as it can (scaling,
 * dividing, multiplying dOut by Out) and broadcasts to X's size once, at the
 * end. Broadcasting needs Out-sized values in "keep form": X's rank with the
 * reduced dims kept as size 1. With keepdim they already are; otherwise
 * keep_form() unsqueezes them, except for a leading run of reduced dims,
 * which NumPy broadcasting puts back by itself (so reducing [B, N] over
 * axis 0, the usual bias gradient, needs no unsqueeze at all).
 *
 * Ties and zeros:
 *  - reduce_max / reduce_min split the gradient evenly among the elements
 *    equal to the result, as PyTorch's amax/amin do: dX = mask * dOut /
 *    count, a subgradient whose entries add up to dOut. (A NaN in X makes
 *    the gradient of its reduction NaN.)
 *  - reduce_prod uses dX = dOut * Out / X, which is NaN or inf where X is 0;
 *    a zero-safe rule needs exclusive products that no op offers yet. */
#include <stddef.h>
#include "nabla/device.h"
#include <stdlib.h>
#include "reduce_grad.h"
#include "kernels/cpu/reduce.h"
#include "nabla/ops.h"
#include "nabla/op.h"

/* The reduction a forward op did. */
typedef struct red_info {
    nb_value x;
    nb_var_info xi;
    const nb_attr_value *axes;
    bool keepdim;
    bool mask[NB_MAX_DIMS]; /* the reduced dims of X */
} red_info;

static nb_status red_info_of(nb_builder *b, const nb_grad_ctx *g, red_info *r)
{
    r->x = nb_grad_x(g, 0, 0);
    r->xi = nb_value_info(b, r->x);
    r->axes = nb_grad_attr(g, "axes");
    r->keepdim = nb_grad_attr(g, "keepdim")->b;
    nb_status st = nb_builder_status(b);
    if (st) return st;
    /* The forward op's shape inference accepted these axes already. */
    return nb_reduce_axes_mask(g->def->name, r->axes->n, r->axes->ints, r->xi.ndim, r->xi.shape, r->mask);
}

/* v, shaped like Out, in a form that broadcasts against X (see the top). */
static nb_value keep_form(nb_builder *b, const red_info *r, nb_value v)
{
    if (r->keepdim) return v;
    int lead = 0;
    while (lead < r->xi.ndim && r->mask[lead]) lead++;
    int64_t axes[NB_MAX_DIMS];
    int n = 0;
    for (int d = lead; d < r->xi.ndim; d++)
        if (r->mask[d]) axes[n++] = d - lead;
    return n ? nb_unsqueeze(b, v, n, axes) : v;
}

/* reduce_sum: dX = dOut broadcast back over the reduced dims. */
nb_status nb_vjp_reduce_sum(nb_builder *b, nb_grad_ctx *g)
{
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_grad_set_dx(g, 0, 0, nb_expand_as(b, keep_form(b, &r, nb_grad_dy(g, 0, 0)), r.x));
    return nb_builder_status(b);
}

/* reduce_mean: as reduce_sum, with dOut divided by the count of reduced
 * elements. The reduced dims known when the rule is built give a constant
 * factor; those unknown until run time (-1, such as a batch dim) are counted
 * then, by summing ones over a slice of X that keeps only them, which costs
 * their product, not X's size. */
nb_status nb_vjp_reduce_mean(nb_builder *b, nb_grad_ctx *g)
{
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_value s = nb_grad_dy(g, 0, 0);
    int64_t known = 1;
    int64_t axes[NB_MAX_DIMS], starts[NB_MAX_DIMS], ends[NB_MAX_DIMS];
    int n_cut = 0;
    bool any_unknown = false;
    for (int d = 0; d < r.xi.ndim; d++) {
        bool unknown = r.xi.shape[d] < 0;
        if (r.mask[d] && unknown) {
            any_unknown = true;
            continue;
        }
        if (r.mask[d]) known *= r.xi.shape[d];
        if (r.xi.shape[d] != 1) {
            axes[n_cut] = d;
            starts[n_cut] = 0;
            ends[n_cut++] = 1;
        }
    }
    if (any_unknown) {
        nb_value part = n_cut ? nb_slice(b, r.x, n_cut, axes, starts, ends) : r.x;
        s = nb_div(b, s, nb_reduce_sum(b, nb_ones_like(b, part), 0, NULL, false));
    }
    if (known != 1) s = nb_scale(b, s, 1.0 / (double)known, 0.0);
    nb_grad_set_dx(g, 0, 0, nb_expand_as(b, keep_form(b, &r, s), r.x));
    return nb_builder_status(b);
}

/* reduce_max and reduce_min: dX = mask * dOut / count, where mask marks the
 * elements of X equal to Out and count is how many there are per result
 * (ties share the gradient). */
nb_status nb_vjp_reduce_max(nb_builder *b, nb_grad_ctx *g)
{
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_value hit = nb_cast(b, nb_equal(b, r.x, keep_form(b, &r, nb_grad_y(g, 0, 0))), r.xi.dtype);
    nb_value count = nb_reduce_sum(b, hit, r.axes->n, r.axes->ints, r.keepdim);
    nb_value share = nb_div(b, nb_grad_dy(g, 0, 0), count);
    nb_grad_set_dx(g, 0, 0, nb_mul(b, hit, keep_form(b, &r, share)));
    return nb_builder_status(b);
}

/* reduce_prod: dX = dOut * Out / X (not defined where X is 0). */
nb_status nb_vjp_reduce_prod(nb_builder *b, nb_grad_ctx *g)
{
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_value q = nb_mul(b, nb_grad_dy(g, 0, 0), nb_grad_y(g, 0, 0));
    nb_grad_set_dx(g, 0, 0, nb_div(b, keep_form(b, &r, q), r.x));
    return nb_builder_status(b);
}

/* logsumexp: dX = dOut * exp(X - Out), the softmax over the reduced dims. */
nb_status nb_vjp_logsumexp(nb_builder *b, nb_grad_ctx *g)
{
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_value p = nb_exp(b, nb_sub(b, r.x, keep_form(b, &r, nb_grad_y(g, 0, 0))));
    nb_grad_set_dx(g, 0, 0, nb_mul(b, keep_form(b, &r, nb_grad_dy(g, 0, 0)), p));
    return nb_builder_status(b);
}

/* sum of several tensors: each gets dOut (the backward pass copies it into
 * a var of its own for each). */
nb_status nb_vjp_sum(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    for (int k = 0; k < nb_grad_in_count(g, 0); k++) nb_grad_set_dx(g, 0, k, dy);
    return nb_builder_status(b);
}

/* sum_to undoes a broadcast, so its gradient redoes it. */
nb_status nb_vjp_sum_to(nb_builder *b, nb_grad_ctx *g)
{
    nb_grad_set_dx(g, 0, 0, nb_expand_as(b, nb_grad_dy(g, 0, 0), nb_grad_x(g, 0, 0)));
    return nb_builder_status(b);
}

/* ---- JVP rules (forward mode) ---------------------------------------------------
 *
 * Each is the transpose of the VJP above: what the VJP broadcasts back over
 * the reduced dims, the JVP sums over them, so every rule ends in one
 * reduction of an X-sized value with the forward op's axes and keepdim,
 * which gives Out's shape directly. */

static nb_value reduce_like(nb_builder *b, const nb_grad_ctx *g, nb_value v, bool mean)
{
    const nb_attr_value *axes = nb_grad_attr(g, "axes");
    bool keepdim = nb_grad_attr(g, "keepdim")->b;
    return mean ? nb_reduce_mean(b, v, axes->n, axes->ints, keepdim)
                : nb_reduce_sum(b, v, axes->n, axes->ints, keepdim);
}

/* reduce_sum: tOut = reduce_sum(tX). */
nb_status nb_jvp_reduce_sum(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, reduce_like(b, g, t, false));
    return nb_builder_status(b);
}

/* reduce_mean: tOut = reduce_mean(tX). */
nb_status nb_jvp_reduce_mean(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, reduce_like(b, g, t, true));
    return nb_builder_status(b);
}

/* reduce_max and reduce_min: tOut = sum(mask * tX) / count, the mean of the
 * tangent over the elements equal to Out (ties share it, as in the VJP). */
nb_status nb_jvp_reduce_max(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return nb_builder_status(b);
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_value hit = nb_cast(b, nb_equal(b, r.x, keep_form(b, &r, nb_grad_y(g, 0, 0))), r.xi.dtype);
    nb_value count = reduce_like(b, g, hit, false);
    nb_grad_set_ty(g, 0, 0, nb_div(b, reduce_like(b, g, nb_mul(b, hit, t), false), count));
    return nb_builder_status(b);
}

/* reduce_prod: tOut = Out * reduce_sum(tX / X) (not defined where X is 0). */
nb_status nb_jvp_reduce_prod(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return nb_builder_status(b);
    nb_value s = reduce_like(b, g, nb_div(b, t, nb_grad_x(g, 0, 0)), false);
    nb_grad_set_ty(g, 0, 0, nb_mul(b, nb_grad_y(g, 0, 0), s));
    return nb_builder_status(b);
}

/* logsumexp: tOut = reduce_sum(exp(X - Out) * tX), the softmax-weighted
 * tangent. */
nb_status nb_jvp_logsumexp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return nb_builder_status(b);
    red_info r;
    nb_status st = red_info_of(b, g, &r);
    if (st) return st;
    nb_value p = nb_exp(b, nb_sub(b, r.x, keep_form(b, &r, nb_grad_y(g, 0, 0))));
    nb_grad_set_ty(g, 0, 0, reduce_like(b, g, nb_mul(b, p, t), false));
    return nb_builder_status(b);
}

/* sum of several tensors: tOut = the sum of the non-zero tangents (one of
 * them passes as it is; none leaves tOut zero). */
nb_status nb_jvp_sum(nb_builder *b, nb_grad_ctx *g)
{
    int n = nb_grad_in_count(g, 0), m = 0;
    nb_value ts[64];
    nb_value *buf = ts;
    if (n > (int)(sizeof ts / sizeof *ts)) {
        /* Rare: more inputs than the stack buffer holds. */
        buf = nb_malloc((size_t)n * sizeof *buf);
        if (!buf) return nb_builder_fail(b, NB_ERR_NOMEM, "sum JVP: out of memory for %d tangents", n);
    }
    for (int k = 0; k < n; k++) {
        nb_value t = nb_grad_tx(g, 0, k);
        if (!nb_is_none(t)) buf[m++] = t;
    }
    if (m == 1) nb_grad_set_ty(g, 0, 0, buf[0]);
    else if (m > 1) nb_grad_set_ty(g, 0, 0, nb_sum(b, m, buf));
    if (buf != ts) nb_free(buf);
    return nb_builder_status(b);
}

/* sum_to is linear: tOut = sum_to(tX, Like). */
nb_status nb_jvp_sum_to(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, nb_sum_to(b, t, nb_grad_x(g, 1, 0)));
    return nb_builder_status(b);
}
