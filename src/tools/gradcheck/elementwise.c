/* Gradient-check cases of the elementwise family.
 *
 * Inputs stay inside each op's domain (log, sqrt, rsqrt and pow's base on
 * [0.5, 2]; tan well inside its poles) and away from kinks and ties (abs,
 * sign, relu, leaky_relu, elu, clip, softplus's threshold): where the sign of
 * an input matters the cases give fixed values that sit at least 0.05 from
 * the kink, since finite differences straddling one would be meaningless. */
#include "cases.h"

/* Attributes in a table (plain initialisers, no compound literals). */
#define A_F(nm, v) {.name = (nm), .value = {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_B(nm, v) {.name = (nm), .value = {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_I(nm, v) {.name = (nm), .value = {.type = NB_ATTR_INT, .i = (v)}}

/* A 0-d input drawn from [lo, hi]. */
#define GC_SCALAR_RANGE(lo_, hi_) {.dtype = NB_F64, .ndim = 0, .lo = (lo_), .hi = (hi_)}
/* Fixed values: GC_VALS(array, dims...). */
#define GC_VALS(vals, ...) {.dtype = NB_F64, .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                            .shape = {__VA_ARGS__}, .fill = NB_GC_VALUES, .values = (vals)}

/* Both signs, at least 0.05 from 0 (and from +-0.5, clip's bounds below). */
static const double signed6[] = {-0.9, -0.3, 0.25, 0.7, -0.05, 1.2};
static const double signed12[] = {-1.7, -0.8, -0.35, -0.1, 0.05, 0.2, 0.45, 0.65, 1.1, 1.9, -2.4, 3.0};
static const double signed1[] = {-0.6};
/* At least 0.1 from every whole number and half, where floor, ceil and round jump. */
static const double between12[] = {-2.3, -1.7, -0.8, -0.35, -0.1, 0.2, 0.4, 0.65, 1.1, 1.85, 2.3, 3.7};
/* Around and at zero (a subnormal of float among them), for gelu; and far
 * out on both sides. */
static const double near0[] = {0.0, 1e-3, -1e-3, 1e-40, -0.02, 0.3};
static const double wide6[] = {-6.0, -3.5, -1.2, 2.2, 4.0, 7.5};
/* softplus with beta 2, threshold 1 (switches at x = 0.5) and beta -1,
 * threshold 0.5 (switches at x = -0.5): both sides of each switch. */
static const double straddle8[] = {-1.3, -0.8, -0.3, 0.1, 0.3, 0.45, 0.6, 1.4};

/* Every broadcasting pattern of a binary op, X drawn from [xl, xh], Y from [yl, yh]. */
#define BINARY_CASES(op_, xl, xh, yl, yh)                                                                  \
    {.op = op_, .name = "same shape [2,3]", .n_in = 2,                                                    \
     .in = {GC_F_RANGE(xl, xh, 2, 3), GC_F_RANGE(yl, yh, 2, 3)}},                                         \
    {.op = op_, .name = "[2,3] with [3]", .n_in = 2, .in = {GC_F_RANGE(xl, xh, 2, 3), GC_F_RANGE(yl, yh, 3)}}, \
    {.op = op_, .name = "[3] with [2,3]", .n_in = 2, .in = {GC_F_RANGE(xl, xh, 3), GC_F_RANGE(yl, yh, 2, 3)}}, \
    {.op = op_, .name = "[2,1] with [1,3]", .n_in = 2,                                                    \
     .in = {GC_F_RANGE(xl, xh, 2, 1), GC_F_RANGE(yl, yh, 1, 3)}},                                         \
    {.op = op_, .name = "0-d with [2,2]", .n_in = 2, .in = {GC_SCALAR_RANGE(xl, xh), GC_F_RANGE(yl, yh, 2, 2)}}, \
    {.op = op_, .name = "[2,2] with 0-d", .n_in = 2, .in = {GC_F_RANGE(xl, xh, 2, 2), GC_SCALAR_RANGE(yl, yh)}}, \
    {.op = op_, .name = "[4,1,3] with [2,1]", .n_in = 2,                                                  \
     .in = {GC_F_RANGE(xl, xh, 4, 1, 3), GC_F_RANGE(yl, yh, 2, 1)}}

/* A unary op on [2,3], 0-d and [4,1,3] inputs drawn from [lo, hi]. */
#define UNARY_CASES(op_, lo, hi)                                                           \
    {.op = op_, .name = "[2,3]", .n_in = 1, .in = {GC_F_RANGE(lo, hi, 2, 3)}},            \
    {.op = op_, .name = "0-d", .n_in = 1, .in = {GC_SCALAR_RANGE(lo, hi)}},                \
    {.op = op_, .name = "[4,1,3]", .n_in = 1, .in = {GC_F_RANGE(lo, hi, 4, 1, 3)}}

