/* The backward engine (PyTorch's autograd engine is the model). One graph
 * task per nb_backward or nb_autograd_grad call: find the nodes reachable
 * from the roots, count for each how many gradients it will receive, keep
 * an input buffer per node that sums them, and run a node (its VJP rule,
 * through an eager builder) when its count reaches zero, latest-created
 * first. nb_autograd_grad also marks which nodes lie on a path to the
 * requested inputs and runs only those. */
#include <math.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "../core/prefetch.h"
#include "../core/tensor_internal.h"
#include "../builder/builder_internal.h"
#include "batched.h"
#include "nabla/grad_rule.h"
#include "nabla/ops.h"

/* What a node held for the task that owned it before a nested task (a
 * backward run from inside a node's backward, as nb_checkpoint does) took
 * it over; given back when the nested task ends. */
typedef struct saved_state {
    nb_node *n;
    uint64_t task;
    int deps, capture, index;
    bool needed;
    nb_tensor **buffer;
} saved_state;

typedef struct task {
    uint64_t id;
    saved_state *saved;
    int n_saved, cap_saved;
    bool retain_graph, create_graph, capturing;
    nb_node **nodes; /* reachable, each retained for the task until it has run (then NULL) */
    int n_nodes, cap_nodes;
    nb_node **heap; /* ready nodes, max-heap on sequence */
    int n_heap;
    int n_capture; /* nb_autograd_grad: where each input's gradient is picked up */
    nb_node **cap_node;
    int *cap_nr;
    nb_tensor **captured;
    nb_builder *b;
    struct buffer_chunk *chunks; /* where the nodes' buffers are carved from */
} task;

/* The nodes' gradient buffers (n_out + 1 slots each) come from chunks that
 * the task frees together at its end: one allocation per few hundred nodes,
 * not one per node, which was a tenth of a chain's backward. */
#define BUFFER_CHUNK_SLOTS 1024
typedef struct buffer_chunk {
    struct buffer_chunk *next;
    int used, cap;
    nb_tensor *slot[];
} buffer_chunk;

static nb_tensor **buffer_take(task *t, int n)
{
    buffer_chunk *c = t->chunks;
    if (!c || c->cap - c->used < n) {
        int cap = n > BUFFER_CHUNK_SLOTS ? n : BUFFER_CHUNK_SLOTS;
        if (!(c = nb_malloc(sizeof *c + (size_t)cap * sizeof c->slot[0]))) return NULL;
        *c = (buffer_chunk){t->chunks, 0, cap};
        t->chunks = c;
    }
    nb_tensor **b = c->slot + c->used;
    c->used += n;
    memset(b, 0, (size_t)n * sizeof *b);
    return b;
}

/* "st", "nd", "rd" or "th", as English writes the ordinal of n. */
static const char *ordinal_suffix(uint64_t n)
{
    if (n % 100 >= 11 && n % 100 <= 13) return "th";
    switch (n % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
    }
}

static _Thread_local uint64_t task_ids;

/* ---- bookkeeping --------------------------------------------------------------- */

static nb_status push_node(task *t, nb_node *n)
{
    if (t->n_nodes == t->cap_nodes) {
        int cap = t->cap_nodes ? 2 * t->cap_nodes : 64;
        nb_node **v = nb_realloc(t->nodes, (size_t)cap * sizeof *v);
        if (!v) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
        t->nodes = v;
        t->cap_nodes = cap;
    }
    if (n->task) { /* an outer task's: keep its state for it */
        if (t->n_saved == t->cap_saved) {
            int cap = t->cap_saved ? 2 * t->cap_saved : 16;
            saved_state *v = nb_realloc(t->saved, (size_t)cap * sizeof *v);
            if (!v) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
            t->saved = v;
            t->cap_saved = cap;
        }
        t->saved[t->n_saved++] = (saved_state){n, n->task, n->deps, n->capture, n->index, n->needed, n->buffer};
        n->buffer = NULL;
    }
    nb_node_retain(n);
    n->index = t->n_nodes;
    t->nodes[t->n_nodes++] = n;
    n->task = t->id;
    n->deps = 0;
    n->needed = !t->capturing;
    n->capture = 0;
    n->buffer = buffer_take(t, n->n_out + 1);
    return n->buffer ? NB_OK : nb_error(NB_ERR_NOMEM, "backward: out of memory");
}

