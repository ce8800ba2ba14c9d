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
