/* nabla/autodiff.h: gradients of static programs, and the gradient-rule
 * interface every op's VJP and JVP rules are written against.
 *
 * A VJP rule sees the forward op through an nb_grad_ctx: its attributes, its
 * input and output values (x, y), the gradients of its outputs (dy) and
 * which input gradients are wanted. It emits ops through the builder it is
 * given and stores each input gradient it makes with nb_grad_set_dx(). The
 * same rule serves every backend: recorded, it becomes grad OpDescs in a
 * program; run eagerly, it computes gradients at once, and because a rule is
 * made of differentiable ops, gradients of gradients come for free.
 *
 * A JVP rule (forward mode) sees the same context: x and y (every forward
 * value is there: forward mode runs beside the forward), the tangents of the
 * inputs tx (NB_NONE: a tangent known to be zero, whose terms the rule skips
 * rather than computes), and stores each output tangent with
 * nb_grad_set_ty() (leaving NB_NONE when it is zero). The rule is linear in
 * tx and emits ops through the builder, like a VJP rule:
 *
 *     static nb_status sin_jvp(nb_builder *b, nb_grad_ctx *g)
 *     {
 *         nb_value t = nb_grad_tx(g, 0, 0);
 *         if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, nb_mul(b, t, nb_cos(b, nb_grad_x(g, 0, 0))));
 *         return nb_builder_status(b);
 *     }
 *
 * VJP rules may assume:
 *  - x and y hold the forward values the op declared in grad_uses_inputs and
 *    grad_uses_outputs (others may be NB_NONE in eager mode);
 *  - dy of an output that received no gradient is NB_NONE; a rule that needs
 *    it anyway calls nb_grad_dy_or_zeros(), which inserts fill_zeros_like;
 *  - dx of an input nobody wants need not be made (nb_grad_wants_dx). */
#ifndef NABLA_AUTODIFF_H
#define NABLA_AUTODIFF_H

#include "nabla/export.h"

#include "nabla/builder.h"

NB_BEGIN_DECLS

typedef struct nb_grad_ctx {
    const nb_op_def *def;
    const nb_attr_value *attrs; /* the forward op's, in def order */
    int in_begin[NB_MAX_SLOTS + 1];
    int out_begin[NB_MAX_SLOTS + 1];
    const nb_value *x;  /* forward inputs, flat as in nb_op_ctx */
    const nb_value *y;  /* forward outputs */
    const nb_value *dy; /* gradients of the outputs (NB_NONE: zero) */
    nb_value *dx;       /* the rule's results, one per input */
    const bool *want_dx;
    /* Forward-mode rules (JVP) read tangents of the inputs and write
     * tangents of the outputs through the same context: */
    const nb_value *tx; /* input tangents (NB_NONE: zero) */
    nb_value *ty;       /* output tangents */
    /* Shapes of the outputs, for when y was not kept (eager mode keeps only
     * what grad_uses_outputs declares); NULL when every y is there. */
    const nb_var_info *y_info;
} nb_grad_ctx;

static inline nb_value nb_grad_x(const nb_grad_ctx *g, int slot, int k) { return g->x[g->in_begin[slot] + k]; }
static inline nb_value nb_grad_y(const nb_grad_ctx *g, int slot, int k) { return g->y[g->out_begin[slot] + k]; }
static inline nb_value nb_grad_dy(const nb_grad_ctx *g, int slot, int k) { return g->dy[g->out_begin[slot] + k]; }
static inline int nb_grad_in_count(const nb_grad_ctx *g, int slot) { return g->in_begin[slot + 1] - g->in_begin[slot]; }
static inline int nb_grad_out_count(const nb_grad_ctx *g, int slot) { return g->out_begin[slot + 1] - g->out_begin[slot]; }
static inline bool nb_grad_wants_dx(const nb_grad_ctx *g, int slot, int k)
{
    return k < nb_grad_in_count(g, slot) && g->want_dx[g->in_begin[slot] + k];
}
static inline void nb_grad_set_dx(nb_grad_ctx *g, int slot, int k, nb_value v)
{
    if (nb_grad_wants_dx(g, slot, k)) g->dx[g->in_begin[slot] + k] = v;
}
static inline nb_value nb_grad_tx(const nb_grad_ctx *g, int slot, int k) { return g->tx[g->in_begin[slot] + k]; }
static inline void nb_grad_set_ty(nb_grad_ctx *g, int slot, int k, nb_value v) { g->ty[g->out_begin[slot] + k] = v; }

/* dy of output (slot, k), or zeros shaped like the output if none arrived. */
NB_API nb_value nb_grad_dy_or_zeros(nb_builder *b, const nb_grad_ctx *g, int slot, int k);
/* The forward op's attributes, by name. */
NB_API const nb_attr_value *nb_grad_attr(const nb_grad_ctx *g, const char *name);
/* Sums v down to the shape of `like` when the two may differ (the gradient
 * of a broadcast); returns v itself when their shapes are known equal. */
NB_API nb_value nb_grad_unbroadcast(nb_builder *b, nb_value v, nb_value like);

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
    nb_grad_info *info;   /* every forward var that received a gradient */
    int n_info;
    const char **grads;   /* nb_gradients: the gradient of each input, or NULL */
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
