/* Gradient rules of the nn family.
 *
 * Most rules are compositions of differentiable ops, so their own gradients
 * (second derivatives) come for free. Two emit a fused gradient op instead:
 * softmax_with_cross_entropy (softmax_with_cross_entropy_grad) and
 * embedding (embedding_grad); those fused ops have rules of their own (at
 * the end of the file), which second derivatives and forward over reverse
 * reach. The JVP rules (forward mode) follow the VJP rules;
 * softmax_with_cross_entropy's uses the same fused op for its Loss tangent. */
#include <string.h>
#include "nabla/ops.h"
#include "nn_grad.h"

static nb_dtype dtype_of(nb_builder *b, nb_value v) { return nb_value_info(b, v).dtype; }

/* softmax_with_cross_entropy_grad at (S, Label, D), with the attributes of
 * the op g describes: softmax_with_cross_entropy or the grad op itself,
 * both of which hold Label in input slot 1. */
static nb_value swce_grad(nb_builder *b, const nb_grad_ctx *g, nb_value s, nb_value d)
{
    nb_value in[3] = {s, nb_grad_x(g, 1, 0), d};
    nb_attr attrs[3] = {NB_ATTR_INT("axis", nb_grad_attr(g, "axis")->i),
                        NB_ATTR_BOOL("soft_label", nb_grad_attr(g, "soft_label")->b),
                        NB_ATTR_INT("ignore_index", nb_grad_attr(g, "ignore_index")->i)};
    return nb_emit1(b, "softmax_with_cross_entropy_grad", NB_VALUES_N(3, in), NB_ATTRS_N(3, attrs));
}

/* embedding_grad: DW, shaped like W, from the rows of DOut that Ids name. */
static nb_value embedding_grad(nb_builder *b, const nb_grad_ctx *g, nb_value ids, nb_value dout, nb_value w)
{
    nb_value in[3] = {ids, dout, w};
    nb_attr attrs[1] = {NB_ATTR_INT("padding_idx", nb_grad_attr(g, "padding_idx")->i)};
    return nb_emit1(b, "embedding_grad", NB_VALUES_N(3, in), NB_ATTRS_N(1, attrs));
}

/* The softmax VJP given its output y and the gradient dy of y:
 * y * (dy - sum(dy * y, axis)). A 0-d y is a single class, where the sum
 * along the axis is the element itself. */
static nb_value softmax_backward(nb_builder *b, nb_value y, nb_value dy, int64_t axis)
{
    nb_value dot = nb_mul(b, dy, y);
    if (nb_value_info(b, y).ndim > 0) dot = nb_reduce_sum(b, dot, 1, &axis, true);
    return nb_mul(b, y, nb_sub(b, dy, dot));
}

nb_status nb_nn_softmax_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return NB_OK;
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_grad_set_dx(g, 0, 0, softmax_backward(b, nb_grad_y(g, 0, 0), dy, axis));
    return nb_builder_status(b);
}

/* d log_softmax: dy - exp(y) * sum(dy, axis). */
nb_status nb_nn_log_softmax_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_value dy = nb_grad_dy(g, 0, 0), y = nb_grad_y(g, 0, 0);
    if (nb_is_none(dy)) return NB_OK;
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_value s = nb_value_info(b, y).ndim > 0 ? nb_reduce_sum(b, dy, 1, &axis, true) : dy;
    nb_grad_set_dx(g, 0, 0, nb_sub(b, dy, nb_mul(b, nb_exp(b, y), s)));
    return nb_builder_status(b);
}

/* The gradient of Loss goes through the fused op, which needs only Softmax
 * and Label; a gradient of the Softmax output (if the caller used it too)
 * adds the softmax rule's contribution. */
nb_status nb_nn_softmax_with_cross_entropy_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_value sm = nb_grad_y(g, 0, 0), dsm = nb_grad_dy(g, 0, 0), dloss = nb_grad_dy(g, 1, 0);
    nb_value dx = NB_NONE;
    if (!nb_is_none(dloss)) dx = swce_grad(b, g, sm, dloss);
    if (!nb_is_none(dsm)) {
        nb_value c = softmax_backward(b, sm, dsm, axis);
        dx = nb_is_none(dx) ? c : nb_add(b, dx, c);
    }
    if (!nb_is_none(dx)) nb_grad_set_dx(g, 0, 0, dx);
    return nb_builder_status(b);
}

