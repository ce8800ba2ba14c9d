/* Preparing and running a block.
 *
 * Every var the block touches becomes a value slot of one of three kinds:
 * fed by the caller, living in the scope (persistable vars, and vars read
 * before any op writes them), or a temporary owned by the prepared program.
 * Temporaries get buffers planned by liveness: a buffer freed after the last
 * op that touches one temporary is given to the next temporary defined, and
 * grows to the largest size it is asked for, so steady-state runs allocate
 * nothing. Fetched temporaries keep buffers of their own. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "nabla/executor.h"
#include "exec_env.h"
#include "executor_internal.h"
#include "fold.h"
#include "fuse.h"
#include "prune.h"
#include "../core/fpenv.h"
#include "../core/strmap.h"
#include "../comm/comm_internal.h"
#include "../core/tensor_internal.h"
#include "../ops/op_internal.h"
#include "../program/program_internal.h"

/* ---- preparing ------------------------------------------------------------ */

static int value_index(nb_prepared *pp, const char *name)
{
    return (int)(uintptr_t)nb_strmap_get(&pp->index, name, NULL) - 1;
}

static int add_value(nb_prepared *pp, const char *name, value_kind kind, const nb_var *var)
{
    if (pp->n_values == pp->cap_values) {
        int cap = pp->cap_values ? 2 * pp->cap_values : 64;
        value *v = nb_realloc(pp->values, (size_t)cap * sizeof *v);
        if (!v) return -1;
        pp->values = v;
        pp->cap_values = cap;
    }
    int i = pp->n_values;
    if (nb_strmap_put(&pp->index, name, (void *)(uintptr_t)(i + 1))) return -1;
    pp->values[i] =
        (value){.name = name, .kind = kind, .var = var, .buffer = -1, .last_use = -1, .inplace_of = -1, .local = -1};
    pp->n_values++;
    return i;
}

/* Finds or creates the slot for a name read (reading=true) or written by
 * step s. */
static int slot_for(nb_prepared *pp, const nb_block *b, const char *name, bool reading, int s)
{
    int i = value_index(pp, name);
    if (i < 0) {
        const nb_var *var = nb_block_find_var_recursive(b, name);
        value_kind kind = (var && var->persistable) || reading || pp->scope_resident ? V_SCOPE : V_TEMP;
        if ((i = add_value(pp, name, kind, var)) < 0) return -1;
    }
    if (!reading) pp->values[i].written = true;
    pp->values[i].last_use = s;
    return i;
}

nb_status nb_exec_prepare_step(nb_prepared *pp, const nb_block *b, const nb_op *op, int s)
{
    step *st = &pp->steps[s];
    st->op = op;
    st->group = -1;
    nb_op_label(op, st->label, sizeof st->label);
    st->n_in = nb_op_n_inputs(op);
    st->n_out = nb_op_n_outputs(op);
    st->in = nb_calloc((size_t)st->n_in + 1, sizeof *st->in);
    st->out = nb_calloc((size_t)st->n_out + 1, sizeof *st->out);
    st->in_info = nb_calloc((size_t)st->n_in + 1, sizeof *st->in_info);
    st->out_info = nb_calloc((size_t)st->n_out + 1, sizeof *st->out_info);
    st->in_t = nb_calloc((size_t)st->n_in + 1, sizeof *st->in_t);
    st->out_t = nb_calloc((size_t)st->n_out + 1, sizeof *st->out_t);
    st->out_is_input = nb_calloc((size_t)st->n_out + 1, sizeof *st->out_is_input);
    if (!st->in || !st->out || !st->in_info || !st->out_info || !st->in_t || !st->out_t || !st->out_is_input)
        return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
    for (int k = 0; k < st->n_in; k++)
        if ((st->in[k] = slot_for(pp, b, op->inputs[k], true, s)) < 0)
            return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
    for (int k = 0; k < st->n_out; k++) {
        if ((st->out[k] = slot_for(pp, b, op->outputs[k], false, s)) < 0)
            return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
        for (int j = 0; j < st->n_in; j++) st->out_is_input[k] |= st->in[j] == st->out[k];
    }
    st->ctx = (nb_op_ctx){
        .def = op->def, .label = st->label, .attrs = op->attrs, .in_info = st->in_info, .out_info = st->out_info};
    memcpy(st->ctx.in_begin, op->in_begin, sizeof st->ctx.in_begin);
    memcpy(st->ctx.out_begin, op->out_begin, sizeof st->ctx.out_begin);
    if (op->def->params_size) {
        if (!(st->params = nb_calloc(1, op->def->params_size))) return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
        nb_status ps = op->def->params(&st->ctx, st->params);
        if (ps) return ps;
    }
    st->kctx = (nb_kernel_ctx){
        .params = st->params, .label = st->label, .in = st->in_t, .out = st->out_t, .rng = &st->rng, .exec = &pp->env};
    memcpy(st->kctx.in_begin, op->in_begin, sizeof st->kctx.in_begin);
    memcpy(st->kctx.out_begin, op->out_begin, sizeof st->kctx.out_begin);
    uint64_t sd = nb_op_seed(pp->program, op);
    st->seed = sd;
    st->random = (op->def->flags & NB_OP_RANDOM) != 0;
    nb_rng_seed(&st->rng, sd);
    return NB_OK;
}

