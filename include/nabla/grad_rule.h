/* nabla/grad_rule.h: the interface every op's VJP and JVP rules are
 * written against (the builder's layer: rules emit through a builder and
 * know no backend).
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
#ifndef NABLA_GRAD_RULE_H
#define NABLA_GRAD_RULE_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/kernel.h"

NB_BEGIN_DECLS

struct nb_op_def;

typedef struct nb_grad_ctx {
    const struct nb_op_def *def; /* nabla/op.h */
    const nb_attr_value *attrs;  /* the forward op's, in def order */
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
static inline int nb_grad_out_count(const nb_grad_ctx *g, int slot)
{
    return g->out_begin[slot + 1] - g->out_begin[slot];
}
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

NB_END_DECLS

#endif
