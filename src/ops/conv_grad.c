/* Gradient rules of conv2d and pool2d. Each emits the family's fused
 * gradient op with the forward op's attributes. */
#include "conv_grad.h"
#include "nabla/ops.h"

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
    if (nb_emit(b, "conv2d_grad", 3, in, n_attrs, attrs, n_out, out)) return nb_builder_status(b);
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
    nb_grad_set_dx(g, 0, 0, nb_emit1(b, "pool2d_grad", 3, in, n_attrs, attrs));
    return nb_builder_status(b);
}