/* Every node reachable from the roots, by an explicit stack (graphs can be
 * 100,000 nodes deep). A plain backward needs every node it reaches, so the
 * gradients each will receive are counted on the way, in the one pass over
 * the graph before it runs: a tape too big for the cache pays a miss on
 * each node per pass (nb_autograd_grad counts after mark_needed). */
static nb_status discover(task *t, int n_roots, nb_node *const *roots)
{
    nb_status st = NB_OK;
    int cap = 256, top = 0;
    nb_node **stack = nb_malloc((size_t)cap * sizeof *stack);
    if (!stack) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
    for (int i = 0; i < n_roots && !st; i++)
        if (roots[i] && roots[i]->task != t->id) {
            st = push_node(t, roots[i]);
            stack[top++] = roots[i];
            if (top == cap) break;
        }
    while (top > 0 && !st) {
        nb_node *n = stack[--top];
        for (int k = 0; n->kind != NODE_ACCUMULATE && k < n->n_in && !st; k++) {
            nb_node *m = n->next[k].node;
            if (!m) continue;
            /* m's edges, which its block holds right after it: asked for
             * now, their miss overlaps the one on m itself, instead of
             * following it when m is popped (a chain is walked one
             * dependent load after another). */
            nb_prefetch_lines(m + 1, sizeof(nb_edge));
            bool seen = m->task == t->id;
            if (!seen && (st = push_node(t, m))) break;
            if (!t->capturing && n->wants[k]) m->deps++;
            if (seen) continue;
            if (top == cap) {
                nb_node **bigger = nb_realloc(stack, (size_t)cap * 2 * sizeof *bigger);
                if (!bigger) {
                    st = nb_error(NB_ERR_NOMEM, "backward: out of memory");
                    break;
                }
                stack = bigger;
                cap *= 2;
            }
            stack[top++] = m;
        }
    }
    nb_free(stack);
    return st;
}

static int by_sequence(const void *a, const void *b)
{
    uint64_t x = (*(nb_node *const *)a)->seq, y = (*(nb_node *const *)b)->seq;
    return (x > y) - (x < y);
}

/* nb_autograd_grad: a node is needed when one of its edges leads to a
 * capture point or to a needed node. Edges point to earlier nodes (smaller
 * sequence numbers), so one pass in sequence order settles it. */
static void mark_needed(task *t)
{
    for (int i = 0; i < t->n_capture; i++)
        if (t->cap_node[i]) t->cap_node[i]->capture = 1;
    qsort(t->nodes, (size_t)t->n_nodes, sizeof *t->nodes, by_sequence);
    for (int i = 0; i < t->n_nodes; i++) t->nodes[i]->index = i;
    for (int i = 0; i < t->n_nodes; i++) {
        nb_node *n = t->nodes[i];
        if (n->kind == NODE_ACCUMULATE) continue;
        for (int k = 0; k < n->n_in && !n->needed; k++) {
            nb_node *m = n->next[k].node;
            n->needed = m && m->task == t->id && (m->needed || m->capture);
        }
    }
}

/* Whether node m, the target of an edge from a running node, takes part. */
static bool receives(const task *t, const nb_node *m) { return m && m->task == t->id && (m->needed || m->capture); }

static void count_dependencies(task *t)
{
    for (int i = 0; i < t->n_nodes; i++) {
        nb_node *n = t->nodes[i];
        if (n->kind == NODE_ACCUMULATE || !n->needed) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->wants[k] && receives(t, n->next[k].node)) n->next[k].node->deps++;
    }
}

static void heap_push(task *t, nb_node *n)
{
    int i = t->n_heap++;
    t->heap[i] = n;
    while (i > 0 && t->heap[(i - 1) / 2]->seq < t->heap[i]->seq) {
        nb_node *p = t->heap[(i - 1) / 2];
        t->heap[(i - 1) / 2] = t->heap[i];
        t->heap[i] = p;
        i = (i - 1) / 2;
    }
}

static nb_node *heap_pop(task *t)
{
    nb_node *top = t->heap[0];
    t->heap[0] = t->heap[--t->n_heap];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < t->n_heap && t->heap[l]->seq > t->heap[m]->seq) m = l;
        if (r < t->n_heap && t->heap[r]->seq > t->heap[m]->seq) m = r;
        if (m == i) break;
        nb_node *x = t->heap[m];
        t->heap[m] = t->heap[i];
        t->heap[i] = x;
        i = m;
    }
    return top;
}