/* The target distribution T of cross_entropy, shaped like X (classes last):
 * the soft label itself, or for hard labels their one-hot form with the rows
 * whose label equals ignore_index zeroed. NB_NONE (with the builder failed)
 * when the number of classes is not known yet. */
static nb_value cross_entropy_target(nb_builder *b, const nb_grad_ctx *g, nb_value x, nb_value lab, const char *what)
{
    if (nb_grad_attr(g, "soft_label")->b) return lab;
    nb_var_info xi = nb_value_info(b, x), li = nb_value_info(b, lab);
    int64_t C = xi.ndim ? xi.shape[xi.ndim - 1] : -1;
    if (C < 0) {
        nb_builder_fail(b, NB_ERR_SHAPE,
                        "cross_entropy %s: the number of classes (last dim of X) must be known "
                        "when the %s is built",
                        what, what);
        return NB_NONE;
    }
    /* Labels in Paddle's layout [..., 1] become [...], like X without its class dim. */
    nb_value flat = lab;
    if (li.ndim == xi.ndim) flat = nb_squeeze(b, lab, 1, (const int64_t[]){-1});
    nb_value valid =
        nb_not_equal(b, flat, nb_fill_constant(b, li.dtype, 0, NULL, (double)nb_grad_attr(g, "ignore_index")->i));
    nb_value safe = nb_where(b, valid, flat, nb_fill_constant(b, li.dtype, 0, NULL, 0));
    nb_attr oh[2] = {NB_ATTR_INT("depth", C), NB_ATTR_INT("dtype", xi.dtype)};
    nb_value t = nb_emit1(b, "one_hot", NB_VALUES(safe), NB_ATTRS_N(2, oh));
    return nb_mul(b, t, nb_unsqueeze(b, nb_cast(b, valid, xi.dtype), 1, (const int64_t[]){-1}));
}

/* Y = -log(X[label]) per row (classes last): dX = -dY * T / X, where T is
 * the soft label itself, or for hard labels their one-hot form with the
 * rows whose label equals ignore_index zeroed. The kernel's clamp of X at
 * 1e-20 is not modelled: it only matters for probabilities of (nearly) 0. */
nb_status nb_nn_cross_entropy_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_value dy = nb_grad_dy(g, 0, 0), x = nb_grad_x(g, 0, 0), lab = nb_grad_x(g, 1, 0);
    if (nb_is_none(dy)) return NB_OK;
    nb_value t = cross_entropy_target(b, g, x, lab, "gradient");
    if (nb_is_none(t)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, nb_div(b, nb_mul(b, nb_scale(b, dy, -1, 0), t), x));
    return nb_builder_status(b);
}

/* dy scaled by `coef`, and by 1/numel(x) for the "mean" reduction (with the
 * count computed at run time when x's shape is not known yet). */
static nb_value reduced_dy(nb_builder *b, const nb_grad_ctx *g, nb_value dy, nb_value x, double coef)
{
    if (strcmp(nb_grad_attr(g, "reduction")->s, "mean")) return coef == 1 ? dy : nb_scale(b, dy, coef, 0);
    nb_var_info xi = nb_value_info(b, x);
    int64_t n = 1;
    for (int d = 0; d < xi.ndim && n >= 0; d++) n = xi.shape[d] < 0 ? -1 : n * xi.shape[d];
    if (n >= 0) return nb_scale(b, dy, n ? coef / (double)n : coef, 0);
    nb_value count = nb_reduce_sum(b, nb_ones_like(b, x), 0, NULL, false);
    nb_value r = nb_div(b, dy, count);
    return coef == 1 ? r : nb_scale(b, r, coef, 0);
}

