/* Batching rules of elementwise ops: a one-input op runs on the physical
 * value as it is (its batch dim stays where it was); broadcasting ops get
 * their batched inputs' batch dims first and size-1 dims padded after them,
 * so that NumPy broadcasting lines the examples up; ops that want inputs of
 * one shape get the unbatched ones expanded along the batch. */
#include "batch_rules.h"

nb_status nb_batch_unary(nb_builder *b, nb_batch_ctx *c)
{
    nb_status st = nb_batch_reemit(b, c, c->x, 0, NULL, c->n_out, c->y);
    nb_batch_set_all(c, c->x_bdim[0]);
    return st;
}

nb_status nb_batch_broadcast(nb_builder *b, nb_batch_ctx *c)
{
    int rank = 0;
    for (int i = 0; i < c->n_in; i++)
        if (c->x_info[i].ndim > rank) rank = c->x_info[i].ndim;
    /* Batched inputs of the full rank with their batch dims in one place d,
     * and unbatched ones that NumPy aligns right of d: as they are. */
    int d = -1;
    bool stay = true;
    for (int i = 0; i < c->n_in && stay; i++)
        if (nb_batch_is(c, i)) {
            stay = (d < 0 || c->x_bdim[i] == d) && c->x_info[i].ndim == rank;
            d = c->x_bdim[i];
        }
    for (int i = 0; i < c->n_in && stay; i++)
        if (!nb_batch_is(c, i) && !nb_is_none(c->x[i])) stay = c->x_info[i].ndim <= rank - d;
    if (stay && d >= 0) {
        nb_status st = nb_batch_reemit(b, c, c->x, 0, NULL, c->n_out, c->y);
        nb_batch_set_all(c, d);
        return st;
    }
    nb_value in[NB_MAX_SLOTS];
    if (c->n_in > NB_MAX_SLOTS) return nb_batch_loop(b, c);
    for (int i = 0; i < c->n_in; i++) in[i] = nb_batch_front_padded(b, c, i, rank);
    nb_status st = nb_batch_reemit(b, c, in, 0, NULL, c->n_out, c->y);
    nb_batch_set_all(c, 0);
    return st;
}

/* Ops whose output k is input k transformed alone, across processes
 * (c_allreduce_sum, c_broadcast): the stacked examples go through at once. */
nb_status nb_batch_each(nb_builder *b, nb_batch_ctx *c)
{
    nb_status st = nb_batch_reemit(b, c, c->x, 0, NULL, c->n_out, c->y);
    for (int k = 0; k < c->n_out; k++) c->y_bdim[k] = k < c->n_in ? c->x_bdim[k] : -1;
    return st;
}

nb_status nb_batch_same_shape(nb_builder *b, nb_batch_ctx *c)
{
    nb_value stack_in[64], *in = stack_in;
    if (c->n_in > 64) return nb_batch_loop(b, c);
    for (int i = 0; i < c->n_in; i++) in[i] = nb_batch_materialize(b, c, i);
    nb_status st = nb_batch_reemit(b, c, in, 0, NULL, c->n_out, c->y);
    nb_batch_set_all(c, 0);
    return st;
}