/* Every temporary's size from its var, when every one of them has a shape
 * known to the last dim: the plan by size can then be made before the first
 * run, which otherwise runs on the plan below, made without sizes, and takes
 * the most memory of any (GPT-2 124M: 933 MB of buffers, against 541 MB
 * planned by size, which set the process's peak). False, with sizes left
 * unknown, where one is not known. */
static bool sizes_from_vars(nb_prepared *pp)
{
    for (int i = 0; i < pp->n_values; i++) {
        const value *v = &pp->values[i];
        if (v->kind != V_TEMP || v->fetched || v->local >= 0) continue;
        if (!v->var || v->var->ndim < 0) return false;
        for (int d = 0; d < v->var->ndim; d++)
            if (v->var->shape[d] < 0) return false;
    }
    for (int i = 0; i < pp->n_values; i++) {
        value *v = &pp->values[i];
        if (v->kind == V_TEMP && !v->fetched && v->local < 0)
            v->bytes = (size_t)nb_shape_numel(v->var->ndim, v->var->shape) * nb_dtype_size(v->var->dtype);
    }
    return true;
}

/* Gives each temporary a buffer, reusing those of temporaries already dead. */
static nb_status plan_buffers(nb_prepared *pp)
{
    int *free_list = nb_malloc(((size_t)pp->n_values + 1) * sizeof *free_list);
    bool *released = nb_calloc((size_t)pp->n_values + 1, sizeof *released);
    if (!free_list || !released) {
        nb_free(free_list);
        nb_free(released);
        return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
    }
    int n_free = 0;
    for (int s = 0; pp->steps && s < pp->n_steps; s++) {
        step *st = &pp->steps[s];
        for (int k = 0; k < st->n_out; k++) {
            value *v = &pp->values[st->out[k]];
            if (v->kind != V_TEMP || v->fetched || v->buffer >= 0 || v->local >= 0) continue;
            v->buffer = n_free ? free_list[--n_free] : pp->n_buffers++;
        }
        /* Free after the op, so that no output shares a buffer with an input. */
        for (int side = 0; side < 2; side++) {
            int n = side ? st->n_out : st->n_in, *ids = side ? st->out : st->in;
            for (int k = 0; k < n; k++) {
                value *v = &pp->values[ids[k]];
                if (v->kind == V_TEMP && v->buffer >= 0 && v->last_use == s && !released[ids[k]]) {
                    released[ids[k]] = true;
                    free_list[n_free++] = v->buffer;
                }
            }
        }
    }
    nb_free(free_list);
    nb_free(released);
    pp->buffers = nb_calloc((size_t)pp->n_buffers + 1, sizeof *pp->buffers);
    return pp->buffers ? NB_OK : nb_error(NB_ERR_NOMEM, "prepare: out of memory");
}

static void storage_drop(nb_storage *s);
static nb_storage *storage_alloc(nb_prepared *pp, size_t nbytes);

/* The plan again, now that a run has told every temporary's size: each
 * takes the free buffer that fits it most tightly, or grows the largest
 * free one, so that buffers hold temporaries of like sizes (the first plan,
 * made before sizes are known, may pair a small buffer with a large
 * temporary and a large one with a small), and the first output of an op
 * that allows it (NB_OP_INPLACE) takes over the buffer of an input of its
 * size that the op reads last. A view (NB_OP_VIEW: reshape, flatten and the
 * like) shares its input's buffer even when the input lives on, so that its
 * kernel copies nothing (the flattens around the GPT's products copied 2.4%
 * of its step); a buffer is then free once every value in it is dead, and
 * an op writes in place only over a buffer whose values all die there. The
 * old buffers are let go and, with `allocate`, the new ones allocated at
 * their sizes, so that the next run allocates nothing (without, each is
 * allocated at its planned size when the run first needs it). */
