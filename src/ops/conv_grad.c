/* Gradient rules of conv2d and pool2d. Each emits the family's fused
 * gradient op with the forward op's attributes. */
#include "conv_grad.h"
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "nabla/ops.h"
#include "nabla/op.h"

int nb_convgrad_attrs(const nb_grad_ctx *g, const char *type, nb_attr out[NB_MAX_ATTRS])
{
    const nb_op_def *to = nb_op_find(type);
    int n = 0;
    for (int i = 0; i < NB_MAX_ATTRS && g->def->attrs[i].name; i++) {
        if (g->attrs[i].type == NB_ATTR_NONE) continue;
        if (to && nb_op_attr_index(to, g->def->attrs[i].name) < 0) continue;
        out[n++] = (nb_attr){g->def->attrs[i].name, g->attrs[i]};
    }
    return n;
}

/* conv2d(Input, Filter, Bias?) -> Output: conv2d_grad(Input, Filter, DOutput)
 * gives DInput, DFilter and DBias. Its outputs are optional and taken in
 * order, so only those up to the last one wanted are asked for. */
nb_status nb_conv2d_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return nb_builder_status(b);
    const bool want[3] = {nb_grad_wants_dx(g, 0, 0), nb_grad_wants_dx(g, 1, 0), nb_grad_wants_dx(g, 2, 0)};
    const int n_out = want[2] ? 3 : want[1] ? 2 : want[0] ? 1 : 0;
    if (!n_out) return nb_builder_status(b);
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "conv2d_grad", attrs);
    const nb_value in[3] = {nb_grad_x(g, 0, 0), nb_grad_x(g, 1, 0), dy};
    nb_value out[3];
    if (nb_emit(b, "conv2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs), n_out, out))
        return nb_builder_status(b);
    for (int k = 0; k < n_out; k++)
        if (want[k]) nb_grad_set_dx(g, k, 0, out[k]);
    return nb_builder_status(b);
}

/* pool2d(X) -> Out: pool2d_grad(X, Out, DOut) -> DX. */
nb_status nb_pool2d_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "pool2d_grad", attrs);
    const nb_value in[3] = {nb_grad_x(g, 0, 0), nb_grad_y(g, 0, 0), dy};
    nb_grad_set_dx(g, 0, 0, nb_emit1(b, "pool2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs)));
    return nb_builder_status(b);
}

/* ---- rules of the fused gradient ops: second and higher orders ----------- */

/* conv2d_grad(Input X, Filter W, DOutput D) -> DInput, DFilter, DBias is
 * bilinear. With gI, gF, gB the gradients of its outputs:
 *   <DInput, gI> = <D, conv2d(gI, W)>, <DFilter, gF> = <D, conv2d(X, gF)>,
 *   <DBias, gB> = <D, gB> (broadcast over N, H, W),
 * so dD = conv2d(gI, W) + conv2d(X, gF) + gB, dW = DFilter of
 * conv2d_grad(gI, W, D) and dX = DInput of conv2d_grad(X, gF, D): conv2d and
 * conv2d_grad again, so every order has a rule. */
nb_status nb_conv2d_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value gin[3];
    for (int s = 0; s < 3; s++) gin[s] = nb_grad_out_count(g, s) ? nb_grad_dy(g, s, 0) : NB_NONE;
    const nb_value x = nb_grad_x(g, 0, 0), w = nb_grad_x(g, 1, 0), d = nb_grad_x(g, 2, 0);
    const nb_value gi = gin[0], gf = gin[1], gb = gin[2];
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "conv2d", attrs);
    if (nb_grad_wants_dx(g, 2, 0)) {
        /* gB rides on the first conv2d as its Bias. */
        nb_value terms[2];
        int n = 0;
        bool bias_used = false;
        if (!nb_is_none(gi)) {
            const nb_value in[3] = {gi, w, gb};
            terms[n++] = nb_emit1(b, "conv2d", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs));
            bias_used = true;
        }
        if (!nb_is_none(gf)) {
            const nb_value in[3] = {x, gf, bias_used ? NB_NONE : gb};
            terms[n++] = nb_emit1(b, "conv2d", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs));
            bias_used = true;
        }
        if (!nb_is_none(gb) && !bias_used) {
            const int64_t shape[4] = {1, -1, 1, 1};
            terms[n++] = nb_expand_as(b, nb_reshape(b, gb, 4, shape), d);
        }
        if (n) nb_grad_set_dx(g, 2, 0, n == 1 ? terms[0] : nb_add(b, terms[0], terms[1]));
    }
    if (!nb_is_none(gi) && nb_grad_wants_dx(g, 1, 0)) {
        const nb_value in[3] = {gi, w, d};
        nb_value out[2];
        if (!nb_emit(b, "conv2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs), 2, out))
            nb_grad_set_dx(g, 1, 0, out[1]);
    }
    if (!nb_is_none(gf) && nb_grad_wants_dx(g, 0, 0)) {
        const nb_value in[3] = {x, gf, d};
        nb_value out[1];
        if (!nb_emit(b, "conv2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs), 1, out))
            nb_grad_set_dx(g, 0, 0, out[0]);
    }
    return nb_builder_status(b);
}

/* Row (axis 0) or column (axis 1) indicator of the windows whose index is
 * `c` modulo `r`, among `len`: [len, 1] or [1, len] of dtype dt. */
static nb_value window_class(nb_builder *b, int64_t len, int64_t r, int64_t c, int axis, nb_dtype dt)
{
    const int64_t q = (len + r - 1) / r, flat[1] = {q * r}, zero = 0, axis0 = 0;
    const nb_value idx = nb_fill_constant(b, NB_I64, 1, &q, (double)c);
    const nb_attr attrs[2] = {NB_ATTR_INT("depth", r), NB_ATTR_INT("dtype", dt)};
    nb_value v = nb_reshape(b, nb_emit1(b, "one_hot", NB_VALUES(idx), NB_ATTRS_N(2, attrs)), 1, flat);
    v = nb_slice(b, v, 1, &axis0, &zero, &len);
    const int64_t shape[2] = {axis ? 1 : len, axis ? len : 1};
    return nb_reshape(b, v, 2, shape);
}

/* pool2d_grad(X, Out, DOut) -> DX is linear in DOut: DX = P^T DOut, where P
 * is average pooling, or for max pooling the map that picks each window's
 * (first) maximum of X. Its gradient with respect to DOut is P gDX; X and Out
 * only place the windows and the maxima, so their gradients are zero.
 *
 * Average: P is pool2d itself. Max: P a takes a at each window's argmax.
 * M = pool2d_grad(X, Out, ones) marks the argmaxes; when windows do not
 * overlap, window o holds only its own mark, so (P a)_o = the sum of M * a
 * over the window = kh * kw * (non-exclusive average pool of M * a). Windows
 * that overlap are split into classes by their index modulo ceil(k / s) along
 * each axis: windows of a class never overlap, and each class is done that
 * way with DOut its indicator, its result kept on its own windows. Global
 * pooling has one window: a plain sum over the image. */
/* P a for the pooling of g's op (pool2d or pool2d_grad, which share their
 * attributes) over X x, whose pooled values are `out`. */
static nb_value pool_apply(nb_builder *b, const nb_grad_ctx *g, nb_value x, nb_value out, nb_value a)
{
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "pool2d", attrs);
    const nb_attr_value *type = nb_grad_attr(g, "pooling_type");
    if (type->type == NB_ATTR_STRING && strcmp(type->s, "max"))
        return nb_emit1(b, "pool2d", NB_VALUES(a), NB_ATTRS_N(n_attrs, attrs));
    const nb_var_info xi = nb_value_info(b, x), oi = nb_value_info(b, out);
    if (nb_grad_attr(g, "global_pooling")->b) {
        /* One window, the whole image: a sum over it, whatever its size. */
        const int64_t hw[2] = {2, 3};
        const nb_value in[3] = {x, out, nb_ones_like(b, out)};
        const nb_value marks = nb_emit1(b, "pool2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs));
        return nb_reduce_sum(b, nb_mul(b, marks, a), 2, hw, true);
    }
    const nb_attr_value *ks = nb_grad_attr(g, "ksize"), *st = nb_grad_attr(g, "strides");
    if (oi.ndim != 4 || ks->n != 2 || st->n != 2) {
        nb_builder_fail(b, NB_ERR_ARG, "%s gradient: Out must be 4-D, ksize and strides 2 values", g->def->name);
        return NB_NONE;
    }
    const int64_t kh = ks->ints[0], kw = ks->ints[1], ho = oi.shape[2], wo = oi.shape[3];
    if (ho < 0 || wo < 0) {
        nb_builder_fail(b, NB_ERR_SHAPE, "%s gradient: max pooling needs the pooled sizes at build time", g->def->name);
        return NB_NONE;
    }
    const int64_t rh = ho <= 1 ? 1 : (kh + st->ints[0] - 1) / st->ints[0];
    const int64_t rw = wo <= 1 ? 1 : (kw + st->ints[1] - 1) / st->ints[1];
    /* The sums over each window: non-exclusive average pools times kh * kw. */
    nb_attr avg[NB_MAX_ATTRS];
    for (int i = 0; i < n_attrs; i++) {
        avg[i] = attrs[i];
        if (!strcmp(attrs[i].name, "pooling_type")) avg[i] = NB_ATTR_STRING("pooling_type", "avg");
        if (!strcmp(attrs[i].name, "exclusive")) avg[i] = NB_ATTR_BOOL("exclusive", false);
    }
    const nb_value ones = nb_ones_like(b, out);
    /* Each row and column indicator once (rh, rw <= kh, kw). */
    nb_value *rows = nb_calloc((size_t)(rh + rw), sizeof *rows), *cols = rows + rh;
    if (!rows) {
        nb_builder_fail(b, NB_ERR_NOMEM, "%s gradient: out of memory", g->def->name);
        return NB_NONE;
    }
    for (int64_t c = 0; c < rh; c++) rows[c] = rh > 1 ? window_class(b, ho, rh, c, 0, xi.dtype) : NB_NONE;
    for (int64_t c = 0; c < rw; c++) cols[c] = rw > 1 ? window_class(b, wo, rw, c, 1, xi.dtype) : NB_NONE;
    nb_value sum = NB_NONE;
    for (int64_t ch = 0; ch < rh; ch++)
        for (int64_t cw = 0; cw < rw; cw++) {
            nb_value cls = ones;
            if (rh > 1) cls = nb_mul(b, cls, rows[ch]);
            if (rw > 1) cls = nb_mul(b, cls, cols[cw]);
            const nb_value in[3] = {x, out, cls};
            const nb_value marks = nb_emit1(b, "pool2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs));
            const nb_value picked = nb_mul(b, marks, a);
            nb_value v =
                nb_scale(b, nb_emit1(b, "pool2d", NB_VALUES(picked), NB_ATTRS_N(n_attrs, avg)), (double)(kh * kw), 0);
            if (rh > 1 || rw > 1) v = nb_mul(b, v, cls);
            sum = nb_is_none(sum) ? v : nb_add(b, sum, v);
        }
    nb_free(rows);
    return sum;
}

/* The gradient of pool2d_grad with respect to DOut: P gDX. */
nb_status nb_pool2d_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_value gdx = nb_grad_dy(g, 0, 0);
    if (nb_is_none(gdx) || !nb_grad_wants_dx(g, 2, 0)) return nb_builder_status(b);
    const nb_value p = pool_apply(b, g, nb_grad_x(g, 0, 0), nb_grad_x(g, 1, 0), gdx);
    if (!nb_is_none(p)) nb_grad_set_dx(g, 2, 0, p);
    return nb_builder_status(b);
}

/* ---- JVP rules (forward mode) ---------------------------------------------- */

/* conv2d is bilinear in (Input, Filter) and affine in Bias:
 * tOutput = conv2d(tInput, Filter, tBias) + conv2d(Input, tFilter), tBias
 * riding on the first conv2d there is, else broadcast over N, H, W. */
nb_status nb_conv2d_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_value tx = nb_grad_tx(g, 0, 0), tw = nb_grad_tx(g, 1, 0);
    const nb_value tb = nb_grad_in_count(g, 2) ? nb_grad_tx(g, 2, 0) : NB_NONE;
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "conv2d", attrs);
    nb_value terms[2];
    int n = 0;
    bool bias_used = false;
    if (!nb_is_none(tx)) {
        const nb_value in[3] = {tx, nb_grad_x(g, 1, 0), tb};
        terms[n++] = nb_emit1(b, "conv2d", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs));
        bias_used = true;
    }
    if (!nb_is_none(tw)) {
        const nb_value in[3] = {nb_grad_x(g, 0, 0), tw, bias_used ? NB_NONE : tb};
        terms[n++] = nb_emit1(b, "conv2d", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs));
        bias_used = true;
    }
    if (!nb_is_none(tb) && !bias_used) {
        const int64_t shape[4] = {1, -1, 1, 1};
        terms[n++] = nb_expand_as(b, nb_reshape(b, tb, 4, shape), nb_grad_y(g, 0, 0));
    }
    if (n) nb_grad_set_ty(g, 0, 0, n == 1 ? terms[0] : nb_add(b, terms[0], terms[1]));
    return nb_builder_status(b);
}

