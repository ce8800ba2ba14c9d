/* nabla/autodiff.h: gradients of static programs (nb_append_backward,
 * nb_gradients, nb_append_jvp). The rules those passes emit are written
 * against nabla/grad_rule.h, included here. */
#ifndef NABLA_AUTODIFF_H
#define NABLA_AUTODIFF_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/grad_rule.h"
#include "nabla/program.h"

NB_BEGIN_DECLS

/* ---- static programs ------------------------------------------------------ */

/* Where the gradient of a forward var lives (Fluid's grad_info_map). */
typedef struct nb_grad_info {
    const char *var;  /* forward var */
    const char *grad; /* its gradient var */
    int block;        /* the block holding the gradient var */
} nb_grad_info;

typedef struct nb_param_grad {
    const char *param;
    const char *grad;
} nb_param_grad;

/* What nb_append_backward and nb_gradients return. Free with
 * nb_backward_result_free(). Names point into the result. */
typedef struct nb_backward_result {
    nb_param_grad *pairs; /* (parameter, gradient), in parameter order */
    int n_pairs;
    nb_grad_info *info; /* every forward var that received a gradient */
    int n_info;
    const char **grads; /* nb_gradients: the gradient of each input, or NULL */
    int n_grads;
} nb_backward_result;

NB_API void nb_backward_result_free(nb_backward_result *r);
/* The gradient var of forward var `var`, or NULL. */
NB_API const char *nb_backward_grad_of(const nb_backward_result *r, const char *var);

/* What nb_append_backward and nb_minimize differentiate with respect to.
 * NULL, or a zeroed struct: every trainable parameter of block 0. */
typedef struct nb_backward_opts {
    nb_names params;  /* the vars to differentiate; none: every trainable parameter */
    nb_names no_grad; /* vars that take no gradient (as stop_gradient) */
    /* Recomputation (PaddlePaddle's RecomputeOptimizer, JAX's checkpoint):
     * memory for compute. The forward ops between two checkpoints form a
     * segment; the backward part emits each segment's ops again (role
     * backward, writing "<var>@RECOMPUTE" vars) just before the gradient
     * rules that need them, and those rules read the copies. So after the
     * forward pass only the checkpoints (and what the ops after the last
     * one computed, which are not recomputed) stay alive, and the backward
     * pass holds one segment at a time. Gradients equal those without recomputation
     * bit for bit: the same kernels on the same values, and a recomputed
     * random op (dropout) draws with its original's seed, the same numbers
     * (set the program's seed before calling this). Ops that update state in
     * place are not recomputed; their outputs stay alive. The copies are
     * ordinary ops, so nb_gradients can differentiate the result again.
     * checkpoints: vars to keep (outputs of forward ops); recompute_segments:
     * n > 0 also cuts the m ops on the gradient path into n even segments
     * (a checkpoint after every m/n of them, the last after the last op, so
     * that only checkpoints outlive the forward pass), NB_RECOMPUTE_SQRT into
     * sqrt(m), 0 adds none. */
    nb_names checkpoints;
    int recompute_segments;
} nb_backward_opts;
#define NB_RECOMPUTE_SQRT (-1)

/* Appends the gradient part of block 0 of `p` for the scalar `loss`, as
 * PaddlePaddle Fluid's append_backward: seeds loss@GRAD with ones; keeps only
 * the ops on a path from the parameters (opts->params; all trainable ones by
 * default) to the loss; honours stop_gradient vars and the no-grad set; emits each
 * op's VJP rule in reverse order; renames a gradient written by several ops
 * to x@GRAD@RENAME@k and adds them with one `sum` op; inserts
 * fill_zeros_like where a gradient is needed but never produced; removes
 * grad ops nothing needs; marks roles and (param, grad) pairs. An op on the
 * path without a rule is an error that names it. */
NB_API nb_status nb_append_backward(nb_program *p, const char *loss, const nb_backward_opts *opts,
                                    nb_backward_result *out);

/* How nb_gradients differentiates; NULL for the defaults. */
typedef struct nb_gradients_opts {
    const char *const *target_grads; /* NULL, or one per target (NULL entries: ones) */
    nb_names no_grad;                /* vars that take no gradient */
    unsigned flags;                  /* NB_ALLOW_UNUSED */
} nb_gradients_opts;

/* Gradients of `targets` with respect to `inputs` (any vars of block 0),
 * with the given output gradients (opts->target_grads; ones by default).
 * out->grads[i] is the gradient var of inputs[i], or NULL if inputs[i] does
 * not affect the targets (an error instead, unless opts->flags holds
 * NB_ALLOW_UNUSED). Called again on a program that already holds
 * gradient ops, it differentiates them too: second and higher derivatives,
 * with names that never collide, through control flow as well (while_grad,
 * cond_grad, recurrent_grad and net_grad have rules). An op on the path
 * without a VJP rule is an error naming it. */
NB_API nb_status nb_gradients(nb_program *p, nb_names targets, nb_names inputs, const nb_gradients_opts *opts,
                              nb_backward_result *out);

/* Appends the forward-mode part of block 0: given a tangent var for each of
 * `inputs` (tangents[i], same shape), emits in order the JVP rule of every
 * op that a tangent reaches and that `outputs` depend on, and names in
 * out_tangents[i] (allocated by nabla, nb_free it: a string, or NULL where it
 * is zero) the tangent var of outputs[i]. A tangent that reaches an op with
 * no JVP rule is an error naming the op. On a program that holds its
 * gradient ops already this is forward over reverse: the tangent of a
 * gradient along v is a Hessian-vector product, through loops and branches
 * too (their gradient ops have rules). */
NB_API nb_status nb_append_jvp(nb_program *p, nb_names inputs, const char *const *tangents, nb_names outputs,
                               char **out_tangents);

NB_END_DECLS

#endif