static nb_status plan_by_size(nb_prepared *pp, bool allocate)
{
    int n = pp->n_values;
    int *free_list = nb_malloc(((size_t)n + 1) * sizeof *free_list);
    size_t *cap = nb_calloc((size_t)n + 1, sizeof *cap);
    bool *released = nb_calloc((size_t)n + 1, sizeof *released);
    int *old = nb_malloc(((size_t)n + 1) * sizeof *old);
    int *live = nb_calloc(2 * (size_t)n + 1, sizeof *live); /* per buffer: the live values in it */
    int *end = live ? live + n : NULL;                      /* per buffer: the last step that reads a value in it */
    if (!free_list || !cap || !released || !old || !live) {
        nb_free(free_list);
        nb_free(cap);
        nb_free(released);
        nb_free(old);
        nb_free(live);
        return nb_error(NB_ERR_NOMEM, "run: the step completed, but there was no memory to plan its buffers by size");
    }
    int n_free = 0, n_buffers = 0;
    for (int i = 0; i < n; i++) {
        old[i] = pp->values[i].buffer;
        pp->values[i].inplace_of = -1;
        if (pp->values[i].kind == V_TEMP && !pp->values[i].fetched) pp->values[i].buffer = -1;
    }
    for (int s = 0; s < pp->n_steps; s++) {
        step *st = &pp->steps[s];
        for (int k = 0; k < st->n_out; k++) {
            value *v = &pp->values[st->out[k]];
            if (v->kind != V_TEMP || v->fetched || v->buffer >= 0 || v->local >= 0) continue;
            /* In place: the first output of an op that allows it takes the
             * buffer of an input of its size that this op reads last. */
            const unsigned flags = st->op->def->flags;
            int from = -1;
            for (int j = 0; k == 0 && (flags & NB_OP_INPLACE) && j < st->n_in && from < 0; j++) {
                const value *u = &pp->values[st->in[j]];
                bool view = j == 0 && (flags & NB_OP_VIEW);
                if (u->kind == V_TEMP && !u->fetched && u->buffer >= 0 && !released[st->in[j]] &&
                    u->bytes == v->bytes && v->bytes > 0 && (view || end[u->buffer] == s))
                    from = st->in[j];
            }
            if (from >= 0) { /* u is let go below if it dies here, and the buffer goes on with v */
                v->buffer = pp->values[from].buffer;
                v->inplace_of = from;
                live[v->buffer]++;
                if (end[v->buffer] < v->last_use) end[v->buffer] = v->last_use;
                continue;
            }
            int best = -1, largest = -1;
            for (int j = 0; j < n_free; j++) {
                size_t c = cap[free_list[j]];
                if (c >= v->bytes && (best < 0 || c < cap[free_list[best]])) best = j;
                if (largest < 0 || c > cap[free_list[largest]]) largest = j;
            }
            int pick = best >= 0 ? best : largest;
            if (pick >= 0) {
                v->buffer = free_list[pick];
                free_list[pick] = free_list[--n_free];
            } else v->buffer = n_buffers++;
            if (cap[v->buffer] < v->bytes) cap[v->buffer] = v->bytes;
            live[v->buffer]++;
            end[v->buffer] = v->last_use;
        }
        for (int side = 0; side < 2; side++) {
            int m = side ? st->n_out : st->n_in, *ids = side ? st->out : st->in;
            for (int k = 0; k < m; k++) {
                value *v = &pp->values[ids[k]];
                if (v->kind == V_TEMP && v->buffer >= 0 && v->last_use == s && !released[ids[k]]) {
                    released[ids[k]] = true;
                    if (--live[v->buffer] == 0) free_list[n_free++] = v->buffer;
                }
            }
        }
    }
    /* The old buffers go first, then the new are allocated: freeing after
     * allocating would leave the allocator holding both (glibc raises its
     * mmap threshold as large blocks are freed, so the new ones came from
     * the heap it keeps). One that cannot be allocated now is allocated when
     * first needed, and the run says so. */
    buffer *bufs = nb_calloc((size_t)n_buffers + 1, sizeof *bufs);
    nb_status st = NB_OK;
    if (bufs) {
        for (int b = 0; b < pp->n_buffers; b++) storage_drop(pp->buffers[b].storage);
        nb_free(pp->buffers);
        for (int i = 0; i < n; i++) {
            value *v = &pp->values[i];
            if (v->kind == V_TEMP && v->t && v->t->refcount == 1 && v->t->storage) {
                storage_drop(v->t->storage);
                v->t->storage = NULL;
            }
        }
        pp->buffers = bufs;
        pp->n_buffers = n_buffers;
        for (int b = 0; b < n_buffers; b++) {
            bufs[b].cap = cap[b];
            if (allocate && cap[b] && !(bufs[b].storage = storage_alloc(pp, cap[b])) && !st)
                st = nb_error(NB_ERR_NOMEM,
                              "run: the step completed, but there was no memory for its buffers, "
                              "planned again by size");
        }
        pp->sized = true;
    } else {
        for (int i = 0; i < n; i++) pp->values[i].buffer = old[i];
        st = nb_error(NB_ERR_NOMEM, "run: the step completed, but there was no memory to plan its buffers by size");
    }
    pp->grew = false;
    nb_free(free_list);
    nb_free(cap);
    nb_free(released);
    nb_free(old);
    nb_free(live);
    return st;
}

