/* L2 regularisation and gradient clipping, composed from existing ops so
 * that they run (and draw) like any other part of the program. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/ops.h"
#include "optim_internal.h"

/* Replaces grads[i] by the name of v, if the builder is still sound. */
static nb_status set_grad(nb_optim_ctx *c, char **grads, int i, nb_value v)
{
    nb_status st = nb_builder_status(c->b);
    if (st) return st;
    char *name = nb_strdup(nb_value_name(v));
    if (!name) return nb_error(NB_ERR_NOMEM, "minimize: out of memory");
    nb_free(grads[i]);
    grads[i] = name;
    return NB_OK;
}

static nb_value by_name(nb_optim_ctx *c, const char *name) { return nb_value_by_name(c->b, name); }

/* A 0-d constant of dtype dt. */
static nb_value constant(nb_optim_ctx *c, nb_dtype dt, double v) { return nb_fill_constant(c->b, dt, 0, NULL, v); }

/* ||g||^2 as a 0-d value. */
static nb_value sum_squares(nb_optim_ctx *c, nb_value g)
{
    return nb_reduce_sum(c->b, nb_square(c->b, g), 0, NULL, false);
}

/* c / max(norm, c): 1 while the norm is within the bound (and for a zero
 * gradient), and the factor that brings it down to c otherwise. */
static nb_value clip_factor(nb_optim_ctx *c, nb_value norm, nb_dtype dt)
{
    nb_value bound = constant(c, dt, c->opt->clip_value);
    return nb_div(c->b, bound, nb_maximum(c->b, norm, bound));
}

static nb_status l2(nb_optim_ctx *c, int n, const char *const *params, char **grads)
{
    for (int i = 0; i < n; i++) {
        int from = c->mb->n_ops;
        nb_value g = by_name(c, grads[i]), p = by_name(c, params[i]);
        nb_status st = set_grad(c, grads, i, nb_add(c->b, g, nb_scale(c->b, p, c->opt->l2, 0.0)));
        if (st || (st = nb_optim_mark(c, from, params[i], grads[i]))) return st;
    }
    return NB_OK;
}

static nb_status clip_each(nb_optim_ctx *c, int n, const char *const *params, char **grads)
{
    for (int i = 0; i < n; i++) {
        int from = c->mb->n_ops;
        nb_value g = by_name(c, grads[i]), out;
        if (c->opt->clip == NB_CLIP_VALUE) {
            out = nb_clip(c->b, g, -c->opt->clip_value, c->opt->clip_value);
        } else {
            nb_dtype dt = nb_value_info(c->b, g).dtype;
            out = nb_mul(c->b, g, clip_factor(c, nb_sqrt(c->b, sum_squares(c, g)), dt));
        }
        nb_status st = set_grad(c, grads, i, out);
        if (st || (st = nb_optim_mark(c, from, params[i], grads[i]))) return st;
    }
    return NB_OK;
}

/* One norm over every gradient, summed in the learning rate's dtype (float64
 * as soon as one parameter is), then one factor for all. */
static nb_status clip_global(nb_optim_ctx *c, int n, const char *const *params, char **grads)
{
    if (n < 1) return NB_OK;
    nb_value *parts = nb_calloc((size_t)n, sizeof *parts);
    if (!parts) return nb_error(NB_ERR_NOMEM, "minimize: out of memory");
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++) {
        int from = c->mb->n_ops;
        nb_value g = by_name(c, grads[i]);
        parts[i] = sum_squares(c, g);
        if (nb_value_info(c->b, g).dtype != c->lr_dtype) parts[i] = nb_cast(c->b, parts[i], c->lr_dtype);
        if (!(st = nb_builder_status(c->b))) st = nb_optim_mark(c, from, params[i], grads[i]);
    }
    int from = c->mb->n_ops;
    nb_value total = n == 1 ? parts[0] : nb_sum(c->b, n, parts);
    nb_free(parts);
    nb_value factor = clip_factor(c, nb_sqrt(c->b, total), c->lr_dtype);
    if (!st && !(st = nb_builder_status(c->b))) st = nb_optim_mark(c, from, NULL, NULL);
    for (int i = 0; i < n && !st; i++) {
        from = c->mb->n_ops;
        nb_value g = by_name(c, grads[i]), f = factor;
        nb_dtype dt = nb_value_info(c->b, g).dtype;
        if (dt != c->lr_dtype) f = nb_cast(c->b, f, dt);
        if (!(st = set_grad(c, grads, i, nb_mul(c->b, g, f)))) st = nb_optim_mark(c, from, params[i], grads[i]);
    }
    return st;
}

nb_status nb_optim_transform_grads(nb_optim_ctx *c, int n, const char *const *params, char **grads)
{
    nb_status st = NB_OK;
    if (c->opt->l2 != 0) st = l2(c, n, params, grads);
    if (st) return st;
    switch (c->opt->clip) {
    case NB_CLIP_VALUE:
    case NB_CLIP_NORM: return clip_each(c, n, params, grads);
    case NB_CLIP_GLOBAL_NORM: return clip_global(c, n, params, grads);
    default: return NB_OK;
    }
}
