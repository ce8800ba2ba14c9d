/* Batching rules of the neural-network ops: softmax and the losses along a
 * shifted axis, layer_norm with its normalised dims shifted, embedding with
 * batched ids, and conv2d/pool2d with the batch folded into N. */
#include <string.h>
#include "nabla/ops.h"
#include "batch_rules.h"

nb_status nb_batch_softmax(nb_builder *b, nb_batch_ctx *c)
{
    int r = c->x_info[0].ndim;
    if (r == 0) return nb_batch_loop(b, c);
    nb_value x = nb_batch_front(b, c, 0);
    int axis = (int)nb_batch_axis(nb_batch_attr(c, "axis")->i, r) + 1;
    nb_status st = nb_batch_reemit(b, c, &x, 1, (nb_attr[]){NB_ATTR_INT("axis", axis)}, c->n_out, c->y);
    nb_batch_set_all(c, 0);
    return st;
}

/* cross_entropy (classes last), softmax_with_cross_entropy and its grad
 * (axis): every input batch first, unbatched ones expanded. */
nb_status nb_batch_cross_entropy(nb_builder *b, nb_batch_ctx *c)
{
    nb_value in[4];
    int r = c->x_info[0].ndim;
    if (c->n_in > 4 || r == 0) return nb_batch_loop(b, c);
    for (int i = 0; i < c->n_in; i++) in[i] = nb_batch_materialize(b, c, i);
    const nb_attr_value *a = nb_batch_attr(c, "axis");
    nb_attr set = NB_ATTR_INT("axis", a->type == NB_ATTR_INT ? nb_batch_axis(a->i, r) + 1 : 0);
    nb_status st = nb_batch_reemit(b, c, in, a->type == NB_ATTR_INT, &set, c->n_out, c->y);
    nb_batch_set_all(c, 0);
    return st;
}

/* mse_loss, bce_with_logits: unreduced, then each example reduced alone. */
nb_status nb_batch_pointwise_loss(nb_builder *b, nb_batch_ctx *c)
{
    nb_value in[2] = {nb_batch_materialize(b, c, 0), nb_batch_materialize(b, c, 1)};
    const char *red = nb_batch_attr(c, "reduction")->s;
    nb_value out;
    nb_batch_reemit(b, c, in, 1, (nb_attr[]){NB_ATTR_STRING("reduction", "none")}, 1, &out);
    int r = c->x_info[0].ndim;
    int64_t axes[NB_MAX_DIMS];
    for (int k = 0; k < r; k++) axes[k] = k + 1;
    if (r > 0 && red && !strcmp(red, "mean")) out = nb_reduce_mean(b, out, r, axes, false);
    else if (r > 0 && red && !strcmp(red, "sum")) out = nb_reduce_sum(b, out, r, axes, false);
    c->y[0] = out;
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}

/* Shared Scale and Bias only: per-example ones take the loop. */
nb_status nb_batch_layer_norm(nb_builder *b, nb_batch_ctx *c)
{
    for (int i = 1; i < c->n_in; i++)
        if (nb_batch_is(c, i)) return nb_batch_loop(b, c);
    int r = c->x_info[0].ndim;
    nb_value in[3] = {nb_batch_front(b, c, 0), c->n_in > 1 ? c->x[1] : NB_NONE, c->n_in > 2 ? c->x[2] : NB_NONE};
    int64_t axis = nb_batch_axis(nb_batch_attr(c, "begin_norm_axis")->i, r) + 1;
    nb_batch_reemit(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("begin_norm_axis", axis)}, c->n_out, c->y);
    /* Mean and Variance are per row: [B * rows] back to [B, rows...]. */
    for (int k = 1; k < c->n_out; k++) {
        const nb_var_info *o = &c->y_info[k];
        int64_t shape[NB_MAX_DIMS] = {-1};
        for (int d = 0; d < o->ndim && d + 1 < NB_MAX_DIMS; d++) shape[d + 1] = o->shape[d];
        if (!nb_is_none(c->y[k])) c->y[k] = nb_reshape(b, c->y[k], o->ndim + 1, shape);
    }
    nb_batch_set_all(c, 0);
    return nb_builder_status(b);
}

/* layer_norm_grad with a shared Scale: DX from the op with the batch as one
 * more row dim; DScale and DBias, which the op sums over every row, summed
 * over each example's rows instead, from DY and X normalised (by statistics
 * recomputed from X, as the op does). */
