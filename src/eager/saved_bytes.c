/* nb_autograd_saved_bytes (nabla/eager.h): the memory a tape holds for its
 * backward pass, walking the nodes behind some tensors and counting each
 * storage their saved values keep alive once. The storages of leaves that
 * take gradients (parameters) do not count: their owner keeps them alive
 * whatever the tape does, so recomputation could not free them. */
#include <stdint.h>
#include <stdio.h>
#include "nabla/device.h"
#include "autograd.h"
#include "../core/strmap.h"

/* Pointers as keys of a string map: "%p" text is unique per address. */
static void key_of(const void *p, char key[32]) { snprintf(key, 32, "%p", p); }

static nb_status mark(nb_strmap *seen, const void *p, bool *fresh)
{
    char key[32];
    key_of(p, key);
    *fresh = !nb_strmap_get(seen, key, NULL);
    return *fresh && nb_strmap_put(seen, key, (void *)1) ? NB_ERR_NOMEM : NB_OK;
}

static bool marked(const nb_strmap *seen, const void *p)
{
    char key[32];
    key_of(p, key);
    return nb_strmap_get(seen, key, NULL) != NULL;
}

typedef struct tally {
    nb_strmap leaves;   /* storages of leaves that take gradients */
    nb_strmap storages; /* storages counted */
    size_t bytes;
    int nodes;
} tally;

static nb_status push(nb_node ***stack, int *top, int *cap, nb_node *n)
{
    if (*top == *cap) {
        nb_node **s = nb_realloc(*stack, (size_t)(2 * *cap) * sizeof *s);
        if (!s) return NB_ERR_NOMEM;
        *stack = s;
        *cap *= 2;
    }
    (*stack)[(*top)++] = n;
    return NB_OK;
}

/* Calls fn once on each node behind the roots, depth first with a stack of
 * our own: graphs can be 100,000 ops deep. A released node's inputs are not
 * visited: what it kept is gone. */
static nb_status each_node(nb_tensors roots, nb_status (*fn)(nb_node *, tally *), tally *t)
{
    nb_strmap seen;
    nb_strmap_init(&seen);
    int cap = 64, top = 0;
    nb_node **stack = nb_malloc((size_t)cap * sizeof *stack);
    nb_status st = stack ? NB_OK : NB_ERR_NOMEM;
    for (int i = 0; !st && i < roots.n; i++) {
        nb_node *n = roots.v[i] ? nb_tensor_grad_fn(roots.v[i]) : NULL;
        if (n) st = push(&stack, &top, &cap, n);
    }
    while (!st && top > 0) {
        nb_node *n = stack[--top];
        bool fresh;
        if ((st = mark(&seen, n, &fresh)) || !fresh || (st = fn(n, t))) continue;
        if (n->kind == NODE_ACCUMULATE || n->released) continue;
        for (int i = 0; !st && n->next && i < n->n_in; i++)
            if (n->next[i].node) st = push(&stack, &top, &cap, n->next[i].node);
    }
    nb_free(stack);
    nb_strmap_free(&seen);
    return st;
}

/* A leaf that takes gradients has an accumulator in the graph (unless only
 * slots without gradients read it: count() catches that one itself). */
static nb_status note_leaf(nb_node *n, tally *t)
{
    bool fresh;
    if (n->kind != NODE_ACCUMULATE || !n->leaf || !n->leaf->storage) return NB_OK;
    return mark(&t->leaves, n->leaf->storage, &fresh);
}

static nb_status count(tally *t, const nb_tensor *v)
{
    bool fresh;
    if (!v || !v->storage || marked(&t->leaves, v->storage)) return NB_OK;
    if (nb_tensor_is_leaf(v) && nb_tensor_requires_grad(v)) return NB_OK;
    nb_status st = mark(&t->storages, v->storage, &fresh);
    if (!st && fresh) t->bytes += v->storage->nbytes;
    return st;
}

static nb_status count_saved(nb_node *n, tally *t)
{
    if (n->kind == NODE_ACCUMULATE || n->released) return NB_OK;
    t->nodes++;
    nb_status st = NB_OK;
    for (int i = 0; !st && n->saved_in && i < n->n_in; i++) st = count(t, n->saved_in[i]);
    for (int i = 0; !st && n->saved_out && i < n->n_out; i++) st = count(t, n->saved_out[i]);
    return st;
}

nb_status nb_autograd_saved_bytes(nb_tensors roots, size_t *bytes, int *n_nodes)
{
    if (!bytes || (roots.n && !roots.v))
        return nb_error(NB_ERR_ARG, "saved bytes: needs the roots and a place for the count");
    tally t = {.bytes = 0};
    nb_strmap_init(&t.leaves);
    nb_strmap_init(&t.storages);
    /* The leaves first: a saved view of a parameter shares its storage. */
    nb_status st = each_node(roots, note_leaf, &t);
    if (!st) st = each_node(roots, count_saved, &t);
    nb_strmap_free(&t.leaves);
    nb_strmap_free(&t.storages);
    *bytes = st ? 0 : t.bytes;
    if (n_nodes) *n_nodes = st ? 0 : t.nodes;
    return st ? nb_error(st, "saved bytes: out of memory") : NB_OK;
}
