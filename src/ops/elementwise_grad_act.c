/* VJP rules of the activations: tanh, sigmoid, relu, leaky_relu, elu, gelu,
 * softplus and silu. These sit on the training hot path, so each is written
 * with as few ops as its math allows, reading Out where that is cheaper than
 * recomputing from X. */
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
static nb_value relu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    return nb_mul(b, d, nb_sign(b, OUT(g)));
}
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
#define INV_SQRT_2PI 0.39894228040143267794 /* phi(0) = 1 / sqrt(2 pi) */
#define GELU_K 0.044715

/* Exact gelu, Out = X * Phi(X): gelu' = Phi(X) + X * phi(X).
 * There is no erf op, so Phi(X) is taken from the forward value as Out / X.
 * Where |X| < 1e-30 (X = 0, and subnormals where Out has lost its relative
 * precision) Phi(X) = 1/2 + phi(0) X to far below rounding, and the rule
 * takes that instead, through a 0/1 mask m:
 *     Phi = (Out + m (1/2 + phi(0) X)) / (X + m),
 * which there is (Out + 1/2 + phi(0) X) / (1 + X) = 1/2 + phi(0) X to first
 * order (Out = X/2 + phi(0) X^2 + ...), with the right derivative too, so
 * the second derivative at X = 0 is right; and
 *     phi(X) = exp(-X^2/2 - log sqrt(2 pi)).
 *
 * Tanh form, Out = X * s with s = sigmoid(2u), u = c (X + k X^3) (the kernel's
 * form): gelu' = s + X s (1 - s) d(2u)/dX = s (1 + X (1 - s) 2c (1 + 3k X^2)). */
static nb_value gelu_apply(nb_builder *b, const nb_grad_ctx *g, nb_value d)
{
    nb_value x = X0(g);
    nb_value dv;
    if (!nb_grad_attr(g, "approximate")->b) {
        nb_dtype dt = nb_value_info(b, x).dtype;
        nb_value m = nb_cast(b, nb_less(b, nb_abs(b, x), nb_ew_grad_const(b, x, 1e-30)), dt);
        nb_value small = nb_mul(b, m, nb_scale(b, x, INV_SQRT_2PI, 0.5));
        nb_value cdf = nb_div(b, nb_add(b, OUT(g), small), nb_add(b, x, m));
        nb_value pdf = nb_exp(b, nb_scale(b, nb_square(b, x), -0.5, -LOG_SQRT_2PI));
        dv = nb_add(b, cdf, nb_mul(b, x, pdf));
    } else {
        const double c2 = 2.0 * SQRT_2_OVER_PI;
        nb_value x2 = nb_square(b, x);
        nb_value s = nb_sigmoid(b, nb_mul(b, x, nb_scale(b, x2, c2 * GELU_K, c2)));
        nb_value du = nb_scale(b, x2, 3.0 * c2 * GELU_K, c2);
        nb_value t = nb_mul(b, nb_mul(b, x, nb_scale(b, s, -1.0, 1.0)), du);
        dv = nb_mul(b, s, nb_scale(b, t, 1.0, 1.0));
    }
    return nb_mul(b, d, dv);
}
ACT_RULES(gelu)

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