static nb_status prepare(nb_prepared **out, nb_program *p, int block_idx, int n_feed, const char *const *feed_names,
                         int n_fetch, const char *const *fetch_names, nb_block_cache *cache)
{
    *out = NULL;
    const nb_block *b = nb_program_block(p, block_idx);
    if (!b) return nb_error(NB_ERR_ARG, "prepare: the program has no block %d", block_idx);
    if (n_feed < 0 || n_fetch < 0 || (n_feed && !feed_names) || (n_fetch && !fetch_names))
        return nb_error(NB_ERR_ARG, "prepare: bad feed or fetch lists");
    nb_prepared *pp = nb_calloc(1, sizeof *pp);
    if (!pp) return nb_error(NB_ERR_NOMEM, "prepare: out of memory");
    nb_strmap_init(&pp->index);
    pp->program = p;
    pp->block_idx = block_idx;
    pp->scope_resident = cache != NULL;
    pp->owns_cache = !cache;
    if (!cache && (cache = nb_calloc(1, sizeof *cache))) {
        cache->n = p->n_blocks;
        if (!(cache->blocks = nb_calloc((size_t)cache->n + 1, sizeof *cache->blocks))) {
            nb_free(cache);
            cache = NULL;
        }
    }
    pp->env = (nb_exec_env){.program = p, .cache = cache};
    nb_status st = NB_OK;
    if (!cache) goto nomem;
    pp->feed_values = nb_calloc((size_t)n_feed + 1, sizeof *pp->feed_values);
    pp->fetch_values = nb_calloc((size_t)n_fetch + 1, sizeof *pp->fetch_values);
    pp->feed_copies = nb_calloc((size_t)n_feed + 1, sizeof *pp->feed_copies);
    pp->steps = nb_calloc((size_t)b->n_ops + 1, sizeof *pp->steps);
    if (!pp->feed_values || !pp->fetch_values || !pp->feed_copies || !pp->steps) goto nomem;
    pp->n_feed = n_feed;
    pp->n_fetch = n_fetch;
    for (int i = 0; i < n_feed; i++) {
        if (!feed_names[i]) {
            st = nb_error(NB_ERR_ARG, "prepare: feed %d has no name", i);
            goto fail;
        }
        if (value_index(pp, feed_names[i]) >= 0) {
            st = nb_error(NB_ERR_ARG, "prepare: '%s' is fed twice", feed_names[i]);
            goto fail;
        }
        const nb_var *fv = nb_block_find_var_recursive(b, feed_names[i]);
        if (!fv) {
            st = nb_error(NB_ERR_NOT_FOUND, "prepare: feed '%s' is not a var of block %d (misspelt?)", feed_names[i],
                          block_idx);
            goto fail;
        }
        if ((pp->feed_values[i] = add_value(pp, feed_names[i], V_FEED, fv)) < 0) goto nomem;
    }
    /* Feeds are read-only: no op of the block may write one, needed or not. */
    for (int s = 0; s < b->n_ops; s++)
        for (int k = 0; k < nb_op_n_outputs(b->ops[s]); k++) {
            int v = value_index(pp, b->ops[s]->outputs[k]);
            if (v >= 0 && pp->values[v].kind == V_FEED) {
                char label[200];
                nb_op_label(b->ops[s], label, sizeof label);
                st = nb_error(NB_ERR_ARG, "%s writes '%s', which is fed: feeds are read-only", label,
                              pp->values[v].name);
                goto fail;
            }
        }
    /* Initialisers among other ops (a parameter made with no startup
     * program) are run-once ops. */
    bool mixed = false;
    for (int s = 0; s < b->n_ops; s++) mixed |= b->ops[s]->role != NB_ROLE_STARTUP;
    bool *keep = nb_calloc((size_t)b->n_ops + 1, sizeof *keep);
    if (!keep) goto nomem;
    if (pp->scope_resident) {
        for (int s = 0; s < b->n_ops; s++) keep[s] = true;
    } else if ((st = nb_exec_needed_ops(b, n_fetch, fetch_names, keep))) {
        nb_free(keep);
        goto fail;
    }
    for (int s = 0; s < b->n_ops; s++) {
        if (!keep[s]) continue;
        int at = pp->n_steps++;
        if ((st = nb_exec_prepare_step(pp, b, b->ops[s], at))) break;
        pp->steps[at].run_once = mixed && b->ops[s]->role == NB_ROLE_STARTUP;
    }
    nb_free(keep);
    if (st) goto fail;

    for (int i = 0; i < n_fetch; i++) {
        const char *name = fetch_names[i];
        int v = name ? value_index(pp, name) : -1;
        if (v < 0) {
            /* A var no op touches: fetch it from the scope. */
            if (!name) {
                st = nb_error(NB_ERR_ARG, "prepare: fetch %d is NULL; fetches are names of vars", i);
                goto fail;
            }
            if (!nb_block_find_var_recursive(b, name)) {
                st = nb_error(NB_ERR_NOT_FOUND, "prepare: fetch '%s' is not a var of block %d", name, block_idx);
                goto fail;
            }
            if ((v = add_value(pp, name, V_SCOPE, nb_block_find_var_recursive(b, name))) < 0) goto nomem;
        }
        pp->values[v].fetched = true;
        pp->fetch_values[i] = v;
    }
    if (!pp->scope_resident && (st = nb_fold_plan(pp, b))) goto fail;
    if (!pp->scope_resident && (st = nb_fuse_plan(pp, b))) goto fail;
    if ((st = plan_buffers(pp))) goto fail;
    if (!pp->scope_resident && sizes_from_vars(pp) && (st = plan_by_size(pp, false))) goto fail;
    *out = pp;
    return NB_OK;
nomem:
    st = nb_error(NB_ERR_NOMEM, "prepare: out of memory");
fail:
    nb_prepared_free(pp);
    return st;
}

