/* VJP rules of the creation family (see creation_grad.h). */
#include "nabla/ops.h"
#include "creation_grad.h"

/* Out = X: dX = dOut, copied into a var of its own. */
nb_status nb_assign_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dy = nb_grad_dy(g, 0, 0);
    if (nb_is_none(dy) || !nb_grad_wants_dx(g, 0, 0)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, nb_assign(b, dy));
    return nb_builder_status(b);
}

/* Out = X: tOut = tX, copied into a var of its own as the VJP does. */
nb_status nb_assign_jvp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value t = nb_grad_tx(g, 0, 0);
    if (!nb_is_none(t)) nb_grad_set_ty(g, 0, 0, nb_assign(b, t));
    return nb_builder_status(b);
}
