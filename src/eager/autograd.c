/* The autograd state of tensors, backward nodes, and recording an op. */
#include <pthread.h>
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "autograd.h"
#include "batched.h"
#include "../core/small_pool.h"
#include "../core/tensor_internal.h"

static _Thread_local uint64_t sequence;
static _Thread_local int grad_mode_depth; /* entries on the mode stack */
static _Thread_local bool grad_mode_stack[64];
static _Thread_local bool anomaly;

uint64_t nb_next_sequence(void) { return ++sequence; }

void nb_grad_mode_push(bool enabled)
{
    if (grad_mode_depth < 64) grad_mode_stack[grad_mode_depth] = enabled;
    grad_mode_depth++;
}

void nb_grad_mode_pop(void)
{
    if (grad_mode_depth > 0) grad_mode_depth--;
}

bool nb_grad_mode_enabled(void)
{
    int d = grad_mode_depth > 64 ? 64 : grad_mode_depth;
    return d == 0 ? true : grad_mode_stack[d - 1];
}

void nb_set_anomaly_mode(bool on) { anomaly = on; }
bool nb_anomaly_mode(void) { return anomaly; }

/* ---- hooks ----------------------------------------------------------------- */

nb_status hook_list_add(hook_list *h, void *fn, void *ctx)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 2;
        void **f = nb_realloc(h->fns, (size_t)cap * sizeof *f);
        if (!f) return nb_error(NB_ERR_NOMEM, "hook: out of memory");
        h->fns = f;
        void **c = nb_realloc(h->ctxs, (size_t)cap * sizeof *c);
        if (!c) return nb_error(NB_ERR_NOMEM, "hook: out of memory");
        h->ctxs = c;
        h->cap = cap;
    }
    h->fns[h->n] = fn;
    h->ctxs[h->n++] = ctx;
    return NB_OK;
}

void hook_list_free(hook_list *h)
{
    nb_free(h->fns);
    nb_free(h->ctxs);
    memset(h, 0, sizeof *h);
}

/* ---- tensor state --------------------------------------------------------------- */

static void autograd_free(nb_tensor *t)
{
    nb_autograd *a = t->autograd;
    if (a->grad_fn) {
        /* A tensor that retained its grad leaves its node: clear the weak link. */
        nb_node *n = a->grad_fn;
        if (n->retain && n->retain[a->output_nr] == t) n->retain[a->output_nr] = NULL;
        nb_node_release(n);
    }
    if (a->accumulator && a->accumulator->leaf == t) a->accumulator->leaf = NULL;
    nb_tensor_release(a->grad);
    hook_list_free(&a->hooks);
    if (a->accumulated) hook_list_free(a->accumulated);
    nb_free(a->accumulated);
    nb_batched_free(a->batched);
    if (!a->in_room) nb_free(a);
    t->autograd = NULL;
}

static void install_free_hook(void) { nb_tensor_autograd_free_hook = autograd_free; }

nb_autograd *nb_autograd_of(nb_tensor *t, bool create)
{
    if (!t) return NULL;
    if (!t->autograd && create) {
        /* Set once for the process: threads creating autograd state at once
         * would otherwise race on the global. pthread_once also orders the
         * store before any tensor given autograd state here, so the thread
         * that frees such a tensor (after it reached that thread through
         * some synchronisation) sees the hook. */
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, install_free_hook);
        _Static_assert(sizeof(nb_autograd) <= NB_TENSOR_ROOM, "nb_autograd outgrew the tensor's room");
        nb_autograd *a = nb_tensor_room(t);
        if (a) *a = (nb_autograd){.in_room = true};
        else a = nb_calloc(1, sizeof *a);
        t->autograd = a;
    }
    return t->autograd;
}

bool nb_tensor_requires_grad(const nb_tensor *t)
{
    const nb_autograd *a = t ? t->autograd : NULL;
    return a && (a->requires_grad || a->grad_fn);
}

bool nb_tensor_is_leaf(const nb_tensor *t)
{
    const nb_autograd *a = t ? t->autograd : NULL;
    return !a || !a->grad_fn;
}

nb_status nb_tensor_set_requires_grad(nb_tensor *t, bool on)
{
    if (!t) return nb_error(NB_ERR_ARG, "requires_grad: tensor is NULL");
    if (!nb_tensor_is_leaf(t))
        return nb_error(NB_ERR_ARG,
                        "requires_grad: only leaves can be changed (this tensor was made by %s); "
                        "detach it first",
                        nb_node_op(((nb_autograd *)t->autograd)->grad_fn));
    if (on && !nb_dtype_is_float(t->dtype))
        return nb_error(NB_ERR_DTYPE, "requires_grad: only floating-point tensors have gradients, not %s",
                        nb_dtype_name(t->dtype));
    nb_autograd *a = nb_autograd_of(t, on);
    if (!a && on) return nb_error(NB_ERR_NOMEM, "requires_grad: out of memory");
    if (a) a->requires_grad = on;
    return NB_OK;
}

