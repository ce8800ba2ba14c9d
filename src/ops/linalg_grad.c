/* Gradient rules of the linear-algebra family (linalg.c), written as
 * compositions of matmul and shape ops, so that their own gradients come
 * for free.
 *
 * matmul: with Out = alpha * op(X) @ op(Y) and G = dOut,
 *     dX = alpha * G @ op(Y)^T   (transposed back if X was),
 *     dY = alpha * op(X)^T @ G   (likewise),
 * each a single matmul whose transpose flags pick the right operands (as
 * Paddle's matmul_grad does). 1-D operands become [1, K] and [K, 1] (and
 * G gets the dims Out lost); their gradients are summed back to [K] over
 * the batch. An operand whose batch dims were broadcast gets its gradient
 * summed down with sum_to, except that when Y has no batch dims and X has,
 * dY is one product of X and G flattened to matrices, not a batched product
 * summed afterwards.
 *
 * fc: the fused activation is undone first (its derivative is a function of
 * Out), then Input is seen as the matrix [rows, K] that fc multiplied. */
#include <stddef.h>
#include "linalg_grad.h"
#include "kernels/cpu/linalg.h"
#include "nabla/ops.h"

/* alpha * op(x) @ op(y). */
static nb_value mm(nb_builder *b, nb_value x, nb_value y, bool tx, bool ty, double alpha)
{
    nb_attr a[3] = {NB_ATTR_BOOL("transpose_x", tx), NB_ATTR_BOOL("transpose_y", ty), NB_ATTR_FLOAT("alpha", alpha)};
    return nb_emit1(b, "matmul", NB_VALUES(x, y), NB_ATTRS_N(alpha == 1.0 ? 2 : 3, a));
}

/* Whether operand v (2-D or more) was broadcast along a batch dim of the
 * product with operand o, so that its gradient, made over the whole batch,
 * must be summed back to v's shape. Unknown dims count as possibly broadcast
 * unless o's matching dim is 1. */
static bool batch_broadcast(const nb_var_info *v, const nb_var_info *o)
{
    int vb = v->ndim - 2, ob = o->ndim > 2 ? o->ndim - 2 : 0;
    if (ob > vb) return true;
    for (int i = 0; i < ob; i++) {
        int64_t vd = v->shape[vb - ob + i], od = o->shape[i];
        if (od != 1 && (vd == 1 || vd < 0)) return true;
    }
    return false;
}

/* The gradient of a 1-D operand from that of its 2-D form g ([..., 1, K]
 * for X, [..., K, 1] for Y): the sum over every dim but K's. */
static nb_value vec_grad(nb_builder *b, nb_value g, int k_axis_from_end)
{
    int nd = nb_value_info(b, g).ndim;
    int64_t axes[NB_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < nd; d++)
        if (d != nd - k_axis_from_end) axes[n++] = d;
    return nb_reduce_sum(b, g, n, axes, false);
}

nb_status nb_vjp_matmul(nb_builder *b, nb_grad_ctx *g)
{
    nb_value x = nb_grad_x(g, 0, 0), y = nb_grad_x(g, 1, 0), dout = nb_grad_dy(g, 0, 0);
    double alpha = nb_grad_attr(g, "alpha")->f;
    nb_var_info xi = nb_value_info(b, x), yi = nb_value_info(b, y);
    nb_status st = nb_builder_status(b);
    if (st) return st;
    nb_matmul_dims d;
    if ((st = nb_matmul_dims_of("matmul gradient", &xi, &yi, nb_grad_attr(g, "transpose_x")->b,
                                nb_grad_attr(g, "transpose_y")->b, &d)))
        return st;
    bool want_x = nb_grad_wants_dx(g, 0, 0), want_y = nb_grad_wants_dx(g, 1, 0);
    bool tx = d.tx, ty = d.ty;

    /* 2-D forms: a = X, bb = Y, gg = dOut, with the dims of 1-D operands. */
    nb_value a = x, bb = y, gg = dout;
    if (d.x_vec && want_y) a = nb_unsqueeze(b, x, 1, (int64_t[]){0});
    if (d.y_vec && want_x) bb = nb_unsqueeze(b, y, 1, (int64_t[]){1});
    int gr = nb_value_info(b, dout).ndim;
    if (d.x_vec && d.y_vec) gg = nb_unsqueeze(b, dout, 2, (int64_t[]){gr, gr + 1});
    else if (d.x_vec) gg = nb_unsqueeze(b, dout, 1, (int64_t[]){gr - 1});
    else if (d.y_vec) gg = nb_unsqueeze(b, dout, 1, (int64_t[]){gr});

    if (want_x) {
        nb_value da = !tx ? mm(b, gg, bb, false, !ty, alpha) : mm(b, bb, gg, ty, true, alpha);
        if (d.x_vec) da = vec_grad(b, da, 1);
        else if (batch_broadcast(&xi, &yi)) da = nb_sum_to(b, da, x);
        nb_grad_set_dx(g, 0, 0, da);
    }
    if (want_y) {
        nb_value aa = a, g2 = gg;
        int ar = d.x_vec ? 2 : xi.ndim;
        if (yi.ndim <= 2 && ar > 2 && !tx) {
            /* Y is shared by the whole batch: one product over all rows. */
            aa = nb_flatten(b, a, 0, ar - 2);
            g2 = nb_flatten(b, gg, 0, ar - 2);
        }
        nb_value db = !ty ? mm(b, aa, g2, !tx, false, alpha) : mm(b, g2, aa, true, tx, alpha);
        if (d.y_vec) db = vec_grad(b, db, 2);
        else if (aa.p == a.p && batch_broadcast(&yi, &xi)) db = nb_sum_to(b, db, y);
        nb_grad_set_dx(g, 1, 0, db);
    }
    return nb_builder_status(b);
}

