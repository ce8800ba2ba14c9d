/* VJP and JVP rules of the scans of nabla/scan_ops.h, written as ops
 * emitted through the builder, so that they differentiate again. */
#include "scan_grad.h"

/* ---- cumsum: linear, so both rules are cumsums ---------------------------------------- */

/* Out_i sums X_j over j <= i (j < i when exclusive), so dX_j sums dOut_i
 * over i >= j (i > j): the same running sum from the other end. */
nb_status nb_cumsum_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (!nb_is_none(dy) && nb_grad_wants_dx(g, 0, 0))
        nb_grad_set_dx(g, 0, 0, nb_cumsum(b, dy, nb_scan_axis(g), nb_scan_flags(g) ^ NB_SCAN_REVERSE));
    return nb_builder_status(b);
}

nb_status nb_cumsum_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, nb_cumsum(b, t, nb_scan_axis(g), nb_scan_flags(g)));
    return nb_builder_status(b);
}

/* ---- cumprod: Out_i / X_j is what X_j multiplies in Out_i ------------------------------ */

/* dX_j sums dOut_i Out_i / X_j over the i whose product holds X_j: the
 * running sum of dOut * Out from the other end, over X. Like reduce_prod's
 * rule it is not defined where X is 0. */
nb_status nb_cumprod_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_value s = nb_cumsum(b, nb_mul(b, dy, nb_grad_y(g, 0, 0)), nb_scan_axis(g), nb_scan_flags(g) ^ NB_SCAN_REVERSE);
    nb_grad_set_dx(g, 0, 0, nb_div(b, s, nb_grad_x(g, 0, 0)));
    return nb_builder_status(b);
}

/* The tangent of Out_i is Out_i times the running sum of dX_j / X_j. */
nb_status nb_cumprod_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (nb_is_none(t)) return nb_builder_status(b);
    nb_value s = nb_cumsum(b, nb_div(b, t, nb_grad_x(g, 0, 0)), nb_scan_axis(g), nb_scan_flags(g));
    nb_grad_set_ty(g, 0, 0, nb_mul(b, nb_grad_y(g, 0, 0), s));
    return nb_builder_status(b);
}
