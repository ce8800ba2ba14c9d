/* ZeRO stage 1 for nb_ddp (nabla/data_parallel.h says what it does). It
 * lives with the optimisers, above src/dist, since it steps an eager
 * optimiser; nb_ddp frees it through the pointer it is given. The
 * rank's shard of the flat parameter vector is one parameter of a private
 * eager builder, stepped by an ordinary eager optimiser, so the update,
 * schedule and state are the unsharded optimiser's, on 1/N of the values.
 * After the update the flat gradient buffer, no longer needed, carries the
 * parameters for the all-gather. */
#include <string.h>
#include "nabla/device.h"
#include "nabla/eager.h"
#include "nabla/init.h"
#include "nabla/optimizer.h"
#include "../dist/ddp_internal.h"
#include "optim_internal.h"

struct nb_zero {
    nb_eager_optimizer *opt;
    nb_builder *shard_b;     /* holds one parameter: the shard */
    nb_tensor *shard, *grad; /* its values (the builder's) and averaged gradient */
    nb_comm_request **reqs;  /* one broadcast per rank */
    int64_t total, begin, end;
    nb_dtype dtype;
    int64_t backward_seen; /* d->stats.steps at the last nb_ddp_step */
};

static void zero_free(nb_zero *z)
{
    if (!z) return;
    nb_eager_optimizer_free(z->opt);
    nb_builder_free(z->shard_b);
    nb_tensor_release(z->grad);
    nb_free(z->reqs);
    nb_free(z);
}

/* Where rank r's shard of n values begins. */
static int64_t shard_begin(int64_t n, int r, int size) { return n * r / size; }

/* Copies values [begin, end) of the flat parameter vector between the
 * parameters and buf (buf holds value `begin` first): into the parameters
 * when `to_params`, else out of them. */
static void copy_params(nb_ddp *d, int64_t begin, int64_t end, char *buf, bool to_params)
{
    size_t esize = nb_dtype_size(d->zero->dtype);
    int64_t at = 0;
    for (int j = 0; j < d->n_params && at < end; j++) {
        nb_tensor *p = d->params[d->order[j]];
        int64_t n = nb_tensor_numel(p), lo = begin > at ? begin : at, hi = end < at + n ? end : at + n;
        if (lo < hi) {
            char *pv = (char *)nb_tensor_data(p) + (size_t)(lo - at) * esize, *bv = buf + (size_t)(lo - begin) * esize;
            size_t bytes = (size_t)(hi - lo) * esize;
            if (to_params) {
                memcpy(pv, bv, bytes);
                p->storage->version++;
            } else memcpy(bv, pv, bytes);
        }
        at += n;
    }
}

static nb_status check_model(const nb_ddp *d, const nb_optimizer *opt, int64_t *total)
{
    if (opt->clip == NB_CLIP_NORM || opt->clip == NB_CLIP_GLOBAL_NORM)
        return nb_error(NB_ERR_UNSUPPORTED,
                        "ddp_shard_optimizer: clipping by %s needs whole gradients; ZeRO-1 updates "
                        "shards (clip by value, or use nb_eager_optimizer)",
                        opt->clip == NB_CLIP_NORM ? "norm" : "global norm");
    for (int i = 0; i < d->n_params; i++) {
        const nb_tensor *p = d->params[i];
        const char *name = nb_eager_param_name(d->b, i);
        if (p->dtype != d->params[0]->dtype)
            return nb_error(NB_ERR_DTYPE,
                            "ddp_shard_optimizer: parameter '%s' is %s but '%s' is %s; ZeRO-1 needs one dtype", name,
                            nb_dtype_name(p->dtype), nb_eager_param_name(d->b, 0), nb_dtype_name(d->params[0]->dtype));
        if (!nb_tensor_requires_grad(p))
            return nb_error(NB_ERR_ARG, "ddp_shard_optimizer: '%s' does not require grad; ZeRO-1 would update it",
                            name);
        *total += nb_tensor_numel(p);
    }
    int size = nb_comm_size(d->comm);
    if (*total < size)
        return nb_error(NB_ERR_ARG, "ddp_shard_optimizer: %lld parameter values cannot be shared by %d ranks",
                        (long long)*total, size);
    return NB_OK;
}