/* conv2d_grad(X, W, D): DInput is bilinear in (W, D), DFilter in (X, D) and
 * DBias linear in D, so
 *   tDInput = DInput(X, tW, D) + DInput(X, W, tD),
 *   tDFilter = DFilter(tX, W, D) + DFilter(X, W, tD), tDBias = DBias(X, W, tD):
 * conv2d_grad again, one call per non-zero tangent. */
nb_status nb_conv2d_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_value x = nb_grad_x(g, 0, 0), w = nb_grad_x(g, 1, 0), d = nb_grad_x(g, 2, 0);
    const nb_value tx = nb_grad_tx(g, 0, 0), tw = nb_grad_tx(g, 1, 0), td = nb_grad_tx(g, 2, 0);
    bool has[3];
    int n_out = 0;
    for (int s = 0; s < 3; s++)
        if ((has[s] = nb_grad_out_count(g, s) > 0)) n_out = s + 1;
    if (!n_out) return nb_builder_status(b);
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "conv2d_grad", attrs);
    nb_value t[3] = {NB_NONE, NB_NONE, NB_NONE};
    if (!nb_is_none(td)) {
        const nb_value in[3] = {x, w, td};
        nb_value out[3];
        if (nb_emit(b, "conv2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs), n_out, out))
            return nb_builder_status(b);
        for (int s = 0; s < n_out; s++)
            if (has[s]) t[s] = out[s];
    }
    if (!nb_is_none(tw) && has[0]) {
        const nb_value in[3] = {x, tw, d};
        nb_value out[1];
        if (nb_emit(b, "conv2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs), 1, out))
            return nb_builder_status(b);
        t[0] = nb_is_none(t[0]) ? out[0] : nb_add(b, t[0], out[0]);
    }
    if (!nb_is_none(tx) && has[1]) {
        const nb_value in[3] = {tx, w, d};
        nb_value out[2];
        if (nb_emit(b, "conv2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs), 2, out))
            return nb_builder_status(b);
        t[1] = nb_is_none(t[1]) ? out[1] : nb_add(b, t[1], out[1]);
    }
    for (int s = 0; s < 3; s++)
        if (has[s] && !nb_is_none(t[s])) nb_grad_set_ty(g, s, 0, t[s]);
    return nb_builder_status(b);
}

/* pool2d(X) -> Out is P X, P piecewise constant in X (average: pool2d
 * itself; max: each window's first maximum, which X only places):
 * tOut = P tX, by the machinery of pool2d_grad's VJP rule. */
nb_status nb_pool2d_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_value tx = nb_grad_tx(g, 0, 0);
    if (nb_is_none(tx)) return nb_builder_status(b);
    const nb_value p = pool_apply(b, g, nb_grad_x(g, 0, 0), nb_grad_y(g, 0, 0), tx);
    if (!nb_is_none(p)) nb_grad_set_ty(g, 0, 0, p);
    return nb_builder_status(b);
}

/* pool2d_grad(X, Out, DOut) -> DX = P^T DOut, linear in DOut; X and Out only
 * place the windows' maxima: tDX = pool2d_grad(X, Out, tDOut). */
nb_status nb_pool2d_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_value td = nb_grad_tx(g, 2, 0);
    if (nb_is_none(td)) return nb_builder_status(b);
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "pool2d_grad", attrs);
    const nb_value in[3] = {nb_grad_x(g, 0, 0), nb_grad_x(g, 1, 0), td};
    nb_grad_set_ty(g, 0, 0, nb_emit1(b, "pool2d_grad", NB_VALUES_N(3, in), NB_ATTRS_N(n_attrs, attrs)));
    return nb_builder_status(b);
}
