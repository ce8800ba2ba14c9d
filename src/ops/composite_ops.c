/* The built-in composite ops: each is one function that emits other ops
 * through the builder (nb_op_def.expand), and inherits their kernels,
 * rules, batching and export. */
#include "nabla/ops.h"
#include "families.h"

/* The primitives below also take integers (abs, div, clip), which would
 * turn these activations into integer arithmetic without a word. */
static nb_value float_x(nb_builder *b, nb_value x)
{
    nb_dtype dt = nb_value_info(b, x).dtype;
    if (nb_dtype_is_float(dt)) return x;
    nb_builder_fail(b, NB_ERR_DTYPE, "X must be a float tensor, not %s", nb_dtype_name(dt));
    return NB_NONE;
}

static nb_status softsign(nb_builder *b, const nb_value *x, const nb_attr_value *attrs, nb_value *y)
{
    (void)attrs;
    nb_value v = float_x(b, x[0]);
    y[0] = nb_div(b, v, nb_scale(b, nb_abs(b, v), 1.0, 1.0));
    return nb_builder_status(b);
}

static nb_status mish(nb_builder *b, const nb_value *x, const nb_attr_value *attrs, nb_value *y)
{
    (void)attrs;
    nb_value v = float_x(b, x[0]);
    y[0] = nb_mul(b, v, nb_tanh(b, nb_softplus(b, v, 1.0, 20.0)));
    return nb_builder_status(b);
}

/* x * relu6(x + 3) / 6, as x * clip(x / 6 + 1/2, 0, 1). */
static nb_status hardswish(nb_builder *b, const nb_value *x, const nb_attr_value *attrs, nb_value *y)
{
    (void)attrs;
    nb_value v = float_x(b, x[0]);
    y[0] = nb_mul(b, v, nb_clip(b, nb_scale(b, v, 1.0 / 6.0, 0.5), 0.0, 1.0));
    return nb_builder_status(b);
}

#define UNARY_COMPOSITE(op, doc_) \
    static const nb_op_def op_##op = {.name = #op, .doc = doc_, .inputs = {{"X", 0}}, .outputs = {{"Out", 0}}, .expand = op}

UNARY_COMPOSITE(softsign, "X / (1 + |X|) (composite: abs, scale, div)");
UNARY_COMPOSITE(mish, "X * tanh(softplus(X)) (composite: softplus, tanh, mul)");
UNARY_COMPOSITE(hardswish, "X * relu6(X + 3) / 6 (composite: scale, clip, mul)");

const nb_op_def *const nb_ops_composite[] = {&op_softsign, &op_mish, &op_hardswish, NULL};
