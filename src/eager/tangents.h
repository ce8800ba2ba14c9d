/* Forward-mode levels (private). A level is a set of tangents: a table from
 * tensors to their tangents, and the eager builder that runs JVP rules at
 * that level. A builder carries a chain of levels, and every op it runs goes
 * through the JVP rule of each. Levels nest: the rules builder of a level
 * carries the levels outside it, so the ops a JVP rule emits get tangents at
 * the outer levels too (forward over forward). Levels made together are
 * siblings (independent directions, as the columns of a Jacobian): they sit
 * side by side in the chain, their rules builders carrying only what is
 * outside the group, and the primal computation runs once for all of them.
 * A level is shared, not copied: every eager builder created while a level
 * is the thread's current one carries it too (the backward engine's among
 * them), which is what makes forward over reverse work: the VJP rules' ops
 * carry the tangents of the forward they read. */
#ifndef NABLA_TANGENTS_H
#define NABLA_TANGENTS_H

#include "nabla/builder.h"

typedef struct nb_tangents {
    int refcount;
    nb_tensor **keys, **vals; /* entry i: a tensor and its tangent, both strong */
    int n, cap;
    int *slots;               /* open addressing on the key's address: entry + 1, 0 when empty */
    int n_slots;              /* a power of two, at least twice n */
    nb_builder *rules;        /* runs the JVP rules; carries the levels outside the group */
    struct nb_tangents *next; /* strong: the rest of the chain, or NULL */
    int set;                  /* index in its group of siblings; the group ends at set 0 */
} nb_tangents;

/* A new level, set `set` of its group, in front of the chain `next` (which
 * may be NULL), without its rules builder (the eager builder sets it). */
nb_status nb_tangents_new(nb_tangents **out, nb_tangents *next, int set);
/* Set `set` of the group at the front of the chain, or NULL. */
nb_tangents *nb_tangents_set_of(nb_tangents *chain, int set);
nb_tangents *nb_tangents_retain(nb_tangents *l);
void nb_tangents_release(nb_tangents *l);
/* t's tangent at level l (borrowed), or NULL for a zero tangent. */
nb_tensor *nb_tangents_get(const nb_tangents *l, const nb_tensor *t);
/* Sets (or replaces) t's tangent; the level keeps both alive. */
nb_status nb_tangents_set(nb_tangents *l, nb_tensor *t, nb_tensor *tangent);

/* The thread's current level: the innermost pushed, or NULL. */
nb_tangents *nb_tangents_current(void);
nb_status nb_tangents_push(nb_tangents *l);
void nb_tangents_pop(void);

#endif
