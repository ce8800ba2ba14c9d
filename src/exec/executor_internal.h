/* The prepared form of a block, shared by the executor (executor.c) and
 * its memory report (memory.c). */
#ifndef NABLA_EXEC_EXECUTOR_INTERNAL_H
#define NABLA_EXEC_EXECUTOR_INTERNAL_H

#include "nabla/executor.h"
#include "nabla/kernel.h"
#include "nabla/rng.h"
#include "exec_env.h"
#include "../core/strmap.h"

typedef enum { V_TEMP, V_SCOPE, V_FEED } value_kind;

typedef struct value {
    const char *name;
    value_kind kind;
    const nb_var *var; /* NULL for a name with no VarDesc */
    int buffer;        /* temporaries: planned buffer, -1 for fetched ones */
    int last_use;      /* index of the last step touching it */
    bool fetched, written;
    size_t bytes;   /* temporaries: their size in the last run */
    int inplace_of; /* temporaries: the input whose buffer it takes over in place (plan by size), or -1 */
    int local;      /* a value only one fused group uses: its scratch slot there (no buffer), else -1 */
    nb_tensor *t;   /* bound during a run (owned by the slot for temporaries) */
} value;

typedef struct buffer {
    nb_storage *storage;
    size_t cap;
} buffer;

typedef struct step {
    const nb_op *op;
    char label[200];
    int *in, *out; /* value indices */
    int n_in, n_out;
    nb_op_ctx ctx;               /* inference, and control-flow kernels */
    nb_kernel_ctx kctx;          /* what the kernel sees */
    const nb_kernel_def *kernel; /* picked on the first run, again when shapes change */
    void *params;                /* the op's parameter struct, filled at prepare time */
    nb_var_info *in_info, *out_info;
    nb_tensor **in_t, **out_t;
    bool *out_is_input; /* output k is also an input of this op (in place) */
    int group;          /* the fused group it belongs to (fuse.c), or -1 */
    bool folded;        /* a matmul whose product an update step takes over (fold.c): not run */
    bool inferred;
    bool random;   /* NB_OP_RANDOM: reseeded every run */
    bool run_once; /* an initialiser among other ops: runs while its outputs have no value */
    uint64_t seed; /* its stream's base seed */
    nb_rng rng;
} step;

struct nb_prepared {
    nb_program *program;
    int block_idx;
    value *values;
    int n_values, cap_values;
    nb_strmap index; /* name -> value index + 1 */
    buffer *buffers;
    int n_buffers;
    step *steps;
    int n_steps;
    int *feed_values, n_feed;
    int *fetch_values, n_fetch;
    nb_tensor **feed_copies;
    uint64_t allocs;
    uint64_t runs; /* index of the next run: random ops draw from (seed, runs, stream) */
    uint64_t stream;
    /* A sub-block (run by a control-flow op) keeps every value in the scope
     * it runs in, so that each iteration's scope holds what its gradient
     * needs; block 0 keeps temporaries in planned buffers. */
    bool scope_resident;
    nb_exec_env env;
    bool owns_cache;
    /* The buffer plan was made by size, from the sizes of a run; a buffer
     * that had to grow since says the sizes changed (plan_by_size). */
    bool sized, grew;
    /* Runs of pointwise steps run together (fuse.c), and how many steps
     * the last run ran that way. */
    struct fuse_group *groups;
    int n_groups, fused_steps;
    /* The matmul_sgd ops of the folded updates (fold.c), which their steps
     * run in place of the sgds. */
    nb_op **folded_ops;
    int n_folded;
    /* A sub-block: per value, what nb_exec_trim_step does with it in a kept
     * iteration scope (TRIM_*), worked out on first use. */
    unsigned char *trim;
};

/* The sub-blocks prepared so far, by block index; the prepared block 0 owns
 * it and every sub-block run under it shares it. */
struct nb_block_cache {
    nb_prepared **blocks;
    int n;
};

/* For update folding (fold.c): (re)makes step s to run op (of block b, or
 * one like it), and lets go of what a step holds. */
nb_status nb_exec_prepare_step(nb_prepared *pp, const nb_block *b, const nb_op *op, int s);
void nb_exec_step_clear(step *st);

/* For the fusion pass (fuse.c): step st as the executor runs it alone, and
 * the binding of its output k (shaped by its last inference) that the step
 * would make, without the zero-fill. */
nb_status nb_exec_step_run(nb_prepared *pp, nb_scope *scope, step *st);
nb_status nb_exec_step_bind(nb_prepared *pp, nb_scope *scope, step *st, int k);
/* Lets go of the storage a temporary holds outside the planned buffers. */
void nb_exec_value_drop_storage(value *v);

#endif
