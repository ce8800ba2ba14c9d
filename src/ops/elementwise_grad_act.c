/* VJP rules of the activations: tanh, sigmoid, relu, leaky_relu, elu, gelu
 * (and its fused gradient gelu_grad), softplus and silu. These sit on the
 * training hot path, so each is written with as few ops as its math allows,
 * reading Out where that is cheaper than recomputing from X. */
#include <float.h>
#include <math.h>
#include "elementwise_grad.h"

#define X0(g) nb_grad_x(g, 0, 0)
#define OUT(g) nb_grad_y(g, 0, 0)
#define DY(g) nb_grad_dy(g, 0, 0)

/* Each activation's Jacobian is diagonal, so its VJP and its JVP are the
 * same product, made by name##_apply from `d`: dy in the VJP (dX, made only
 * if wanted), the tangent of X in the JVP (the tangent of Out, left NB_NONE
 * when X's is). */
#define ACT_RULES(name)                                                   \
    nb_status nb_##name##_vjp(nb_builder *b, nb_grad_ctx *g)              \
    {                                                                     \
        nb_value d = DY(g);                                               \
        if (nb_is_none(d) || !nb_grad_wants_dx(g, 0, 0)) return NB_OK;    \
        nb_grad_set_dx(g, 0, 0, name##_apply(b, g, d));                   \
        return nb_builder_status(b);                                      \
    }                                                                     \
    nb_status nb_##name##_jvp(nb_builder *b, nb_grad_ctx *g)              \
    {                                                                     \
        nb_value d = nb_grad_tx(g, 0, 0);                                 \
        if (nb_is_none(d)) return NB_OK;                                  \
        nb_grad_set_ty(g, 0, 0, name##_apply(b, g, d));                   \
        return nb_builder_status(b);                                      \
    }

/* tanh' = 1 - Out^2. */
static nb_value tanh_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    return nb_mul(b, d, nb_scale(b, nb_square(b, OUT(g)), -1.0, 1.0));
}
ACT_RULES(tanh)

/* sigmoid' = Out * (1 - Out). */
static nb_value sigmoid_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    nb_value out = OUT(g);
    return nb_mul(b, d, nb_mul(b, out, nb_scale(b, out, -1.0, 1.0)));
}
ACT_RULES(sigmoid)

/* relu' = sign(Out): Out >= 0, so its sign is the 0/1 mask of X > 0 (0 at
 * X = 0). Two ops, and twice differentiable since sign has a (zero) rule. */
static nb_value relu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d) { return nb_mul(b, d, nb_sign(b, OUT(g))); }
ACT_RULES(relu)

/* leaky_relu' = 1 for X > 0, alpha for X < 0: an affine map of sign(X),
 * (1 - alpha)/2 * sign(X) + (1 + alpha)/2, which gives (1 + alpha)/2 at
 * X = 0 (a subgradient). Three ops, no constants or comparisons. */
static nb_value leaky_relu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    double alpha = nb_grad_attr(g, "alpha")->f;
    nb_value slope = nb_scale(b, nb_sign(b, X0(g)), 0.5 * (1.0 - alpha), 0.5 * (1.0 + alpha));
    return nb_mul(b, d, slope);
}
ACT_RULES(leaky_relu)

/* elu' = 1 for X > 0; alpha * exp(X) = Out + alpha for X <= 0. Written with
 * Out rather than exp(X): exp would overflow for large positive X, and in
 * the second derivative the zero gradient of the branch `where` drops would
 * meet that infinity (0 * inf = NaN). */
static nb_value elu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    nb_value x = X0(g);
    double alpha = nb_grad_attr(g, "alpha")->f;
    nb_value pos = nb_greater(b, x, nb_ew_grad_const(b, x, 0.0));
    nb_value neg_part = nb_mul(b, d, nb_scale(b, OUT(g), 1.0, alpha));
    return nb_where(b, pos, d, neg_part);
}
ACT_RULES(elu)

#define SQRT_2_OVER_PI 0.79788456080286535588
#define LOG_SQRT_2PI 0.91893853320467274178 /* log(sqrt(2 pi)) */
#define GELU_K 0.044715

/* gelu_grad(X, D) = D * gelu'(X): one fused op, exact or tanh form as the
 * `approximate` of the op g describes (gelu, or gelu_grad itself). */
static nb_value gelu_grad_of(nb_builder *b, const nb_grad_ctx *g, nb_value x, nb_value d)
{
    nb_attr a = NB_ATTR_BOOL("approximate", nb_grad_attr(g, "approximate")->b);
    return nb_emit1(b, "gelu_grad", NB_VALUES(x, d), NB_ATTRS_N(1, &a));
}

/* gelu's Jacobian is diagonal, gelu'(X), so both its VJP and its JVP are
 * gelu_grad with dy or the tangent as DOut: one op, reading only X. */