nb_tensor *nb_tensor_grad(const nb_tensor *t) { return t && t->autograd ? ((nb_autograd *)t->autograd)->grad : NULL; }

void nb_tensor_zero_grad(nb_tensor *t)
{
    nb_autograd *a = t ? t->autograd : NULL;
    if (!a) return;
    nb_tensor_release(a->grad);
    a->grad = NULL;
}

nb_status nb_tensor_retain_grad(nb_tensor *t)
{
    nb_autograd *a = t ? t->autograd : NULL;
    if (!a || (!a->requires_grad && !a->grad_fn))
        return nb_error(NB_ERR_ARG, "retain_grad: the tensor does not require grad");
    if (!a->grad_fn) return NB_OK; /* leaves keep theirs anyway */
    a->retains_grad = true;
    nb_node *n = a->grad_fn;
    if (!n->retain && !(n->retain = nb_calloc((size_t)n->n_out + 1, sizeof *n->retain)))
        return nb_error(NB_ERR_NOMEM, "retain_grad: out of memory");
    n->retain[a->output_nr] = t;
    return NB_OK;
}

nb_status nb_tensor_detach(nb_tensor **out, nb_tensor *t)
{
    *out = NULL;
    if (!t) return nb_error(NB_ERR_ARG, "detach: tensor is NULL");
    nb_tensor *d = nb_calloc(1, sizeof *d);
    if (!d) return nb_error(NB_ERR_NOMEM, "detach: out of memory");
    *d = *t;
    d->refcount = 1;
    d->autograd = NULL;
    if (d->storage) d->storage->refcount++;
    nb_status st = nb_batched_copy(d, t); /* a logical tensor's copy is logical too */
    if (st) {
        nb_tensor_release(d);
        return st;
    }
    *out = d;
    return NB_OK;
}

uint64_t nb_tensor_version(const nb_tensor *t) { return t && t->storage ? t->storage->version : 0; }

nb_status nb_tensor_register_hook(nb_tensor *t, nb_tensor_hook fn, void *ctx)
{
    nb_autograd *a = t ? t->autograd : NULL;
    if (!a || (!a->requires_grad && !a->grad_fn))
        return nb_error(NB_ERR_ARG, "register_hook: the tensor does not require grad");
    if (!a->grad_fn) return hook_list_add(&a->hooks, (void *)fn, ctx);
    nb_node *n = a->grad_fn;
    if (!n->out_hooks && !(n->out_hooks = nb_calloc((size_t)n->n_out + 1, sizeof *n->out_hooks)))
        return nb_error(NB_ERR_NOMEM, "register_hook: out of memory");
    return hook_list_add(&n->out_hooks[a->output_nr], (void *)fn, ctx);
}

nb_status nb_tensor_register_post_accumulate_hook(nb_tensor *t, nb_grad_ready_hook fn, void *ctx)
{
    nb_autograd *a = t ? t->autograd : NULL;
    if (!fn || !a || !a->requires_grad || a->grad_fn)
        return nb_error(NB_ERR_ARG, "register_post_accumulate_hook: %s",
                        !fn ? "no function" : "the tensor is not a leaf that requires grad");
    if (!a->accumulated && !(a->accumulated = nb_calloc(1, sizeof *a->accumulated)))
        return nb_error(NB_ERR_NOMEM, "register_post_accumulate_hook: out of memory");
    return hook_list_add(a->accumulated, (void *)fn, ctx);
}

void nb_tensor_remove_post_accumulate_hook(nb_tensor *t, nb_grad_ready_hook fn, void *ctx)
{
    nb_autograd *a = t ? t->autograd : NULL;
    if (!a) return;
    hook_list *h = a->accumulated;
    if (!h) return;
    for (int i = 0; i < h->n; i++)
        if (h->fns[i] == (void *)fn && h->ctxs[i] == ctx) {
            memmove(h->fns + i, h->fns + i + 1, (size_t)(h->n - i - 1) * sizeof *h->fns);
            memmove(h->ctxs + i, h->ctxs + i + 1, (size_t)(h->n - i - 1) * sizeof *h->ctxs);
            h->n--;
            return;
        }
}