/* mse_loss = reduce((X - Label)^2): dX = 2 (X - Label) dy (/N for mean),
 * dLabel = -dX. */
nb_status nb_nn_mse_loss_vjp(nb_builder *b, nb_grad_ctx *g)
{
    bool want_x = nb_grad_wants_dx(g, 0, 0), want_l = nb_grad_wants_dx(g, 1, 0);
    nb_value dy = nb_grad_dy(g, 0, 0), x = nb_grad_x(g, 0, 0);
    if (nb_is_none(dy) || !(want_x || want_l)) return NB_OK;
    nb_value diff = nb_sub(b, x, nb_grad_x(g, 1, 0));
    if (want_x) nb_grad_set_dx(g, 0, 0, nb_mul(b, diff, reduced_dy(b, g, dy, x, 2)));
    if (want_l) nb_grad_set_dx(g, 1, 0, nb_mul(b, diff, reduced_dy(b, g, dy, x, -2)));
    return nb_builder_status(b);
}

/* bce_with_logits: dX = (sigmoid(X) - Label) dy (/N for mean). */
nb_status nb_nn_bce_with_logits_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_value dy = nb_grad_dy(g, 0, 0), x = nb_grad_x(g, 0, 0);
    if (nb_is_none(dy)) return NB_OK;
    nb_value p = nb_sub(b, nb_sigmoid(b, x), nb_grad_x(g, 1, 0));
    nb_grad_set_dx(g, 0, 0, nb_mul(b, p, reduced_dy(b, g, dy, x, 1)));
    return nb_builder_status(b);
}

/* Out = X * Mask * scale, with the kernel's scale: 1/(1-p) when training in
 * upscale_in_train mode, 1 when training in downgrade_in_infer mode; in
 * test mode Mask is all ones and the scale is 1 or (1-p) respectively. */
nb_status nb_nn_dropout_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return NB_OK;
    double p = nb_grad_attr(g, "dropout_prob")->f;
    bool test = nb_grad_attr(g, "is_test")->b;
    bool upscale = !strcmp(nb_grad_attr(g, "mode")->s, "upscale_in_train");
    double scale = test ? (upscale ? 1.0 : 1.0 - p) : (upscale ? 1.0 / (1.0 - p) : 1.0);
    nb_value dx = test ? dy : nb_mul(b, dy, nb_cast(b, nb_grad_y(g, 1, 0), dtype_of(b, dy)));
    if (scale != 1.0) dx = nb_scale(b, dx, scale, 0);
    nb_grad_set_dx(g, 0, 0, dx);
    return nb_builder_status(b);
}

/* dW: the rows of dOut added into the rows of a zero table that Ids name. */
nb_status nb_nn_embedding_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (!nb_grad_wants_dx(g, 0, 0)) return NB_OK;
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return NB_OK;
    nb_grad_set_dx(g, 0, 0, embedding_grad(b, g, nb_grad_x(g, 1, 0), dy, nb_grad_x(g, 0, 0)));
    return nb_builder_status(b);
}

/* ---- JVP rules (forward mode) ------------------------------------------------
 *
 * Each is linear in the input tangents and skips the terms of tangents that
 * are NB_NONE (zero). The softmax Jacobian is symmetric, so its JVP is the
 * same composition as its VJP. */

/* softmax: tOut = y * (t - sum(y * t, axis)). */
nb_status nb_nn_softmax_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_grad_set_ty(g, 0, 0, softmax_backward(b, nb_grad_y(g, 0, 0), t, axis));
    return nb_builder_status(b);
}

/* log_softmax: tOut = t - sum(exp(y) * t, axis) (exp(y) is the softmax). */
nb_status nb_nn_log_softmax_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0), y = nb_grad_y(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_value s = nb_mul(b, nb_exp(b, y), t);
    if (nb_value_info(b, y).ndim > 0) s = nb_reduce_sum(b, s, 1, &axis, true);
    nb_grad_set_ty(g, 0, 0, nb_sub(b, t, s));
    return nb_builder_status(b);
}