static nb_value gelu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d) { return gelu_grad_of(b, g, X0(g), d); }
ACT_RULES(gelu)

/* gelu''(X), for the rules of gelu_grad, from differentiable ops (so that
 * gelu's third and higher derivatives come from their rules).
 *
 * Exact form, gelu' = Phi + X phi: gelu'' = 2 phi + X phi' = phi (2 - X^2),
 * with phi(X) = exp(-X^2/2 - log sqrt(2 pi)).
 *
 * Tanh form, gelu' = s + X s', with s = sigmoid(w), w = 2u = c (X + k X^3)
 * (c = 2 sqrt(2/pi)), w' = c (1 + 3k X^2), w'' = 6ck X and
 * s' = s (1 - s) w', s'' = s (1 - s) ((1 - 2s) w'^2 + w''):
 *     gelu'' = 2 s' + X s'' = s (1 - s) (2 w' + X ((1 - 2s) w'^2 + w'')). */
static nb_value gelu_second(nb_builder *b, const nb_grad_ctx *g, nb_value x)
{
    nb_value x2 = nb_square(b, x);
    if (!nb_grad_attr(g, "approximate")->b) {
        nb_value pdf = nb_exp(b, nb_scale(b, x2, -0.5, -LOG_SQRT_2PI));
        return nb_mul(b, pdf, nb_scale(b, x2, -1.0, 2.0));
    }
    const double c = 2.0 * SQRT_2_OVER_PI;
    nb_value s = nb_sigmoid(b, nb_mul(b, x, nb_scale(b, x2, c * GELU_K, c)));
    nb_value ds = nb_mul(b, s, nb_scale(b, s, -1.0, 1.0));
    nb_value dw = nb_scale(b, x2, 3.0 * c * GELU_K, c);
    nb_value inner =
        nb_add(b, nb_mul(b, nb_scale(b, s, -2.0, 1.0), nb_square(b, dw)), nb_scale(b, x, 6.0 * c * GELU_K, 0.0));
    return nb_mul(b, ds, nb_add(b, nb_scale(b, dw, 2.0, 0.0), nb_mul(b, x, inner)));
}

/* DX = DOut * gelu'(X) is linear in DOut and has the X-derivative
 * DOut * gelu''(X):
 *     VJP  dDOut = gelu_grad(X, dDX),   dX = dDX * DOut * gelu''(X);
 *     JVP  tDX = gelu_grad(X, tDOut) + tX * DOut * gelu''(X). */
nb_status nb_gelu_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = DY(g), x = X0(g), d = nb_grad_x(g, 1, 0);
    if (nb_is_none(dy)) return NB_OK;
    if (nb_grad_wants_dx(g, 1, 0)) nb_grad_set_dx(g, 1, 0, gelu_grad_of(b, g, x, dy));
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_mul(b, nb_mul(b, dy, d), gelu_second(b, g, x)));
    return nb_builder_status(b);
}

nb_status nb_gelu_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = nb_grad_tx(g, 0, 0), td = nb_grad_tx(g, 1, 0), x = X0(g);
    nb_value t = NB_NONE;
    if (!nb_is_none(td)) t = gelu_grad_of(b, g, x, td);
    if (!nb_is_none(tx)) {
        nb_value u = nb_mul(b, nb_mul(b, tx, nb_grad_x(g, 1, 0)), gelu_second(b, g, x));
        t = nb_is_none(t) ? u : nb_add(b, t, u);
    }
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* softplus' = sigmoid(beta X) where beta X <= threshold, 1 above it (where
 * the op passes X through). The comparison is made as the kernel makes it,
 * in X's dtype. */
static nb_value softplus_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    nb_value x = X0(g);
    double beta = nb_grad_attr(g, "beta")->f, th = nb_grad_attr(g, "threshold")->f;
    nb_value z = beta == 1.0 ? x : nb_scale(b, x, beta, 0.0);
    nb_value r = nb_mul(b, d, nb_sigmoid(b, z));
    /* The kernel's threshold is (T)threshold: beyond float's range, infinite. */
    if (nb_value_info(b, x).dtype == NB_F32 && fabs(th) > FLT_MAX) th = th > 0 ? INFINITY : -INFINITY;
    if (th != INFINITY) r = nb_where(b, nb_greater(b, z, nb_ew_grad_const(b, x, th)), d, r);
    return r;
}
ACT_RULES(softplus)

/* silu = X s, s = sigmoid(X): silu' = s (1 + X (1 - s)). */
static nb_value silu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    nb_value x = X0(g);
    nb_value s = nb_sigmoid(b, x);
    nb_value dv = nb_mul(b, s, nb_scale(b, nb_mul(b, x, nb_scale(b, s, -1.0, 1.0)), 1.0, 1.0));
    return nb_mul(b, d, dv);
}
ACT_RULES(silu)
