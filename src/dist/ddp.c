/* nb_ddp: PyTorch's DistributedDataParallel for the eager tape
 * (nabla/data_parallel.h says what it does). A post-accumulate hook on each
 * parameter counts down its bucket; a bucket whose count reaches zero is
 * packed and its all-reduce started, in bucket order, while the backward
 * pass goes on. The requests are tracked (src/comm/comm_internal.h), so
 * that MPI moves them on at every hook and inside the backward's GEMMs. */
#include <string.h>
#include "nabla/data_parallel.h"
#include "nabla/device.h"
#include "nabla/eager.h"
#include "../comm/comm_internal.h"
#include "../core/tensor_internal.h"
#include "../program/program_internal.h"
#include "dist_internal.h"

#include "ddp_internal.h"

/* ---- buckets during a step ------------------------------------------------------------ */

/* Whether the bucket's all-reduce reads the gradients where they lie (the
 * shared-memory transport) rather than packed into the bucket's buffer. */
static bool by_parts(const nb_ddp *d) { return d->comm->reads_parts; }

/* Whether it also writes the sums into new gradients, with no bucket
 * between: two copies of every gradient fewer. ZeRO instead has the sums
 * of its shard alone written into the buckets, which it reads them from: a
 * reduce-scatter. */
static bool in_place(const nb_ddp *d) { return by_parts(d) && !d->zero; }

/* Whether this is the only rank: its gradients are the averages already,
 * and a bucket needs no all-reduce and no copy (ZeRO still reads its
 * shard from the buffers). */
static bool alone(const nb_ddp *d) { return d->comm->size == 1 && !d->zero; }

/* A gradient the sums can be read from, or written over, where it lies. */
static bool usable_grad(const nb_tensor *p, const nb_tensor *g)
{
    return g && g->dtype == p->dtype && nb_tensor_numel(g) == nb_tensor_numel(p) && nb_tensor_is_contiguous(g);
}

/* Gradient j of the bucket packed at `at` (zeros for a parameter without
 * one). */
static nb_status pack_one(nb_ddp *d, bucket *bk, int j, char *at)
{
    nb_tensor *p = d->params[d->order[bk->first + j]], *g = nb_tensor_grad(p);
    if (g) return nb_comm_pack(g, at);
    memset(at, 0, (size_t)nb_tensor_numel(p) * nb_dtype_size(bk->dtype));
    return NB_OK;
}

/* The bucket's parts for nb_comm_allreduce_parts: each gradient as it
 * lies (or packed into the buffer, where it is not one contiguous tensor
 * of the parameter's dtype), and a new gradient for its sum (ZeRO: its
 * place in the buffer). */
static nb_status gather_parts(nb_ddp *d, bucket *bk)
{
    char *at = bk->buf;
    for (int j = 0; j < bk->count; j++) {
        int k = bk->first + j;
        nb_tensor *p = d->params[d->order[k]], *g = nb_tensor_grad(p);
        int64_t n = nb_tensor_numel(p);
        nb_status st = NB_OK;
        if (d->zero) d->dst[k] = at;
        else if ((st = nb_tensor_new_uninit(&d->fresh[k], p->dtype, p->ndim, p->shape))) return st;
        else d->dst[k] = nb_tensor_data(d->fresh[k]);
        d->counts[k] = n;
        if (usable_grad(p, g)) {
            d->held[k] = nb_tensor_retain(g); /* read until the all-reduce completes */
            d->src[k] = nb_tensor_data(g);
        } else {
            if ((st = pack_one(d, bk, j, at))) return st;
            d->src[k] = at;
        }
        at += (size_t)n * nb_dtype_size(bk->dtype);
    }
    return NB_OK;
}

/* Drops what gather_parts holds for the bucket. */
static void release_parts(nb_ddp *d, const bucket *bk)
{
    for (int k = bk->first; k < bk->first + bk->count; k++) {
        nb_tensor_release(d->held[k]);
        nb_tensor_release(d->fresh[k]);
        d->held[k] = d->fresh[k] = NULL;
    }
}