/* fc. With P = flatten(Input) @ W + Bias and Out = act(P):
 *     dP = dOut * act'(P), written with Out: relu sign(Out), sigmoid
 *          Out * (1 - Out), tanh 1 - Out^2;
 *     dInput = dP @ W^T (a batched product over Out's leading dims, with
 *          the columns reshaped back to Input's trailing dims);
 *     dW = flatten(Input)^T @ flatten(dP);
 *     dBias = the sum of dP over its rows. */
nb_status nb_vjp_fc(nb_builder *b, nb_grad_ctx *g)
{
    nb_value in = nb_grad_x(g, 0, 0), w = nb_grad_x(g, 1, 0), out = nb_grad_y(g, 0, 0);
    nb_value dp = nb_grad_dy(g, 0, 0);
    int ncd = (int)nb_grad_attr(g, "in_num_col_dims")->i;
    nb_fc_act act = NB_FC_NONE;
    if (!nb_fc_act_parse(nb_grad_attr(g, "activation")->s, &act))
        return nb_builder_fail(b, NB_ERR_ARG, "fc gradient: unknown activation \"%s\"",
                               nb_grad_attr(g, "activation")->s);
    switch (act) {
    case NB_FC_RELU: dp = nb_mul(b, dp, nb_sign(b, out)); break;
    case NB_FC_SIGMOID: dp = nb_mul(b, dp, nb_mul(b, out, nb_scale(b, out, -1.0, 1.0))); break;
    case NB_FC_TANH: dp = nb_mul(b, dp, nb_scale(b, nb_square(b, out), -1.0, 1.0)); break;
    default: break;
    }
    nb_var_info ii = nb_value_info(b, in), wi = nb_value_info(b, w);
    int nd = ii.ndim;

    if (nb_grad_wants_dx(g, 0, 0)) {
        nb_value din = mm(b, dp, w, false, true, 1.0); /* [Input's first ncd dims, K] */
        if (ncd < nd - 1) {
            /* Back to Input's trailing dims; 0 keeps the leading ones. */
            int64_t shape[NB_MAX_DIMS];
            int unknown = 0;
            for (int d = 0; d < nd; d++) {
                shape[d] = d < ncd ? 0 : ii.shape[d];
                if (d >= ncd && ii.shape[d] < 0) unknown++;
            }
            if (unknown > 1) {
                char s[NB_SHAPE_STR_MAX];
                return nb_builder_fail(b, NB_ERR_UNSUPPORTED,
                                       "fc gradient: Input has shape %s, with more than one unknown dim after the "
                                       "first in_num_col_dims=%d, which a reshape cannot restore",
                                       nb_shape_str(s, sizeof s, nd, ii.shape), ncd);
            }
            din = nb_reshape(b, din, nd, shape);
        }
        nb_grad_set_dx(g, 0, 0, din);
    }
    bool want_w = nb_grad_wants_dx(g, 1, 0), want_bias = nb_grad_wants_dx(g, 2, 0);
    nb_value dp2 = ncd > 1 && (want_w || want_bias) ? nb_flatten(b, dp, 0, ncd - 1) : dp; /* [rows, N] */
    if (want_w) {
        nb_value in2; /* [rows, K] */
        if (nd == 2) in2 = in;
        else if (ncd == 1) in2 = nb_flatten(b, in, 1, nd - 1);
        else if (ncd == nd - 1) in2 = nb_flatten(b, in, 0, ncd - 1);
        else if (wi.shape[0] >= 0) in2 = nb_reshape(b, in, 2, (int64_t[]){-1, wi.shape[0]});
        else in2 = nb_flatten(b, nb_flatten(b, in, ncd, nd - 1), 0, ncd - 1);
        nb_grad_set_dx(g, 1, 0, mm(b, in2, dp2, true, false, 1.0));
    }
    if (want_bias) {
        bool bias_2d = nb_value_info(b, nb_grad_x(g, 2, 0)).ndim == 2;
        nb_grad_set_dx(g, 2, 0, nb_reduce_sum(b, dp2, 1, (int64_t[]){0}, bias_2d));
    }
    return nb_builder_status(b);
}

