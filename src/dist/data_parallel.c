/* nb_data_parallel: the rewrite that makes a training program
 * data-parallel (PaddlePaddle's collective mode; nabla/data_parallel.h
 * says what it inserts and where). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/data_parallel.h"
#include "nabla/device.h"
#include "dist_internal.h"

/* Position of the last op of block b that writes `var`, or -1. */
static int last_writer(const nb_block *b, const char *var)
{
    for (int i = b->n_ops - 1; i >= 0; i--)
        for (int k = 0; k < nb_op_n_outputs(b->ops[i]); k++)
            if (!strcmp(b->ops[i]->outputs[k], var)) return i;
    return -1;
}

/* Appends an op to b and moves it to position `at`. */
static nb_status insert_op(nb_block *b, int at, const char *type, nb_names in, nb_names out, nb_attrs attrs,
                           nb_op_role role, nb_op **op_out)
{
    nb_op *op;
    nb_status st = nb_block_append_op(b, type, in, out, attrs, &op);
    if (st) return st;
    op->role = role;
    if (op_out) *op_out = op;
    return nb_block_move_op(b, b->n_ops - 1, at);
}

/* The seed of loss@GRAD now writes loss@GRAD@LOCAL, and a scale op by
 * 1/nranks after it writes loss@GRAD, which every gradient op reads. */
static nb_status scale_loss_grad(nb_block *b, const char *loss_grad, int nranks)
{
    int seed = last_writer(b, loss_grad);
    if (seed < 0 || b->ops[seed]->role != NB_ROLE_LOSS)
        return nb_error(NB_ERR_ARG, "data_parallel: no op seeds '%s' (run nb_append_backward for the loss first)",
                        loss_grad);
    nb_op *op = b->ops[seed];
    const nb_var *g = nb_block_find_var(b, loss_grad);
    char local[512];
    if (!g || snprintf(local, sizeof local, "%s@LOCAL", loss_grad) >= (int)sizeof local)
        return nb_error(NB_ERR_ARG, "data_parallel: bad loss gradient var '%s'", loss_grad);
    nb_var *v;
    nb_status st = nb_block_create_var(b, local, g->dtype, g->ndim, g->shape, &v);
    if (st) return st;
    for (int k = 0; k < nb_op_n_outputs(op); k++)
        if (!strcmp(op->outputs[k], loss_grad)) {
            char *s = nb_strdup(local);
            if (!s) return nb_error(NB_ERR_NOMEM, "data_parallel: out of memory");
            nb_free(op->outputs[k]);
            op->outputs[k] = s;
        }
    const char *in = local;
    return insert_op(b, seed + 1, "scale", NB_NAMES_N(1, &in), NB_NAMES_N(1, &loss_grad),
                     NB_ATTRS(NB_ATTR_FLOAT("scale", 1.0 / nranks)), NB_ROLE_LOSS, NULL);
}

typedef struct grad_item {
    const char *param, *grad;
    int ready; /* position of the op that finishes it */
    size_t bytes;
    nb_dtype dtype;
} grad_item;

static int by_ready(const void *a, const void *b)
{
    const grad_item *x = a, *y = b;
    return (x->ready > y->ready) - (x->ready < y->ready);
}

/* Whether an op from position `from` on reads or writes one of the n vars. */
static bool used_from(const nb_block *b, int from, const char *const *vars, int n)
{
    for (int i = from; i < b->n_ops; i++) {
        const nb_op *op = b->ops[i];
        for (int k = 0; k < nb_op_n_inputs(op); k++)
            for (int j = 0; j < n; j++)
                if (!strcmp(op->inputs[k], vars[j])) return true;
        for (int k = 0; k < nb_op_n_outputs(op); k++)
            for (int j = 0; j < n; j++)
                if (!strcmp(op->outputs[k], vars[j])) return true;
    }
    return false;
}

/* One all-reduce per bucket, right after the op that finishes the bucket's
 * last gradient; inserted from the last bucket back, so that the positions
 * of the earlier ones stay valid. A bucket whose gradients no later op of
 * the block touches gets a c_allreduce_start, and a c_allreduce_wait of its
 * own at the end of the block, the waits in bucket order; the optimiser's
 * ops, appended after this rewrite, read the gradients after them (and
 * nb_minimize moves each parameter's update up to its bucket's wait, so
 * that the first buckets' updates run while the last all-reduce is open).
 * The rest, or all of them when the options ask, get a c_allreduce_sum
 * that completes where it stands. */
