/* What scopes hold besides tensors: the step scopes of control-flow ops.
 *
 * A `while` or `recurrent` op run for training keeps one child scope per
 * iteration; its gradient op, run later in the same scope or a descendant,
 * replays them. They hang off the scope the forward op ran in, under the
 * name of the op's StepScopes var. */
#ifndef NABLA_SCOPE_INTERNAL_H
#define NABLA_SCOPE_INTERNAL_H

#include "nabla/scope.h"

/* Attaches `data` under `key`, freeing what was there (and `data` itself if
 * this fails) with its free function. */
nb_status nb_scope_attach(nb_scope *s, const char *key, void *data, void (*free_fn)(void *));
/* The data under `key` here or in an ancestor, or NULL. */
void *nb_scope_attachment(const nb_scope *s, const char *key);
/* Frees the nearest attachment under `key`. */
void nb_scope_detach(nb_scope *s, const char *key);

#endif