nb_status nb_tensor_set_grad(nb_tensor *t, nb_tensor *grad)
{
    nb_autograd *a = t ? nb_autograd_of(t, grad != NULL) : NULL;
    if (!t) return nb_error(NB_ERR_ARG, "set_grad: NULL tensor");
    if (!grad) {
        nb_tensor_zero_grad(t);
        return NB_OK;
    }
    if (!a) return nb_error(NB_ERR_NOMEM, "set_grad: out of memory");
    if (grad->dtype != t->dtype || !nb_shape_equal(grad->ndim, grad->shape, t->ndim, t->shape)) {
        char x[NB_SHAPE_STR_MAX], y[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "set_grad: the gradient is %s %s but the tensor is %s %s",
                        nb_dtype_name(grad->dtype), nb_shape_str(x, sizeof x, grad->ndim, grad->shape),
                        nb_dtype_name(t->dtype), nb_shape_str(y, sizeof y, t->ndim, t->shape));
    }
    nb_tensor_retain(grad);
    nb_tensor_release(a->grad);
    a->grad = grad;
    return NB_OK;
}

/* ---- nodes -------------------------------------------------------------------- */

nb_node *nb_tensor_grad_fn(const nb_tensor *t)
{
    return t && t->autograd ? ((nb_autograd *)t->autograd)->grad_fn : NULL;
}
const char *nb_node_op(const nb_node *n)
{
    return n->kind == NODE_ACCUMULATE ? "accumulate_grad" : n->kind == NODE_FN ? n->fn->name : n->def->name;
}
uint64_t nb_node_sequence(const nb_node *n) { return n->seq; }
static node_hooks *hooks_of(nb_node *n)
{
    if (!n->hooks) n->hooks = nb_calloc(1, sizeof *n->hooks);
    if (!n->hooks) nb_error(NB_ERR_NOMEM, "hook: out of memory");
    return n->hooks;
}
nb_status nb_node_register_pre_hook(nb_node *n, nb_node_hook fn, void *ctx)
{
    node_hooks *h = hooks_of(n);
    return h ? hook_list_add(&h->pre, (void *)fn, ctx) : NB_ERR_NOMEM;
}
nb_status nb_node_register_post_hook(nb_node *n, nb_node_hook fn, void *ctx)
{
    node_hooks *h = hooks_of(n);
    return h ? hook_list_add(&h->post, (void *)fn, ctx) : NB_ERR_NOMEM;
}

void nb_node_retain(nb_node *n)
{
    if (n) n->refcount++;
}

void nb_node_release_saved(nb_node *n)
{
    for (int i = 0; n->saved_in && i < n->n_in; i++) {
        nb_tensor_release(n->saved_in[i]);
        n->saved_in[i] = NULL;
    }
    for (int i = 0; n->saved_out && i < n->n_out; i++) {
        nb_tensor_release(n->saved_out[i]);
        n->saved_out[i] = NULL;
    }
    if (n->fn && n->fn->ctx && n->fn->free) n->fn->free(n->fn->ctx);
    if (n->fn) n->fn->ctx = NULL;
    n->released = true;
}

/* Nodes form chains as long as the graph; releasing iteratively keeps the
 * stack flat however deep the graph is (a chain of 100,000 ops). */
void nb_node_release(nb_node *n)
{
    if (n && n->refcount > 1) { /* the usual case, without the walk's setup */
        n->refcount--;
        return;
    }
    nb_node *stack_inline[64], **stack = stack_inline;
    int top = 0, cap = 64;
    if (n) stack[top++] = n;
    while (top > 0) {
        nb_node *m = stack[--top];
        if (--m->refcount > 0) continue;
        nb_node_release_saved(m);
        for (int i = 0; m->next && i < m->n_in; i++) {
            nb_node *nx = m->next[i].node;
            if (!nx) continue;
            if (top == cap) {
                nb_node **bigger = nb_malloc((size_t)cap * 2 * sizeof *bigger);
                if (!bigger) { /* out of memory: leak rather than recurse */
                    continue;
                }
                memcpy(bigger, stack, (size_t)top * sizeof *stack);
                if (stack != stack_inline) nb_free(stack);
                stack = bigger;
                cap *= 2;
            }
            stack[top++] = nx;
        }
        if (m->kind == NODE_ACCUMULATE && m->leaf) {
            nb_autograd *a = m->leaf->autograd;
            if (a && a->accumulator == m) a->accumulator = NULL;
            nb_tensor_release(m->leaf);
        }
        for (int i = 0; m->def && i < NB_MAX_ATTRS && m->def->attrs[i].name; i++) nb_attr_value_free(&m->attrs[i]);
        for (int i = 0; m->out_hooks && i < m->n_out; i++) hook_list_free(&m->out_hooks[i]);
        if (m->hooks) {
            hook_list_free(&m->hooks->pre);
            hook_list_free(&m->hooks->post);
            nb_free(m->hooks);
        }
        nb_free(m->out_hooks);
        nb_free(m->retain);
        nb_free(m->fn);
        nb_small_free(m, m->bytes);
    }
    if (stack != stack_inline) nb_free(stack);
}

