#include <stdint.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "strmap.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

void nb_strmap_init(nb_strmap *m) { memset(m, 0, sizeof *m); }

void nb_strmap_free(nb_strmap *m)
{
    for (int i = 0; i < m->n; i++) nb_free(m->keys[i]);
    nb_free(m->keys);
    nb_free(m->vals);
    nb_free(m->table);
    memset(m, 0, sizeof *m);
}

/* Returns the table slot holding key, or -1. */
static int find_slot(const nb_strmap *m, const char *key)
{
    if (!m->table_cap) return -1;
    size_t mask = (size_t)m->table_cap - 1;
    for (size_t i = hash_str(key) & mask;; i = (i + 1) & mask) {
        int e = m->table[i];
        if (e == 0) return -1;
        if (e > 0 && !strcmp(m->keys[e - 1], key)) return (int)i;
    }
}

static nb_status rehash(nb_strmap *m, int cap)
{
    int *t = nb_calloc((size_t)cap, sizeof *t);
    if (!t) return NB_ERR_NOMEM;
    size_t mask = (size_t)cap - 1;
    for (int e = 0; e < m->n; e++) {
        if (!m->keys[e]) continue;
        size_t i = hash_str(m->keys[e]) & mask;
        while (t[i]) i = (i + 1) & mask;
        t[i] = e + 1;
    }
    nb_free(m->table);
    m->table = t;
    m->table_cap = cap;
    return NB_OK;
}

nb_status nb_strmap_put(nb_strmap *m, const char *key, void *val)
{
    int slot = find_slot(m, key);
    if (slot >= 0) {
        m->vals[m->table[slot] - 1] = val;
        return NB_OK;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        char **k = nb_realloc(m->keys, (size_t)cap * sizeof *k);
        if (!k) return NB_ERR_NOMEM;
        m->keys = k;
        void **v = nb_realloc(m->vals, (size_t)cap * sizeof *v);
        if (!v) return NB_ERR_NOMEM;
        m->vals = v;
        m->cap = cap;
    }
    /* Keep the table at most half full, counting removed markers. */
    if (2 * (m->n + 1) > m->table_cap && rehash(m, m->table_cap ? 2 * m->table_cap : 32)) return NB_ERR_NOMEM;
    char *k = nb_strdup(key);
    if (!k) return NB_ERR_NOMEM;
    m->keys[m->n] = k;
    m->vals[m->n] = val;
    size_t mask = (size_t)m->table_cap - 1, i = hash_str(key) & mask;
    while (m->table[i] > 0) i = (i + 1) & mask;
    m->table[i] = ++m->n;
    m->live++;
    return NB_OK;
}

void *nb_strmap_get(const nb_strmap *m, const char *key, int *found)
{
    int slot = find_slot(m, key);
    if (found) *found = slot >= 0;
    return slot >= 0 ? m->vals[m->table[slot] - 1] : NULL;
}

void *nb_strmap_remove(nb_strmap *m, const char *key)
{
    int slot = find_slot(m, key);
    if (slot < 0) return NULL;
    int e = m->table[slot] - 1;
    void *v = m->vals[e];
    nb_free(m->keys[e]);
    m->keys[e] = NULL;
    m->table[slot] = -1;
    m->live--;
    return v;
}

int nb_strmap_size(const nb_strmap *m) { return m->live; }

nb_status nb_strmap_copy(nb_strmap *to, const nb_strmap *from)
{
    nb_strmap_init(to);
    for (int i = 0; i < from->n; i++)
        if (from->keys[i] && nb_strmap_put(to, from->keys[i], from->vals[i])) {
            nb_strmap_free(to);
            nb_strmap_init(to);
            return NB_ERR_NOMEM;
        }
    return NB_OK;
}
