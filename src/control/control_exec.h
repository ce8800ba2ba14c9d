/* What the kernels of the control-flow ops share: step scopes, binding
 * tensors into scopes by name, and replaying a grad block.
 *
 * A forward control op runs its block in a scope per iteration:
 *
 *     run scope (the op's block)
 *       outer: the values the block captures, bound by name
 *         bind_k: this iteration's inputs (carried values, sequence slices)
 *           step_k: everything the block writes
 *
 * Inputs live in a scope of their own so that an op in the block that
 * writes one in place makes a new local tensor and leaves the bound value
 * (shared with the previous iteration) alone. For training the op keeps all
 * of them, attached to the run scope under its StepScopes var's name; its
 * gradient op replays iteration k in
 *
 *     step_k -> seeds_k (gradients of the iteration's outputs) -> grad_k
 *
 * so the grad block reads the forward values of iteration k by name. */
#ifndef NABLA_CONTROL_EXEC_H
#define NABLA_CONTROL_EXEC_H

#include "nabla/executor.h"
#include "../exec/exec_env.h"
#include "../exec/scope_internal.h"

typedef struct nb_step_scopes {
    nb_scope *outer;
    nb_scope **bind, **step;
    int n, cap;
    int branch; /* cond: 1 if the then-block ran, 0 for the else-block */
} nb_step_scopes;

nb_status nb_steps_new(const nb_kernel_ctx *ctx, nb_step_scopes **out);
void nb_steps_free(void *steps);
/* Appends iteration scopes (bind, step) and returns them. */
nb_status nb_steps_push(const nb_kernel_ctx *ctx, nb_step_scopes *ss, nb_scope **bind, nb_scope **step);
/* The scopes of the next iteration: new ones when training (`keep`), else
 * the one pair, reused, so that inference allocates once per op run. */
nb_status nb_steps_next(const nb_kernel_ctx *ctx, nb_step_scopes *ss, bool keep, nb_scope **bind, nb_scope **step);
void nb_steps_pop(nb_step_scopes *ss);
/* Makes *cur the next carried value t: t itself when the iteration's scope
 * is kept, else a copy (the reused scope overwrites t next iteration). */
nb_status nb_ctl_take(nb_tensor **cur, nb_tensor *t, bool copy);
/* Keeps ss for the gradient op (attached under output `slot`'s var name), or
 * frees it when `keep` is false. */
nb_status nb_steps_keep(const nb_kernel_ctx *ctx, nb_step_scopes *ss, int slot, bool keep);
/* The step scopes of the forward op whose StepScopes var is this op's input
 * `slot`, and then their release. */
nb_status nb_steps_find(const nb_kernel_ctx *ctx, int slot, nb_step_scopes **out);
void nb_steps_release(const nb_kernel_ctx *ctx, int slot);

/* The var name of this op's flat input / output k. */
const char *nb_ctl_in_name(const nb_kernel_ctx *ctx, int k);
const char *nb_ctl_out_name(const nb_kernel_ctx *ctx, int k);

/* Binds names[i] -> ts[i] in s, for n names ("" names are skipped). */
nb_status nb_ctl_bind(nb_scope *s, int n, const nb_attr_value *names, nb_tensor *const *ts);
/* Binds this op's flat inputs [from, to) in s under their var names. */
nb_status nb_ctl_bind_inputs(const nb_kernel_ctx *ctx, nb_scope *s, int from, int to);
/* The tensor a block left under `name` in scope s (s alone, not its
 * ancestors: the block must have written it). */
nb_status nb_ctl_result(const nb_kernel_ctx *ctx, nb_scope *s, const char *name, const char *what, nb_tensor **out);
/* The bool the block left under `name`. */
nb_status nb_ctl_pred(const nb_kernel_ctx *ctx, const nb_tensor *t, const char *what, bool *out);
/* Binds output k shaped like t and copies t into it. */
nb_status nb_ctl_output_copy(const nb_kernel_ctx *ctx, int k, const nb_tensor *t);
/* Binds output k as zeros shaped like `like`. */
nb_status nb_ctl_output_zeros(const nb_kernel_ctx *ctx, int k, const nb_tensor *like, nb_tensor **out);
/* Checks that a carried value kept its dtype and shape. */
nb_status nb_ctl_check_like(const nb_kernel_ctx *ctx, const nb_tensor *was, const nb_tensor *now, const char *what,
                            int i);
/* *acc += t, allocating *acc (one reference, yours) on first use. */
nb_status nb_ctl_accumulate(nb_tensor **acc, const nb_tensor *t);
/* A new zero tensor shaped like t. */
nb_status nb_ctl_zeros_like(nb_tensor **out, const nb_tensor *t);
/* x[t] along axis 0, as a view one dimension smaller. */
nb_status nb_ctl_time_slice(nb_tensor **out, nb_tensor *x, int64_t t);

/* Runs grad block `grad_block` for forward iteration scope `step`, with the
 * seeds (names -> tensors) bound; *grad receives the scope it ran in (free
 * it, and its parent, with nb_ctl_grad_done). */
nb_status nb_ctl_run_grad(const nb_kernel_ctx *ctx, int grad_block, nb_scope *step, int n_seed,
                          const nb_attr_value *seed_names, nb_tensor *const *seeds, nb_scope **grad);
void nb_ctl_grad_done(nb_scope *grad);
/* Replaces *g (a carried gradient) with the one the grad block left under
 * `name`, or zeros shaped like it when there is none. */
nb_status nb_ctl_carry_grad(nb_scope *grad, const char *name, nb_tensor **g);
/* The gradient the grad block left under `name` ("" or absent: NULL). */
nb_tensor *nb_ctl_grad_of(nb_scope *grad, const char *name);

#endif