/* a + b, recorded when the backward is (create_graph). Under forward mode
 * it goes through the builder even when not recorded, so that the sum of
 * two gradients has the sum of their tangents. */
static nb_status add_grads(task *t, nb_tensor *a, nb_tensor *b, nb_tensor **out)
{
    bool tangents = nb_eager_carries_tangents(t->b);
    /* Logical (vmap) gradients are added by their batching rule. */
    bool batched = nb_batched_level(a) || nb_batched_level(b);
    if (!t->create_graph && !tangents && !batched) {
        *out = NULL;
        return nb_op_run("add", NB_TENSORS(a, b), NB_NO_ATTRS, 1, out);
    }
    if (!t->create_graph) nb_grad_mode_push(false);
    nb_value s = nb_add(t->b, nb_eager_value(t->b, a), nb_eager_value(t->b, b));
    if (!t->create_graph) nb_grad_mode_pop();
    if (nb_builder_status(t->b)) return nb_error(nb_builder_status(t->b), "%s", nb_builder_error(t->b));
    *out = nb_tensor_retain(nb_eager_tensor(s));
    return NB_OK;
}

/* Whether the sum of a and b can go into a itself: a plain gradient that
 * nothing else holds (one reference to the tensor, one to its storage, which
 * is ours), contiguous, of b's dtype and shape, and no graph is being built
 * of the addition. A weight used at each of an LSTM's 64 steps got a new
 * tensor per step's gradient, and those sums, with the page faults of their
 * fresh memory, were a tenth of the eager step. */
static bool add_in_place(const task *t, const nb_tensor *a, const nb_tensor *b)
{
    return !t->create_graph && a->refcount == 1 && a->storage && a->storage->refcount == 1 && !a->storage->borrowed &&
        !a->autograd && a->dtype == b->dtype && nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape) &&
        nb_tensor_is_contiguous(a) && !nb_batched_level(a) && !nb_batched_level(b) && !nb_eager_carries_tangents(t->b);
}

/* Adds g (a reference the caller passes on) into buffer slot *slot. */
static nb_status accumulate(task *t, nb_tensor **slot, nb_tensor *g)
{
    if (!*slot) {
        *slot = g;
        return NB_OK;
    }
    if (add_in_place(t, *slot, g)) {
        nb_status st = nb_op_run("add", NB_TENSORS(*slot, g), NB_NO_ATTRS, 1, slot);
        nb_tensor_release(g);
        return st;
    }
    nb_tensor *sum;
    nb_status st = add_grads(t, *slot, g, &sum);
    nb_tensor_release(g);
    if (st) return st;
    nb_tensor_release(*slot);
    *slot = sum;
    return NB_OK;
}

static nb_status run_tensor_hooks(hook_list *h, nb_tensor **grad)
{
    for (int i = 0; h && i < h->n && *grad; i++) {
        nb_tensor *replace = NULL;
        nb_status st = ((nb_tensor_hook)h->fns[i])(*grad, &replace, h->ctxs[i]);
        if (st) return nb_error_context(st, "backward: a tensor hook failed");
        if (replace) {
            nb_tensor_release(*grad);
            *grad = replace;
        }
    }
    return NB_OK;
}

static nb_status run_node_hooks(nb_node *n, const hook_list *h, int count, nb_tensor **grads)
{
    for (int i = 0; h && i < h->n; i++) {
        nb_status st = ((nb_node_hook)h->fns[i])(n, count, grads, h->ctxs[i]);
        if (st)
            return nb_error_context(st, "backward: a hook of node %s #%llu failed", nb_node_op(n),
                                    (unsigned long long)n->seq);
    }
    return NB_OK;
}

static bool finite(const nb_tensor *g)
{
    for (const nb_batched *bt; (bt = nb_batched_of(g));) g = bt->phys; /* a logical gradient: its whole batch */
    for (int64_t i = 0; i < nb_tensor_numel(g); i++)
        if (!isfinite(nb_tensor_get(g, i))) return false;
    return true;
}

/* ---- running a node ------------------------------------------------------------ */

