/* ONNX's arithmetic, comparisons and logic, activations, products and
 * softmax as nabla ops. Most are compositions of differentiable nabla ops,
 * so an imported model gets their gradients, JVPs and vmap for free.
 *
 * Of the integer widths nabla lacks (int8, int16, uint16 and uint32 arrive
 * widened) uint8 is left, which the arithmetic computes in int32 and casts
 * back, wrapping as ONNX does. Opset 1-6's broadcast along an axis is
 * refused for every op in ox_import_node. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <math.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

#define PI_2 1.57079632679489661923

static nb_value scalar_like(ox_import *im, nb_value x, double v)
{
    return ox_const_scalar(im, nb_value_info(B, x).dtype, v);
}

static nb_dtype dtype_of(ox_import *im, nb_value x) { return nb_value_info(B, x).dtype; }

/* uint8 arithmetic: in int32, the result cast back (wrapping) by back(). */
static nb_value widened(ox_import *im, nb_value v)
{
    return !nb_is_none(v) && dtype_of(im, v) == NB_U8 ? nb_cast(B, v, NB_I32) : v;
}
static nb_value back(ox_import *im, nb_value v, nb_dtype dt)
{
    return !nb_is_none(v) && dtype_of(im, v) != dt ? nb_cast(B, v, dt) : v;
}

static nb_status binary(ox_import *im, const char *op)
{
    nb_value x = ox_in(im, 0), y = ox_in(im, 1);
    if (nb_is_none(x) || nb_is_none(y)) return nb_builder_status(B);
    nb_dtype dt = dtype_of(im, x);
    nb_value out = nb_emit1(B, op, NB_VALUES(widened(im, x), widened(im, y)), NB_NO_ATTRS);
    /* Comparisons give bool: only arithmetic goes back to uint8. */
    return ox_out(im, 0, dt == NB_U8 && !nb_is_none(out) && dtype_of(im, out) == NB_I32 ? back(im, out, dt) : out);
}

#define BINARY(fn, op) \
    static nb_status fn(ox_import *im) { return binary(im, op); }
BINARY(i_add, "add")
BINARY(i_sub, "sub")
BINARY(i_mul, "mul")
BINARY(i_div, "div")
BINARY(i_equal, "equal")
BINARY(i_less, "less")
BINARY(i_greater, "greater")
BINARY(i_less_equal, "less_equal")
BINARY(i_greater_equal, "greater_equal")
BINARY(i_and, "logical_and")
BINARY(i_or, "logical_or")
BINARY(i_xor, "logical_xor")

/* Pow: the exponent may have another dtype than the base (cast to it); an
 * integer base goes through float64 and truncates back, as the reference. */
static nb_status i_pow(ox_import *im)
{
    nb_value x = ox_in(im, 0), y = ox_in(im, 1);
    if (nb_is_none(x) || nb_is_none(y)) return nb_builder_status(B);
    nb_dtype dt = dtype_of(im, x), work = nb_dtype_is_float(dt) ? dt : NB_F64;
    if (dtype_of(im, y) != work) y = nb_cast(B, y, work);
    return ox_out(im, 0, back(im, nb_pow(B, back(im, x, work), y), dt));
}

/* Mod: fmod=1 the C remainder (sign of the dividend), fmod=0 Python's (sign
 * of the divisor). Integers divide truncating toward zero, so x - (x / y) * y
 * is the remainder; floats truncate the quotient themselves. */
static nb_status i_mod(ox_import *im)
{
    nb_value x = ox_in(im, 0), y = ox_in(im, 1);
    if (nb_is_none(x) || nb_is_none(y)) return nb_builder_status(B);
    nb_dtype dt = dtype_of(im, x);
    bool c_style = ox_attr_i(im, "fmod", 0) != 0;
    x = widened(im, x), y = widened(im, y);
    nb_value q = nb_div(B, x, y);
    if (nb_dtype_is_float(dt)) {
        nb_value q_int = c_style ? nb_mul(B, nb_sign(B, q), nb_floor(B, nb_abs(B, q))) : nb_floor(B, q);
        return ox_out(im, 0, nb_sub(B, x, nb_mul(B, q_int, y)));
    }
    nb_value r = nb_sub(B, x, nb_mul(B, q, y));
    if (!c_style) {
        nb_value zero = scalar_like(im, r, 0);
        nb_value flip = nb_logical_and(
            B, nb_not_equal(B, r, zero),
            nb_emit1(B, "logical_xor", NB_VALUES(nb_less(B, r, zero), nb_less(B, y, zero)), NB_NO_ATTRS));
        r = nb_where(B, flip, nb_add(B, r, y), r);
    }
    return ox_out(im, 0, back(im, r, dt));
}

