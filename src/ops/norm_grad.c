/* Gradient rules of batch_norm and layer_norm: each emits the family's fused
 * gradient op.
 *
 * Only Y carries a gradient. The other outputs are statistics: batch_norm's
 * MeanOut/VarianceOut (running averages) and SavedMean/SavedVariance, and
 * layer_norm's row Mean/Variance. They do depend on X, but like PyTorch's
 * running buffers and saved statistics they are not differentiated: a
 * gradient that reaches them is dropped, and when Y has none the rules emit
 * nothing. */
#include "conv_grad.h"
#include "norm_grad.h"
#include "nabla/ops.h"
#include "nabla/op.h"

/* Outputs of a fused grad op DX, DScale, DBias are optional and taken in
 * order: the count to ask for is up to the last one wanted. */
static int count_wanted(const bool want[3]) { return want[2] ? 3 : want[1] ? 2 : want[0] ? 1 : 0; }

/* batch_norm(X, Scale, Bias, Mean, Variance) -> Y, MeanOut, VarianceOut,
 * SavedMean, SavedVariance: batch_norm_grad(X, Scale, SavedMean,
 * SavedVariance, DY[, Mean, Variance]) -> DX, DScale, DBias. With global
 * statistics (is_test or use_global_stats) those are constants and the
 * running Mean and Variance, which the forward pass normalised with, go in
 * too. */
nb_status nb_batch_norm_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return nb_builder_status(b);
    const bool want[3] = {nb_grad_wants_dx(g, 0, 0), nb_grad_wants_dx(g, 1, 0), nb_grad_wants_dx(g, 2, 0)};
    const int n_out = count_wanted(want);
    if (!n_out) return nb_builder_status(b);
    const bool global = nb_grad_attr(g, "is_test")->b || nb_grad_attr(g, "use_global_stats")->b;
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "batch_norm_grad", attrs);
    const nb_value in[7] = {nb_grad_x(g, 0, 0), nb_grad_x(g, 1, 0), nb_grad_y(g, 3, 0), nb_grad_y(g, 4, 0), dy,
                            nb_grad_x(g, 3, 0), nb_grad_x(g, 4, 0)};
    nb_value out[3];
    if (nb_emit(b, "batch_norm_grad", NB_VALUES_N(global ? 7 : 5, in), NB_ATTRS_N(n_attrs, attrs), n_out, out))
        return nb_builder_status(b);
    for (int k = 0; k < n_out; k++)
        if (want[k]) nb_grad_set_dx(g, k, 0, out[k]);
    return nb_builder_status(b);
}

/* layer_norm(X, Scale?, Bias?) -> Y, Mean, Variance: layer_norm_grad(X,
 * Scale?, Mean, Variance, DY) -> DX, DScale, DBias. DScale and DBias come
 * shaped like Scale, or flat [cols] without it: then a Bias given as the
 * normalised dims gets its gradient reshaped. */
nb_status nb_layer_norm_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy)) return nb_builder_status(b);
    const bool want[3] = {nb_grad_wants_dx(g, 0, 0), nb_grad_wants_dx(g, 1, 0), nb_grad_wants_dx(g, 2, 0)};
    const int n_out = count_wanted(want);
    if (!n_out) return nb_builder_status(b);
    const bool has_scale = nb_grad_in_count(g, 1) > 0;
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "layer_norm_grad", attrs);
    const nb_value in[5] = {nb_grad_x(g, 0, 0), has_scale ? nb_grad_x(g, 1, 0) : NB_NONE, nb_grad_y(g, 1, 0),
                            nb_grad_y(g, 2, 0), dy};
    nb_value out[3];
    if (nb_emit(b, "layer_norm_grad", NB_VALUES_N(5, in), NB_ATTRS_N(n_attrs, attrs), n_out, out))
        return nb_builder_status(b);
    if (want[0]) nb_grad_set_dx(g, 0, 0, out[0]);
    if (want[1]) nb_grad_set_dx(g, 1, 0, out[1]);
    if (want[2]) {
        nb_value dbias = out[2];
        const nb_var_info bi = nb_value_info(b, nb_grad_x(g, 2, 0)), di = nb_value_info(b, dbias);
        if (!nb_shape_equal(bi.ndim, bi.shape, di.ndim, di.shape)) dbias = nb_reshape(b, dbias, bi.ndim, bi.shape);
        nb_grad_set_dx(g, 2, 0, dbias);
    }
    return nb_builder_status(b);
}