static nb_status check_saved(const nb_node *n)
{
    const char *label = n->def->name;
    if (n->released)
        return nb_error(NB_ERR_STATE,
                        "backward: trying to backward through the graph a second time (node %s #%llu): "
                        "its saved values were freed; pass retain_graph the first time",
                        label, (unsigned long long)n->seq);
    for (int side = 0; side < 2; side++) {
        int count = side ? n->n_out : n->n_in;
        nb_tensor **saved = side ? n->saved_out : n->saved_in;
        uint64_t *ver = side ? n->saved_out_version : n->saved_in_version;
        for (int k = 0; k < count; k++)
            if (saved[k] && nb_tensor_version(saved[k]) != ver[k])
                return nb_error(NB_ERR_STATE,
                                "backward: %s (node #%llu) saved its %s %d, which was since modified by an in-place %s "
                                "(version %llu, saved at %llu)",
                                label, (unsigned long long)n->seq, side ? "output" : "input", k,
                                saved[k]->storage->last_writer ? saved[k]->storage->last_writer : "op",
                                (unsigned long long)saved[k]->storage->version, (unsigned long long)ver[k]);
    }
    return NB_OK;
}

/* A view of saved output k that, when the backward is recorded, points back
 * at this node, so that rules reading y differentiate through it. Under
 * forward mode the view has the saved output's tangent. */
static nb_value unpack_output(task *t, nb_node *n, int k)
{
    if (!n->saved_out[k]) return NB_NONE;
    if (!t->create_graph) return nb_value_make(n->saved_out[k], NB_VALUE_TENSOR); /* the node holds it */
    nb_tensor *v;
    if (nb_tensor_detach(&v, n->saved_out[k])) return NB_NONE;
    nb_autograd *a = nb_autograd_of(v, true);
    if (!a) {
        nb_builder_fail(t->b, NB_ERR_NOMEM, "backward: out of memory unpacking a saved output of %s", n->def->name);
        nb_tensor_release(v);
        return NB_NONE;
    }
    nb_node_retain(n);
    a->grad_fn = n;
    a->output_nr = k;
    nb_status st = nb_eager_alias_tangent(t->b, n->saved_out[k], v);
    if (st) {
        nb_builder_fail(t->b, st, "%s", nb_last_error());
        nb_tensor_release(v);
        return NB_NONE;
    }
    nb_value val = nb_eager_value(t->b, v);
    nb_tensor_release(v);
    return val;
}

/* Passes each input gradient along its edge. Every counted edge lowers its
 * target's count, gradient or not, so a node whose rule made nothing for an
 * input still lets that input's node run. */
static nb_status deliver(task *t, nb_node *n, nb_tensor **dx)
{
    nb_status st = NB_OK;
    for (int k = 0; k < n->n_in; k++) {
        nb_tensor *g = dx[k];
        dx[k] = NULL;
        nb_node *m = n->next[k].node;
        if (!n->wants[k] || !receives(t, m)) {
            nb_tensor_release(g);
            continue;
        }
        if (!st && g && nb_anomaly_mode() && !finite(g))
            st = nb_error(NB_ERR_STATE,
                          "backward: anomaly: the gradient that %s (node #%llu, the %llu%s op recorded) produced for "
                          "its input %d holds NaN or Inf",
                          nb_node_op(n), (unsigned long long)n->seq, (unsigned long long)n->seq, ordinal_suffix(n->seq),
                          k);
        if (!st && g) st = accumulate(t, &m->buffer[n->next[k].nr], g);
        else nb_tensor_release(g);
        if (!st && --m->deps == 0) heap_push(t, m);
    }
    return st;
}