/* BitShift on unsigned ints: times or divided by 2^Y, made in float64 (exact
 * below 2^53) and int64, and cast back (a uint8 shifted left wraps). */
static nb_status i_bit_shift(ox_import *im)
{
    nb_value x = ox_in(im, 0), y = ox_in(im, 1);
    if (nb_is_none(x) || nb_is_none(y)) return nb_builder_status(B);
    nb_dtype dt = dtype_of(im, x);
    if (nb_dtype_is_float(dt)) return ox_unsupported(im, "shifts a float tensor");
    const char *dir = ox_attr_s(im, "direction", "");
    bool left = !strcmp(dir, "LEFT");
    if (!left && strcmp(dir, "RIGHT"))
        return ox_node_error(im, NB_ERR_ARG, "has direction '%s', not LEFT or RIGHT", dir);
    nb_value two = ox_const_scalar(im, NB_F64, 2);
    nb_value p = nb_cast(B, nb_pow(B, two, nb_cast(B, y, NB_F64)), NB_I64);
    nb_value wide = nb_cast(B, x, NB_I64);
    return ox_out(im, 0, back(im, left ? nb_mul(B, wide, p) : nb_div(B, wide, p), dt));
}

static nb_status i_not(ox_import *im) { return ox_out(im, 0, nb_logical_not(B, ox_in(im, 0))); }

static nb_status i_where(ox_import *im)
{
    nb_value c = ox_in(im, 0), x = ox_in(im, 1), y = ox_in(im, 2);
    return ox_out(im, 0, nb_where(B, c, x, y));
}

/* x != x holds exactly at NaN. */
static nb_status i_is_nan(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_not_equal(B, x, x));
}

static nb_status i_is_inf(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    bool pos = ox_attr_i(im, "detect_positive", 1) != 0, neg = ox_attr_i(im, "detect_negative", 1) != 0;
    nb_value y = pos && neg ? nb_equal(B, nb_abs(B, x), scalar_like(im, x, INFINITY))
        : pos               ? nb_equal(B, x, scalar_like(im, x, INFINITY))
        : neg               ? nb_equal(B, x, scalar_like(im, x, -INFINITY))
                            : nb_less(B, x, x); /* false everywhere, NaN too */
    return ox_out(im, 0, y);
}

/* ---- n-ary: Sum, Mean, Max, Min, broadcasting ---------------------------------- */

static nb_status nary(ox_import *im, const char *op, bool mean)
{
    int n = (int)im->node->n_input;
    if (n < 1) return ox_unsupported(im, "has no inputs");
    nb_value acc = ox_in(im, 0);
    if (nb_is_none(acc)) return nb_builder_status(B);
    nb_dtype dt = dtype_of(im, acc);
    nb_var_info first = nb_value_info(B, acc);
    bool same = true;
    for (int k = 1; k < n; k++) {
        nb_value xk = ox_in(im, k);
        if (nb_is_none(xk)) return nb_builder_status(B);
        nb_var_info ik = nb_value_info(B, xk);
        same &= ik.ndim == first.ndim && !memcmp(ik.shape, first.shape, (size_t)ik.ndim * sizeof *ik.shape);
    }
    /* One sum of many, where the shapes agree; else pairs, broadcasting. */
    if (!strcmp(op, "add") && same && n > 1 && n <= 64 && dt != NB_U8) {
        nb_value xs[64];
        for (int k = 0; k < n; k++) xs[k] = ox_in(im, k);
        acc = nb_sum(B, n, xs);
    } else {
        acc = widened(im, acc);
        for (int k = 1; k < n; k++) acc = nb_emit1(B, op, NB_VALUES(acc, widened(im, ox_in(im, k))), NB_NO_ATTRS);
        acc = back(im, acc, dt);
    }
    if (mean && n > 1) acc = nb_scale(B, acc, 1.0 / n, 0);
    return ox_out(im, 0, acc);
}
static nb_status i_sum(ox_import *im) { return nary(im, "add", false); }
static nb_status i_mean(ox_import *im) { return nary(im, "add", true); }
static nb_status i_max(ox_import *im) { return nary(im, "maximum", false); }
static nb_status i_min(ox_import *im) { return nary(im, "minimum", false); }

