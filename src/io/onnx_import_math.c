/* ONNX's arithmetic, activations, products and softmax as nabla ops. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

static nb_status i_gemm(ox_import *im)
{
    nb_value a = ox_in(im, 0), b = ox_in(im, 1);
    unsigned flags = (ox_attr_i(im, "transA", 0) ? NB_TRANSPOSE_X : 0) | (ox_attr_i(im, "transB", 0) ? NB_TRANSPOSE_Y : 0);
    nb_value y = nb_matmul(B, a, b, flags);
    double alpha = ox_attr_f(im, "alpha", 1), beta = ox_attr_f(im, "beta", 1);
    if (alpha != 1) y = nb_scale(B, y, alpha, 0);
    if (ox_has_in(im, 2) && beta != 0) {
        nb_value c = ox_in(im, 2);
        if (beta != 1) c = nb_scale(B, c, beta, 0);
        y = nb_add(B, y, c);
    }
    return ox_out(im, 0, y);
}

static nb_status i_matmul(ox_import *im)
{
    nb_value a = ox_in(im, 0), b = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (ox_rank(im, a) < 2 || ox_rank(im, b) < 2) return ox_unsupported(im, "multiplies a vector; nabla's matmul takes matrices");
    return ox_out(im, 0, nb_matmul(B, a, b, 0));
}

static nb_status i_sum(ox_import *im)
{
    int n = (int)im->node->n_input;
    nb_value xs[64];
    if (n > 64 || n < 1) return ox_unsupported(im, "sums more than 64 tensors, or none");
    for (int k = 0; k < n; k++)
        if (nb_is_none(xs[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, n == 1 ? xs[0] : nb_sum(B, n, xs));
}

/* Softmax and LogSoftmax: one axis from opset 13; before, the dims from
 * axis flattened, which is the same thing when axis is the last one. */
static nb_status softmax(ox_import *im, bool log)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = ox_rank(im, x), axis = (int)ox_attr_i(im, "axis", im->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += r;
    if (im->opset < 13 && axis != r - 1) return ox_unsupported(im, "normalises over several dims (opset < 13, axis not last)");
    return ox_out(im, 0, log ? nb_log_softmax(B, x, axis) : nb_softmax(B, x, axis));
}
static nb_status i_softmax(ox_import *im) { return softmax(im, false); }
static nb_status i_log_softmax(ox_import *im) { return softmax(im, true); }

static nb_status alpha_op(ox_import *im, const char *op, double def)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_emit1(B, op, NB_VALUES(x), NB_ATTRS(NB_ATTR_FLOAT("alpha", ox_attr_f(im, "alpha", def)))));
}
static nb_status i_leaky_relu(ox_import *im) { return alpha_op(im, "leaky_relu", 0.01); }
static nb_status i_elu(ox_import *im) { return alpha_op(im, "elu", 1.0); }

static nb_status i_softplus(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_emit1(B, "softplus", NB_VALUES(x), NB_ATTRS(NB_ATTR_FLOAT("beta", 1), NB_ATTR_FLOAT("threshold", 1e30))));
}

/* Clip: bounds as attributes before opset 11, optional constant inputs since. */
static nb_status i_clip(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    double lo = -DBL_MAX, hi = DBL_MAX;
    for (int k = 1; k <= 2; k++) {
        if (!ox_has_in(im, k)) continue;
        const nb_tensor *t = ox_const_in(im, k);
        if (!t) return nb_builder_status(B);
        *(k == 1 ? &lo : &hi) = nb_tensor_get(t, 0);
    }
    return ox_out(im, 0, nb_clip(B, x, lo, hi));
}

static nb_status i_reciprocal(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    nb_tensor *one;
    if (nb_tensor_scalar(&one, xi.dtype, 1)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    nb_value c = nb_constant(B, one);
    nb_tensor_release(one);
    return ox_out(im, 0, nb_div(B, c, x));
}

const ox_importer ox_imports_math[] = {
    {"Abs", "abs", 1, 0},         {"Add", "add", 2, 0},           {"Cos", "cos", 1, 0},
    {"Div", "div", 2, 0},         {"Erf", "erf", 1, 0},           {"Exp", "exp", 1, 0},
    {"Log", "log", 1, 0},         {"Max", "maximum", 2, 0},       {"Min", "minimum", 2, 0},
    {"Mul", "mul", 2, 0},         {"Neg", "neg", 1, 0},           {"Pow", "pow", 2, 0},
    {"Relu", "relu", 1, 0},       {"Sigmoid", "sigmoid", 1, 0},   {"Sin", "sin", 1, 0},
    {"Sqrt", "sqrt", 1, 0},       {"Sub", "sub", 2, 0},           {"Tanh", "tanh", 1, 0},
    {"Gemm", 0, 0, i_gemm},       {"MatMul", 0, 0, i_matmul},     {"Sum", 0, 0, i_sum},
    {"Softmax", 0, 0, i_softmax}, {"LogSoftmax", 0, 0, i_log_softmax}, {"LeakyRelu", 0, 0, i_leaky_relu},
    {"Elu", 0, 0, i_elu},         {"Softplus", 0, 0, i_softplus}, {"Clip", 0, 0, i_clip},
    {"Reciprocal", 0, 0, i_reciprocal},
    {0},
};

#endif
