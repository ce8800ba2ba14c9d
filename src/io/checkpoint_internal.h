/* What checkpoints (checkpoint.c) share with the other files that hold a
 * program's state (.npz, npz.c): gathering the persistable vars, and
 * restoring them all or nothing. `what` names the kind of file in messages
 * ("checkpoint", "npz"). */
#ifndef NABLA_IO_CHECKPOINT_INTERNAL_H
#define NABLA_IO_CHECKPOINT_INTERNAL_H

#include "nabla/program.h"
#include "nabla/scope.h"

/* The n persistable vars of block 0 of `program` and their tensors in
 * `scope` (borrowed), in two arrays the caller frees with nb_free; or
 * NB_ERR_NOT_FOUND naming every var without a value ("<what> save
 * '<path>': ..."), and nothing to free. */
nb_status nb_ckpt_collect(const char *what, const char *path, const nb_program *program, nb_scope *scope, int *n,
                          const char ***names, nb_tensor ***tensors);

/* A loaded file's tensor named `name` (borrowed), or NULL. */
typedef nb_tensor *(*nb_ckpt_find_fn)(const void *file, const char *name);

/* nb_checkpoint_load's checking and binding, for any file: every
 * persistable var is looked up with find(file, name); all mismatches in one
 * NB_ERR_FORMAT; the scope changes only when everything fits. */
nb_status nb_ckpt_restore(const char *what, const char *path, const nb_program *program, nb_scope *scope,
                          nb_ckpt_find_fn find, const void *file);

#endif