/* ---- products ------------------------------------------------------------------ */

/* Gemm: before opset 7 a `broadcast` attribute allowed a C smaller than the
 * product, which NumPy's broadcast covers; before 11 C is required. */
static nb_status i_gemm(ox_import *im)
{
    nb_value a = ox_in(im, 0), b = ox_in(im, 1);
    unsigned flags =
        (ox_attr_i(im, "transA", 0) ? NB_TRANSPOSE_X : 0) | (ox_attr_i(im, "transB", 0) ? NB_TRANSPOSE_Y : 0);
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

/* nabla's matmul is NumPy's: 1-D operands and broadcast batch dims. */
static nb_status i_matmul(ox_import *im) { return ox_out(im, 0, nb_matmul(B, ox_in(im, 0), ox_in(im, 1), 0)); }

/* ---- softmax and hardmax --------------------------------------------------------- */

/* x as the 2-D matrix that opset < 13's softmax and hardmax normalise by
 * rows: the dims before axis, and from it. */
static nb_value as_rows(ox_import *im, nb_value x, int axis)
{
    int r = ox_rank(im, x);
    if (r == 0) return nb_reshape(B, x, 2, (const int64_t[]){1, 1});
    nb_value y = nb_flatten(B, x, axis, r - 1);
    return axis == 0 ? nb_unsqueeze(B, y, 1, (const int64_t[]){0}) : nb_flatten(B, y, 0, axis - 1);
}

static nb_value reshape_as(ox_import *im, nb_value y, nb_value like)
{
    return nb_emit1(B, "reshape_as", NB_VALUES(y, like), NB_NO_ATTRS);
}

/* The normalised axis: one from opset 13 (default -1); before, the dims
 * from axis (default 1) flattened, which is that one dim when it is last. */
static bool norm_axis(ox_import *im, nb_value x, int *axis)
{
    int r = ox_rank(im, x);
    int a = (int)ox_attr_i(im, "axis", im->opset >= 13 ? -1 : 1);
    if (a < 0) a += r;
    if (a < 0 || (a >= r && !(r == 0 && a == 0))) {
        ox_node_error(im, NB_ERR_ARG, "its axis is outside its input's %d dims", r);
        return false;
    }
    *axis = a;
    return true;
}

static nb_status softmax(ox_import *im, bool log)
{
    nb_value x = ox_in(im, 0);
    int axis;
    if (nb_is_none(x) || !norm_axis(im, x, &axis)) return nb_builder_status(B);
    int r = ox_rank(im, x);
    if (im->opset < 13 && axis != r - 1) {
        nb_value rows = as_rows(im, x, axis);
        return ox_out(im, 0, reshape_as(im, log ? nb_log_softmax(B, rows, 1) : nb_softmax(B, rows, 1), x));
    }
    return ox_out(im, 0, log ? nb_log_softmax(B, x, axis) : nb_softmax(B, x, axis));
}
static nb_status i_softmax(ox_import *im) { return softmax(im, false); }
static nb_status i_log_softmax(ox_import *im) { return softmax(im, true); }

/* Hardmax: 1 at the first largest element along the axis, 0 elsewhere; the
 * one-hot of argmax, which comes out along the last dim and is moved back. */
static nb_value hardmax(ox_import *im, nb_value x, int axis, nb_dtype dt)
{
    nb_var_info xi = nb_value_info(B, x);
    int64_t depth = xi.shape[axis];
    if (depth < 0) {
        ox_unsupported(im, "takes the hardmax over a dim whose size only a run knows");
        return NB_NONE;
    }
    nb_value h = nb_emit1(B, "one_hot", NB_VALUES(nb_argmax(B, x, axis, false)),
                          NB_ATTRS(NB_ATTR_INT("depth", depth), NB_ATTR_INT("dtype", dt)));
    if (axis == xi.ndim - 1) return h;
    int64_t perm[NB_MAX_DIMS];
    for (int d = 0, src = 0; d < xi.ndim; d++) perm[d] = d == axis ? xi.ndim - 1 : src++;
    return nb_transpose(B, h, xi.ndim, perm);
}

static nb_status i_hardmax(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int axis;
    if (nb_is_none(x) || !norm_axis(im, x, &axis)) return nb_builder_status(B);
    nb_dtype dt = dtype_of(im, x);
    if (ox_rank(im, x) == 0) return ox_out(im, 0, nb_ones_like(B, x));
    if (im->opset < 13) return ox_out(im, 0, reshape_as(im, hardmax(im, as_rows(im, x, axis), 1, dt), x));
    return ox_out(im, 0, hardmax(im, x, axis, dt));
}

/* ---- activations ---------------------------------------------------------------- */

static nb_status alpha_op(ox_import *im, const char *op, double def)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_emit1(B, op, NB_VALUES(x), NB_ATTRS(NB_ATTR_FLOAT("alpha", ox_attr_f(im, "alpha", def)))));
}
static nb_status i_leaky_relu(ox_import *im) { return alpha_op(im, "leaky_relu", 0.01); }
static nb_status i_elu(ox_import *im) { return alpha_op(im, "elu", 1.0); }