/* Starts the bucket's all-reduce: of its gradients where they lie, or of
 * them packed into its buffer. */
static nb_status start_bucket(nb_ddp *d, bucket *bk)
{
    size_t esize = nb_dtype_size(bk->dtype);
    nb_status st = NB_OK;
    if (alone(d)) { /* counted as an all-reduce, of nothing to move */
        bk->started = true;
        bk->t_start = nb_comm_clock();
        d->stats.allreduces++;
        d->stats.bytes += (double)bk->numel * (double)esize;
        bk->req = NULL;
        return NB_OK;
    }
    if (by_parts(d)) st = gather_parts(d, bk);
    else {
        char *at = bk->buf;
        for (int j = 0; j < bk->count && !st; j++) {
            st = pack_one(d, bk, j, at);
            at += (size_t)nb_tensor_numel(d->params[d->order[bk->first + j]]) * esize;
        }
    }
    if (st) return st;
    bk->started = true;
    bk->t_start = nb_comm_clock();
    d->stats.allreduces++;
    d->stats.bytes += (double)bk->numel * (double)esize;
    int k = bk->first;
    int64_t base = (int64_t)(bk->offset / esize); /* the bucket's first value in the flat vector */
    if (!by_parts(d)) st = nb_comm_allreduce_buffer(d->comm, bk->buf, bk->numel, bk->dtype, &bk->req);
    else if (d->zero)
        st = nb_comm_reduce_scatter_parts(d->comm, bk->count, d->src + k, d->dst + k, d->counts + k, bk->dtype,
                                          d->shard_begin - base, d->shard_end - base, &bk->req);
    else st = nb_comm_allreduce_parts(d->comm, bk->count, d->src + k, d->dst + k, d->counts + k, bk->dtype, &bk->req);
    nb_comm_track(bk->req);
    return st;
}

/* Starts every bucket from d->next on that is ready (all of them when
 * `all`), stopping at the first that is not: buckets start in order on
 * every rank. */
static nb_status start_ready(nb_ddp *d, bool all)
{
    nb_status st = NB_OK;
    while (!st && d->next < d->n_buckets && (all || d->buckets[d->next].pending == 0))
        st = start_bucket(d, &d->buckets[d->next++]);
    return st;
}

static nb_status on_grad_ready(nb_tensor *leaf, void *ctx)
{
    param_hook *h = ctx;
    nb_ddp *d = h->d;
    if (!d->active || d->failed) return NB_OK;
    bucket *bk = &d->buckets[d->bucket_of[h->param]];
    if (bk->pending > 0) bk->pending--;
    nb_status st = start_ready(d, false);
    nb_comm_progress();
    if (st) d->failed = st;
    return st;
}

/* Gives the bucket's parameters their sums as new gradients (in place:
 * the tensors the sums went to; else copies of the buffer's). */
static nb_status give_grads(nb_ddp *d, bucket *bk)
{
    nb_status st = NB_OK;
    if (alone(d)) { /* each keeps its own, made whole: zeros where missing, contiguous */
        for (int j = 0; j < bk->count && !st; j++) {
            nb_tensor *p = d->params[d->order[bk->first + j]], *g = nb_tensor_grad(p), *whole;
            if (usable_grad(p, g)) continue;
            if ((st = nb_tensor_new(&whole, p->dtype, p->ndim, p->shape))) break;
            if (g) st = nb_comm_pack(g, nb_tensor_data(whole));
            if (!st) st = nb_tensor_set_grad(p, whole);
            nb_tensor_release(whole);
        }
        return st;
    }
    if (in_place(d)) {
        for (int j = 0; j < bk->count && !st; j++)
            st = nb_tensor_set_grad(d->params[d->order[bk->first + j]], d->fresh[bk->first + j]);
        release_parts(d, bk);
        return st;
    }
    const char *at = bk->buf;
    size_t esize = nb_dtype_size(bk->dtype);
    for (int j = 0; j < bk->count && !st; j++) {
        nb_tensor *p = d->params[d->order[bk->first + j]], *g;
        int64_t n = nb_tensor_numel(p);
        if ((st = nb_tensor_new_uninit(&g, p->dtype, p->ndim, p->shape))) break;
        memcpy(nb_tensor_data(g), at, (size_t)n * esize);
        st = nb_tensor_set_grad(p, g);
        nb_tensor_release(g);
        at += (size_t)n * esize;
    }
    return st;
}

