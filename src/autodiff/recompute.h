/* Recomputation segments for the backward pass (recompute.c says how they
 * work). backward.c plans them from nb_backward_opts, calls
 * nb_recompute_before before each forward op's rule, and reads forward
 * values through nb_recompute_name. */
#ifndef NABLA_RECOMPUTE_H
#define NABLA_RECOMPUTE_H

#include "nabla/autodiff.h"
#include "../core/strmap.h"

typedef struct nb_recompute {
    int *boundary; /* forward op indices whose outputs are kept (checkpoints), ascending */
    int n;
    nb_strmap remap; /* forward var -> the nb_var recomputed for it */
} nb_recompute;

void nb_recompute_init(nb_recompute *rc);
void nb_recompute_free(nb_recompute *rc);
/* Segment boundaries: the producers of `checkpoints`, and those of
 * `segments` (n, or NB_RECOMPUTE_SQRT, or 0 for none) even runs of the ops
 * marked on_path (ops [0, fwd_end) of fwd). */
nb_status nb_recompute_plan(nb_recompute *rc, const nb_block *fwd, int fwd_end, const bool *on_path,
                            nb_names checkpoints, int segments);
/* When forward op i ends a segment: emits the segment's ops again into b. */
nb_status nb_recompute_before(nb_recompute *rc, nb_block *b, const nb_block *fwd, int i);
/* The var a rule should read for forward var `var`. */
const char *nb_recompute_name(const nb_recompute *rc, const char *var);

#endif