static nb_value softplus(ox_import *im, nb_value x)
{
    return nb_emit1(B, "softplus", NB_VALUES(x), NB_ATTRS(NB_ATTR_FLOAT("beta", 1), NB_ATTR_FLOAT("threshold", 1e30)));
}
static nb_status i_softplus(ox_import *im) { return ox_out(im, 0, softplus(im, ox_in(im, 0))); }

/* Mish (opset 18), HardSwish and Softsign are nabla's composite ops. */
static nb_status i_mish(ox_import *im) { return ox_out(im, 0, nb_mish(B, ox_in(im, 0))); }
static nb_status i_hard_swish(ox_import *im) { return ox_out(im, 0, nb_hardswish(B, ox_in(im, 0))); }
static nb_status i_softsign(ox_import *im) { return ox_out(im, 0, nb_softsign(B, ox_in(im, 0))); }

/* Gelu (opset 20): exact, or the tanh form. */
static nb_status i_gelu(ox_import *im)
{
    const char *approx = ox_attr_s(im, "approximate", "none");
    if (strcmp(approx, "none") && strcmp(approx, "tanh"))
        return ox_node_error(im, NB_ERR_ARG, "has approximate '%s', not 'none' or 'tanh'", approx);
    return ox_out(im, 0, nb_gelu(B, ox_in(im, 0), !strcmp(approx, "tanh")));
}

/* Selu: gamma elu(x, alpha), with SELU's constants as defaults. */
static nb_status i_selu(ox_import *im)
{
    double alpha = ox_attr_f(im, "alpha", 1.67326319217681884765625);
    double gamma = ox_attr_f(im, "gamma", 1.05070102214813232421875);
    return ox_out(im, 0, nb_scale(B, nb_elu(B, ox_in(im, 0), alpha), gamma, 0));
}

/* Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)) = alpha elu(x / alpha). */
static nb_status i_celu(ox_import *im)
{
    double alpha = ox_attr_f(im, "alpha", 1.0);
    if (alpha == 0) return ox_node_error(im, NB_ERR_ARG, "has alpha 0");
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_scale(B, nb_elu(B, nb_scale(B, x, 1 / alpha, 0), 1.0), alpha, 0));
}

static nb_value hard_sigmoid(ox_import *im, nb_value x, double alpha, double beta)
{
    return nb_clip(B, nb_scale(B, x, alpha, beta), 0, 1);
}
static nb_status i_hard_sigmoid(ox_import *im)
{
    return ox_out(im, 0, hard_sigmoid(im, ox_in(im, 0), ox_attr_f(im, "alpha", 0.2), ox_attr_f(im, "beta", 0.5)));
}

/* PRelu: x where x >= 0, slope * x below, the slope broadcast to x (one way:
 * it never widens x). relu(x) - slope relu(-x) says it without a compare. */
