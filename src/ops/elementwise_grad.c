/* VJP rules of the elementwise family: broadcasting arithmetic, unary math,
 * clip, scale and cast. The activations are in elementwise_grad_act.c.
 *
 * Binary rules reduce each gradient to its input's shape with
 * nb_grad_unbroadcast, so they read X and Y (at least their shapes). Unary
 * rules read X or Out, whichever makes the rule cheaper; the op definitions'
 * grad_uses_* masks say which. */
#include "elementwise_grad.h"
#include "nabla/op.h"

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
    if (nb_grad_wants_dx(g, 1, 0)) nb_grad_set_dx(g, 1, 0, nb_neg(b, nb_grad_unbroadcast(b, nb_mul(b, q, OUT(g)), y)));
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
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_grad_unbroadcast(b, nb_where(b, takes_x, dy, zero), x));
    if (nb_grad_wants_dx(g, 1, 0)) nb_grad_set_dx(g, 1, 0, nb_grad_unbroadcast(b, nb_where(b, takes_x, zero, dy), y));
    return nb_builder_status(b);
}

nb_status nb_maximum_vjp(nb_builder *b, nb_grad_ctx *g) { return select_vjp(b, g, true); }
nb_status nb_minimum_vjp(nb_builder *b, nb_grad_ctx *g) { return select_vjp(b, g, false); }

/* ---- binary JVPs ---------------------------------------------------------------- */

/* Tangents of X and Y have X's and Y's shapes; a sum of terms from both, or a
 * term with a forward value of Out's shape in it, has Out's shape already.
 * A lone tangent t (or a value broadcast from some of the inputs) is
 * expanded to Out's shape here, unless it has that shape already: when
 * every input broadcasts into t's shape without growing it, which is known
 * even with unknown dims where the other inputs are 1 there (a [-1, C]
 * tangent plus a [C] bias, say), with no op emitted. `own` is the flat
 * index of an input t was broadcast from (whose tangent it is), which fits
 * within it whatever its dims, or -1. */
static bool fits_within(const nb_var_info *in, const nb_var_info *t)
{
    if (in->ndim > t->ndim) return false;
    for (int i = 1; i <= in->ndim; i++) {
        int64_t d = in->shape[in->ndim - i], e = t->shape[t->ndim - i];
        if (d != 1 && (d < 0 || d != e)) return false;
    }
    return true;
}

nb_value nb_ew_jvp_fit(nb_builder *b, const nb_grad_ctx *g, nb_value t, int own)
{
    if (nb_is_none(t)) return t;
    nb_var_info ti = nb_value_info(b, t);
    bool fits = true;
    for (int k = 0; k < g->in_begin[NB_MAX_SLOTS] && fits; k++) {
        if (k == own || nb_is_none(g->x[k])) continue;
        nb_var_info xi = nb_value_info(b, g->x[k]);
        fits = fits_within(&xi, &ti);
    }
    if (fits) return t;
    nb_value out = OUT(g);
    if (!nb_is_none(out)) return nb_expand_as(b, t, out);
    if (g->y_info) return nb_expand(b, t, g->y_info[g->out_begin[0]].ndim, g->y_info[g->out_begin[0]].shape);
    nb_builder_fail(b, NB_ERR_ARG, "%s JVP: a broadcast tangent needs Out or its shape", g->def->name);
    return NB_NONE;
}

#define TX(g) nb_grad_tx(g, 0, 0)
#define TY(g) nb_grad_tx(g, 1, 0)

nb_status nb_add_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = TX(g), ty = TY(g);
    if (nb_is_none(tx) && nb_is_none(ty)) return NB_OK;
    nb_value t = nb_is_none(ty) ? nb_ew_jvp_fit(b, g, tx, g->in_begin[0])
        : nb_is_none(tx)        ? nb_ew_jvp_fit(b, g, ty, g->in_begin[1])
                                : nb_add(b, tx, ty);
    nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

nb_status nb_sub_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = TX(g), ty = TY(g);
    if (nb_is_none(tx) && nb_is_none(ty)) return NB_OK;
    /* Negate before expanding: the tangent of Y is never larger. */
    nb_value t = nb_is_none(ty) ? nb_ew_jvp_fit(b, g, tx, g->in_begin[0])
        : nb_is_none(tx)        ? nb_ew_jvp_fit(b, g, nb_neg(b, ty), g->in_begin[1])
                                : nb_sub(b, tx, ty);
    nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* tOut = tX Y + X tY: each term has Out's shape. */