/* tSoftmax is the softmax JVP. Loss = sum(Label) * logsumexp(Logits) -
 * sum(Label * Logits) per row (Label one-hot for hard labels, zero for
 * ignored rows), so tLoss = sum((Softmax * sum(Label) - Label) * t, axis):
 * the fused gradient op with DLoss = 1 makes that factor, honouring
 * soft_label, ignore_index and both hard-label layouts as the VJP does. */
nb_status nb_nn_softmax_with_cross_entropy_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    int64_t axis = nb_grad_attr(g, "axis")->i;
    nb_value sm = nb_grad_y(g, 0, 0), loss = nb_grad_y(g, 1, 0);
    nb_grad_set_ty(g, 0, 0, softmax_backward(b, sm, t, axis));
    /* Ones shaped like Loss (Softmax with the class dim kept as 1). */
    nb_value ones = nb_ones_like(b, nb_is_none(loss) ? nb_reduce_sum(b, sm, 1, &axis, true) : loss);
    nb_value w = swce_grad(b, g, sm, ones);
    nb_grad_set_ty(g, 1, 0, nb_reduce_sum(b, nb_mul(b, w, t), 1, &axis, true));
    return nb_builder_status(b);
}

/* cross_entropy: tY = -sum(T * t / X, classes), T as in the VJP. */
nb_status nb_nn_cross_entropy_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0), x = nb_grad_x(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    nb_value tgt = cross_entropy_target(b, g, x, nb_grad_x(g, 1, 0), "JVP");
    if (nb_is_none(tgt)) return nb_builder_status(b);
    nb_value s = nb_reduce_sum(b, nb_div(b, nb_mul(b, tgt, t), x), 1, (const int64_t[]){-1}, true);
    nb_grad_set_ty(g, 0, 0, nb_scale(b, s, -1, 0));
    return nb_builder_status(b);
}

/* The loss tangent made from the per-element one by the op's reduction. */
static nb_value reduce_tangent(nb_builder *b, const nb_grad_ctx *g, nb_value v)
{
    const char *r = nb_grad_attr(g, "reduction")->s;
    if (!strcmp(r, "none")) return v;
    if (!strcmp(r, "sum")) return nb_reduce_sum(b, v, 0, NULL, false);
    return nb_reduce_mean(b, v, 0, NULL, false);
}

/* mse_loss: tOut = reduce(2 (X - Label) (tX - tLabel)); Label's tangent
 * counts as X's does, either may be zero. */
nb_status nb_nn_mse_loss_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = nb_grad_tx(g, 0, 0), tl = nb_grad_tx(g, 1, 0);
    if (nb_is_none(tx) && nb_is_none(tl)) return NB_OK;
    nb_value diff = nb_sub(b, nb_grad_x(g, 0, 0), nb_grad_x(g, 1, 0));
    nb_value dt = nb_is_none(tl) ? tx : nb_is_none(tx) ? tl : nb_sub(b, tx, tl);
    nb_value v = nb_mul(b, nb_scale(b, diff, nb_is_none(tx) ? -2 : 2, 0), dt);
    nb_grad_set_ty(g, 0, 0, reduce_tangent(b, g, v));
    return nb_builder_status(b);
}

/* bce_with_logits: tOut = reduce((sigmoid(X) - Label) tX). */
nb_status nb_nn_bce_with_logits_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0), x = nb_grad_x(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    nb_value p = nb_sub(b, nb_sigmoid(b, x), nb_grad_x(g, 1, 0));
    nb_grad_set_ty(g, 0, 0, reduce_tangent(b, g, nb_mul(b, p, t)));
    return nb_builder_status(b);
}

/* dropout: tOut = t * Mask * scale with the forward's scale (see the VJP);
 * in test mode Mask is all ones, so it is left out. Mask has no tangent. */
