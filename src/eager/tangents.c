/* Forward-mode levels: the tangent table, and the thread's stack of current
 * levels. The table is a hash on the tensor's address: forward over reverse
 * puts every value of the forward and of the backward in it, and each op
 * looks up each of its inputs. */
#include <stdint.h>
#include "nabla/device.h"
#include <stdlib.h>
#include "tangents.h"
#include "nabla/status.h"

#define MAX_DEPTH 64

static _Thread_local nb_tangents *current[MAX_DEPTH];
static _Thread_local int depth;

nb_status nb_tangents_new(nb_tangents **out, nb_tangents *next, int set)
{
    nb_tangents *l = nb_calloc(1, sizeof *l);
    if (!l) return nb_error(NB_ERR_NOMEM, "forward mode: out of memory");
    l->refcount = 1;
    l->next = nb_tangents_retain(next);
    l->set = set;
    *out = l;
    return NB_OK;
}

nb_tangents *nb_tangents_set_of(nb_tangents *chain, int set)
{
    for (nb_tangents *l = chain; l; l = l->next) {
        if (l->set == set) return l;
        if (l->set == 0) break;
    }
    return NULL;
}

nb_tangents *nb_tangents_retain(nb_tangents *l)
{
    if (l) l->refcount++;
    return l;
}

void nb_tangents_release(nb_tangents *l)
{
    if (!l || --l->refcount > 0) return;
    for (int i = 0; i < l->n; i++) {
        nb_tensor_release(l->keys[i]);
        nb_tensor_release(l->vals[i]);
    }
    nb_free(l->keys);
    nb_free(l->vals);
    nb_free(l->slots);
    nb_builder_free(l->rules);
    nb_tangents_release(l->next);
    nb_free(l);
}

static size_t hash(const nb_tensor *t)
{
    uint64_t h = (uint64_t)(uintptr_t)t;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h;
}

/* The slot holding t, or the empty slot where it would go. */
static int find(const nb_tangents *l, const nb_tensor *t)
{
    size_t mask = (size_t)l->n_slots - 1, i = hash(t) & mask;
    while (l->slots[i] && l->keys[l->slots[i] - 1] != t) i = (i + 1) & mask;
    return (int)i;
}

nb_tensor *nb_tangents_get(const nb_tangents *l, const nb_tensor *t)
{
    if (!l || !t || l->n == 0) return NULL;
    int e = l->slots[find(l, t)];
    return e ? l->vals[e - 1] : NULL;
}

static nb_status grow(nb_tangents *l)
{
    int cap = l->cap ? 2 * l->cap : 32, n_slots = 2 * cap;
    nb_tensor **k = nb_realloc(l->keys, (size_t)cap * sizeof *k);
    if (!k) return nb_error(NB_ERR_NOMEM, "forward mode: out of memory");
    l->keys = k;
    nb_tensor **v = nb_realloc(l->vals, (size_t)cap * sizeof *v);
    if (!v) return nb_error(NB_ERR_NOMEM, "forward mode: out of memory");
    l->vals = v;
    int *s = nb_calloc((size_t)n_slots, sizeof *s);
    if (!s) return nb_error(NB_ERR_NOMEM, "forward mode: out of memory");
    nb_free(l->slots);
    l->slots = s;
    l->n_slots = n_slots;
    l->cap = cap;
    for (int e = 0; e < l->n; e++) l->slots[find(l, l->keys[e])] = e + 1;
    return NB_OK;
}

nb_status nb_tangents_set(nb_tangents *l, nb_tensor *t, nb_tensor *tangent)
{
    if (l->n == l->cap) {
        nb_status st = grow(l);
        if (st) return st;
    }
    int i = find(l, t), e = l->slots[i];
    nb_tensor_retain(tangent);
    if (e) {
        nb_tensor_release(l->vals[e - 1]);
        l->vals[e - 1] = tangent;
        return NB_OK;
    }
    l->keys[l->n] = nb_tensor_retain(t);
    l->vals[l->n++] = tangent;
    l->slots[i] = l->n;
    return NB_OK;
}

nb_tangents *nb_tangents_current(void) { return depth > 0 ? current[depth - 1] : NULL; }

nb_status nb_tangents_push(nb_tangents *l)
{
    if (depth == MAX_DEPTH)
        return nb_error(NB_ERR_STATE, "forward mode: more than %d levels pushed at once", MAX_DEPTH);
    current[depth++] = nb_tangents_retain(l);
    return NB_OK;
}

void nb_tangents_pop(void)
{
    if (depth > 0) nb_tangents_release(current[--depth]);
}
