/* A string-keyed hash map (open addressing, linear probing) used for var
 * tables, scopes, unique-name counters and the op registry. Keys are copied;
 * values are opaque pointers the map does not own. Entries keep insertion
 * order for iteration. */
#ifndef NABLA_STRMAP_H
#define NABLA_STRMAP_H

#include <stddef.h>
#include "nabla/status.h"

typedef struct nb_strmap {
    char **keys; /* insertion order; NULL marks a removed entry */
    void **vals;
    int n, cap;    /* entries used in keys/vals (removed ones included) */
    int *table;    /* slot -> entry index + 1; 0 empty, -1 removed */
    int table_cap; /* power of two */
    int live;
} nb_strmap;

void nb_strmap_init(nb_strmap *m);
void nb_strmap_free(nb_strmap *m);
/* Sets key to val (replacing). Returns NB_ERR_NOMEM on failure. */
nb_status nb_strmap_put(nb_strmap *m, const char *key, void *val);
/* The value, or NULL; *found (if given) tells a stored NULL from absence. */
void *nb_strmap_get(const nb_strmap *m, const char *key, int *found);
/* Removes key; returns its value (NULL if absent). */
void *nb_strmap_remove(nb_strmap *m, const char *key);
int nb_strmap_size(const nb_strmap *m);
/* *to (uninitialised) becomes a copy of from, in from's order; NB_ERR_NOMEM
 * (to left empty) on failure. */
nb_status nb_strmap_copy(nb_strmap *to, const nb_strmap *from);

#endif