nb_status nb_ddp_finish_bucket(nb_ddp *d, int k)
{
    bucket *bk = &d->buckets[k];
    nb_comm_request *r = bk->req;
    bk->req = NULL;
    bk->finished = true;
    double t0 = nb_comm_clock(), done_at = nb_comm_done_at(r);
    nb_status st = nb_comm_finish(r);
    bk->t_done = done_at > 0 ? done_at : nb_comm_clock();
    d->stats.wait_seconds += nb_comm_clock() - t0;
    if (st) return st;
    /* Buckets finish in order: their open times merge into spans, so that
     * all-reduces running together count once. What ran before the
     * backward pass ended was hidden behind it, and in nb_ddp_step what
     * ran before this wait began, behind the earlier buckets' updates. */
    d->spans.cut = d->deferred ? t0 : d->t_backward_end;
    nb_comm_spans_add(&d->spans, bk->t_start, bk->t_done);
    if (k == d->n_buckets - 1) nb_comm_spans_flush(&d->spans);
    if (d->zero) return NB_OK; /* nb_ddp_step reads its shard from the buckets */
    return give_grads(d, bk);
}

nb_status nb_ddp_finish(nb_ddp *d, int from)
{
    nb_status st = start_ready(d, true);
    for (int k = from; k < d->n_buckets && !st; k++)
        if (!d->buckets[k].finished) st = nb_ddp_finish_bucket(d, k);
    if (st) nb_comm_spans_flush(&d->spans);
    /* After a failure, complete what was started before giving up. */
    for (int k = 0; k < d->n_buckets; k++) {
        nb_comm_request *r = d->buckets[k].req;
        d->buckets[k].req = NULL;
        if (r) nb_comm_wait(r);
        release_parts(d, &d->buckets[k]);
    }
    d->deferred = false;
    return st;
}

nb_status nb_ddp_backward(nb_ddp *d, nb_tensor *loss)
{
    if (!d || !loss) return nb_error(NB_ERR_ARG, "ddp_backward: NULL ddp or loss");
    if (d->deferred) { /* completed first, so that no rank is left in them */
        nb_status late = nb_ddp_finish(d, 0);
        return late ? nb_error_context(late, "ddp_backward on rank %d", nb_comm_rank(d->comm))
                    : nb_error(NB_ERR_STATE,
                               "ddp_backward: the last backward's nb_ddp_step did not come (its "
                               "all-reduces are complete now; step, or zero the gradients, and go on)");
    }
    for (int k = 0; k < d->n_buckets; k++) {
        bucket *bk = &d->buckets[k];
        bk->pending = bk->count;
        bk->started = bk->finished = false;
        bk->req = NULL;
    }
    /* Seeded with 1/N, the gradients all-reduce to their average (as the
     * static program scales its loss gradient): no pass over them after. */
    nb_tensor *seed = NULL;
    int size = nb_comm_size(d->comm);
    nb_status st = size > 1 ? nb_tensor_full(&seed, loss->dtype, loss->ndim, loss->shape, 1.0 / size) : NB_OK;
    d->next = 0;
    d->failed = NB_OK;
    d->active = true;
    d->spans = (nb_comm_spans){0, 0, -1, &d->stats.comm_seconds, &d->stats.overlap_seconds};
    double t0 = nb_comm_clock();
    if (!st) st = nb_backward(NB_TENSORS(loss), seed ? &seed : NULL, 0);
    nb_tensor_release(seed);
    d->t_backward_end = nb_comm_clock();
    d->active = false;
    d->stats.backward_seconds += d->t_backward_end - t0;
    d->stats.steps++;
    /* A failed backward on one rank leaves the others waiting for its
     * all-reduces: finishing them here (zeros where gradients are missing)
     * keeps every rank in step, and the failure is still reported. With an
     * optimiser of its own (nb_ddp_set_optimizer), nb_ddp_step finishes
     * them, bucket by bucket. */
    if (d->step_opt && !st && !d->failed) {
        st = start_ready(d, true);
        d->deferred = !st;
        if (!st) return NB_OK;
    }
    nb_status fin = nb_ddp_finish(d, 0);
    if (st) return nb_error_context(st, "ddp_backward on rank %d", nb_comm_rank(d->comm));
    if (d->failed) return d->failed;
    return fin;
}

