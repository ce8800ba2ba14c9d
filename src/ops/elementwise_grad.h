/* VJP and JVP rules of the elementwise family (elementwise_grad.c: arithmetic, math,
 * clip, scale, cast; elementwise_grad_act.c: activations), and helpers the
 * rules share.
 *
 * Every rule is a composition of differentiable ops (or of ops with zero
 * gradient: sign, comparisons, constants), so gradients of gradients come
 * from the same rules. Masks are bool comparisons used through `where`, or
 * `sign` where that saves ops; constants are 0-d fill_constant values that
 * broadcast, so they cost one element each. */
#ifndef NABLA_OPS_ELEMENTWISE_GRAD_H
#define NABLA_OPS_ELEMENTWISE_GRAD_H

#include "nabla/grad_rule.h"
#include "nabla/ops.h"

/* A 0-d constant of `like`'s dtype: broadcasts against anything. */
static inline nb_value nb_ew_grad_const(nb_builder *b, nb_value like, double v)
{
    return nb_fill_constant(b, nb_value_info(b, like).dtype, 0, NULL, v);
}

/* A JVP term t expanded to Out's shape unless it is known to have it already
 * (a lone tangent of a broadcast input). `own`: the flat index of an input
 * that t was broadcast from (the input t is the tangent of), or -1. */
nb_value nb_ew_jvp_fit(nb_builder *b, const nb_grad_ctx *g, nb_value t, int own);

/* The rules of every op in nabla/elementwise_ops.h: nb_<name>_vjp and
 * nb_<name>_jvp. */
#define RULES(name)                                       \
    nb_status nb_##name##_vjp(nb_builder *b, nb_grad_ctx *g); \
    nb_status nb_##name##_jvp(nb_builder *b, nb_grad_ctx *g);
#define NB_BINARY(name, ...) RULES(name)
#define NB_UNARY(name, ...) RULES(name)
#define NB_UNARY_A1(name, ...) RULES(name)
#define NB_UNARY_A2(name, ...) RULES(name)
#include "nabla/elementwise_ops.h"

/* ... and of those written out in full. */
RULES(gelu)
RULES(gelu_grad)
RULES(clip)
RULES(scale)
RULES(cast)
#undef RULES

#endif