static nb_status insert_allreduces(nb_block *b, const nb_backward_result *r, const nb_data_parallel_opts *o)
{
    int n = r->n_pairs;
    grad_item *items = nb_calloc((size_t)n + 1, sizeof *items);
    int *bucket = nb_calloc((size_t)n + 1, sizeof *bucket);
    size_t *bytes = nb_calloc((size_t)n + 1, sizeof *bytes);
    nb_dtype *dts = nb_calloc((size_t)n + 1, sizeof *dts);
    const char **names = nb_calloc((size_t)n + 1, sizeof *names);
    bool *waits = nb_calloc((size_t)n + 1, sizeof *waits);
    nb_status st = items && bucket && bytes && dts && names && waits
        ? NB_OK
        : nb_error(NB_ERR_NOMEM, "data_parallel: out of memory");
    for (int i = 0; i < n && !st; i++) {
        const nb_var *g = nb_block_find_var(b, r->pairs[i].grad);
        int at = last_writer(b, r->pairs[i].grad);
        if (!g || at < 0) {
            st = nb_error(NB_ERR_NOT_FOUND, "data_parallel: no op in block 0 writes gradient '%s' of parameter '%s'",
                          r->pairs[i].grad, r->pairs[i].param);
            break;
        }
        int64_t numel = 1;
        for (int d = 0; d < g->ndim; d++) numel *= g->shape[d] > 0 ? g->shape[d] : 1;
        items[i] =
            (grad_item){r->pairs[i].param, r->pairs[i].grad, at, (size_t)numel * nb_dtype_size(g->dtype), g->dtype};
    }
    if (!st) {
        /* A stable order: ready position, then parameter order. */
        qsort(items, (size_t)n, sizeof *items, by_ready);
        size_t total = 0, first, rest;
        for (int i = 0; i < n; i++) {
            bytes[i] = items[i].bytes;
            dts[i] = items[i].dtype;
            total += bytes[i];
        }
        nb_bucket_caps(total, o->bucket_bytes, &first, &rest);
        int nb = nb_plan_buckets_first(n, bytes, dts, first, rest, bucket);
        /* Decided on the block as it was: the inserted ops touch no other bucket. */
        for (int i = 0; i < n; i++) names[i] = items[i].grad;
        for (int k = 0, begin = 0; k < nb; k++) {
            int end = begin;
            while (end < n && bucket[end] == k) end++;
            bool open = !o->synchronous && !used_from(b, items[end - 1].ready + 1, names + begin, end - begin);
            for (int i = begin; i < end; i++) waits[i] = open;
            begin = end;
        }
        nb_attrs ring = NB_ATTRS(NB_ATTR_INT("ring_id", o->ring));
        for (int k = 0, begin = 0; k < nb && !st; k++) {
            int end = begin;
            while (end < n && bucket[end] == k) end++;
            nb_names list = NB_NAMES_N(end - begin, names + begin);
            if (waits[begin]) st = insert_op(b, b->n_ops, "c_allreduce_wait", list, list, ring, NB_ROLE_BACKWARD, NULL);
            begin = end;
        }
        for (int k = nb - 1, end = n; k >= 0 && !st; k--) {
            int begin = end;
            while (begin > 0 && bucket[begin - 1] == k) begin--;
            nb_names list = NB_NAMES_N(end - begin, names + begin);
            st = insert_op(b, items[end - 1].ready + 1, waits[begin] ? "c_allreduce_start" : "c_allreduce_sum", list,
                           list, ring, NB_ROLE_BACKWARD, NULL);
            end = begin;
        }
    }
    nb_free(items);
    nb_free(bucket);
    nb_free(bytes);
    nb_free(dts);
    nb_free(names);
    nb_free(waits);
    return st;
}

/* The parameters of main that startup creates, and the hash of their
 * names, dtypes and shapes. */
static nb_status startup_params(const nb_block *mb, const nb_block *sb, const char ***out, int *n, uint64_t *hash)
{
    const char **list = nb_calloc((size_t)mb->n_vars + 1, sizeof *list);
    if (!list) return nb_error(NB_ERR_NOMEM, "data_parallel: out of memory");
    uint64_t h = NB_HASH_INIT;
    int k = 0;
    for (int i = 0; i < mb->n_vars; i++) {
        const nb_var *v = mb->vars[i];
        if (!v->is_parameter || !nb_block_find_var(sb, v->name)) continue;
        list[k++] = v->name;
        h = nb_hash_param(h, v->name, v->dtype, v->ndim, v->shape);
    }
    *out = list;
    *n = k;
    *hash = h ? h : 1; /* 0 would mean "no check" */
    return NB_OK;
}

static nb_status broadcast_params(nb_block *mb, nb_block *sb, const nb_data_parallel_opts *o)
{
    const char **names = NULL;
    int n = 0;
    uint64_t hash = 0;
    nb_status st = startup_params(mb, sb, &names, &n, &hash);
    if (st) return st;
    if (n > 0) {
        nb_names list = NB_NAMES_N(n, names);
        nb_op *op;
        st = nb_block_append_op(sb, "c_broadcast", list, list,
                                NB_ATTRS(NB_ATTR_INT("ring_id", o->ring), NB_ATTR_INT("root", o->root),
                                         NB_ATTR_INT("check", (int64_t)hash)),
                                &op);
        if (!st) op->role = NB_ROLE_STARTUP;
    }
    nb_free(names);
    return st;
}

nb_status nb_data_parallel(nb_program *main, nb_program *startup, const char *loss, const nb_backward_result *grads,
                           const nb_data_parallel_opts *opts)
{
    if (!main || !startup || !loss || !grads || !opts)
        return nb_error(NB_ERR_ARG,
                        "data_parallel: need main and startup programs, the loss, its gradients and options");
    if (opts->nranks < 1) return nb_error(NB_ERR_ARG, "data_parallel: nranks is %d; it must be >= 1", opts->nranks);
    if (opts->ring < 0 || opts->ring >= NB_COMM_MAX_RINGS)
        return nb_error(NB_ERR_ARG, "data_parallel: ring %d is not in [0, %d)", opts->ring, NB_COMM_MAX_RINGS);
    if (opts->root < 0 || opts->root >= opts->nranks)
        return nb_error(NB_ERR_ARG, "data_parallel: root %d is not a rank of %d", opts->root, opts->nranks);
    if (grads->n_pairs < 1) return nb_error(NB_ERR_ARG, "data_parallel: no (parameter, gradient) pairs");
    const char *loss_grad = nb_backward_grad_of(grads, loss);
    if (!loss_grad) return nb_error(NB_ERR_ARG, "data_parallel: '%s' has no gradient in the result given", loss);
    nb_block *mb = nb_program_global_block(main), *sb = nb_program_global_block(startup);
    nb_status st = scale_loss_grad(mb, loss_grad, opts->nranks);
    if (!st) st = insert_allreduces(mb, grads, opts);
    if (!st) st = broadcast_params(mb, sb, opts);
    return st;
}