static nb_status i_prelu(ox_import *im)
{
    nb_value x = ox_in(im, 0), slope = ox_in(im, 1);
    if (nb_is_none(x) || nb_is_none(slope)) return nb_builder_status(B);
    return ox_out(im, 0, nb_sub(B, nb_relu(B, x), nb_mul(B, slope, nb_relu(B, nb_neg(B, x)))));
}

static nb_status i_thresholded_relu(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_value above = nb_greater(B, x, scalar_like(im, x, ox_attr_f(im, "alpha", 1.0)));
    return ox_out(im, 0, nb_where(B, above, x, scalar_like(im, x, 0)));
}

/* Shrink: x - bias above lambd, x + bias below -lambd, 0 between. */
static nb_status i_shrink(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    double lambd = ox_attr_f(im, "lambd", 0.5), bias = ox_attr_f(im, "bias", 0);
    nb_value zero = scalar_like(im, x, 0);
    nb_value lo = nb_where(B, nb_less(B, x, scalar_like(im, x, -lambd)), nb_scale(B, x, 1, bias), zero);
    return ox_out(im, 0, nb_where(B, nb_greater(B, x, scalar_like(im, x, lambd)), nb_scale(B, x, 1, -bias), lo));
}

/* Clip: bounds as attributes before opset 11, optional inputs since. Constant
 * bounds make one clip; bounds a run computes, maximum and minimum (min
 * first, so that min > max gives max, as ONNX's min(max(x, min), max)). */
static bool is_const(ox_import *im, int k)
{
    const char *name = im->node->input[k];
    return !nb_strmap_get(&im->values, name, NULL) &&
        (nb_strmap_get(&im->consts, name, NULL) || nb_strmap_get(&im->protos, name, NULL));
}

static nb_status i_clip(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    if (im->opset < 11)
        return ox_out(im, 0, nb_clip(B, x, ox_attr_f(im, "min", -DBL_MAX), ox_attr_f(im, "max", DBL_MAX)));
    double bound[2] = {-DBL_MAX, DBL_MAX};
    bool known = true;
    for (int k = 1; k <= 2; k++) {
        if (!ox_has_in(im, k)) continue;
        if (!is_const(im, k)) {
            known = false;
            continue;
        }
        const nb_tensor *t = ox_const_in(im, k);
        if (!t) return nb_builder_status(B);
        if (nb_tensor_numel(t) != 1) return ox_node_error(im, NB_ERR_SHAPE, "its bound %d is not one value", k);
        bound[k - 1] = nb_tensor_get(t, 0);
    }
    if (known && bound[0] <= bound[1]) return ox_out(im, 0, nb_clip(B, x, bound[0], bound[1]));
    nb_dtype dt = dtype_of(im, x);
    nb_value y = widened(im, x);
    if (ox_has_in(im, 1)) y = nb_maximum(B, y, widened(im, ox_in(im, 1)));
    if (ox_has_in(im, 2)) y = nb_minimum(B, y, widened(im, ox_in(im, 2)));
    return ox_out(im, 0, back(im, y, dt));
}

static nb_status i_reciprocal(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    return ox_out(im, 0, nb_div(B, scalar_like(im, x, 1), x));
}

/* ---- trigonometry and hyperbolics, composed ------------------------------------- */

/* (1 - x)(1 + x): 1 - x^2 without its cancellation near |x| = 1. */
static nb_value one_minus_square(ox_import *im, nb_value x)
{
    return nb_mul(B, nb_scale(B, x, -1, 1), nb_scale(B, x, 1, 1));
}

/* asin x = atan(x / sqrt(1 - x^2)); +-1 make +-inf, whose atan is +-pi/2. */
static nb_value asin_of(ox_import *im, nb_value x)
{
    return nb_atan(B, nb_div(B, x, nb_sqrt(B, one_minus_square(im, x))));
}
static nb_status i_asin(ox_import *im) { return ox_out(im, 0, asin_of(im, ox_in(im, 0))); }

/* acos x = 2 atan(sqrt((1 - x) / (1 + x))), accurate near 1, where
 * pi/2 - asin x would cancel. */
