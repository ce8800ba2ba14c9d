/* VJP rules of the elementwise family: broadcasting arithmetic, unary math,
 * clip, scale and cast. The activations are in elementwise_grad_act.c.
 *
 * Binary rules reduce each gradient to its input's shape with
 * nb_grad_unbroadcast, so they read X and Y (at least their shapes). Unary
 * rules read X or Out, whichever makes the rule cheaper; the op definitions'
 * grad_uses_* masks say which. */
#include "elementwise_grad.h"

#define X0(g) nb_grad_x(g, 0, 0)
#define Y0(g) nb_grad_x(g, 1, 0)
#define OUT(g) nb_grad_y(g, 0, 0)
#define DY(g) nb_grad_dy(g, 0, 0)

/* ---- binary ------------------------------------------------------------------ */

nb_status nb_add_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g);
    if (nb_is_none(dy)) return NB_OK;
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, dy, X0(g)));
    if (nb_grad_wants_dx(g, 1, 0)) nb_grad_set_dx(g, 1, 0, nb_grad_unbroadcast(b, dy, Y0(g)));
    return nb_builder_status(b);
}

nb_status nb_sub_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g);
    if (nb_is_none(dy)) return NB_OK;
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, dy, X0(g)));
    /* Negate after reducing: the reduced tensor is never larger. */
    if (nb_grad_wants_dx(g, 1, 0)) nb_grad_set_dx(g, 1, 0, nb_neg(b, nb_grad_unbroadcast(b, dy, Y0(g))));
    return nb_builder_status(b);
}

nb_status nb_mul_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g), x = X0(g), y = Y0(g);
    if (nb_is_none(dy)) return NB_OK;
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, nb_mul(b, dy, y), x));
    if (nb_grad_wants_dx(g, 1, 0)) nb_grad_set_dx(g, 1, 0, nb_grad_unbroadcast(b, nb_mul(b, dy, x), y));
    return nb_builder_status(b);
}

/* Out = X / Y: dX = dy / Y, dY = -dy * X / Y^2 = -(dy / Y) * Out. */
nb_status nb_div_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g), x = X0(g), y = Y0(g);
    if (nb_is_none(dy)) return NB_OK;
    nb_value q = nb_div(b, dy, y);
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, q, x));
    if (nb_grad_wants_dx(g, 1, 0))
        nb_grad_set_dx(g, 1, 0, nb_neg(b, nb_grad_unbroadcast(b, nb_mul(b, q, OUT(g)), y)));
    return nb_builder_status(b);
}

/* Out = X^Y.
 * dX = dy * Y * X^(Y-1), written with pow rather than Out / X so that it holds
 * wherever the derivative exists: X = 0 with Y >= 1, negative X with whole Y.
 * (At Y = 0 and X = 0 it gives 0 * inf = NaN.)
 * dY = dy * Out * log(X), defined for X > 0; NaN for X < 0, where X^Y is
 * not differentiable in Y. At X = 0 it is 0 (log is taken of 1 there, which
 * keeps the second derivative free of 0 * inf as well). */
nb_status nb_pow_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g), x = X0(g), y = Y0(g);
    if (nb_is_none(dy)) return NB_OK;
    if (nb_grad_wants_dx(g, 0, 0)) {
        nb_value d = nb_mul(b, y, nb_pow(b, x, nb_scale(b, y, 1.0, -1.0)));
        nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, nb_mul(b, dy, d), x));
    }
    if (nb_grad_wants_dx(g, 1, 0)) {
        nb_value zero = nb_ew_grad_const(b, x, 0.0), one = nb_ew_grad_const(b, x, 1.0);
        nb_value safe_x = nb_where(b, nb_equal(b, x, zero), one, x);
        nb_value d = nb_mul(b, OUT(g), nb_log(b, safe_x));
        nb_grad_set_dx(g, 1, 0, nb_grad_unbroadcast(b, nb_mul(b, dy, d), y));
    }
    return nb_builder_status(b);
}

/* maximum/minimum: the gradient goes to the input that was chosen. On a tie
 * all of it goes to X (so dX + dY = dy always; a subgradient). */