nb_status nb_mul_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = TX(g), ty = TY(g), t = NB_NONE;
    if (!nb_is_none(tx)) t = nb_mul(b, tx, Y0(g));
    if (!nb_is_none(ty)) {
        nb_value u = nb_mul(b, X0(g), ty);
        t = nb_is_none(t) ? u : nb_add(b, t, u);
    }
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* Out = X / Y: tOut = tX / Y - Out tY / Y = (tX - Out tY) / Y. */
nb_status nb_div_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = TX(g), ty = TY(g), y = Y0(g), t;
    if (nb_is_none(tx) && nb_is_none(ty)) return NB_OK;
    if (nb_is_none(ty)) t = nb_div(b, tx, y);
    else {
        nb_value u = nb_mul(b, OUT(g), ty);
        t = nb_is_none(tx) ? nb_neg(b, nb_div(b, u, y)) : nb_div(b, nb_sub(b, tx, u), y);
    }
    nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* Out = X^Y: tOut = Y X^(Y-1) tX + Out log(X) tY, with the VJP's forms (pow
 * rather than Out / X; log of 1 where X = 0). */
nb_status nb_pow_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = TX(g), ty = TY(g), x = X0(g), y = Y0(g), t = NB_NONE;
    if (!nb_is_none(tx)) t = nb_mul(b, tx, nb_mul(b, y, nb_pow(b, x, nb_scale(b, y, 1.0, -1.0))));
    if (!nb_is_none(ty)) {
        nb_value zero = nb_ew_grad_const(b, x, 0.0), one = nb_ew_grad_const(b, x, 1.0);
        nb_value safe_x = nb_where(b, nb_equal(b, x, zero), one, x);
        nb_value u = nb_mul(b, ty, nb_mul(b, OUT(g), nb_log(b, safe_x)));
        t = nb_is_none(t) ? u : nb_add(b, t, u);
    }
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* maximum/minimum: the tangent of the chosen input (X on a tie, as the VJP).
 * The mask has Out's shape, so one where gives Out's shape. */
static nb_status select_jvp(nb_builder *b, nb_grad_ctx *g, bool is_max)
{
    nb_value tx = TX(g), ty = TY(g), x = X0(g), y = Y0(g);
    if (nb_is_none(tx) && nb_is_none(ty)) return NB_OK;
    nb_value takes_x = is_max ? nb_greater_equal(b, x, y) : nb_less_equal(b, x, y);
    nb_value zero = nb_is_none(tx) || nb_is_none(ty) ? nb_ew_grad_const(b, x, 0.0) : NB_NONE;
    nb_grad_set_ty(g, 0, 0, nb_where(b, takes_x, nb_is_none(tx) ? zero : tx, nb_is_none(ty) ? zero : ty));
    return nb_builder_status(b);
}

nb_status nb_maximum_jvp(nb_builder *b, nb_grad_ctx *g) { return select_jvp(b, g, true); }
nb_status nb_minimum_jvp(nb_builder *b, nb_grad_ctx *g) { return select_jvp(b, g, false); }

/* ---- unary math ---------------------------------------------------------------- */

/* A one-input rule. An elementwise op's Jacobian is diagonal, so its VJP and
 * its JVP are the same product: EXPR, built from `d` (and X or Out), where d
 * is dy in the VJP (dX = EXPR, made only if wanted) and the tangent of X in
 * the JVP (the tangent of Out = EXPR, left NB_NONE when X's is). */
#define UNARY_VJP(name, EXPR)                                             \
    nb_status nb_##name##_vjp(nb_builder *b, nb_grad_ctx *g)              \
    {                                                                     \
        nb_value d = DY(g);                                               \
        if (nb_is_none(d) || !nb_grad_wants_dx(g, 0, 0)) return NB_OK;    \
        nb_grad_set_dx(g, 0, 0, (EXPR));                                  \
        return nb_builder_status(b);                                      \
    }
#define UNARY_JVP(name, EXPR)                                             \
    nb_status nb_##name##_jvp(nb_builder *b, nb_grad_ctx *g)              \
    {                                                                     \
        nb_value d = nb_grad_tx(g, 0, 0);                                 \
        if (nb_is_none(d)) return NB_OK;                                  \
        nb_grad_set_ty(g, 0, 0, (EXPR));                                  \
        return nb_builder_status(b);                                      \
    }
