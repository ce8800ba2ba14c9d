/* Batching rule of conv2d and conv2d_grad. With a shared Filter and only
 * DInput (or Output) wanted, the batch folds into N (nb_batch_fold). Else,
 * as functorch does, the examples become groups: Input [B, N, C, H, W] runs
 * as [N, B*C, H, W], the Filter [B, O, C/g, kh, kw] as [B*O, C/g, kh, kw]
 * (a shared one repeated), DOutput as [N, B*O, ...], with groups B*g; so a
 * batched Filter, and per-example DFilter and DBias, come from one op. */
#include <string.h>
#include "nabla/ops.h"
#include "batch_rules.h"

/* [B, N, X, h, w] <-> [N, B*X, h, w]. */
static nb_value to_groups(nb_builder *b, nb_value v)
{
    nb_var_info i = nb_value_info(b, v);
    int64_t shape[4] = {i.shape[1], -1, i.shape[3], i.shape[4]};
    return nb_reshape(b, nb_transpose(b, v, 5, (const int64_t[]){1, 0, 2, 3, 4}), 4, shape);
}

static nb_value from_groups(nb_builder *b, nb_value v, int64_t batch)
{
    nb_var_info i = nb_value_info(b, v);
    int64_t shape[5] = {i.shape[0], batch, -1, i.shape[2], i.shape[3]};
    return nb_transpose(b, nb_reshape(b, v, 5, shape), 5, (const int64_t[]){1, 0, 2, 3, 4});
}

/* [B, d0, ...] <-> [B*d0, ...]. */
static nb_value merge_front(nb_builder *b, nb_value v)
{
    nb_var_info i = nb_value_info(b, v);
    int64_t shape[NB_MAX_DIMS] = {-1};
    for (int k = 2; k < i.ndim; k++) shape[k - 1] = i.shape[k];
    return nb_reshape(b, v, i.ndim - 1, shape);
}

static nb_value split_front(nb_builder *b, nb_value v, int64_t batch)
{
    nb_var_info i = nb_value_info(b, v);
    int64_t shape[NB_MAX_DIMS] = {batch, -1};
    for (int k = 1; k < i.ndim; k++) shape[k + 1] = i.shape[k];
    return nb_reshape(b, v, i.ndim + 1, shape);
}

nb_status nb_batch_conv(nb_builder *b, nb_batch_ctx *c)
{
    bool grad = !strcmp(c->def->inputs[2].name, "DOutput");
    bool shared_filter = !nb_batch_is(c, 1) && !(!grad && nb_batch_is(c, 2));
    if (shared_filter && c->n_out == 1) return nb_batch_fold(b, c);
    if (c->batch < 0 || c->x_info[0].ndim != 4 || c->n_in > 3) return nb_batch_loop(b, c);
    nb_value in[3];
    for (int i = 0; i < c->n_in; i++) {
        in[i] = c->x[i];
        if (nb_is_none(in[i])) continue;
        nb_value v = nb_batch_materialize(b, c, i);
        const char *slot = c->def->inputs[i].name;
        in[i] = !strcmp(slot, "Input") || !strcmp(slot, "DOutput") ? to_groups(b, v) : merge_front(b, v);
    }
    int64_t groups = nb_batch_attr(c, "groups")->i * c->batch;
    nb_value out[3];
    nb_batch_reemit(b, c, in, 1, (nb_attr[]){NB_ATTR_INT("groups", groups)}, c->n_out, out);
    for (int k = 0; k < c->n_out; k++) {
        const char *slot = c->def->outputs[k].name;
        c->y[k] = nb_is_none(out[k])                             ? NB_NONE
            : !strcmp(slot, "Output") || !strcmp(slot, "DInput") ? from_groups(b, out[k], c->batch)
                                                                 : split_front(b, out[k], c->batch);
    }
    nb_batch_set_all(c, 0);
    return nb_builder_status(b);
}
