/* The rules of batch_norm_grad and layer_norm_grad: each fused op written
 * again with primitive ops, which the composite rules differentiate (see
 * src/autodiff/composite.h). With them, batch_norm and layer_norm have
 * second derivatives, and forward over reverse goes through them.
 *
 * The batch (or row) statistics are recomputed from X, as the kernels do:
 * the saved statistics are values of functions of X, and the derivative
 * must see that dependence. With global statistics (is_test,
 * use_global_stats) they are constants and are used as given. */
#include "nabla/ops.h"
#include "norm_grad.h"
#include "composite.h"

#define E1(c, type, a, n, at) nb_cmp_emit((c), (type), 1, (nb_value[]){a}, (n), (at))
#define E2(c, type, a, b_) nb_cmp_emit((c), (type), 2, (nb_value[]){a, b_}, 0, NULL)

static nb_value reduce(nb_composite *c, const char *type, nb_value x, int n_axes, const int64_t *axes, bool keep)
{
    nb_attr a[2] = {NB_ATTR_INTS_N("axes", n_axes, axes), NB_ATTR_BOOL("keepdim", keep)};
    return E1(c, type, x, 2, a);
}

static nb_value reshape(nb_composite *c, nb_value x, int ndim, const int64_t *shape)
{
    nb_attr a[1] = {NB_ATTR_INTS_N("shape", ndim, shape)};
    return E1(c, "reshape", x, 1, a);
}

/* r * (g - mean(g) - xhat * mean(g * xhat)) over `axes`: the input
 * gradient of a normalisation whose statistics depend on its input. */
static nb_value normalised_grad(nb_composite *c, nb_value g, nb_value xhat, nb_value r, int n_axes, const int64_t *axes)
{
    nb_value m1 = reduce(c, "reduce_mean", g, n_axes, axes, true);
    nb_value m2 = reduce(c, "reduce_mean", E2(c, "mul", g, xhat), n_axes, axes, true);
    return E2(c, "mul", r, E2(c, "sub", E2(c, "sub", g, m1), E2(c, "mul", xhat, m2)));
}

/* xhat and r = 1 / sqrt(var + eps) of x over `axes`. */
static void batch_stats(nb_composite *c, nb_value x, int n_axes, const int64_t *axes, double eps, nb_value *xhat,
                        nb_value *r)
{
    nb_value xc = E2(c, "sub", x, reduce(c, "reduce_mean", x, n_axes, axes, true));
    nb_value var = reduce(c, "reduce_mean", E2(c, "mul", xc, xc), n_axes, axes, true);
    nb_attr a[2] = {NB_ATTR_FLOAT("scale", 1), NB_ATTR_FLOAT("bias", eps)};
    *r = nb_cmp_emit(c, "rsqrt", 1, (nb_value[]){E1(c, "scale", var, 2, a)}, 0, NULL);
    *xhat = E2(c, "mul", xc, *r);
}

/* batch_norm_grad(X, Scale, SavedMean, SavedVariance, DY[, Mean, Variance])
 * -> DX, DScale, DBias; per channel (axis 1) over every other axis. */
