/* nb_ddp_step (nabla/data_parallel.h says what it does): the sharded step
 * of ZeRO-1 (zero_optimizer.c), or the update of an eager optimiser run
 * bucket by bucket, each bucket's parameters as soon as its all-reduce
 * completes, while the later buckets' all-reduces still run: the largest
 * gradients come last in backward, and their all-reduce, which nothing in
 * backward is left to hide, hides behind the other buckets' updates, as
 * the static program's updates hide it (nb_data_parallel). It lives with
 * the optimisers, above src/dist, since it steps an eager optimiser. */
#include "nabla/data_parallel.h"
#include "nabla/device.h"
#include "nabla/eager.h"
#include "nabla/optimizer.h"
#include "../dist/ddp_internal.h"
#include "optim_internal.h"

/* nb_ddp_free's, through the pointer: dist sits below optim. */
static void release(nb_eager_optimizer *o) { nb_eager_optimizer_set_stepper(o, NULL); }

nb_status nb_ddp_set_optimizer(nb_ddp *d, nb_eager_optimizer *o)
{
    if (!d) return nb_error(NB_ERR_ARG, "ddp_set_optimizer: NULL ddp");
    if (d->zero) return nb_error(NB_ERR_STATE, "ddp_set_optimizer: the optimizer is sharded (nb_ddp_shard_optimizer)");
    if (d->deferred)
        return nb_error(NB_ERR_STATE, "ddp_set_optimizer: a step is under way (nb_ddp_backward without nb_ddp_step)");
    if (o && nb_eager_optimizer_options(o)->clip == NB_CLIP_GLOBAL_NORM)
        return nb_error(NB_ERR_UNSUPPORTED,
                        "ddp_set_optimizer: clipping by global norm needs every gradient before any update; step "
                        "with nb_eager_optimizer_step after nb_ddp_backward instead");
    if (o && nb_eager_optimizer_stepper(o) && nb_eager_optimizer_stepper(o) != d)
        return nb_error(NB_ERR_STATE, "ddp_set_optimizer: another nb_ddp steps this optimizer");
    if (d->step_opt) nb_eager_optimizer_set_stepper(d->step_opt, NULL);
    if (o) nb_eager_optimizer_set_stepper(o, d);
    d->step_opt = o;
    d->step_opt_release = release;
    return NB_OK;
}

/* Bucket by bucket, in the order they started: wait, then update. */
static nb_status bucket_step(nb_ddp *d)
{
    if (!d->deferred) return nb_error(NB_ERR_STATE, "ddp_step: no nb_ddp_backward since the last step");
    int *idx = nb_malloc((size_t)(d->n_params > 0 ? d->n_params : 1) * sizeof *idx);
    if (!idx) {
        nb_status st = nb_error(NB_ERR_NOMEM, "ddp_step: out of memory");
        nb_ddp_finish(d, 0); /* the other ranks are in the all-reduces */
        return st;
    }
    nb_status st = NB_OK;
    int done = 0; /* buckets finished */
    while (done < d->n_buckets && !st) {
        if ((st = nb_ddp_finish_bucket(d, done))) break;
        const bucket *bk = &d->buckets[done++];
        for (int j = 0; j < bk->count; j++) idx[j] = d->order[bk->first + j];
        st = nb_eager_optimizer_update(d->step_opt, d->b, bk->count, idx, done == d->n_buckets);
        nb_comm_progress(); /* the next buckets' all-reduces, between updates */
    }
    /* After a failure every rank still completes the all-reduces. */
    nb_status fin = nb_ddp_finish(d, done);
    nb_free(idx);
    if (st) return nb_error_context(st, "ddp_step on rank %d", nb_comm_rank(d->comm));
    return fin;
}

nb_status nb_ddp_step(nb_ddp *d)
{
    if (!d) return nb_error(NB_ERR_ARG, "ddp_step: NULL ddp");
    if (d->zero) return nb_zero_step(d);
    if (d->step_opt) return bucket_step(d);
    return nb_error(NB_ERR_STATE,
                    "ddp_step: the ddp has no optimizer (nb_ddp_set_optimizer, or nb_ddp_shard_optimizer for ZeRO-1)");
}
