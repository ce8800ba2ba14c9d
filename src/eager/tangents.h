/* Forward-mode levels (private). A level is a set of tangents: a table from
 * tensors to their tangents, and the eager builder that runs JVP rules at
 * that level. Levels nest: the builder of a level carries the levels outside
 * it, so the ops a JVP rule emits get tangents at the outer levels too
 * (forward over forward). A level is shared, not copied: every eager builder
 * created while a level is the thread's current one carries it as well (the
 * backward engine's among them), which is what makes forward over reverse
 * work: the VJP rules' ops carry the tangents of the forward they read. */
#ifndef NABLA_TANGENTS_H
#define NABLA_TANGENTS_H

#include "nabla/builder.h"

typedef struct nb_tangents {
    int refcount;
    nb_tensor **keys, **vals; /* entry i: a tensor and its tangent, both strong */
    int n, cap;
    int *slots;               /* open addressing on the key's address: entry + 1, 0 when empty */
    int n_slots;              /* a power of two, at least twice n */
    nb_builder *rules;        /* runs the JVP rules; carries `outer` */
    struct nb_tangents *outer; /* strong; NULL for the outermost level */
} nb_tangents;

/* A new level inside `outer` (which may be NULL), without its rules builder
 * (the eager builder sets it). */
nb_status nb_tangents_new(nb_tangents **out, nb_tangents *outer);
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