static nb_status select_vjp(nb_builder *b, nb_grad_ctx *g, bool is_max)
{
    nb_value dy = DY(g), x = X0(g), y = Y0(g);
    if (nb_is_none(dy)) return NB_OK;
    nb_value takes_x = is_max ? nb_greater_equal(b, x, y) : nb_less_equal(b, x, y);
    nb_value zero = nb_ew_grad_const(b, dy, 0.0);
    if (nb_grad_wants_dx(g, 0, 0))
        nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, nb_where(b, takes_x, dy, zero), x));
    if (nb_grad_wants_dx(g, 1, 0))
        nb_grad_set_dx(g, 1, 0, nb_grad_unbroadcast(b, nb_where(b, takes_x, zero, dy), y));
    return nb_builder_status(b);
}

nb_status nb_maximum_vjp(nb_builder *b, nb_grad_ctx *g) { return select_vjp(b, g, true); }
nb_status nb_minimum_vjp(nb_builder *b, nb_grad_ctx *g) { return select_vjp(b, g, false); }

/* ---- unary math ---------------------------------------------------------------- */

/* A one-input rule: dX = EXPR, built from dy (and X or Out), made only if
 * wanted. */
#define UNARY_RULE(name, EXPR)                                            \
    nb_status nb_##name##_vjp(nb_builder *b, nb_grad_ctx *g)              \
    {                                                                     \
        nb_value dy = DY(g);                                              \
        if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return NB_OK;   \
        nb_grad_set_dx(g, 0, 0, (EXPR));                                  \
        return nb_builder_status(b);                                      \
    }

UNARY_RULE(neg, nb_neg(b, dy))
/* |x|' = sign(x) (0 at 0: a subgradient). */
UNARY_RULE(abs, nb_mul(b, dy, nb_sign(b, X0(g))))
/* The derivative of sign is 0 almost everywhere: a zero gradient, so that
 * sign on a gradient path is no error. Made from dy, which has X's shape, so
 * the rule needs no forward value. */
UNARY_RULE(sign, nb_fill_zeros_like(b, dy))
UNARY_RULE(square, nb_mul(b, dy, nb_scale(b, X0(g), 2.0, 0.0)))
/* sqrt' = 0.5 / sqrt(x) = 0.5 / Out. */
UNARY_RULE(sqrt, nb_div(b, nb_scale(b, dy, 0.5, 0.0), OUT(g)))
/* rsqrt' = -0.5 x^(-3/2) = -0.5 Out^3. */
UNARY_RULE(rsqrt, nb_scale(b, nb_mul(b, nb_mul(b, dy, OUT(g)), nb_square(b, OUT(g))), -0.5, 0.0))
UNARY_RULE(exp, nb_mul(b, dy, OUT(g)))
UNARY_RULE(log, nb_div(b, dy, X0(g)))
UNARY_RULE(log1p, nb_div(b, dy, nb_scale(b, X0(g), 1.0, 1.0)))
UNARY_RULE(sin, nb_mul(b, dy, nb_cos(b, X0(g))))
UNARY_RULE(cos, nb_neg(b, nb_mul(b, dy, nb_sin(b, X0(g)))))
/* tan' = 1 + tan^2 = 1 + Out^2. */
UNARY_RULE(tan, nb_mul(b, dy, nb_scale(b, nb_square(b, OUT(g)), 1.0, 1.0)))

/* clip passes dy where X was kept, min <= X <= max, which is exactly where
 * Out == X: one comparison, exact in every dtype, with no constants for
 * bounds a float32 cannot hold. At the bounds themselves the gradient
 * passes (a subgradient, as PyTorch's clamp); NaN X gets none. */
UNARY_RULE(clip, nb_where(b, nb_equal(b, X0(g), OUT(g)), dy, nb_ew_grad_const(b, dy, 0.0)))

/* Both forms, scale * x + bias and scale * (x + bias), have derivative scale. */
UNARY_RULE(scale, nb_scale(b, dy, nb_grad_attr(g, "scale")->f, 0.0))

/* cast: the gradient is dy cast back to X's dtype. Integer (and bool) X
 * takes no gradient, and an integer Out carries none. */
nb_status nb_cast_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_dtype xt = nb_value_info(b, X0(g)).dtype;
    if (!nb_dtype_is_float(xt) || !nb_dtype_is_float(nb_value_info(b, dy).dtype)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, nb_cast(b, dy, xt));
    return nb_builder_status(b);
}