nb_status nb_batch_layer_norm_grad(nb_builder *b, nb_batch_ctx *c)
{
    const nb_var_info *x = &c->x_info[0];
    int r = x->ndim, axis = (int)nb_batch_axis(nb_batch_attr(c, "begin_norm_axis")->i, r);
    if (nb_batch_is(c, 1) || r + 1 > NB_MAX_DIMS || c->n_out > 3) return nb_batch_loop(b, c);
    nb_value xs = nb_batch_materialize(b, c, 0), dy = nb_batch_materialize(b, c, 4);
    nb_value mean = nb_batch_materialize(b, c, 2), var = nb_batch_materialize(b, c, 3);
    const int64_t flat[1] = {-1};
    nb_value in[5] = {xs, c->x[1], nb_reshape(b, mean, 1, flat), nb_reshape(b, var, 1, flat), dy}, out[3];
    nb_batch_reemit(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("begin_norm_axis", axis + 1)}, c->n_out, out);
    c->y[0] = out[0];
    int64_t axes[NB_MAX_DIMS], norm[NB_MAX_DIMS];
    for (int k = 0; k < axis; k++) axes[k] = k + 1;
    for (int k = axis; k < r; k++) norm[k - axis] = k + 1;
    nb_value xhat = NB_NONE;
    for (int k = 1; k < c->n_out; k++) {
        if (nb_is_none(out[k])) {
            c->y[k] = NB_NONE;
            continue;
        }
        nb_value g = dy;
        if (k == 1) {
            if (nb_is_none(xhat)) {
                nb_value d = nb_sub(b, xs, nb_reduce_mean(b, xs, r - axis, norm, true));
                nb_value v = nb_reduce_mean(b, nb_square(b, d), r - axis, norm, true);
                xhat = nb_mul(b, d, nb_rsqrt(b, nb_scale(b, v, 1, nb_batch_attr(c, "epsilon")->f)));
            }
            g = nb_mul(b, dy, xhat);
        }
        if (axis > 0) g = nb_reduce_sum(b, g, axis, axes, false);
        const nb_var_info *o = &c->y_info[k];
        int64_t shape[NB_MAX_DIMS] = {0};
        for (int d = 0; d < o->ndim; d++) shape[d + 1] = o->shape[d];
        c->y[k] = nb_reshape(b, g, o->ndim + 1, shape);
    }
    nb_batch_set_all(c, 0);
    return nb_builder_status(b);
}

/* A shared table looked up by batched ids: Out is Ids' shape plus the row,
 * so the batch dim stays where it is. */
nb_status nb_batch_embedding(nb_builder *b, nb_batch_ctx *c)
{
    if (nb_batch_is(c, 0)) return nb_batch_loop(b, c);
    nb_status st = nb_batch_reemit(b, c, c->x, 0, NULL, 1, c->y);
    c->y_bdim[0] = c->x_bdim[1];
    return st;
}

/* embedding_grad(Ids, DOut, W): each example's table of row gradients,
 * one_hot(Ids)^T @ DOut as one batched matmul ([B, V, N] @ [B, N, D]). A
 * padding row (padding_idx) takes the loop. */
nb_status nb_batch_embedding_grad(nb_builder *b, nb_batch_ctx *c)
{
    const nb_var_info *w = &c->x_info[2];
    if (nb_batch_attr(c, "padding_idx")->i >= 0 || w->ndim != 2 || w->shape[0] < 0) return nb_batch_loop(b, c);
    nb_value ids = nb_batch_materialize(b, c, 0), dout = nb_batch_materialize(b, c, 1);
    nb_value oh = nb_emit1(b, "one_hot", NB_VALUES(ids),
                           NB_ATTRS(NB_ATTR_INT("depth", w->shape[0]), NB_ATTR_INT("dtype", w->dtype)));
    oh = nb_reshape(b, oh, 3, (const int64_t[]){0, -1, w->shape[0]});
    dout = nb_reshape(b, dout, 3, (const int64_t[]){0, -1, w->shape[1]});
    c->y[0] = nb_matmul(b, oh, dout, NB_TRANSPOSE_X);
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}

/* conv2d and conv2d_grad's DInput (shared Filter and Bias), pool2d and
 * pool2d_grad: the examples' [N, C, H, W] inputs (DOutput's too) as one
 * [B*N, C, H, W] batch, unfolded after. */
nb_status nb_batch_fold(nb_builder *b, nb_batch_ctx *c)
{
    bool conv = c->def->inputs[1].name && !strcmp(c->def->inputs[1].name, "Filter");
    bool bias = c->n_in > 2 && !strcmp(c->def->inputs[2].name, "Bias");
    if (conv && (nb_batch_is(c, 1) || (bias && nb_batch_is(c, 2)) || c->n_out != 1)) return nb_batch_loop(b, c);
    if (c->x_info[0].ndim != 4 || c->n_in > 4) return nb_batch_loop(b, c);
    nb_value in[4];
    for (int i = 0; i < c->n_in; i++) {
        in[i] = c->x[i];
        if (nb_is_none(in[i]) || (conv && (i == 1 || !strcmp(c->def->inputs[i].name, "Bias")))) continue;
        const nb_var_info *xi = &c->x_info[i];
        int64_t shape[NB_MAX_DIMS] = {-1};
        for (int k = 1; k < xi->ndim; k++) shape[k] = xi->shape[k];
        in[i] = nb_reshape(b, nb_batch_materialize(b, c, i), xi->ndim, shape);
    }
    nb_value out;
    nb_batch_reemit(b, c, in, 0, NULL, 1, &out);
    const nb_var_info *o = &c->y_info[0];
    int64_t shape[NB_MAX_DIMS] = {c->batch < 0 ? -1 : c->batch};
    for (int k = 0; k < o->ndim; k++) shape[k + 1] = o->shape[k];
    c->y[0] = nb_reshape(b, out, o->ndim + 1, shape);
    c->y_bdim[0] = 0;
    return nb_builder_status(b);
}