/* A node with its per-input and per-output arrays and its attributes in the
 * same block: one allocation, not eight, for every op the tape records, and
 * no room for attributes the op does not have (a fixed array of them was
 * half of a recorded mul's memory). */
static nb_node *node_new(node_kind kind, int n_in, int n_out, int n_attrs)
{
    size_t ni = (size_t)n_in, no = (size_t)n_out;
    size_t size = sizeof(nb_node), at[8];
#define PLACE(i, count, type)                                              \
    size = (size + _Alignof(type) - 1) / _Alignof(type) * _Alignof(type); \
    at[i] = size;                                                          \
    size += (count) * sizeof(type);
    PLACE(0, ni, nb_edge) /* first, right after the node: discover() counts on it */
    PLACE(1, ni, nb_tensor *)
    PLACE(2, ni, uint64_t)
    PLACE(3, no, nb_tensor *)
    PLACE(4, no, uint64_t)
    PLACE(5, no, nb_var_info)
    PLACE(6, ni, bool)
    PLACE(7, (size_t)n_attrs, nb_attr_value)
#undef PLACE
    char *base = nb_small_alloc(size);
    if (!base) return NULL;
    memset(base, 0, size);
    nb_node *n = (nb_node *)base;
    /* Field by field: the block is zeroed, and a compound literal would
     * clear the whole node once more. */
    n->bytes = size;
    n->refcount = 1;
    n->kind = kind;
    n->seq = nb_next_sequence();
    n->n_in = n_in;
    n->n_out = n_out;
    n->next = (nb_edge *)(base + at[0]);
    n->saved_in = (nb_tensor **)(base + at[1]);
    n->saved_in_version = (uint64_t *)(base + at[2]);
    n->saved_out = (nb_tensor **)(base + at[3]);
    n->saved_out_version = (uint64_t *)(base + at[4]);
    n->out_info = (nb_var_info *)(base + at[5]);
    n->wants = (bool *)(base + at[6]);
    n->attrs = n_attrs ? (nb_attr_value *)(base + at[7]) : NULL;
    return n;
}

nb_status nb_edge_of(nb_tensor *t, nb_edge *e)
{
    nb_autograd *a = t ? t->autograd : NULL;
    *e = (nb_edge){NULL, 0};
    if (!a) return NB_OK;
    if (a->grad_fn) {
        nb_node_retain(a->grad_fn);
        *e = (nb_edge){a->grad_fn, a->output_nr};
        return NB_OK;
    }
    if (!a->requires_grad) return NB_OK;
    if (!a->accumulator) {
        nb_node *n = node_new(NODE_ACCUMULATE, 0, 1, 0);
        if (!n) return nb_error(NB_ERR_NOMEM, "autograd: out of memory making a leaf's gradient accumulator");
        n->leaf = nb_tensor_retain(t);
        n->seq = UINT64_MAX; /* accumulate as soon as ready */
        a->accumulator = n;  /* weak: its users own it */
        *e = (nb_edge){n, 0};
        return NB_OK;
    }
    nb_node_retain(a->accumulator);
    *e = (nb_edge){a->accumulator, 0};
    return NB_OK;
}

/* Makes n the history of the float outputs (each holds a reference). */
static bool adopt_outputs(nb_node *n, int n_out, nb_tensor *const *out)
{
    for (int k = 0; k < n_out; k++) {
        if (!nb_dtype_is_float(out[k]->dtype)) continue;
        nb_autograd *a = nb_autograd_of(out[k], true);
        if (!a) return false;
        nb_node_retain(n);
        a->grad_fn = n;
        a->output_nr = k;
    }
    return true;
}