static nb_status run_op_node(task *t, nb_node *n)
{
    nb_status st = check_saved(n);
    if (st) return st;
    if (n->hooks && (st = run_node_hooks(n, &n->hooks->pre, n->n_out, n->buffer))) return st;
    nb_value x[64], y[64], dy[64], dxv[64];
    bool want[64];
    nb_tensor *dx[64]; /* the n_in used are cleared below, not all 64 */
    if (n->n_in > 64 || n->n_out > 64)
        return nb_error(NB_ERR_UNSUPPORTED, "backward: %s has too many slots", n->def->name);
    /* The rule's inputs are the node's (its saved values, held until it has
     * run) and the buffer's: handed over as they are, not held once more by
     * the builder. */
    for (int k = 0; k < n->n_in; k++) {
        dx[k] = NULL;
        x[k] = n->saved_in[k] ? nb_value_make(n->saved_in[k], NB_VALUE_TENSOR) : NB_NONE;
        want[k] = n->wants[k] && receives(t, n->next[k].node);
        dxv[k] = NB_NONE;
    }
    bool any = false;
    for (int k = 0; k < n->n_out; k++) {
        y[k] = unpack_output(t, n, k);
        dy[k] = n->buffer[k] ? nb_value_make(n->buffer[k], NB_VALUE_TENSOR) : NB_NONE;
        any |= n->buffer[k] != NULL;
    }
    if ((st = nb_builder_status(t->b))) return nb_error(st, "%s", nb_builder_error(t->b));
    if (any) {
        nb_grad_ctx g = {.def = n->def,
                         .attrs = n->attrs,
                         .x = x,
                         .y = y,
                         .dy = dy,
                         .dx = dxv,
                         .want_dx = want,
                         .y_info = n->out_info};
        for (int s = 0; s <= NB_MAX_SLOTS; s++) {
            g.in_begin[s] = n->in_begin[s];
            g.out_begin[s] = n->out_begin[s];
        }
        if (!n->def->vjp) {
            st = nb_error(NB_ERR_UNSUPPORTED, "backward: %s (node #%llu) has no gradient rule", n->def->name,
                          (unsigned long long)n->seq);
        } else {
            nb_grad_mode_push(t->create_graph);
            st = n->def->vjp(t->b, &g);
            nb_grad_mode_pop();
            if (!st) st = nb_builder_status(t->b);
            if (st) {
                if (nb_builder_status(t->b)) nb_error(st, "%s", nb_builder_error(t->b));
                nb_error_context(st, "backward: in the gradient rule of %s (node #%llu)", n->def->name,
                                 (unsigned long long)n->seq);
            }
        }
        for (int k = 0; !st && k < n->n_in; k++)
            dx[k] = want[k] && !nb_is_none(dxv[k]) ? nb_tensor_retain(dxv[k].p) : NULL;
    }
    if (!st && n->hooks) st = run_node_hooks(n, &n->hooks->post, n->n_in, dx);
    nb_eager_release_values(t->b);
    nb_builder_clear_error(t->b);
    if (!st) st = deliver(t, n, dx);
    else
        for (int k = 0; k < n->n_in; k++) nb_tensor_release(dx[k]);
    if (!t->retain_graph) nb_node_release_saved(n);
    return st;
}

/* A node whose backward is a function (nb_checkpoint's). */
static nb_status run_fn_node(task *t, nb_node *n)
{
    if (!n->fn->ctx)
        return nb_error(NB_ERR_STATE,
                        "backward: trying to backward through the graph a second time (node %s #%llu): "
                        "its saved values were freed; pass retain_graph the first time",
                        n->fn->name, (unsigned long long)n->seq);
    nb_status st = n->hooks ? run_node_hooks(n, &n->hooks->pre, n->n_out, n->buffer) : NB_OK;
    if (st) return st;
    bool *want = nb_calloc((size_t)n->n_in + 1, sizeof *want);
    nb_tensor **dx = nb_calloc((size_t)n->n_in + 1, sizeof *dx);
    if (!want || !dx) st = nb_error(NB_ERR_NOMEM, "backward: out of memory");
    bool any = false;
    for (int k = 0; k < n->n_out; k++) any |= n->buffer[k] != NULL;
    for (int k = 0; !st && k < n->n_in; k++) want[k] = n->wants[k] && receives(t, n->next[k].node);
    if (!st && any) {
        nb_grad_mode_push(t->create_graph);
        st = n->fn->fn(n->fn->ctx, n->n_out, n->buffer, n->n_in, want, dx, t->create_graph);
        nb_grad_mode_pop();
        if (st) nb_error_context(st, "backward: in %s (node #%llu)", n->fn->name, (unsigned long long)n->seq);
    }
    if (!st && n->hooks) st = run_node_hooks(n, &n->hooks->post, n->n_in, dx);
    if (!st) st = deliver(t, n, dx);
    else
        for (int k = 0; dx && k < n->n_in; k++) nb_tensor_release(dx[k]);
    nb_free(want);
    nb_free(dx);
    if (!t->retain_graph) nb_node_release_saved(n);
    return st;
}