nb_status nb_prepare(nb_prepared **out, nb_program *p, int block_idx, nb_names feeds, nb_names fetches)
{
    return prepare(out, p, block_idx, feeds.n, feeds.v, fetches.n, fetches.v, NULL);
}

void nb_prepared_free(nb_prepared *pp)
{
    if (!pp) return;
    if (pp->owns_cache && pp->env.cache) {
        for (int i = 0; pp->env.cache->blocks && i < pp->env.cache->n; i++) nb_prepared_free(pp->env.cache->blocks[i]);
        nb_free(pp->env.cache->blocks);
        nb_free(pp->env.cache);
    }
    for (int s = 0; pp->steps && s < pp->n_steps; s++) nb_exec_step_clear(&pp->steps[s]);
    for (int i = 0; pp->values && i < pp->n_values; i++)
        if (pp->values[i].kind == V_TEMP) nb_tensor_release(pp->values[i].t);
    nb_free(pp->trim);
    nb_fuse_free(pp);
    nb_fold_free(pp);
    for (int i = 0; pp->buffers && i < pp->n_buffers; i++) { /* n_buffers is counted before they exist */
        nb_storage *s = pp->buffers[i].storage;
        if (s && --s->refcount == 0) {
            nb_device_free(s->device, s->data);
            nb_free(s);
        }
    }
    nb_free(pp->buffers);
    nb_free(pp->steps);
    nb_free(pp->values);
    nb_free(pp->feed_values);
    nb_free(pp->fetch_values);
    nb_free(pp->feed_copies);
    nb_strmap_free(&pp->index);
    nb_free(pp);
}

void nb_exec_step_clear(step *st)
{
    nb_free(st->in);
    nb_free(st->out);
    nb_free(st->in_info);
    nb_free(st->params);
    nb_free(st->out_info);
    nb_free(st->in_t);
    nb_free(st->out_t);
    nb_free(st->out_is_input);
    memset(st, 0, sizeof *st);
}

size_t nb_prepared_buffer_bytes(const nb_prepared *pp)
{
    size_t n = 0;
    for (int i = 0; i < pp->n_buffers; i++) n += pp->buffers[i].cap;
    return n;
}

uint64_t nb_prepared_alloc_count(const nb_prepared *pp) { return pp->allocs; }
uint64_t nb_prepared_run_index(const nb_prepared *pp) { return pp->runs; }
void nb_prepared_set_run_index(nb_prepared *pp, uint64_t index) { pp->runs = index; }
void nb_prepared_set_stream(nb_prepared *pp, uint64_t stream) { pp->stream = stream; }
int nb_prepared_fused_steps(const nb_prepared *pp) { return pp ? pp->fused_steps : 0; }
int nb_prepared_folded_updates(const nb_prepared *pp) { return pp ? pp->n_folded : 0; }

/* ---- running ---------------------------------------------------------------- */

static nb_storage *storage_alloc(nb_prepared *pp, size_t nbytes)
{
    nb_storage *s = nb_calloc(1, sizeof *s);
    size_t padded = ((nbytes + 63) & ~(size_t)63) + 64;
    if (!s || !(s->data = nb_device_alloc(NB_DEVICE_CPU, padded))) {
        nb_free(s);
        return NULL;
    }
    s->nbytes = nbytes;
    s->refcount = 1;
    pp->allocs++;
    return s;
}

static void storage_drop(nb_storage *s)
{
    if (s && --s->refcount == 0) {
        if (!s->borrowed && !s->inline_data) nb_device_free(s->device, s->data);
        nb_free(s);
    }
}

void nb_exec_value_drop_storage(value *v)
{
    if (v->t && v->t->refcount == 1 && v->t->storage) {
        storage_drop(v->t->storage);
        v->t->storage = NULL;
    }
}

/* Makes v->t a contiguous tensor of `info`'s dtype and shape backed by its
 * buffer (or, for fetched values, by storage of its own). */