static nb_status i_acos(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    nb_value ratio = nb_div(B, nb_scale(B, x, -1, 1), nb_scale(B, x, 1, 1));
    return ox_out(im, 0, nb_scale(B, nb_atan(B, nb_sqrt(B, ratio)), 2, 0));
}

static nb_status hyperbolic(ox_import *im, double sign)
{
    nb_value x = ox_in(im, 0);
    nb_value ex = nb_exp(B, x), enx = nb_exp(B, nb_neg(B, x));
    return ox_out(im, 0, nb_scale(B, sign > 0 ? nb_add(B, ex, enx) : nb_sub(B, ex, enx), 0.5, 0));
}
static nb_status i_sinh(ox_import *im) { return hyperbolic(im, -1); }
static nb_status i_cosh(ox_import *im) { return hyperbolic(im, 1); }

/* asinh x = log(x + sqrt(x^2 + 1)); acosh x = log(x + sqrt(x^2 - 1)). */
static nb_status area(ox_import *im, double one)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_log(B, nb_add(B, x, nb_sqrt(B, nb_scale(B, nb_square(B, x), 1, one)))));
}
static nb_status i_asinh(ox_import *im) { return area(im, 1); }
static nb_status i_acosh(ox_import *im) { return area(im, -1); }

/* atanh x = (log1p(x) - log1p(-x)) / 2. */
static nb_status i_atanh(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    return ox_out(im, 0, nb_scale(B, nb_sub(B, nb_log1p(B, x), nb_log1p(B, nb_neg(B, x))), 0.5, 0));
}

/* clang-format off */
const ox_importer ox_imports_math[] = {
    OX_AS(Abs, abs, 1), OX_AS(Cos, cos, 1), OX_AS(Erf, erf, 1), OX_AS(Exp, exp, 1), OX_AS(Log, log, 1),
    OX_AS(Neg, neg, 1), OX_AS(Relu, relu, 1), OX_AS(Sigmoid, sigmoid, 1), OX_AS(Sin, sin, 1), OX_AS(Sqrt, sqrt, 1),
    OX_AS(Tanh, tanh, 1), OX_AS(Tan, tan, 1), OX_AS(Atan, atan, 1), OX_AS(Floor, floor, 1), OX_AS(Ceil, ceil, 1),
    OX_AS(Round, round, 1), OX_AS(Sign, sign, 1),
    OX_FN(Add, add), OX_FN(Sub, sub), OX_FN(Mul, mul), OX_FN(Div, div), OX_FN(Pow, pow), OX_FN(Mod, mod),
    OX_FN(BitShift, bit_shift), OX_FN(Equal, equal), OX_FN(Less, less), OX_FN(Greater, greater),
    OX_FN(LessOrEqual, less_equal), OX_FN(GreaterOrEqual, greater_equal), OX_FN(And, and), OX_FN(Or, or),
    OX_FN(Xor, xor), OX_FN(Not, not), OX_FN(Where, where), OX_FN(IsNaN, is_nan), OX_FN(IsInf, is_inf),
    OX_FN(Sum, sum), OX_FN(Mean, mean), OX_FN(Max, max), OX_FN(Min, min), OX_FN(Gemm, gemm), OX_FN(MatMul, matmul),
    OX_FN(Softmax, softmax), OX_FN(LogSoftmax, log_softmax), OX_FN(Hardmax, hardmax), OX_FN(LeakyRelu, leaky_relu),
    OX_FN(Elu, elu), OX_FN(Softplus, softplus), OX_FN(Mish, mish), OX_FN(Gelu, gelu), OX_FN(Selu, selu),
    OX_FN(Celu, celu), OX_FN(HardSigmoid, hard_sigmoid), OX_FN(HardSwish, hard_swish), OX_FN(Softsign, softsign),
    OX_FN(PRelu, prelu), OX_FN(ThresholdedRelu, thresholded_relu), OX_FN(Shrink, shrink), OX_FN(Clip, clip),
    OX_FN(Reciprocal, reciprocal), OX_FN(Asin, asin), OX_FN(Acos, acos), OX_FN(Sinh, sinh), OX_FN(Cosh, cosh),
    OX_FN(Asinh, asinh), OX_FN(Acosh, acosh), OX_FN(Atanh, atanh),
    {0},
};
/* clang-format on */

#endif