static nb_status run_accumulate(task *t, nb_node *n)
{
    nb_tensor *g = n->buffer[0];
    n->buffer[0] = NULL;
    if (!g || !n->leaf) {
        nb_tensor_release(g);
        return NB_OK;
    }
    nb_autograd *a = nb_autograd_of(n->leaf, true);
    nb_status st = run_tensor_hooks(&a->hooks, &g);
    if (st || !g || t->capturing) {
        nb_tensor_release(g);
        return st;
    }
    if ((st = accumulate(t, &a->grad, g))) return st;
    /* Each leaf's accumulator runs once per pass, after all its
     * contributions: .grad is final for this pass (DDP starts its
     * all-reduces here). */
    for (int i = 0; a->accumulated && i < a->accumulated->n && !st; i++)
        if ((st = ((nb_grad_ready_hook)a->accumulated->fns[i])(n->leaf, a->accumulated->ctxs[i])))
            st = nb_error_context(st, "backward: a post-accumulate hook failed");
    return st;
}

/* A node's gradients are complete: hooks and retained grads of its outputs,
 * captures, then (if it is on a needed path) its rule. */
static nb_status process(task *t, nb_node *n)
{
    nb_status st = NB_OK;
    for (int k = 0; n->kind != NODE_ACCUMULATE && k < n->n_out && !st; k++) {
        if (n->out_hooks && n->buffer[k]) st = run_tensor_hooks(&n->out_hooks[k], &n->buffer[k]);
        if (!st && n->retain && n->retain[k] && n->buffer[k]) {
            nb_autograd *a = n->retain[k]->autograd;
            nb_tensor_release(a->grad);
            a->grad = nb_tensor_retain(n->buffer[k]);
        }
    }
    if (n->kind == NODE_ACCUMULATE && n->leaf && n->buffer[0]) {
        nb_autograd *a = n->leaf->autograd;
        if (a && t->capturing) st = run_tensor_hooks(&a->hooks, &n->buffer[0]);
    }
    for (int i = 0; i < t->n_capture && !st; i++)
        if (t->cap_node[i] == n && n->buffer[t->cap_nr[i]]) t->captured[i] = nb_tensor_retain(n->buffer[t->cap_nr[i]]);
    if (st || !n->needed) return st;
    st = n->kind == NODE_ACCUMULATE ? run_accumulate(t, n) : n->kind == NODE_FN ? run_fn_node(t, n) : run_op_node(t, n);
    /* Its gradients are spent: freed now, while in the cache (and their
     * blocks ready for the next node's), not when the pass ends. */
    for (int k = 0; !st && k < n->n_out; k++) {
        nb_tensor_release(n->buffer[k]);
        n->buffer[k] = NULL;
    }
    return st;
}

/* The nodes n passes gradients to will most likely run next: their blocks
 * and the values they saved are asked for now, while n runs. A tape longer
 * than the cache holds is otherwise read one miss after another (this made a
 * backward node of a 10,000-op chain 1.3x faster). The step after is asked
 * for too, to be warm when it comes to be prefetched in turn: its size is
 * still to be read, so as much as a node of a two-input op takes. */
static void prefetch_ahead(const nb_node *n)
{
    if (n->kind == NODE_ACCUMULATE) return;
    for (int k = 0; k < n->n_in; k++) {
        const nb_node *m = n->next[k].node;
        if (!m) continue;
        nb_prefetch_lines(m, m->bytes);
        if (m->kind == NODE_ACCUMULATE) continue;
        for (int j = 0; j < m->n_in; j++) {
            if (m->saved_in[j]) nb_tensor_prefetch(m->saved_in[j]);
            if (m->next[j].node) nb_prefetch_lines(m->next[j].node, 2 * sizeof(nb_node));
        }
    }
}

/* Gives up the task's hold on its i-th node and what its buffer still has. */
static void drop_node(task *t, int i)
{
    nb_node *n = t->nodes[i];
    t->nodes[i] = NULL;
    for (int k = 0; n->buffer && k < n->n_out; k++) nb_tensor_release(n->buffer[k]);
    n->buffer = NULL;
    n->task = 0;
    nb_node_release(n);
}

/* Processes n and then drops it: nothing of this task reaches it again (the
 * nodes with edges to it have run), and the task's end then walks no node,
 * which in a tape larger than the cache was one more miss per node. */
