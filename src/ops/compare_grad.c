/* VJP and JVP rules of where. */
#include "compare_grad.h"
#include "elementwise_grad.h"
#include "nabla/ops.h"

/* Out = where(C, X, Y): dX = where(C, dy, 0), dY = where(C, 0, dy), each
 * summed back to its input's shape (all three inputs broadcast). The zero is
 * a 0-d constant, so each gradient costs one where and its reduction.
 * Condition takes no gradient. */
nb_status nb_where_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0), c = nb_grad_x(g, 0, 0), x = nb_grad_x(g, 1, 0), y = nb_grad_x(g, 2, 0);
    bool want_x = nb_grad_wants_dx(g, 1, 0), want_y = nb_grad_wants_dx(g, 2, 0);
    if (nb_is_none(dy) || !(want_x || want_y)) return NB_OK;
    nb_value zero = nb_fill_constant(b, nb_value_info(b, dy).dtype, 0, NULL, 0.0);
    if (want_x) nb_grad_set_dx(g, 1, 0, nb_grad_unbroadcast(b, nb_where(b, c, dy, zero), x));
    if (want_y) nb_grad_set_dx(g, 2, 0, nb_grad_unbroadcast(b, nb_where(b, c, zero, dy), y));
    return nb_builder_status(b);
}

/* tOut = where(C, tX, tY): one where when both tangents are there, its result
 * of Out's shape. A lone tangent meets a 0-d zero, and the result is expanded
 * to Out's shape if C and that tangent do not reach it (Y was the larger). */
nb_status nb_where_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value c = nb_grad_x(g, 0, 0), tx = nb_grad_tx(g, 1, 0), ty = nb_grad_tx(g, 2, 0);
    if (nb_is_none(tx) && nb_is_none(ty)) return NB_OK;
    nb_value t;
    if (!nb_is_none(tx) && !nb_is_none(ty)) t = nb_where(b, c, tx, ty);
    else {
        nb_value zero = nb_ew_grad_const(b, nb_is_none(tx) ? ty : tx, 0.0);
        t = nb_is_none(tx) ? nb_ew_jvp_fit(b, g, nb_where(b, c, zero, ty), g->in_begin[2])
                           : nb_ew_jvp_fit(b, g, nb_where(b, c, tx, zero), g->in_begin[1]);
    }
    nb_grad_set_ty(g, 0, 0, t);
    return nb_builder_status(b);
}