static nb_status batch_norm_grad_composite(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y)
{
    nb_builder *b = nb_cmp_builder(c);
    const nb_value X = nb_grad_x(g, 0, 0), scale = nb_grad_x(g, 1, 0), dy = nb_grad_x(g, 4, 0);
    const int nd = nb_value_info(b, X).ndim;
    const double eps = nb_grad_attr(g, "epsilon")->f;
    const bool global = nb_grad_attr(g, "is_test")->b || nb_grad_attr(g, "use_global_stats")->b;
    int64_t cshape[NB_MAX_DIMS], axes[NB_MAX_DIMS];
    int n_axes = 0;
    for (int i = 0; i < nd; i++) {
        cshape[i] = i == 1 ? -1 : 1;
        if (i != 1) axes[n_axes++] = i;
    }
    (void)x;
    nb_value xhat, r;
    if (!global) {
        batch_stats(c, X, n_axes, axes, eps, &xhat, &r);
    } else if (nb_grad_in_count(g, 5)) { /* the running Mean and Variance */
        nb_attr a[2] = {NB_ATTR_FLOAT("scale", 1), NB_ATTR_FLOAT("bias", eps)};
        r = nb_cmp_emit(c, "rsqrt", 1, (nb_value[]){E1(c, "scale", reshape(c, nb_grad_x(g, 6, 0), nd, cshape), 2, a)},
                        0, NULL);
        xhat = E2(c, "mul", E2(c, "sub", X, reshape(c, nb_grad_x(g, 5, 0), nd, cshape)), r);
    } else { /* saved: the mean and 1 / sqrt(var + eps) */
        r = reshape(c, nb_grad_x(g, 3, 0), nd, cshape);
        xhat = E2(c, "mul", E2(c, "sub", X, reshape(c, nb_grad_x(g, 2, 0), nd, cshape)), r);
    }
    const int n_out = g->out_begin[NB_MAX_SLOTS];
    const nb_value gs = E2(c, "mul", dy, reshape(c, scale, nd, cshape));
    if (n_out > 0) y[0] = global ? E2(c, "mul", gs, r) : normalised_grad(c, gs, xhat, r, n_axes, axes);
    if (n_out > 1) y[1] = reduce(c, "reduce_sum", E2(c, "mul", dy, xhat), n_axes, axes, false);
    if (n_out > 2) y[2] = reduce(c, "reduce_sum", dy, n_axes, axes, false);
    return nb_builder_status(b);
}

/* layer_norm_grad(X, Scale?, Mean, Variance, DY) -> DX, DScale, DBias; X
 * viewed as [rows, cols], each row normalised on its own. */
static nb_status layer_norm_grad_composite(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y)
{
    nb_builder *b = nb_cmp_builder(c);
    (void)x;
    const nb_value X = nb_grad_x(g, 0, 0), dy = nb_grad_x(g, 4, 0);
    const bool has_scale = nb_grad_in_count(g, 1) > 0;
    const nb_var_info xi = nb_value_info(b, X);
    int64_t axis = nb_grad_attr(g, "begin_norm_axis")->i, cols = 1;
    if (axis < 0) axis += xi.ndim;
    for (int i = (int)axis; i < xi.ndim; i++) cols = cols < 0 || xi.shape[i] < 0 ? -1 : cols * xi.shape[i];
    if (cols < 0) return nb_builder_fail(b, NB_ERR_SHAPE, "layer_norm_grad: its rules need the normalised dims known");
    const int64_t view[2] = {-1, cols}, row[2] = {1, cols}, ax1[1] = {1}, ax0[1] = {0};
    const nb_value x2 = reshape(c, X, 2, view), dy2 = reshape(c, dy, 2, view);
    nb_value xhat, r;
    batch_stats(c, x2, 1, ax1, nb_grad_attr(g, "epsilon")->f, &xhat, &r);
    const nb_value gs = has_scale ? E2(c, "mul", dy2, reshape(c, nb_grad_x(g, 1, 0), 2, row)) : dy2;
    const int n_out = g->out_begin[NB_MAX_SLOTS];
    if (n_out > 0) y[0] = E2(c, "reshape_as", normalised_grad(c, gs, xhat, r, 1, ax1), X);
    for (int k = 1; k < n_out && k < 3; k++) {
        nb_value s = reduce(c, "reduce_sum", k == 1 ? E2(c, "mul", dy2, xhat) : dy2, 1, ax0, false);
        y[k] = has_scale ? E2(c, "reshape_as", s, nb_grad_x(g, 1, 0)) : s;
    }
    return nb_builder_status(b);
}

nb_status nb_batch_norm_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_vjp(b, g, batch_norm_grad_composite);
}
nb_status nb_batch_norm_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_jvp(b, g, batch_norm_grad_composite);
}
nb_status nb_layer_norm_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_vjp(b, g, layer_norm_grad_composite);
}
nb_status nb_layer_norm_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_jvp(b, g, layer_norm_grad_composite);
}
