/* Helpers that gradient rules call. They sit with the builder, under the op
 * definitions whose rules use them, and read nothing of the op's definition
 * (nb_grad_attr, which does, is with the attributes in src/ops/attr.c). */
#include "nabla/grad_rule.h"
#include "nabla/ops.h"

nb_value nb_grad_dy_or_zeros(nb_builder *b, const nb_grad_ctx *g, int slot, int k)
{
    nb_value dy = nb_grad_dy(g, slot, k), y = nb_grad_y(g, slot, k);
    if (!nb_is_none(dy)) return dy;
    if (!nb_is_none(y) || !g->y_info) return nb_fill_zeros_like(b, y);
    const nb_var_info *info = &g->y_info[g->out_begin[slot] + k];
    return nb_fill_constant(b, info->dtype, info->ndim, info->shape, 0);
}

nb_value nb_grad_unbroadcast(nb_builder *b, nb_value v, nb_value like)
{
    if (nb_is_none(v)) return v;
    nb_var_info a = nb_value_info(b, v), l = nb_value_info(b, like);
    bool known = true;
    for (int i = 0; i < a.ndim; i++) known &= a.shape[i] >= 0;
    if (known && nb_shape_equal(a.ndim, a.shape, l.ndim, l.shape)) return v;
    return nb_sum_to(b, v, like);
}
