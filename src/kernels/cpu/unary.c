/* Unary math and activations.
 *
 * Float loops are written once for float and double through <tgmath.h>, so
 * log(v) is logf for float; constants are cast to T so that float loops stay
 * in single precision. exp and tanh, the heart of sigmoid, silu and both
 * tanh-based activations, come from fastmath.h for float (vectorisable) and
 * from libm for double.
 *
 * The forms are chosen for accuracy over the whole range: sigmoid is
 * 1 / (1 + exp(-x)), which is relatively accurate everywhere and goes to 0
 * (not NaN) when exp overflows; softplus is max(z, 0) + log1p(exp(-|z|));
 * gelu uses erfc (no cancellation in 1 + erf for negative x), and its tanh
 * form is x * sigmoid(2u), equal to 0.5x(1 + tanh u) without that
 * cancellation either. */

/* Nothing here reads floating-point exception flags, so gcc may treat FP
 * operations as non-trapping. Otherwise it keeps ?: selects with arithmetic
 * around them (leaky_relu, sign, the fast exp) as branches and leaves those
 * loops scalar. Clang assumes this by default. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <float.h>
#include <stdint.h>
#include <tgmath.h>
#include "broadcast.h"
#include "elementwise.h"
#include "fastmath.h"

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_OVER_PI 0.79788456080286535588

#define UNARY_LOOP(name, T, PRE, EXPR)                                               \
    static void name(int64_t n, char *const p[], const int64_t s[], const void *aux) \
    {                                                                                \
        const nb_ew_params *P = aux;                                                 \
        (void)P;                                                                     \
        PRE                                                                          \
        const T *x = (const T *)p[0];                                                \
        T *o = (T *)p[1];                                                            \
        if (s[0] == 1 && s[1] == 1) {                                                \
            for (int64_t i = 0; i < n; i++) {                                        \
                T v = x[i];                                                          \
                o[i] = (EXPR);                                                       \
            }                                                                        \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++) {                                        \
                T v = x[i * s[0]];                                                   \
                o[i * s[1]] = (EXPR);                                                \
            }                                                                        \
        }                                                                            \
    }

/* EXP and TANH: the exp and tanh to use for T. */
#define FLOAT_HELPERS(T, sfx, EXP)                                                 \
    static inline T f_sigmoid_##sfx(T v) { return (T)1 / ((T)1 + EXP(-v)); }       \
    static inline T f_softplus_##sfx(T v, T beta, T threshold)                     \
    {                                                                              \
        T z = beta * v;                                                            \
        if (z > threshold) return v;                                               \
        return (fmax(z, (T)0) + log1p(exp(-fabs(z)))) / beta;                      \
    }                                                                              \
    static inline T f_gelu_tanh_##sfx(T v)                                         \
    {                                                                              \
        T u = (T)SQRT_2_OVER_PI * (v + (T)0.044715 * v * v * v);                   \
        return v * f_sigmoid_##sfx((T)2 * u);                                      \
    }

FLOAT_HELPERS(float, f32, nb_fast_expf)
FLOAT_HELPERS(double, f64, exp)

