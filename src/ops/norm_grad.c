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

/* Outputs of a fused grad op DX, DScale, DBias are optional and taken in
 * order: the count to ask for is up to the last one wanted. */
static int count_wanted(const bool want[3])
{
    return want[2] ? 3 : want[1] ? 2 : want[0] ? 1 : 0;
}

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
    if (nb_emit(b, "batch_norm_grad", global ? 7 : 5, in, n_attrs, attrs, n_out, out)) return nb_builder_status(b);
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
    if (nb_emit(b, "layer_norm_grad", 5, in, n_attrs, attrs, n_out, out)) return nb_builder_status(b);
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