nb_status nb_nn_dropout_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    double p = nb_grad_attr(g, "dropout_prob")->f;
    bool test = nb_grad_attr(g, "is_test")->b;
    bool upscale = !strcmp(nb_grad_attr(g, "mode")->s, "upscale_in_train");
    double scale = test ? (upscale ? 1.0 : 1.0 - p) : (upscale ? 1.0 / (1.0 - p) : 1.0);
    nb_value ty = test ? t : nb_mul(b, t, nb_cast(b, nb_grad_y(g, 1, 0), dtype_of(b, t)));
    if (scale != 1.0) ty = nb_scale(b, ty, scale, 0);
    nb_grad_set_ty(g, 0, 0, ty);
    return nb_builder_status(b);
}

/* embedding is linear in W: tOut = embedding(tW, Ids), rows of padding_idx
 * zero as in the forward. */
nb_status nb_nn_embedding_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return NB_OK;
    nb_grad_set_ty(g, 0, 0, nb_embedding(b, t, nb_grad_x(g, 1, 0), nb_grad_attr(g, "padding_idx")->i));
    return nb_builder_status(b);
}

/* ---- rules of the fused gradient ops ------------------------------------------
 *
 * A backward run under forward mode (forward over reverse), or differentiated
 * again (reverse over reverse), reaches the fused ops the VJP rules above
 * emit. */

/* DLogits = (S r - T) D per row, where T is the target (the soft label, or
 * the one-hot hard label, zero in ignored rows) and r = sum(T, axis): affine
 * in S, linear in D. The op itself gives the pieces, whatever the label's
 * layout: r D (broadcast along the axis) is its change when S grows by one,
 * and (S r - T) is its value at D = 1. */
static nb_value swce_grad_rd(nb_builder *b, const nb_grad_ctx *g, nb_value at_s)
{
    nb_value s = nb_grad_x(g, 0, 0), d = nb_grad_x(g, 2, 0);
    return nb_sub(b, swce_grad(b, g, nb_scale(b, s, 1, 1), d), nb_is_none(at_s) ? swce_grad(b, g, s, d) : at_s);
}

/* dS = dY r D; dD = sum(dY (S r - T), axis). */
nb_status nb_nn_softmax_with_cross_entropy_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return NB_OK;
    if (nb_grad_wants_dx(g, 0, 0)) nb_grad_set_dx(g, 0, 0, nb_mul(b, dy, swce_grad_rd(b, g, NB_NONE)));
    if (nb_grad_wants_dx(g, 2, 0)) {
        int64_t axis = nb_grad_attr(g, "axis")->i;
        nb_value w = swce_grad(b, g, nb_grad_x(g, 0, 0), nb_ones_like(b, nb_grad_x(g, 2, 0)));
        nb_grad_set_dx(g, 2, 0, nb_reduce_sum(b, nb_mul(b, dy, w), 1, &axis, true));
    }
    return nb_builder_status(b);
}

/* tY = tS r D + (S r - T) tD, the second term the op at D = tD. */
nb_status nb_nn_softmax_with_cross_entropy_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value ts = nb_grad_tx(g, 0, 0), td = nb_grad_tx(g, 2, 0), t = NB_NONE;
    if (!nb_is_none(ts)) t = nb_mul(b, ts, swce_grad_rd(b, g, nb_grad_y(g, 0, 0)));
    if (!nb_is_none(td)) {
        nb_value u = swce_grad(b, g, nb_grad_x(g, 0, 0), td);
        t = nb_is_none(t) ? u : nb_add(b, t, u);
    }
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* DW gathers the rows of DOut by Ids (padding rows left out): linear in
 * DOut, so the tangent is the op applied to tDOut, and the gradient of DOut
 * is the rows of dDW that Ids name (zero at padding ids): an embedding. */
nb_status nb_nn_embedding_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 1, 0)) return NB_OK;
    nb_grad_set_dx(g, 1, 0, nb_embedding(b, dy, nb_grad_x(g, 0, 0), nb_grad_attr(g, "padding_idx")->i));
    return nb_builder_status(b);
}

nb_status nb_nn_embedding_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 1, 0);
    if (nb_is_none(t)) return NB_OK;
    nb_grad_set_ty(g, 0, 0, embedding_grad(b, g, nb_grad_x(g, 0, 0), t, nb_grad_x(g, 2, 0)));
    return nb_builder_status(b);
}