static nb_status process_and_drop(task *t, nb_node *n)
{
    prefetch_ahead(n);
    nb_status st = process(t, n);
    if (!st && n->task == t->id && t->nodes[n->index] == n) drop_node(t, n->index);
    return st;
}

/* ---- a graph task -------------------------------------------------------------- */

static void task_free(task *t)
{
    for (int i = 0; i < t->n_nodes; i++)
        if (t->nodes[i]) drop_node(t, i);
    /* Nodes an outer task owns get their state back, innermost first. */
    for (int i = t->n_saved - 1; i >= 0; i--) {
        saved_state *s = &t->saved[i];
        s->n->task = s->task;
        s->n->deps = s->deps;
        s->n->capture = s->capture;
        s->n->index = s->index;
        s->n->needed = s->needed;
        s->n->buffer = s->buffer;
    }
    nb_free(t->saved);
    for (int i = 0; t->cap_node && i < t->n_capture; i++) nb_node_release(t->cap_node[i]);
    for (buffer_chunk *c = t->chunks, *next; c; c = next) {
        next = c->next;
        nb_free(c);
    }
    nb_free(t->nodes);
    nb_free(t->heap);
    nb_free(t->cap_node);
    nb_free(t->cap_nr);
    nb_builder_free(t->b);
}

/* Runs the task from the roots (their gradients already resolved). */
static nb_status run_task(task *t, int n_roots, nb_tensor *const *roots, nb_tensor **root_grads)
{
    nb_node **root_nodes = nb_calloc((size_t)n_roots + 1, sizeof *root_nodes);
    int *root_nr = nb_calloc((size_t)n_roots + 1, sizeof *root_nr);
    nb_status st =
        root_nodes && root_nr ? nb_eager_builder_for_engine(&t->b) : nb_error(NB_ERR_NOMEM, "backward: out of memory");
    for (int i = 0; i < n_roots && !st; i++) {
        nb_edge e;
        if ((st = nb_edge_of(roots[i], &e))) break;
        if (!e.node)
            st = nb_error(NB_ERR_ARG,
                          "backward: root %d does not require grad: no recorded op made it and it is not a "
                          "leaf that requires grad",
                          i);
        root_nodes[i] = e.node;
        root_nr[i] = e.nr;
    }
    if (!st) st = discover(t, n_roots, root_nodes);
    if (!st && t->capturing) {
        mark_needed(t);
        count_dependencies(t);
    }
    if (!st && !(t->heap = nb_calloc((size_t)t->n_nodes + 1, sizeof *t->heap)))
        st = nb_error(NB_ERR_NOMEM, "backward: out of memory");
    if (!st) {
        for (int i = 0; i < n_roots && !st; i++) {
            nb_node *n = root_nodes[i];
            st = accumulate(t, &n->buffer[root_nr[i]], nb_tensor_retain(root_grads[i]));
        }
        for (int i = 0; i < n_roots && !st; i++) {
            nb_node *n = root_nodes[i];
            bool queued = false;
            for (int j = 0; j < i; j++) queued |= root_nodes[j] == n;
            if (!queued && n->deps == 0 && (n->needed || n->capture)) heap_push(t, n);
        }
    }
    while (!st && t->n_heap > 0) st = process_and_drop(t, heap_pop(t));
    for (int i = 0; root_nodes && i < n_roots; i++) nb_node_release(root_nodes[i]);
    nb_free(root_nodes);
    nb_free(root_nr);
    return st;
}

/* Each root's gradient: the caller's, or ones for a one-element root. */
static nb_status root_gradients(int n, nb_tensor *const *roots, nb_tensor *const *given, nb_tensor **out)
{
    for (int i = 0; i < n; i++) {
        if (!roots[i]) return nb_error(NB_ERR_ARG, "backward: root %d is NULL", i);
        if (!nb_tensor_requires_grad(roots[i]))
            return nb_error(NB_ERR_ARG,
                            "backward: root %d does not require grad: no recorded op made it and it is not "
                            "a leaf that requires grad",
                            i);
        if (given && given[i]) {
            if (!nb_shape_equal(given[i]->ndim, given[i]->shape, roots[i]->ndim, roots[i]->shape)) {
                char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
                return nb_error(NB_ERR_SHAPE, "backward: the gradient given for root %d has shape %s, the root %s", i,
                                nb_shape_str(a, sizeof a, given[i]->ndim, given[i]->shape),
                                nb_shape_str(b, sizeof b, roots[i]->ndim, roots[i]->shape));
            }
            out[i] = nb_tensor_retain(given[i]);
            continue;
        }
        if (nb_tensor_numel(roots[i]) != 1) {
            char a[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_SHAPE,
                            "backward: root %d has shape %s; a gradient is implied only for one-element "
                            "roots, so pass root_grads",
                            i, nb_shape_str(a, sizeof a, roots[i]->ndim, roots[i]->shape));
        }
        nb_status st = nb_tensor_full(&out[i], roots[i]->dtype, roots[i]->ndim, roots[i]->shape, 1.0);
        if (st) return st;
    }
    return NB_OK;
}

