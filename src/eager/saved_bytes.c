/* nb_autograd_saved_bytes (nabla/eager.h): the memory a tape holds for its
 * backward pass, walking the nodes behind some tensors and counting each
 * storage their saved values keep alive once. */
#include <stdint.h>
#include <stdio.h>
#include "nabla/device.h"
#include "autograd.h"
#include "../core/strmap.h"

/* Pointers as keys of a string map: "%p" text is unique per address. */
static nb_status mark(nb_strmap *seen, const void *p, bool *fresh)
{
    char key[32];
    snprintf(key, sizeof key, "%p", p);
    *fresh = !nb_strmap_get(seen, key, NULL);
    return *fresh && nb_strmap_put(seen, key, (void *)1) ? NB_ERR_NOMEM : NB_OK;
}

static nb_status count(nb_strmap *storages, const nb_tensor *t, size_t *bytes)
{
    bool fresh;
    if (!t || !t->storage) return NB_OK;
    nb_status st = mark(storages, t->storage, &fresh);
    if (!st && fresh) *bytes += t->storage->nbytes;
    return st;
}

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

nb_status nb_autograd_saved_bytes(nb_tensors roots, size_t *bytes, int *n_nodes)
{
    if (!bytes || (roots.n && !roots.v)) return nb_error(NB_ERR_ARG, "saved bytes: needs the roots and a place for the count");
    *bytes = 0;
    if (n_nodes) *n_nodes = 0;
    nb_strmap nodes, storages;
    nb_strmap_init(&nodes);
    nb_strmap_init(&storages);
    int cap = 64, top = 0;
    nb_node **stack = nb_malloc((size_t)cap * sizeof *stack);
    nb_status st = stack ? NB_OK : NB_ERR_NOMEM;
    for (int i = 0; !st && i < roots.n; i++) {
        nb_node *n = roots.v[i] ? nb_tensor_grad_fn(roots.v[i]) : NULL;
        if (n) st = push(&stack, &top, &cap, n);
    }
    /* Depth first, with a stack of our own: graphs can be 100,000 ops deep. */
    while (!st && top > 0) {
        nb_node *n = stack[--top];
        bool fresh;
        if ((st = mark(&nodes, n, &fresh)) || !fresh) continue;
        if (n->kind == NODE_ACCUMULATE || n->released) continue;
        if (n_nodes) (*n_nodes)++;
        for (int i = 0; !st && n->saved_in && i < n->n_in; i++) st = count(&storages, n->saved_in[i], bytes);
        for (int i = 0; !st && n->saved_out && i < n->n_out; i++) st = count(&storages, n->saved_out[i], bytes);
        for (int i = 0; !st && n->next && i < n->n_in; i++)
            if (n->next[i].node) st = push(&stack, &top, &cap, n->next[i].node);
    }
    nb_free(stack);
    nb_strmap_free(&nodes);
    nb_strmap_free(&storages);
    return st ? nb_error(st, "saved bytes: out of memory") : NB_OK;
}