static nb_status bind_temp(nb_prepared *pp, value *v, const nb_var_info *info, bool in_place, const char *label)
{
    size_t nbytes = (size_t)nb_shape_numel(info->ndim, info->shape) * nb_dtype_size(info->dtype);
    v->bytes = nbytes;
    nb_tensor *held = NULL;
    /* The caller still holds the tensor fetched last run: leave it to them
     * (an in-place op still needs its values, so keep them for a copy). */
    if (v->t && v->t->refcount > 1) {
        held = v->t;
        v->t = NULL;
    }
    if (!v->t) {
        if (!(v->t = nb_calloc(1, sizeof *v->t))) {
            nb_tensor_release(held);
            return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
        }
        v->t->refcount = 1;
        pp->allocs++;
    }
    nb_storage *want;
    /* An output planned in place needs its input in that buffer, of its
     * size; otherwise (shapes changed since the plan) it gets storage of its
     * own this run, and the plan is made again after it. */
    bool shared = v->inplace_of < 0;
    if (!shared) {
        const value *u = &pp->values[v->inplace_of];
        shared = u->bytes == nbytes && u->t && u->t->storage == pp->buffers[v->buffer].storage;
        if (!shared) pp->grew = true;
    }
    if (v->buffer >= 0 && shared) {
        buffer *buf = &pp->buffers[v->buffer];
        if (!buf->storage || buf->cap < nbytes) {
            /* A fresh buffer of a plan by size is allocated at its planned size. */
            size_t size = !buf->storage && buf->cap > nbytes ? buf->cap : nbytes;
            pp->grew |= buf->storage != NULL;
            nb_storage *s = storage_alloc(pp, size);
            if (!s) return nb_error(NB_ERR_NOMEM, "%s: out of memory allocating %zu bytes", label, size);
            storage_drop(buf->storage);
            buf->storage = s;
            buf->cap = size;
        }
        want = buf->storage;
    } else {
        want = v->t->storage;
        if (!want || want->nbytes < nbytes) {
            if (!(want = storage_alloc(pp, nbytes))) return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
            storage_drop(v->t->storage);
            v->t->storage = want;
        }
    }
    if (v->t->storage != want) {
        want->refcount++;
        storage_drop(v->t->storage);
        v->t->storage = want;
    }
    nb_tensor *t = v->t;
    t->dtype = info->dtype;
    t->ndim = info->ndim;
    memcpy(t->shape, info->shape, sizeof t->shape);
    nb_contiguous_strides(t->ndim, t->shape, t->strides);
    t->offset = 0;
    if (held) {
        if (in_place) memcpy(nb_tensor_data(t), nb_tensor_data(held), nbytes);
        nb_tensor_release(held);
    }
    return NB_OK;
}

/* Binds a value living in the scope that op output `info` writes. */
static nb_status bind_scope_output(nb_prepared *pp, nb_scope *scope, value *v, const nb_var_info *info, bool in_place,
                                   const char *label)
{
    /* A sub-block writes its own scope only: an outer var it redefines is
     * shadowed, never overwritten (other iterations' scopes still read it). */
    nb_tensor *t = pp->scope_resident ? nb_scope_find_local(scope, v->name) : nb_scope_find(scope, v->name);
    if (pp->scope_resident) in_place = false;
    if (t && t->dtype == info->dtype && nb_shape_equal(t->ndim, t->shape, info->ndim, info->shape) &&
        nb_tensor_is_contiguous(t)) {
        v->t = t;
        return NB_OK;
    }
    if (t && in_place) {
        char a[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: writes %s in place as %s %s, but it holds %s %s", label, v->name,
                        nb_dtype_name(info->dtype), nb_shape_str(a, sizeof a, info->ndim, info->shape),
                        nb_dtype_name(t->dtype), nb_shape_str(c, sizeof c, t->ndim, t->shape));
    }
    /* Uninitialised: run_step zero-fills what its kernel may not write. */
    nb_status st = nb_tensor_new_uninit(&t, info->dtype, info->ndim, info->shape);
    if (st) return st;
    pp->allocs++;
    st = nb_scope_set(scope, v->name, t);
    nb_tensor_release(t);
    v->t = st ? NULL : t;
    return st;
}

static nb_status missing_input(const nb_prepared *pp, const step *st, const value *v)
{
    if (v->var && v->var->is_data)
        return nb_error(NB_ERR_NOT_FOUND, "%s: data var '%s' was not fed", st->label, v->name);
    if (v->var && v->var->persistable)
        return nb_error(NB_ERR_NOT_FOUND, "%s: persistable var '%s' is not in the scope (was the startup program run?)",
                        st->label, v->name);
    return nb_error(NB_ERR_NOT_FOUND,
                    "%s: var '%s' has no value: it is not fed, not in the scope, and no earlier op writes it",
                    st->label, v->name);
}