/* A unary op whose inputs must keep away from 0: fixed values of both signs. */
#define SIGNED_CASES(op_, ...)                                                                      \
    {.op = op_, .name = "[2,3] both signs", .n_in = 1, .in = {GC_VALS(signed6, 2, 3)}, __VA_ARGS__},  \
    {.op = op_, .name = "[3,4] both signs", .n_in = 1, .in = {GC_VALS(signed12, 3, 4)}, __VA_ARGS__}, \
    {.op = op_, .name = "0-d negative", .n_in = 1, .in = {GC_VALS(signed1)}, __VA_ARGS__}

const nb_gradcheck_case nb_gc_elementwise[] = {
    /* ---- binary ---- */
    BINARY_CASES("add", -1, 1, -1, 1),
    BINARY_CASES("sub", -1, 1, -1, 1),
    BINARY_CASES("mul", -1, 1, -1, 1),
    BINARY_CASES("div", -1, 1, 0.5, 2),
    {.op = "div",
     .name = "negative divisor [2,3] with [3]",
     .n_in = 2,
     .in = {GC_F_RANGE(-1, 1, 2, 3), GC_F_RANGE(-2, -0.5, 3)}},
    /* pow on a positive base (dY needs log X); exponents of both signs. */
    BINARY_CASES("pow", 0.5, 2, -1.5, 2.5),
    /* maximum/minimum: continuous draws, so no ties. */
    BINARY_CASES("maximum", -1, 1, -1, 1),
    BINARY_CASES("minimum", -1, 1, -1, 1),

    /* ---- unary math ---- */
    UNARY_CASES("neg", -1, 1),
    SIGNED_CASES("abs"),
    SIGNED_CASES("sign"),
    {.op = "floor", .name = "[3,4] between steps", .n_in = 1, .in = {GC_VALS(between12, 3, 4)}},
    {.op = "ceil", .name = "[3,4] between steps", .n_in = 1, .in = {GC_VALS(between12, 3, 4)}},
    {.op = "round", .name = "[3,4] between steps", .n_in = 1, .in = {GC_VALS(between12, 3, 4)}},
    UNARY_CASES("square", -1, 1),
    UNARY_CASES("sqrt", 0.5, 2),
    UNARY_CASES("rsqrt", 0.5, 2),
    UNARY_CASES("exp", -1, 1),
    UNARY_CASES("log", 0.5, 2),
    UNARY_CASES("log1p", -0.5, 1),
    UNARY_CASES("sin", -3, 3),
    UNARY_CASES("cos", -3, 3),
    UNARY_CASES("tan", -1.2, 1.2),
    UNARY_CASES("atan", -3, 3),

    /* ---- activations ---- */
    UNARY_CASES("tanh", -2, 2),
    {.op = "tanh", .name = "saturating", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},
    UNARY_CASES("sigmoid", -3, 3),
    {.op = "sigmoid", .name = "saturating", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},
    SIGNED_CASES("relu"),
    SIGNED_CASES("leaky_relu"),
    GC_ATTR_CASE("leaky_relu", "alpha 0.2", GC_VALS(signed12, 3, 4), A_F("alpha", 0.2)),
    GC_ATTR_CASE("leaky_relu", "alpha -0.5", GC_VALS(signed12, 3, 4), A_F("alpha", -0.5)),
    GC_ATTR_CASE("leaky_relu", "alpha 2", GC_VALS(signed6, 2, 3), A_F("alpha", 2.0)),
    SIGNED_CASES("elu"),
    GC_ATTR_CASE("elu", "alpha 0.5", GC_VALS(signed12, 3, 4), A_F("alpha", 0.5)),
    GC_ATTR_CASE("elu", "alpha -1.5", GC_VALS(signed12, 3, 4), A_F("alpha", -1.5)),
    {.op = "elu", .name = "far out", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},
    UNARY_CASES("erf", -2.5, 2.5),
    UNARY_CASES("gelu", -3, 3),
    {.op = "gelu", .name = "at and near 0", .n_in = 1, .in = {GC_VALS(near0, 2, 3)}},
    {.op = "gelu", .name = "far out", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},
    GC_ATTR_CASE("gelu", "approximate [2,3]", GC_F_RANGE(-3, 3, 2, 3), A_B("approximate", true)),
    GC_ATTR_CASE("gelu", "approximate 0-d", GC_SCALAR_RANGE(-3, 3), A_B("approximate", true)),
    GC_ATTR_CASE("gelu", "approximate at and near 0", GC_VALS(near0, 2, 3), A_B("approximate", true)),
    GC_ATTR_CASE("gelu", "approximate far out", GC_VALS(wide6, 2, 3), A_B("approximate", true)),
    /* gelu_grad(X, DOut): DOut * gelu'(X), both forms; its rules need gelu''. */
    {.op = "gelu_grad", .name = "[2,3]", .n_in = 2, .in = {GC_F_RANGE(-3, 3, 2, 3), GC_F_RANGE(-1, 1, 2, 3)}},
    {.op = "gelu_grad", .name = "0-d", .n_in = 2, .in = {GC_SCALAR_RANGE(-3, 3), GC_SCALAR_RANGE(-1, 1)}},
    {.op = "gelu_grad", .name = "at and near 0", .n_in = 2, .in = {GC_VALS(near0, 2, 3), GC_F_RANGE(-1, 1, 2, 3)}},
    {.op = "gelu_grad", .name = "far out", .n_in = 2, .in = {GC_VALS(wide6, 2, 3), GC_F_RANGE(-1, 1, 2, 3)}},
    {.op = "gelu_grad",
     .name = "approximate [2,3]",
     .n_in = 2,
     .in = {GC_F_RANGE(-3, 3, 2, 3), GC_F_RANGE(-1, 1, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_B("approximate", true)}},
    {.op = "gelu_grad",
     .name = "approximate 0-d",
     .n_in = 2,
     .in = {GC_SCALAR_RANGE(-3, 3), GC_SCALAR_RANGE(-1, 1)},
     .n_attrs = 1,
     .attrs = {A_B("approximate", true)}},
    {.op = "gelu_grad",
     .name = "approximate at and near 0",
     .n_in = 2,
     .in = {GC_VALS(near0, 2, 3), GC_F_RANGE(-1, 1, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_B("approximate", true)}},
    {.op = "gelu_grad",
     .name = "approximate far out",
     .n_in = 2,
     .in = {GC_VALS(wide6, 2, 3), GC_F_RANGE(-1, 1, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_B("approximate", true)}},
    UNARY_CASES("softplus", -3, 3),
    GC_ATTR_CASE("softplus", "beta 2, threshold 1, both sides", GC_VALS(straddle8, 2, 4), A_F("beta", 2.0),
                 A_F("threshold", 1.0)),
    GC_ATTR_CASE("softplus", "beta -1, threshold 0.5, both sides", GC_VALS(straddle8, 2, 4), A_F("beta", -1.0),
                 A_F("threshold", 0.5)),
    GC_ATTR_CASE("softplus", "beta 0.5, default threshold, far out", GC_VALS(wide6, 2, 3), A_F("beta", 0.5)),
    GC_ATTR_CASE("softplus", "beta 4, default threshold, both sides", GC_VALS(wide6, 2, 3), A_F("beta", 4.0)),
    UNARY_CASES("silu", -3, 3),
    {.op = "silu", .name = "far out", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},
    /* The composites (src/ops/composite_ops.c), through the ops they expand into. */
    SIGNED_CASES("softsign"),
    UNARY_CASES("mish", -3, 3),
    {.op = "mish", .name = "far out", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},
    UNARY_CASES("hardswish", -2.5, 2.5),
    {.op = "hardswish", .name = "both flat sides, 0.5 from the kinks at +-3", .n_in = 1, .in = {GC_VALS(wide6, 2, 3)}},

    /* ---- clip, scale, cast ---- */
    GC_ATTR_CASE("clip", "[-0.5, 0.5] on [3,4]", GC_VALS(signed12, 3, 4), A_F("min", -0.5), A_F("max", 0.5)),
    GC_ATTR_CASE("clip", "[-0.5, 0.5] on [2,3]", GC_VALS(signed6, 2, 3), A_F("min", -0.5), A_F("max", 0.5)),
    GC_ATTR_CASE("clip", "min only (0)", GC_VALS(signed12, 3, 4), A_F("min", 0.0)),
    GC_ATTR_CASE("clip", "max only (0.5)", GC_VALS(signed12, 3, 4), A_F("max", 0.5)),
    {.op = "clip", .name = "unbounded (defaults), 0-d", .n_in = 1, .in = {GC_SCALAR}},
    GC_ATTR_CASE("clip", "clipped 0-d", GC_VALS(signed1), A_F("min", -0.5), A_F("max", 0.5)),
    {.op = "scale", .name = "defaults [2,3]", .n_in = 1, .in = {GC_F(2, 3)}},
    GC_ATTR_CASE("scale", "2.5 x + 1", GC_F(2, 3), A_F("scale", 2.5), A_F("bias", 1.0)),
    GC_ATTR_CASE("scale", "-3 (x + 1), 0-d", GC_SCALAR, A_F("scale", -3.0), A_F("bias", 1.0),
                 A_B("bias_after_scale", false)),
    GC_ATTR_CASE("scale", "0.5 (x - 2), [4,1,3]", GC_F(4, 1, 3), A_F("scale", 0.5), A_F("bias", -2.0),
                 A_B("bias_after_scale", false)),
    GC_ATTR_CASE("cast", "float64 to float64 [2,3]", GC_F(2, 3), A_I("dtype", NB_F64)),
    GC_ATTR_CASE("cast", "float64 to float64 0-d", GC_SCALAR, A_I("dtype", NB_F64)),
    /* Out and the loss are float32, whose rounding swamps a central difference
     * of step 1e-6 unless the values are small: near 1e-4, float32 resolves
     * the step to about 1e-5 relative. */
    {.op = "cast",
     .name = "float64 to float32 [2,3]",
     .n_in = 1,
     .in = {GC_F_RANGE(-1e-4, 1e-4, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_I("dtype", NB_F32)},
     .rtol = 1e-2},
    {.op = NULL},
};
