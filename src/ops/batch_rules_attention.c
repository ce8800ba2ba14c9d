/* Batching rule of the attention ops: Q [..., T, D], K and V take any
 * leading dims, so the batch becomes one more: Q, K, V and the per-row
 * values (LSE, DOut, Delta) batch first (the shared ones expanded), a
 * batched Mask batch first and padded to the scores' rank (a shared one
 * broadcasts as it is), and the random stream Key (int64 [2]) stays one for
 * the whole batch: the dropout of the batched op draws every example's
 * weights anew. Outputs whose shape does not hold the batch (Key, the causal
 * bias [T, S]) are the same for every example. */
#include <string.h>
#include "batch_rules.h"

nb_status nb_batch_attention(nb_builder *b, nb_batch_ctx *c)
{
    nb_value in[NB_MAX_SLOTS];
    if (c->n_in > NB_MAX_SLOTS || c->x_info[0].ndim < 2) return nb_batch_loop(b, c);
    int score_rank = c->x_info[0].ndim + (nb_batch_attr(c, "heads")->i > 0);
    for (int i = 0; i < c->n_in; i++) {
        const char *slot = c->def->inputs[i].name;
        in[i] = c->x[i];
        if (nb_is_none(in[i])) continue;
        if (!strcmp(slot, "Key")) {
            if (nb_batch_is(c, i)) return nb_batch_loop(b, c); /* a stream per example */
        } else if (!strcmp(slot, "Mask")) in[i] = nb_batch_front_padded(b, c, i, score_rank);
        else in[i] = nb_batch_materialize(b, c, i);
    }
    nb_status st = nb_batch_reemit(b, c, in, 0, NULL, c->n_out, c->y);
    for (int k = 0; k < c->n_out && !st; k++)
        c->y_bdim[k] = !nb_is_none(c->y[k]) && nb_value_info(b, c->y[k]).ndim == c->y_info[k].ndim + 1 ? 0 : -1;
    return st;
}