static nb_status bind_feeds(nb_prepared *pp, nb_tensor *const *feeds)
{
    char a[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
    for (int i = 0; i < pp->n_feed; i++) {
        value *v = &pp->values[pp->feed_values[i]];
        nb_tensor *t = feeds ? feeds[i] : NULL;
        if (!t) return nb_error(NB_ERR_ARG, "run: feed '%s' is NULL", v->name);
        if (v->var) {
            bool ok = t->dtype == v->var->dtype && t->ndim == v->var->ndim;
            for (int d = 0; ok && d < t->ndim; d++) ok = v->var->shape[d] == -1 || v->var->shape[d] == t->shape[d];
            if (!ok)
                return nb_error(t->dtype != v->var->dtype ? NB_ERR_DTYPE : NB_ERR_SHAPE,
                                "run: feed '%s' is %s %s but the var is declared %s %s", v->name,
                                nb_dtype_name(t->dtype), nb_shape_str(a, sizeof a, t->ndim, t->shape),
                                nb_dtype_name(v->var->dtype), nb_shape_str(c, sizeof c, v->var->ndim, v->var->shape));
        }
        if (!nb_tensor_is_contiguous(t)) {
            nb_status st = nb_tensor_contiguous(&pp->feed_copies[i], t);
            if (st) return st;
            pp->allocs++;
            t = pp->feed_copies[i];
        }
        v->t = t;
    }
    return NB_OK;
}

/* Whether every output of a run-once step has a value in the scope. */
static bool initialised(const nb_prepared *pp, nb_scope *scope, const step *st)
{
    for (int k = 0; k < st->n_out; k++)
        if (!nb_scope_find(scope, pp->values[st->out[k]].name)) return false;
    return true;
}

nb_status nb_exec_step_bind(nb_prepared *pp, nb_scope *scope, step *st, int k)
{
    value *v = &pp->values[st->out[k]];
    const nb_var_info *info = &st->out_info[k];
    nb_status s = v->kind == V_TEMP ? bind_temp(pp, v, info, st->out_is_input[k], st->label)
                                    : bind_scope_output(pp, scope, v, info, st->out_is_input[k], st->label);
    if (!s) st->out_t[k] = v->t;
    return s;
}

nb_status nb_exec_step_run(nb_prepared *pp, nb_scope *scope, step *st)
{
    if (st->run_once && initialised(pp, scope, st)) return NB_OK;
    bool same = st->inferred;
    for (int k = 0; k < st->n_in; k++) {
        value *v = &pp->values[st->in[k]];
        if (!v->t) return missing_input(pp, st, v);
        nb_tensor *t = v->t;
        st->in_t[k] = t;
        nb_var_info *inf = &st->in_info[k];
        if (same && (inf->dtype != t->dtype || !nb_shape_equal(inf->ndim, inf->shape, t->ndim, t->shape))) same = false;
        if (!same) {
            inf->dtype = t->dtype;
            inf->ndim = t->ndim;
            memcpy(inf->shape, t->shape, sizeof inf->shape);
        }
    }
    if (!same) {
        nb_status s = nb_run_infer(&st->ctx);
        if (s) return s;
        st->inferred = true;
        st->kernel = NULL;
    }
    pp->env.scope = scope;
    pp->env.op = st->op;
    pp->env.pp = pp;
    pp->env.step = st;
    /* Control-flow kernels bind their outputs themselves (nb_exec_output). */
    const int n_bound = (st->op->def->flags & NB_OP_CONTROL) ? 0 : st->n_out;
    for (int k = n_bound; k < st->n_out; k++) st->out_t[k] = NULL;
    for (int k = 0; k < n_bound; k++) {
        nb_status s = nb_exec_step_bind(pp, scope, st, k);
        if (s) return s;
        value *v = &pp->values[st->out[k]];
        /* Kernels may count on zeroed outputs, except in place and for ops
         * whose kernels write every element: NB_OP_WRITES_ALL, and
         * NB_OP_INPLACE (which may be writing over their input's buffer,
         * which a zero-fill would wipe first). */
        size_t nbytes = (size_t)nb_tensor_numel(v->t) * nb_dtype_size(v->t->dtype);
        if (!st->out_is_input[k] && !(st->op->def->flags & (NB_OP_INPLACE | NB_OP_WRITES_ALL)))
            memset(nb_tensor_data(v->t), 0, nbytes);
        else if (!st->out_is_input[k] && !(st->op->def->flags & NB_OP_INPLACE) && nb_poison_uninit())
            memset(nb_tensor_data(v->t), 0xff, nbytes);
    }
    if (!st->kernel) {
        nb_dtype dt = st->n_in ? st->in_t[0]->dtype : st->out_info[0].dtype;
        if (!(st->kernel = nb_kernel_find(st->op->def->name, NB_DEVICE_CPU, dt, &st->kctx)))
            return nb_error(NB_ERR_UNSUPPORTED, "%s: %s", st->label, nb_last_error());
    }
    return st->kernel->run(&st->kctx);
}

nb_status nb_exec_output(const nb_kernel_ctx *kc, int k, const nb_var_info *info, nb_tensor **out)
{
    nb_prepared *pp = kc->exec->pp;
    step *st = kc->exec->step;
    if (k < 0 || k >= st->n_out) return nb_error(NB_ERR_ARG, "%s: no output %d", st->label, k);
    value *v = &pp->values[st->out[k]];
    nb_scope *scope = kc->exec->scope;
    nb_status s = v->kind == V_TEMP ? bind_temp(pp, v, info, false, st->label)
                                    : bind_scope_output(pp, scope, v, info, false, st->label);
    if (s) return s;
    memset(nb_tensor_data(v->t), 0, (size_t)nb_tensor_numel(v->t) * nb_dtype_size(v->t->dtype));
    st->out_t[k] = *out = v->t;
    return NB_OK;
}

nb_status nb_prepared_run(nb_prepared *pp, nb_scope *scope, nb_tensor *const *feeds, nb_tensor **fetched)
{
    if (!pp || !scope) return nb_error(NB_ERR_ARG, "run: NULL prepared program or scope");
    if (pp->n_fetch && !fetched) return nb_error(NB_ERR_ARG, "run: no array for the fetches");
    for (int i = 0; i < pp->n_fetch; i++) fetched[i] = NULL;
    nb_status st = bind_feeds(pp, feeds);
    for (int i = 0; !st && i < pp->n_values; i++) {
        value *v = &pp->values[i];
        if (v->kind == V_SCOPE) v->t = nb_scope_find(scope, v->name);
    }
    /* A random op's numbers depend only on its seed and the run index, so a
     * training run resumed at step k (nb_prepared_set_run_index) draws what
     * the uninterrupted run drew. */
    for (int s = 0; s < pp->n_steps; s++)
        if (pp->steps[s].random) {
            uint64_t sd = nb_mix_seed(pp->steps[s].seed, pp->runs);
            nb_rng_seed(&pp->steps[s].rng, pp->stream ? nb_mix_seed(sd, pp->stream) : sd);
        }
    pp->runs++;
    pp->fused_steps = 0;
    unsigned fp = nb_fpmode_enter();
    for (int s = 0; !st && s < pp->n_steps; s++) {
        step *sp = &pp->steps[s];
        if (sp->folded) continue;
        if (sp->group < 0) st = nb_exec_step_run(pp, scope, sp);
        else {
            struct fuse_group *g = &pp->groups[sp->group];
            st = nb_fuse_run(pp, scope, g);
            s += g->n - 1;
        }
        /* What a c_allreduce_start left open moves on here (and in GEMMs). */
        nb_comm_progress();
    }
    nb_fpmode_leave(fp);
    /* A run that failed between its start and wait ops still completes
     * what it started: the other ranks are in those all-reduces. */
    if (st) nb_comm_wait_all_open();
    for (int i = 0; !st && i < pp->n_fetch; i++) {
        value *v = &pp->values[pp->fetch_values[i]];
        if (!v->t) {
            st = nb_error(NB_ERR_NOT_FOUND, "run: fetch '%s' has no value (not fed, not in the scope, not written)",
                          v->name);
        } else if (v->kind == V_SCOPE) {
            /* Scope values change under later runs: hand out a copy. */
            st = nb_tensor_clone(&fetched[i], v->t);
            pp->allocs++;
        } else {
            fetched[i] = nb_tensor_retain(v->t);
        }
    }
    /* Block 0, once its sizes are known (and again when they grow). */
    if (!st && !pp->scope_resident && (!pp->sized || pp->grew)) st = plan_by_size(pp, true);
    if (st)
        for (int i = 0; i < pp->n_fetch; i++) {
            nb_tensor_release(fetched[i]);
            fetched[i] = NULL;
        }
    for (int i = 0; i < pp->n_feed; i++) {
        pp->values[pp->feed_values[i]].t = NULL;
        nb_tensor_release(pp->feed_copies[i]);
        pp->feed_copies[i] = NULL;
    }
    for (int i = 0; i < pp->n_values; i++) {
        value *v = &pp->values[i];
        if (v->kind == V_SCOPE) v->t = NULL;
        /* A buffer that grew during the run would stay pinned, in its old
         * storage, by an earlier temporary's tensor until that temporary's
         * next binding: let that storage go now. */
        if (v->kind == V_TEMP && v->buffer >= 0 && v->t && v->t->refcount == 1 && v->t->storage &&
            v->t->storage != pp->buffers[v->buffer].storage) {
            storage_drop(v->t->storage);
            v->t->storage = NULL;
        }
    }
    return st;
}

nb_status nb_exec_run_block(const nb_exec_env *env, int block_idx, nb_scope *scope)
{
    nb_block_cache *c = env->cache;
    if (block_idx <= 0 || block_idx >= c->n || !nb_program_block(env->program, block_idx))
        return nb_error(NB_ERR_ARG, "run: the program has no sub-block %d", block_idx);
    if (!c->blocks[block_idx]) {
        nb_status st = prepare(&c->blocks[block_idx], env->program, block_idx, 0, NULL, 0, NULL, c);
        if (st) return st;
    }
    return nb_prepared_run(c->blocks[block_idx], scope, NULL, NULL);
}
