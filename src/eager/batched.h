/* Batched (logical) tensors, for vmap (private). A logical tensor is an
 * nb_tensor shaped as one example, without storage, whose autograd state
 * points at the physical tensor that holds the whole batch, which dim of it
 * the batch is, and the vmap level (nested vmaps count up from 1; a logical
 * tensor at level L may wrap a physical one that is logical at a lower
 * level). An op run eagerly on inputs batched at level L (the innermost
 * among its inputs) runs its batching rule on the physical values instead of
 * its kernel; its outputs are logical at level L again. */
#ifndef NABLA_BATCHED_H
#define NABLA_BATCHED_H

#include "nabla/builder.h"
#include "nabla/op.h"

typedef struct nb_batched {
    nb_tensor *phys; /* strong */
    int bdim;
    int level;
} nb_batched;

/* t's batching, or NULL for an ordinary tensor. */
const nb_batched *nb_batched_of(const nb_tensor *t);
/* The level t is batched at, 0 for an ordinary tensor. */
int nb_batched_level(const nb_tensor *t);
/* A new logical tensor (one reference) over phys batched along bdim. */
nb_status nb_batched_wrap(nb_tensor **out, nb_tensor *phys, int bdim, int level);
/* Gives dst (a fresh copy of src's fields, without autograd state) src's
 * batching; NB_OK for an ordinary src. */
nb_status nb_batched_copy(nb_tensor *dst, const nb_tensor *src);
void nb_batched_free(nb_batched *bt);

/* vmap levels of the thread: the innermost live one, entering a new one,
 * leaving it. */
int nb_vmap_level(void);
int nb_vmap_level_enter(void);
void nb_vmap_level_leave(void);

/* The innermost level among n tensors (NULL entries skipped), 0 if none is
 * batched. */
int nb_batched_max_level(int n, nb_tensor *const *t);
/* Runs op def on inputs of which some are batched at `level`: its batching
 * rule (or the loop over the batch) through eager builder b on the physical
 * values; out[k] receive new references to logical tensors (or ordinary
 * ones, for outputs that do not depend on the batch). Errors name the op
 * and the logical shapes. */
nb_status nb_batched_run(nb_builder *b, const nb_op_def *def, int level, nb_tensors in, nb_attrs attrs, int n_out,
                         nb_tensor **out);

#endif
