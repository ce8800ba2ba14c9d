/* nabla/scope.h: where the values of a program's vars live.
 *
 * A scope maps names to tensors and has an optional parent; lookups go up the
 * chain. Persistable vars (parameters, optimiser state) live in the scope that
 * runs see, so that the startup program writes them once and every later run
 * of the main program reads and updates them. */
#ifndef NABLA_SCOPE_H
#define NABLA_SCOPE_H

#include "nabla/export.h"

#include "nabla/tensor.h"

NB_BEGIN_DECLS

typedef struct nb_scope nb_scope;

NB_API nb_status nb_scope_new(nb_scope **out, nb_scope *parent);
/* Drops the scope's references to its tensors. The parent is not touched. */
NB_API void nb_scope_free(nb_scope *s);
NB_API nb_scope *nb_scope_parent(const nb_scope *s);

/* The tensor named `name` here or in an ancestor (a borrowed reference), or NULL. */
NB_API nb_tensor *nb_scope_find(const nb_scope *s, const char *name);
NB_API nb_tensor *nb_scope_find_local(const nb_scope *s, const char *name);
/* Binds `name` to `t` in this scope, retaining t and releasing any tensor
 * the name had. */
NB_API nb_status nb_scope_set(nb_scope *s, const char *name, nb_tensor *t);
NB_API nb_status nb_scope_remove(nb_scope *s, const char *name);

/* Iteration over this scope's own names, in insertion order. */
NB_API int nb_scope_size(const nb_scope *s);
NB_API const char *nb_scope_name_at(const nb_scope *s, int i);
NB_API nb_tensor *nb_scope_tensor_at(const nb_scope *s, int i);

NB_END_DECLS

#endif
