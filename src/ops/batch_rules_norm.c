/* Batching rule of batch_norm and batch_norm_grad: each example's
 * statistics are its own, so the batch becomes part of the channels. X
 * [B, N, C, ...] is seen as [N, B*C, ...] and the per-channel values ([C]:
 * Scale, Bias, running and saved statistics) as [B*C]; the outputs come
 * back as [B, N, C, ...] and [B, C]. */
#include <string.h>
#include "nabla/ops.h"
#include "batch_rules.h"

/* Input slots read per sample ([N, C, ...]); the others are per channel. */
static bool per_sample(const char *slot) { return !strcmp(slot, "X") || !strcmp(slot, "DY"); }
static bool per_sample_out(const char *slot) { return !strcmp(slot, "Y") || !strcmp(slot, "DX"); }

nb_status nb_batch_batch_norm(nb_builder *b, nb_batch_ctx *c)
{
    const nb_var_info *x = &c->x_info[0];
    if (x->ndim < 2 || x->ndim + 1 > NB_MAX_DIMS || c->n_in > NB_MAX_SLOTS) return nb_batch_loop(b, c);
    int64_t bsz = c->batch, C = x->shape[1];
    int64_t perm[NB_MAX_DIMS], shape[NB_MAX_DIMS];
    for (int k = 0; k <= x->ndim; k++) perm[k] = k < 2 ? 1 - k : k;
    nb_value in[NB_MAX_SLOTS];
    for (int i = 0; i < c->n_in; i++) {
        in[i] = c->x[i];
        if (nb_is_none(in[i])) continue;
        nb_value v = nb_batch_materialize(b, c, i);
        if (per_sample(c->def->inputs[i].name)) { /* [B, N, C, rest] -> [N, B*C, rest] */
            shape[0] = 0, shape[1] = -1;
            for (int k = 2; k < x->ndim; k++) shape[k] = x->shape[k];
            in[i] = nb_reshape(b, nb_transpose(b, v, x->ndim + 1, perm), x->ndim, shape);
        } else in[i] = nb_reshape(b, v, 1, (const int64_t[]){-1});
    }
    nb_value out[NB_MAX_SLOTS];
    if (c->n_out > NB_MAX_SLOTS) return nb_batch_loop(b, c);
    nb_batch_reemit(b, c, in, 0, NULL, c->n_out, out);
    for (int k = 0; k < c->n_out; k++) {
        c->y_bdim[k] = nb_is_none(out[k]) ? -1 : 0;
        if (nb_is_none(out[k])) {
            c->y[k] = out[k];
        } else if (per_sample_out(c->def->outputs[k].name)) { /* [N, B*C, rest] -> [B, N, C, rest] */
            shape[0] = 0, shape[1] = bsz, shape[2] = C;
            for (int d = 2; d < x->ndim; d++) shape[d + 1] = x->shape[d];
            c->y[k] = nb_transpose(b, nb_reshape(b, out[k], x->ndim + 1, shape), x->ndim + 1, perm);
        } else c->y[k] = nb_reshape(b, out[k], 2, (const int64_t[]){bsz, C});
    }
    return nb_builder_status(b);
}
