/* The executor's fusion pass: consecutive pointwise steps run as one pass
 * over slices of their elements (fuse.c). */
#ifndef NABLA_EXEC_FUSE_H
#define NABLA_EXEC_FUSE_H

#include "executor_internal.h"

#define FUSE_MAX_STEPS 16

struct fuse_group {
    int first, n;  /* steps [first, first + n) */
    bool ready;    /* the shapes of its last run allow one pass */
    bool math;     /* some step is costly per element: split across threads sooner */
    int64_t numel; /* elements of every step's output */
    nb_pointwise pw[FUSE_MAX_STEPS];
};

/* Whether NABLA_FUSE allows fusing: anything but "0" does. */
bool nb_fuse_enabled(void);

/* Forms the groups of a prepared block and marks the values only one group
 * uses (value.local), which then get no buffer. Call after the fetches are
 * marked and before the buffers are planned. */
nb_status nb_fuse_plan(nb_prepared *pp, const nb_block *b);

/* Runs group g: as one pass when the shapes of its last run hold, else step
 * by step, after which it checks whether the new shapes allow one pass. */
nb_status nb_fuse_run(nb_prepared *pp, nb_scope *scope, struct fuse_group *g);

void nb_fuse_free(nb_prepared *pp);

#endif