#define FLOAT_LOOPS(T, sfx, EXP, TANH)                                                                            \
    UNARY_LOOP(neg_##sfx, T, , -v)                                                                       \
    UNARY_LOOP(abs_##sfx, T, , fabs(v))                                                                  \
    UNARY_LOOP(sign_##sfx, T, , v > 0 ? (T)1 : (v < 0 ? (T)-1 : v))                                      \
    UNARY_LOOP(square_##sfx, T, , v * v)                                                                 \
    UNARY_LOOP(sqrt_##sfx, T, , sqrt(v))                                                                 \
    UNARY_LOOP(rsqrt_##sfx, T, , (T)1 / sqrt(v))                                                         \
    UNARY_LOOP(exp_##sfx, T, , EXP(v))                                                                   \
    UNARY_LOOP(log_##sfx, T, , log(v))                                                                   \
    UNARY_LOOP(log1p_##sfx, T, , log1p(v))                                                               \
    UNARY_LOOP(sin_##sfx, T, , sin(v))                                                                   \
    UNARY_LOOP(cos_##sfx, T, , cos(v))                                                                   \
    UNARY_LOOP(tan_##sfx, T, , tan(v))                                                                   \
    UNARY_LOOP(tanh_##sfx, T, , TANH(v))                                                                 \
    UNARY_LOOP(sigmoid_##sfx, T, , f_sigmoid_##sfx(v))                                                     \
    UNARY_LOOP(relu_##sfx, T, , v < 0 ? (T)0 : v)                                                        \
    UNARY_LOOP(leaky_relu_##sfx, T, const T al = (T)P->alpha;, v > 0 ? v : al * v)                       \
    UNARY_LOOP(elu_##sfx, T, const T al = (T)P->alpha;, v > 0 ? v : al * expm1(v))                       \
    UNARY_LOOP(gelu_##sfx, T, , (T)0.5 * v * erfc(-v * (T)SQRT1_2))                                      \
    UNARY_LOOP(gelu_tanh_##sfx, T, , f_gelu_tanh_##sfx(v))                                                 \
    UNARY_LOOP(softplus_##sfx, T, const T be = (T)P->beta; const T th = (T)P->threshold;,                \
               f_softplus_##sfx(v, be, th))                                                                \
    UNARY_LOOP(silu_##sfx, T, , v * f_sigmoid_##sfx(v))                                                    \
    UNARY_LOOP(clip_##sfx, T, const T lo = (T)P->lo; const T hi = (T)P->hi;, v < lo ? lo : (v > hi ? hi : v)) \
    UNARY_LOOP(scale_##sfx, T, const T sc = (T)P->scale; const T bi = (T)P->bias;, sc * v + bi)          \
    UNARY_LOOP(scale_first_##sfx, T, const T sc = (T)P->scale; const T bi = (T)P->bias;, sc * (v + bi))

FLOAT_LOOPS(float, f32, nb_fast_expf, nb_fast_tanhf)
FLOAT_LOOPS(double, f64, exp, tanh)

/* Integer scale: exact wrapping arithmetic when scale and bias are whole
 * numbers (bias already multiplied in for scale * (x + bias)), otherwise
 * through double, truncated and saturated like a cast. */
typedef struct int_scale {
    int64_t scale, bias;
} int_scale;

#define INT_LOOPS(T, U, sfx, TMIN, TMAX)                                                                 \
    UNARY_LOOP(neg_##sfx, T, , (T)((U)0 - (U)v))                                                         \
    UNARY_LOOP(abs_##sfx, T, , v < 0 ? (T)((U)0 - (U)v) : v)                                             \
    UNARY_LOOP(sign_##sfx, T, , (T)((v > 0) - (v < 0)))                                                  \
    UNARY_LOOP(square_##sfx, T, , (T)((U)v * (U)v))                                                      \
    UNARY_LOOP(relu_##sfx, T, , v < 0 ? (T)0 : v)                                                        \
    UNARY_LOOP(clip_##sfx, T, const T lo = (T)nb_ew_sat_i64(ceil(P->lo), TMIN, TMAX);                    \
               const T hi = (T)nb_ew_sat_i64(floor(P->hi), TMIN, TMAX);, v < lo ? lo : (v > hi ? hi : v)) \
    UNARY_LOOP(scale_##sfx, T, const double sc = P->scale; const double bi = P->bias;,                   \
               (T)nb_ew_sat_i64(sc * (double)v + bi, TMIN, TMAX))                                        \
    UNARY_LOOP(scale_first_##sfx, T, const double sc = P->scale; const double bi = P->bias;,             \
               (T)nb_ew_sat_i64(sc * ((double)v + bi), TMIN, TMAX))                                      \
    static void scale_exact_##sfx(int64_t n, char *const p[], const int64_t s[], const void *aux)        \
    {                                                                                                    \
        const int_scale *q = aux;                                                                        \
        const U sc = (U)q->scale, bi = (U)q->bias;                                                       \
        const T *x = (const T *)p[0];                                                                    \
        T *o = (T *)p[1];                                                                                \
        for (int64_t i = 0; i < n; i++) o[i * s[1]] = (T)(sc * (U)x[i * s[0]] + bi);                     \
    }

INT_LOOPS(int32_t, uint32_t, i32, INT32_MIN, INT32_MAX)
INT_LOOPS(int64_t, uint64_t, i64, INT64_MIN, INT64_MAX)

#define ALL(op) {[NB_F32] = op##_f32, [NB_F64] = op##_f64, [NB_I32] = op##_i32, [NB_I64] = op##_i64}
#define FLT(op) {[NB_F32] = op##_f32, [NB_F64] = op##_f64}

static const nb_bcast_loop loops[NB_EW_UNARY_COUNT][NB_DTYPE_COUNT] = {
    [NB_EW_NEG] = ALL(neg),
    [NB_EW_ABS] = ALL(abs),
    [NB_EW_SIGN] = ALL(sign),
    [NB_EW_SQUARE] = ALL(square),
    [NB_EW_SQRT] = FLT(sqrt),
    [NB_EW_RSQRT] = FLT(rsqrt),
    [NB_EW_EXP] = FLT(exp),
    [NB_EW_LOG] = FLT(log),
    [NB_EW_LOG1P] = FLT(log1p),
    [NB_EW_SIN] = FLT(sin),
    [NB_EW_COS] = FLT(cos),
    [NB_EW_TAN] = FLT(tan),
    [NB_EW_TANH] = FLT(tanh),
    [NB_EW_SIGMOID] = FLT(sigmoid),
    [NB_EW_RELU] = ALL(relu),
    [NB_EW_LEAKY_RELU] = FLT(leaky_relu),
    [NB_EW_ELU] = FLT(elu),
    [NB_EW_GELU] = FLT(gelu),
    [NB_EW_GELU_TANH] = FLT(gelu_tanh),
    [NB_EW_SOFTPLUS] = FLT(softplus),
    [NB_EW_SILU] = FLT(silu),
    [NB_EW_CLIP] = ALL(clip),
    [NB_EW_SCALE] = ALL(scale),
    [NB_EW_SCALE_FIRST_BIAS] = ALL(scale_first),
};

/* Ops cheap enough that threads only pay off on large tensors. */
static bool is_cheap(nb_ew_unary_op op)
{
    switch (op) {
    case NB_EW_NEG: case NB_EW_ABS: case NB_EW_SIGN: case NB_EW_SQUARE: case NB_EW_RELU:
    case NB_EW_LEAKY_RELU: case NB_EW_CLIP: case NB_EW_SCALE: case NB_EW_SCALE_FIRST_BIAS:
        return true;
    default:
        return false;
    }
}

bool nb_ew_unary_supports(nb_ew_unary_op op, nb_dtype dt)
{
    return (unsigned)op < NB_EW_UNARY_COUNT && nb_dtype_valid((int)dt) && loops[op][dt] != NULL;
}

static bool whole(double v)
{
    return v == trunc(v) && fabs(v) < 4e18;
}

nb_status nb_ew_unary(nb_ew_unary_op op, const nb_tensor *x, nb_tensor *out, const nb_ew_params *params,
                      const char *label)
{
    if ((unsigned)op >= NB_EW_UNARY_COUNT) return nb_error(NB_ERR_ARG, "%s: unknown unary op %d", label, (int)op);
    if (out->dtype != x->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: X is %s but Out is %s", label, nb_dtype_name(x->dtype),
                        nb_dtype_name(out->dtype));
    if (!nb_ew_unary_supports(op, x->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: does not take %s", label, nb_dtype_name(x->dtype));
    static const nb_ew_params none = {0};
    if (!params) params = &none;
    nb_bcast_plan plan;
    nb_status st = nb_bcast_plan_init(&plan, label, 1, &x, out);
    if (st) return st;
    nb_bcast_loop loop = loops[op][x->dtype];
    const void *aux = params;
    int_scale iscale;
    bool is_int = x->dtype == NB_I32 || x->dtype == NB_I64;
    if (is_int && (op == NB_EW_SCALE || op == NB_EW_SCALE_FIRST_BIAS) && whole(params->scale) &&
        whole(params->bias)) {
        /* Two's complement arithmetic is a ring, so scale * (x + bias) is
         * scale * x + scale * bias exactly, wrapping included. */
        uint64_t s = (uint64_t)(int64_t)params->scale, b = (uint64_t)(int64_t)params->bias;
        iscale = (int_scale){(int64_t)s, (int64_t)(op == NB_EW_SCALE ? b : s * b)};
        loop = x->dtype == NB_I32 ? scale_exact_i32 : scale_exact_i64;
        aux = &iscale;
    }
    nb_bcast_run(&plan, loop, aux, is_cheap(op) ? NB_BCAST_GRAIN_CHEAP : NB_BCAST_GRAIN_MATH);
    return NB_OK;
}
