/* The executor's update folding: an sgd whose gradient is the product of a
 * matmul, and is read by nothing else, runs as one matmul_sgd step that adds
 * the scaled product onto the parameter (fold.c). */
#ifndef NABLA_EXEC_FOLD_H
#define NABLA_EXEC_FOLD_H

#include "executor_internal.h"

/* Whether NABLA_FOLD allows folding: anything but "0" does. */
bool nb_fold_enabled(void);

/* Rewrites the steps of a prepared block 0: each foldable sgd becomes a
 * matmul_sgd step, and the matmul making its gradient is skipped. Call after
 * the fetches are marked and before fusion and the buffer plan. */
nb_status nb_fold_plan(nb_prepared *pp, const nb_block *b);

void nb_fold_free(nb_prepared *pp);

#endif