nb_status nb_ddp_shard_optimizer(nb_ddp *d, const nb_optimizer *opt)
{
    if (!d || !opt) return nb_error(NB_ERR_ARG, "ddp_shard_optimizer: NULL ddp or optimizer");
    if (d->zero) return nb_error(NB_ERR_STATE, "ddp_shard_optimizer: the optimizer is sharded already");
    if (d->step_opt)
        return nb_error(NB_ERR_STATE,
                        "ddp_shard_optimizer: the ddp steps an optimizer of its own (nb_ddp_set_optimizer)");
    int64_t total = 0;
    nb_status st = check_model(d, opt, &total);
    if (st) return st;
    nb_zero *z = nb_calloc(1, sizeof *z);
    if (!z) return nb_error(NB_ERR_NOMEM, "ddp_shard_optimizer: out of memory");
    int rank = nb_comm_rank(d->comm), size = nb_comm_size(d->comm);
    z->total = total;
    z->begin = shard_begin(total, rank, size);
    z->end = shard_begin(total, rank + 1, size);
    z->dtype = d->params[0]->dtype;
    z->backward_seen = d->stats.steps;
    const int64_t len = z->end - z->begin;
    if (!(z->reqs = nb_calloc((size_t)size, sizeof *z->reqs)))
        st = nb_error(NB_ERR_NOMEM, "ddp_shard_optimizer: out of memory");
    if (!st) st = nb_eager_optimizer_new(&z->opt, opt);
    if (!st) st = nb_builder_new_eager(&z->shard_b);
    if (!st) {
        nb_param(z->shard_b, "zero_shard", z->dtype, 1, &len, nb_init_zeros());
        if ((st = nb_builder_status(z->shard_b)))
            st = nb_error(st, "ddp_shard_optimizer: %s", nb_builder_error(z->shard_b));
    }
    if (!st) {
        z->shard = nb_eager_param_at(z->shard_b, 0);
        st = nb_tensor_new(&z->grad, z->dtype, 1, &len);
    }
    if (st) {
        zero_free(z);
        return st;
    }
    d->zero = z;
    d->zero_free = zero_free;
    d->shard_begin = z->begin;
    d->shard_end = z->end;
    d->stats.shard_numel = len;
    return NB_OK;
}

/* Every rank's shard, from d->flat, to every rank: one broadcast each. */
static nb_status all_gather(nb_ddp *d, nb_zero *z)
{
    int size = nb_comm_size(d->comm);
    size_t esize = nb_dtype_size(z->dtype);
    nb_status st = NB_OK;
    for (int r = 0; r < size; r++) z->reqs[r] = NULL;
    for (int r = 0; r < size && !st; r++) {
        int64_t b = shard_begin(z->total, r, size), e = shard_begin(z->total, r + 1, size);
        st = nb_comm_broadcast_buffer(d->comm, d->flat + (size_t)b * esize, e - b, z->dtype, r, &z->reqs[r]);
    }
    for (int r = 0; r < size; r++) {
        nb_status w = nb_comm_finish(z->reqs[r]);
        z->reqs[r] = NULL;
        if (!st) st = w;
    }
    return st;
}

nb_status nb_zero_step(nb_ddp *d)
{
    nb_zero *z = d->zero;
    if (d->stats.steps == z->backward_seen)
        return nb_error(NB_ERR_STATE, "ddp_step: no nb_ddp_backward since the last step");
    z->backward_seen = d->stats.steps;
    size_t esize = nb_dtype_size(z->dtype);
    /* the buckets hold the average (nb_ddp_backward seeds with 1/N) */
    memcpy(nb_tensor_data(z->grad), d->flat + (size_t)z->begin * esize, (size_t)(z->end - z->begin) * esize);
    copy_params(d, z->begin, z->end, nb_tensor_data(z->shard), false);
    nb_status st = nb_tensor_set_grad(z->shard, z->grad);
    if (!st) st = nb_eager_optimizer_step(z->opt, z->shard_b);
    /* Every rank joins the gather, also after a failed update, so that none
     * is left waiting; the failure is still reported. */
    memcpy(d->flat + (size_t)z->begin * esize, nb_tensor_data(z->shard), (size_t)(z->end - z->begin) * esize);
    double t0 = nb_comm_clock();
    nb_status gst = all_gather(d, z);
    d->stats.gather_seconds += nb_comm_clock() - t0;
    if (!st && !gst) copy_params(d, 0, z->total, d->flat, true);
    nb_tensor_set_grad(z->shard, NULL);
    d->stats.optimizer_state_bytes = nb_eager_optimizer_state_bytes(z->opt);
    if (st) return nb_error_context(st, "ddp_step on rank %d", nb_comm_rank(d->comm));
    return gst;
}