nb_status nb_backward(nb_tensors root_list, nb_tensor *const *root_grads, unsigned flags)
{
    int n_roots = root_list.n;
    nb_tensor *const *roots = root_list.v;
    bool create_graph = flags & NB_CREATE_GRAPH, retain_graph = flags & NB_RETAIN_GRAPH;
    if (n_roots < 1 || !roots) return nb_error(NB_ERR_ARG, "backward: no roots");
    nb_tensor **grads = nb_calloc((size_t)n_roots, sizeof *grads);
    if (!grads) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
    task t = {.id = ++task_ids, .retain_graph = retain_graph || create_graph, .create_graph = create_graph};
    nb_status st = root_gradients(n_roots, roots, root_grads, grads);
    if (!st) st = run_task(&t, n_roots, roots, grads);
    for (int i = 0; i < n_roots; i++) nb_tensor_release(grads[i]);
    nb_free(grads);
    task_free(&t);
    return st;
}

nb_status nb_autograd_grad(nb_tensors outs, nb_tensor *const *grad_outputs, nb_tensors ins, unsigned flags,
                           nb_tensor **grads_out)
{
    int n_out = outs.n, n_in = ins.n;
    nb_tensor *const *outputs = outs.v, *const *inputs = ins.v;
    bool create_graph = flags & NB_CREATE_GRAPH, retain_graph = flags & NB_RETAIN_GRAPH;
    bool allow_unused = flags & NB_ALLOW_UNUSED;
    if (n_out < 1 || !outputs || n_in < 1 || !inputs || !grads_out)
        return nb_error(NB_ERR_ARG, "autograd_grad: need outputs, inputs and room for the gradients");
    for (int i = 0; i < n_in; i++) grads_out[i] = NULL;
    nb_tensor **grads = nb_calloc((size_t)n_out, sizeof *grads);
    task t = {.id = ++task_ids,
              .retain_graph = retain_graph || create_graph,
              .create_graph = create_graph,
              .capturing = true,
              .n_capture = n_in,
              .captured = grads_out};
    t.cap_node = nb_calloc((size_t)n_in, sizeof *t.cap_node);
    t.cap_nr = nb_calloc((size_t)n_in, sizeof *t.cap_nr);
    nb_status st = grads && t.cap_node && t.cap_nr ? NB_OK : nb_error(NB_ERR_NOMEM, "autograd_grad: out of memory");
    for (int i = 0; i < n_in && !st; i++) {
        if (!inputs[i] || !nb_tensor_requires_grad(inputs[i])) {
            st = nb_error(NB_ERR_ARG, "autograd_grad: input %d does not require grad", i);
            break;
        }
        nb_edge e;
        if ((st = nb_edge_of(inputs[i], &e))) break;
        t.cap_node[i] = e.node;
        t.cap_nr[i] = e.nr;
    }
    if (!st) st = root_gradients(n_out, outputs, grad_outputs, grads);
    if (!st) st = run_task(&t, n_out, outputs, grads);
    for (int i = 0; i < n_in && !st; i++)
        if (!grads_out[i] && !allow_unused)
            st = nb_error(NB_ERR_ARG,
                          "autograd_grad: input %d is not used to compute the outputs (pass NB_ALLOW_UNUSED)", i);
    if (st)
        for (int i = 0; i < n_in; i++) {
            nb_tensor_release(grads_out[i]);
            grads_out[i] = NULL;
        }
    for (int i = 0; grads && i < n_out; i++) nb_tensor_release(grads[i]);
    nb_free(grads);
    task_free(&t);
    return st;
}
