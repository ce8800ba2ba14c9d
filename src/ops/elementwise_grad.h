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

#include "nabla/autodiff.h"
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

/* binary, broadcasting (VJP and JVP rules) */
nb_status nb_add_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_add_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sub_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sub_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_mul_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_mul_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_div_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_div_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pow_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pow_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_maximum_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_maximum_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_minimum_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_minimum_jvp(nb_builder *b, nb_grad_ctx *g);

/* unary math */
nb_status nb_neg_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_neg_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_abs_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_abs_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sign_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sign_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_square_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_square_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sqrt_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sqrt_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_rsqrt_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_rsqrt_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_exp_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_exp_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_log_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_log_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_log1p_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_log1p_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sin_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sin_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_cos_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_cos_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_tan_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_tan_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_clip_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_clip_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_scale_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_scale_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_cast_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_cast_jvp(nb_builder *b, nb_grad_ctx *g);

/* activations (elementwise_grad_act.c) */
nb_status nb_tanh_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_tanh_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sigmoid_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_sigmoid_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_relu_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_relu_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_leaky_relu_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_leaky_relu_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_elu_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_elu_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_gelu_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_gelu_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_softplus_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_softplus_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_silu_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_silu_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