#define UNARY_RULE(name, EXPR) UNARY_VJP(name, EXPR) UNARY_JVP(name, EXPR)

UNARY_RULE(neg, nb_neg(b, d))
/* |x|' = sign(x) (0 at 0: a subgradient). */
UNARY_RULE(abs, nb_mul(b, d, nb_sign(b, X0(g))))
/* The derivative of sign is 0 almost everywhere: a zero gradient, so that
 * sign on a gradient path is no error. Made from dy, which has X's shape, so
 * the rule needs no forward value. */
#define ZERO_RULE(name)                                      \
    UNARY_VJP(name, nb_fill_zeros_like(b, d))                \
    /* Its tangent is zero: left NB_NONE. */                 \
    nb_status nb_##name##_jvp(nb_builder *b, nb_grad_ctx *g) \
    {                                                        \
        (void)g;                                             \
        return nb_builder_status(b);                         \
    }
ZERO_RULE(sign)
/* floor, ceil and round are steps: flat between their jumps, as sign is. */
ZERO_RULE(floor)
ZERO_RULE(ceil)
ZERO_RULE(round)
UNARY_RULE(square, nb_mul(b, d, nb_scale(b, X0(g), 2.0, 0.0)))
/* sqrt' = 0.5 / sqrt(x) = 0.5 / Out. */
UNARY_RULE(sqrt, nb_div(b, nb_scale(b, d, 0.5, 0.0), OUT(g)))
/* rsqrt' = -0.5 x^(-3/2) = -0.5 Out^3. */
UNARY_RULE(rsqrt, nb_scale(b, nb_mul(b, nb_mul(b, d, OUT(g)), nb_square(b, OUT(g))), -0.5, 0.0))
UNARY_RULE(exp, nb_mul(b, d, OUT(g)))
UNARY_RULE(log, nb_div(b, d, X0(g)))
UNARY_RULE(log1p, nb_div(b, d, nb_scale(b, X0(g), 1.0, 1.0)))
UNARY_RULE(sin, nb_mul(b, d, nb_cos(b, X0(g))))
UNARY_RULE(cos, nb_neg(b, nb_mul(b, d, nb_sin(b, X0(g)))))
/* tan' = 1 + tan^2 = 1 + Out^2. */
UNARY_RULE(tan, nb_mul(b, d, nb_scale(b, nb_square(b, OUT(g)), 1.0, 1.0)))
/* atan' = 1 / (1 + x^2). */
UNARY_RULE(atan, nb_div(b, d, nb_scale(b, nb_square(b, X0(g)), 1.0, 1.0)))
/* erf' = 2/sqrt(pi) exp(-x^2), with the constant folded into the exponent. */
#define LOG_2_OVER_SQRT_PI 0.12078223763524522234
UNARY_RULE(erf, nb_mul(b, d, nb_exp(b, nb_scale(b, nb_square(b, X0(g)), -1.0, LOG_2_OVER_SQRT_PI))))

/* clip passes dy (the tangent) where X was kept, min <= X <= max, which is exactly where
 * Out == X: one comparison, exact in every dtype, with no constants for
 * bounds a float32 cannot hold. At the bounds themselves the gradient
 * passes (a subgradient, as PyTorch's clamp); NaN X gets none. */
UNARY_RULE(clip, nb_where(b, nb_equal(b, X0(g), OUT(g)), d, nb_ew_grad_const(b, d, 0.0)))

/* Both forms, scale * x + bias and scale * (x + bias), have derivative scale. */
UNARY_RULE(scale, nb_scale(b, d, nb_grad_attr(g, "scale")->f, 0.0))

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

/* cast: the tangent is X's cast to Out's dtype, when both are floats; an
 * integer (or bool) Out carries none. */
nb_status nb_cast_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    nb_dtype ot = (nb_dtype)nb_grad_attr(g, "dtype")->i;
    if (!nb_dtype_is_float(ot) || !nb_dtype_is_float(nb_value_info(b, t).dtype)) return nb_builder_status(b);
    nb_grad_set_ty(g, 0, 0, nb_cast(b, t, ot));
    return nb_builder_status(b);
}