/* ---- setting up ------------------------------------------------------------------------------ */

static uint64_t params_hash(nb_ddp *d)
{
    uint64_t h = NB_HASH_INIT;
    for (int i = 0; i < d->n_params; i++)
        h = nb_hash_param(h, nb_eager_param_name(d->b, i), d->params[i]->dtype, d->params[i]->ndim,
                          d->params[i]->shape);
    return h;
}

/* Lays the buckets out in d->flat, each at an offset aligned to its dtype. */
static nb_status place_buckets(nb_ddp *d)
{
    size_t at = 0;
    for (int k = 0; k < d->n_buckets; k++) {
        size_t esize = nb_dtype_size(d->buckets[k].dtype);
        at = (at + esize - 1) / esize * esize;
        d->buckets[k].offset = at;
        at += (size_t)d->buckets[k].numel * esize;
    }
    if (!(d->flat = nb_malloc(at ? at : 1)))
        return nb_error(NB_ERR_NOMEM, "ddp: out of memory for %zu bytes of gradient buckets", at);
    for (int k = 0; k < d->n_buckets; k++) d->buckets[k].buf = d->flat + d->buckets[k].offset;
    return NB_OK;
}

static nb_status plan(nb_ddp *d, size_t cap)
{
    int n = d->n_params;
    size_t *bytes = nb_calloc((size_t)n, sizeof *bytes);
    nb_dtype *dts = nb_calloc((size_t)n, sizeof *dts);
    int *in_order = nb_calloc((size_t)n, sizeof *in_order);
    nb_status st = bytes && dts && in_order ? NB_OK : nb_error(NB_ERR_NOMEM, "ddp: out of memory");
    if (!st) {
        size_t total = 0, first, rest;
        for (int j = 0; j < n; j++) {
            d->order[j] = n - 1 - j;
            nb_tensor *p = d->params[d->order[j]];
            bytes[j] = (size_t)nb_tensor_numel(p) * nb_dtype_size(p->dtype);
            dts[j] = p->dtype;
            total += bytes[j];
        }
        nb_bucket_caps(total, cap, &first, &rest);
        d->n_buckets = nb_plan_buckets_first(n, bytes, dts, first, rest, in_order);
        d->buckets = nb_calloc((size_t)d->n_buckets, sizeof *d->buckets);
        if (!d->buckets) st = nb_error(NB_ERR_NOMEM, "ddp: out of memory");
    }
    for (int j = 0; j < n && !st; j++) {
        bucket *bk = &d->buckets[in_order[j]];
        if (bk->count++ == 0) {
            bk->first = j;
            bk->dtype = dts[j];
        }
        bk->numel += (int64_t)(bytes[j] / nb_dtype_size(dts[j]));
        d->bucket_of[d->order[j]] = in_order[j];
    }
    if (!st) st = place_buckets(d);
    nb_free(bytes);
    nb_free(dts);
    nb_free(in_order);
    return st;
}

/* Rank r > 0 draws from its own stream; rank 0 keeps the builder's. */
static void own_stream(nb_builder *b, int rank)
{
    if (rank == 0) return;
    nb_rng *r = nb_eager_rng(b);
    r->key = nb_mix_seed(r->key, (uint64_t)rank);
}