nb_status nb_record_node(const nb_op_def *def, const nb_attr_value *attrs, const int *in_begin, const int *out_begin,
                         int n_in, nb_tensor *const *in, int n_out, nb_tensor *const *out)
{
    bool any = false;
    for (int s = 0; s < NB_MAX_SLOTS && def->inputs[s].name; s++)
        if (!(def->inputs[s].flags & NB_SLOT_NO_GRAD))
            for (int k = in_begin[s]; k < in_begin[s + 1]; k++) any |= nb_tensor_requires_grad(in[k]);
    if (!any) return NB_OK;
    int n_attrs = 0;
    while (n_attrs < NB_MAX_ATTRS && def->attrs[n_attrs].name) n_attrs++;
    nb_node *n = node_new(NODE_OP, n_in, n_out, n_attrs);
    if (!n) return nb_error(NB_ERR_NOMEM, "%s: out of memory recording its node", def->name);
    n->def = def;
    for (int s = 0; s <= NB_MAX_SLOTS; s++) {
        n->in_begin[s] = (uint8_t)in_begin[s]; /* at most 64 (eager_emit's limit) */
        n->out_begin[s] = (uint8_t)out_begin[s];
    }
    bool ok = true;
    for (int i = 0; i < n_attrs && ok; i++) ok = !nb_attr_value_copy(&n->attrs[i], &attrs[i]);
    for (int s = 0; ok && s < NB_MAX_SLOTS && def->inputs[s].name; s++)
        for (int k = in_begin[s]; k < in_begin[s + 1]; k++) {
            if ((def->grad_uses_inputs >> s) & 1) {
                n->saved_in[k] = nb_tensor_retain(in[k]);
                n->saved_in_version[k] = nb_tensor_version(in[k]);
            }
            if ((def->inputs[s].flags & NB_SLOT_NO_GRAD) || !nb_tensor_requires_grad(in[k])) continue;
            if (nb_edge_of(in[k], &n->next[k])) ok = false;
            n->wants[k] = n->next[k].node != NULL;
        }
    for (int s = 0; ok && s < NB_MAX_SLOTS && def->outputs[s].name; s++)
        for (int k = out_begin[s]; k < out_begin[s + 1]; k++) {
            nb_tensor *o = out[k];
            n->out_info[k] = (nb_var_info){.dtype = o->dtype, .ndim = o->ndim};
            memcpy(n->out_info[k].shape, o->shape, sizeof o->shape);
            if (((def->grad_uses_outputs >> s) & 1) && nb_tensor_detach(&n->saved_out[k], o)) ok = false;
            if (n->saved_out[k]) n->saved_out_version[k] = nb_tensor_version(o);
        }
    if (ok) ok = adopt_outputs(n, n_out, out);
    /* The next op recorded will most likely want blocks of the same sizes:
     * they come from the pool, cold since the last backward freed them, and
     * were half of a recorded op's time in a long tape. */
    nb_small_prefetch(n->bytes);
    for (int k = 0; k < n_out; k++) nb_tensor_prefetch_block_like(out[k]);
    nb_node_release(n); /* the outputs hold it now */
    return ok ? NB_OK : nb_error(NB_ERR_NOMEM, "%s: out of memory recording its node", def->name);
}

nb_status nb_record_fn_node(const char *name, nb_node_fn fn, void *ctx, void (*free_fn)(void *), int n_in,
                            nb_tensor *const *in, int n_out, nb_tensor *const *out)
{
    nb_node *n = node_new(NODE_FN, n_in, n_out, 0);
    if (!n) {
        if (free_fn) free_fn(ctx);
        return nb_error(NB_ERR_NOMEM, "%s: out of memory recording its node", name);
    }
    if (!(n->fn = nb_malloc(sizeof *n->fn))) {
        nb_small_free(n, n->bytes);
        if (free_fn) free_fn(ctx);
        return nb_error(NB_ERR_NOMEM, "%s: out of memory recording its node", name);
    }
    *n->fn = (nb_fn_part){fn, ctx, free_fn, name};
    /* What the function keeps, as an op node's saved values are counted
     * (nb_autograd_saved_bytes). */
    bool ok = true;
    for (int k = 0; ok && k < n_in; k++) {
        n->saved_in[k] = nb_tensor_retain(in[k]);
        if (!nb_tensor_requires_grad(in[k])) continue;
        if (nb_edge_of(in[k], &n->next[k])) ok = false;
        n->wants[k] = n->next[k].node != NULL;
    }
    for (int k = 0; ok && k < n_out; k++) {
        n->out_info[k] = (nb_var_info){.dtype = out[k]->dtype, .ndim = out[k]->ndim};
        memcpy(n->out_info[k].shape, out[k]->shape, sizeof out[k]->shape);
    }
    if (ok) ok = adopt_outputs(n, n_out, out);
    nb_node_release(n); /* the outputs hold it now */
    return ok ? NB_OK : nb_error(NB_ERR_NOMEM, "%s: out of memory recording its node", name);
}