/* ---- JVP rules (forward mode) ---------------------------------------------- */

/* With xhat = (x - mean) * r and r = 1 / sqrt(var + eps), statistics taken
 * over the reduced axes: along a tangent t of x,
 *   d xhat = r * (t - mean(t) - xhat * mean(xhat * t))
 * (d mean = mean(t), d var = 2 mean((x - mean) t)); with fixed statistics
 * just r * t. Then tY = Scale * d xhat + tScale * xhat + tBias. Every
 * per-channel (or per-column) value arrives shaped to broadcast against x;
 * `scale` and `k` may be NB_NONE (one). Returns NB_NONE when every term is
 * zero. `like` gives tBias alone the output's shape. */
typedef struct norm_jvp {
    nb_value xhat, r, scale;    /* the point */
    nb_value tx, tscale, tbias; /* the tangents, NB_NONE where zero */
    bool batch_stats;           /* statistics of the batch (else fixed) */
    int n_axes;                 /* the reduced axes */
    const int64_t *axes;
    nb_value like;
} norm_jvp;

static nb_value norm_tangent(nb_builder *b, const norm_jvp *j)
{
    const nb_value xhat = j->xhat, r = j->r, scale = j->scale, tx = j->tx, tscale = j->tscale, tbias = j->tbias;
    const int n_axes = j->n_axes;
    const int64_t *axes = j->axes;
    nb_value terms[3];
    int n = 0;
    if (!nb_is_none(tx)) {
        nb_value u = tx;
        if (j->batch_stats) {
            const nb_value m1 = nb_reduce_mean(b, tx, n_axes, axes, true);
            const nb_value m2 = nb_reduce_mean(b, nb_mul(b, xhat, tx), n_axes, axes, true);
            u = nb_sub(b, nb_sub(b, tx, m1), nb_mul(b, xhat, m2));
        }
        const nb_value k = nb_is_none(scale) ? r : nb_mul(b, scale, r);
        terms[n++] = nb_mul(b, u, k);
    }
    if (!nb_is_none(tscale)) terms[n++] = nb_mul(b, tscale, xhat);
    if (!nb_is_none(tbias)) {
        terms[n] = n ? tbias : nb_expand_as(b, tbias, j->like);
        n++;
    }
    if (!n) return NB_NONE;
    nb_value t = terms[0];
    for (int i = 1; i < n; i++) t = nb_add(b, t, terms[i]);
    return t;
}

/* batch_norm: per channel over every axis but 1. SavedMean and
 * SavedVariance (which holds 1 / sqrt(var + eps)) are the statistics the
 * forward pass used in either mode: the batch's in training, constants
 * (the running ones) with is_test or use_global_stats. */
nb_status nb_batch_norm_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_value tx = nb_grad_tx(g, 0, 0), ts = nb_grad_tx(g, 1, 0), tb = nb_grad_tx(g, 2, 0);
    if (nb_is_none(tx) && nb_is_none(ts) && nb_is_none(tb)) return nb_builder_status(b);
    const bool global = nb_grad_attr(g, "is_test")->b || nb_grad_attr(g, "use_global_stats")->b;
    const nb_value x = nb_grad_x(g, 0, 0);
    const int nd = nb_value_info(b, x).ndim;
    if (nd < 2 || nd > NB_MAX_DIMS) return nb_builder_fail(b, NB_ERR_SHAPE, "batch_norm JVP: X must be at least 2-D");
    int64_t cshape[NB_MAX_DIMS], axes[NB_MAX_DIMS];
    int n_axes = 0;
    for (int i = 0; i < nd; i++) {
        cshape[i] = i == 1 ? -1 : 1;
        if (i != 1) axes[n_axes++] = i;
    }
    const nb_value r = nb_reshape(b, nb_grad_y(g, 4, 0), nd, cshape);
    nb_value xhat = NB_NONE;
    if (!nb_is_none(ts) || (!nb_is_none(tx) && !global))
        xhat = nb_mul(b, nb_sub(b, x, nb_reshape(b, nb_grad_y(g, 3, 0), nd, cshape)), r);
    const nb_value scale = nb_is_none(tx) ? NB_NONE : nb_reshape(b, nb_grad_x(g, 1, 0), nd, cshape);
    const nb_value t = norm_tangent(b,
                                    &(norm_jvp){.xhat = xhat,
                                                .r = r,
                                                .scale = scale,
                                                .tx = tx,
                                                .tscale = nb_is_none(ts) ? ts : nb_reshape(b, ts, nd, cshape),
                                                .tbias = nb_is_none(tb) ? tb : nb_reshape(b, tb, nd, cshape),
                                                .batch_stats = !global,
                                                .n_axes = n_axes,
                                                .axes = axes,
                                                .like = x});
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}