nb_status nb_ddp_new(nb_ddp **out, nb_comm *c, nb_builder *b, size_t bucket_bytes)
{
    if (!out || !c || !b)
        return nb_error(NB_ERR_ARG, "ddp_new: need room for the result, a communicator and an eager builder");
    *out = NULL;
    int n = nb_eager_param_count(b);
    if (n < 1)
        return nb_error(NB_ERR_ARG,
                        "ddp_new: the builder has no parameters yet (run the model once, or create "
                        "them with nb_param, before wrapping it)");
    nb_ddp *d = nb_calloc(1, sizeof *d);
    if (!d) return nb_error(NB_ERR_NOMEM, "ddp_new: out of memory");
    d->comm = c;
    d->b = b;
    d->params = nb_calloc((size_t)n, sizeof *d->params);
    d->hooks = nb_calloc((size_t)n, sizeof *d->hooks);
    d->order = nb_calloc((size_t)n, sizeof *d->order);
    d->bucket_of = nb_calloc((size_t)n, sizeof *d->bucket_of);
    d->src = nb_calloc((size_t)n, sizeof *d->src);
    d->dst = nb_calloc((size_t)n, sizeof *d->dst);
    d->counts = nb_calloc((size_t)n, sizeof *d->counts);
    d->held = nb_calloc((size_t)n, sizeof *d->held);
    d->fresh = nb_calloc((size_t)n, sizeof *d->fresh);
    nb_status st =
        d->params && d->hooks && d->order && d->bucket_of && d->src && d->dst && d->counts && d->held && d->fresh
        ? NB_OK
        : nb_error(NB_ERR_NOMEM, "ddp_new: out of memory");
    for (int i = 0; i < n && !st; i++) {
        nb_tensor *p = nb_eager_param_at(b, i);
        if (!nb_tensor_is_contiguous(p) || (p->dtype != NB_F32 && p->dtype != NB_F64))
            st = nb_error(NB_ERR_ARG, "ddp_new: parameter '%s' is not a contiguous float32 or float64 tensor",
                          nb_eager_param_name(b, i));
        else d->params[d->n_params++] = nb_tensor_retain(p);
    }
    if (!st) st = plan(d, bucket_bytes);
    if (!st) st = nb_comm_check_same(c, "the eager parameters (names, dtypes and shapes)", params_hash(d));
    for (int i = 0; i < n && !st; i++) st = nb_comm_broadcast(c, d->params[i], 0);
    for (int i = 0; i < n && !st; i++) {
        d->hooks[i] = (param_hook){d, i};
        st = nb_tensor_register_post_accumulate_hook(d->params[i], on_grad_ready, &d->hooks[i]);
    }
    if (st) {
        nb_ddp_free(d);
        return st;
    }
    d->stats.n_buckets = d->n_buckets;
    own_stream(b, nb_comm_rank(c));
    *out = d;
    return NB_OK;
}

void nb_ddp_free(nb_ddp *d)
{
    if (!d) return;
    if (d->deferred) nb_ddp_finish(d, 0); /* the other ranks are in its all-reduces */
    if (d->step_opt) d->step_opt_release(d->step_opt);
    for (int i = 0; i < d->n_params; i++) {
        nb_tensor_remove_post_accumulate_hook(d->params[i], on_grad_ready, &d->hooks[i]);
        nb_tensor_release(d->params[i]);
    }
    if (d->zero) d->zero_free(d->zero);
    nb_free(d->flat);
    nb_free(d->buckets);
    nb_free(d->params);
    nb_free(d->hooks);
    nb_free(d->order);
    nb_free(d->bucket_of);
    nb_free(d->src);
    nb_free(d->dst);
    nb_free(d->counts);
    nb_free(d->held);
    nb_free(d->fresh);
    nb_free(d);
}

void nb_ddp_stats_get(const nb_ddp *d, nb_ddp_stats *s)
{
    if (!d || !s) return;
    *s = d->stats;
    s->hidden_fraction = s->comm_seconds > 0 ? s->overlap_seconds / s->comm_seconds : 0;
}

int nb_ddp_bucket_count(const nb_ddp *d) { return d ? d->n_buckets : 0; }

int nb_ddp_bucket_of(const nb_ddp *d, int param)
{
    return d && param >= 0 && param < d->n_params ? d->bucket_of[param] : -1;
}