/* ---- JVP rules (forward mode) ------------------------------------------------------ */

/* matmul is bilinear: tOut = alpha * (op(tX) @ op(Y) + op(X) @ op(tY)), two
 * products with the forward op's transpose flags and alpha. Tangents have
 * their operands' shapes, so 1-D operands and broadcast batch dims are
 * handled by matmul itself, and each term already has Out's shape. */
nb_status nb_jvp_matmul(nb_builder *b, nb_grad_ctx *g)
{
    nb_value tx = nb_grad_tx(g, 0, 0), ty = nb_grad_tx(g, 1, 0);
    if (nb_is_none(tx) && nb_is_none(ty)) return nb_builder_status(b);
    bool trx = nb_grad_attr(g, "transpose_x")->b, try_ = nb_grad_attr(g, "transpose_y")->b;
    double alpha = nb_grad_attr(g, "alpha")->f;
    nb_value t = NB_NONE;
    if (!nb_is_none(tx)) t = mm(b, tx, nb_grad_x(g, 1, 0), trx, try_, alpha);
    if (!nb_is_none(ty)) {
        nb_value u = mm(b, nb_grad_x(g, 0, 0), ty, trx, try_, alpha);
        t = nb_is_none(t) ? u : nb_add(b, t, u);
    }
    nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* fc: the pre-activation tangent is bilinear in (Input, W) plus tBias,
 *     tP = fc(tInput, W, tBias) + fc(Input, tW)
 * (tBias rides in the first fc that is made; alone, it is broadcast to
 * Out's shape), then tOut = tP * act'(P), written with Out as in the VJP. */
static nb_value fc_term(nb_builder *b, nb_value in, nb_value w, nb_value bias, int64_t ncd)
{
    nb_attr a[1] = {NB_ATTR_INT("in_num_col_dims", ncd)};
    return nb_emit1(b, "fc", NB_VALUES(in, w, bias), NB_ATTRS_N(1, a));
}

nb_status nb_jvp_fc(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t_in = nb_grad_tx(g, 0, 0), t_w = nb_grad_tx(g, 1, 0);
    nb_value t_bias = nb_grad_in_count(g, 2) ? nb_grad_tx(g, 2, 0) : NB_NONE;
    if (nb_is_none(t_in) && nb_is_none(t_w) && nb_is_none(t_bias)) return nb_builder_status(b);
    int64_t ncd = nb_grad_attr(g, "in_num_col_dims")->i;
    nb_fc_act act = NB_FC_NONE;
    if (!nb_fc_act_parse(nb_grad_attr(g, "activation")->s, &act))
        return nb_builder_fail(b, NB_ERR_ARG, "fc JVP: unknown activation \"%s\"", nb_grad_attr(g, "activation")->s);
    nb_value out = nb_grad_y(g, 0, 0);
    nb_value tp = NB_NONE;
    if (!nb_is_none(t_in)) {
        tp = fc_term(b, t_in, nb_grad_x(g, 1, 0), t_bias, ncd);
        t_bias = NB_NONE;
    }
    if (!nb_is_none(t_w)) {
        nb_value u = fc_term(b, nb_grad_x(g, 0, 0), t_w, t_bias, ncd);
        t_bias = NB_NONE;
        tp = nb_is_none(tp) ? u : nb_add(b, tp, u);
    }
    if (!nb_is_none(t_bias)) tp = act == NB_FC_NONE ? nb_expand_as(b, t_bias, out) : t_bias;
    switch (act) {
    case NB_FC_RELU: tp = nb_mul(b, tp, nb_sign(b, out)); break;
    case NB_FC_SIGMOID: tp = nb_mul(b, tp, nb_mul(b, out, nb_scale(b, out, -1.0, 1.0))); break;
    case NB_FC_TANH: tp = nb_mul(b, tp, nb_scale(b, nb_square(b, out), -1.0, 1.0)); break;
    default: break;
    }
    nb_grad_set_ty(g, 0, 0, tp);
    return nb_builder_status(b);
}