/* layer_norm: X viewed as [rows, cols], normalised along each row with the
 * row Mean and Variance it output; Scale and Bias ([cols] or the normalised
 * dims) as [1, cols]. The tangent takes X's shape back at the end. */
nb_status nb_layer_norm_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const bool has_scale = nb_grad_in_count(g, 1) > 0, has_bias = nb_grad_in_count(g, 2) > 0;
    const nb_value tx = nb_grad_tx(g, 0, 0), ts = has_scale ? nb_grad_tx(g, 1, 0) : NB_NONE,
                   tb = has_bias ? nb_grad_tx(g, 2, 0) : NB_NONE;
    if (nb_is_none(tx) && nb_is_none(ts) && nb_is_none(tb)) return nb_builder_status(b);
    const nb_value x = nb_grad_x(g, 0, 0);
    const nb_var_info xi = nb_value_info(b, x);
    int64_t axis = nb_grad_attr(g, "begin_norm_axis")->i;
    if (axis < 0) axis += xi.ndim;
    if (axis < 0 || axis >= xi.ndim)
        return nb_builder_fail(b, NB_ERR_ARG, "layer_norm JVP: begin_norm_axis out of range");
    int64_t rows = 1, cols = 1;
    for (int i = 0; i < xi.ndim; i++) {
        int64_t *p = i < axis ? &rows : &cols;
        *p = *p < 0 || xi.shape[i] < 0 ? -1 : *p * xi.shape[i];
    }
    if (rows < 0 && cols < 0)
        return nb_builder_fail(b, NB_ERR_SHAPE, "layer_norm JVP: X needs its leading or its normalised dims known");
    const int64_t view[2] = {cols < 0 ? rows : -1, cols}, col[2] = {-1, 1}, row[2] = {1, -1}, axes[1] = {1};
    const nb_value x2 = nb_reshape(b, x, 2, view);
    const double eps = nb_grad_attr(g, "epsilon")->f;
    const nb_value r = nb_reshape(b, nb_rsqrt(b, nb_scale(b, nb_grad_y(g, 2, 0), 1, eps)), 2, col);
    nb_value xhat = NB_NONE;
    if (!nb_is_none(tx) || !nb_is_none(ts))
        xhat = nb_mul(b, nb_sub(b, x2, nb_reshape(b, nb_grad_y(g, 1, 0), 2, col)), r);
    const nb_value scale = has_scale && !nb_is_none(tx) ? nb_reshape(b, nb_grad_x(g, 1, 0), 2, row) : NB_NONE;
    const nb_value t = norm_tangent(b,
                                    &(norm_jvp){.xhat = xhat,
                                                .r = r,
                                                .scale = scale,
                                                .tx = nb_is_none(tx) ? tx : nb_reshape(b, tx, 2, view),
                                                .tscale = nb_is_none(ts) ? ts : nb_reshape(b, ts, 2, row),
                                                .tbias = nb_is_none(tb) ? tb : nb_reshape(b, tb, 2, row),
                                                .batch_stats = true,
                                                .n_axes = 1,
                                                .axes = axes,
                                                .like = x2});
    if (nb_is_none(t)) return nb_builder_status(b);
    const nb_value in[2] = {t, x};
    nb_grad_set_ty(g, 0, 0, nb_emit1(b, "reshape_as", NB_VALUES_N(2, in), NB_NO_ATTRS));
    return nb_builder_status(b);
}
