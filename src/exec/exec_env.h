/* What a control-flow kernel sees of the executor running it.
 *
 * Ordinary kernels see tensors only. The kernels of `while`, `cond`,
 * `recurrent`, `net` and their gradient ops also need the scope their block
 * runs in (to make child scopes and find step scopes), the names of their
 * op's vars, and a way to run a sub-block: nb_op_ctx.exec points here for
 * them (it is NULL when an op runs outside an executor, as in eager mode). */
#ifndef NABLA_EXEC_ENV_H
#define NABLA_EXEC_ENV_H

#include "nabla/executor.h"

typedef struct nb_block_cache nb_block_cache;

typedef struct nb_exec_env {
    nb_program *program;
    nb_scope *scope; /* the scope the running block's values live in */
    const nb_op *op; /* the op being run */
    nb_block_cache *cache;
    struct nb_prepared *pp; /* private: where nb_exec_output binds */
    void *step;
} nb_exec_env;

/* Control-flow ops (NB_OP_CONTROL) learn the shapes of their outputs only by
 * running their blocks, so the executor leaves their outputs unbound and the
 * kernel binds output k (flat index) with the dtype and shape it found. The
 * tensor, zero-filled, is also stored in the kernel's k->out. */
nb_status nb_exec_output(const nb_kernel_ctx *k, int out_index, const nb_var_info *info, nb_tensor **out);

/* Runs block `block_idx` of env's program with every var it writes kept in
 * `scope` (its own vars, and outer vars it redefines, shadow outer ones;
 * reads go up the scope chain). Sub-blocks are prepared once per executor. */
nb_status nb_exec_run_block(const nb_exec_env *env, int block_idx, nb_scope *scope);

/* After an iteration whose scope is kept for the backward pass (a loop's
 * step scope): lets go of what no op of another block will read, and keeps
 * only the dtype and shape (a one-element tensor broadcast to the shape) of
 * what other blocks read through NB_SLOT_SHAPE_ONLY slots alone. `keep`
 * (NULL, or string attrs such as a recurrent op's mem_out and seq_out) names
 * vars the caller reads itself. Which vars go is worked out once per block. */
nb_status nb_exec_trim_step(const nb_exec_env *env, int block_idx, nb_scope *step, const nb_attr_value *keep1,
                            const nb_attr_value *keep2);

#endif
