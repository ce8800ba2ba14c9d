/* Which ops of a block a run needs. */
#ifndef NABLA_EXEC_PRUNE_H
#define NABLA_EXEC_PRUNE_H

#include <stdbool.h>
#include "nabla/program.h"

/* keep[i] (for each of b's ops) says whether a run that fetches `fetch`
 * needs op i: it writes a fetched var, a persistable one (the run's lasting
 * effects: parameters, optimiser state) or an input in place, or holds
 * blocks; or it writes what a needed op reads. So fetching a test clone's
 * logits needs no label. */
nb_status nb_exec_needed_ops(const nb_block *b, int n_fetch, const char *const *fetch, bool *keep);

#endif
