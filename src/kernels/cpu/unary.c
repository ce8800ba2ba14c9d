/* Unary math and activations, and gelu's fused gradient.
 *
 * Float loops are written once for float and double through <tgmath.h>, so
 * log(v) is logf for float; constants are cast to T so that float loops stay
 * in single precision. exp, tanh and erf, the heart of sigmoid, silu, gelu
 * and the tanh-based activations, come from fastmath.h for float
 * (vectorisable) and from libm for double.
 *
 * The forms are chosen for accuracy over the whole range: sigmoid is
 * 1 / (1 + exp(-x)), which is relatively accurate everywhere and goes to 0
 * (not NaN) when exp overflows; softplus is max(z, 0) + log1p(exp(-|z|));
 * gelu is x Phi(x) with Phi from erfc (no cancellation in 1 + erf for
 * negative x; for float, nb_fast_normcdff, which also keeps the tail's
 * accuracy that rounding x / sqrt 2 would lose), and its tanh form is
 * x * sigmoid(2u), equal to 0.5x(1 + tanh u) without that cancellation
 * either. */

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
#include "simd.h"

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_OVER_PI 0.79788456080286535588
#define INV_SQRT_2PI 0.39894228040143267794 /* phi(0) = 1 / sqrt(2 pi) */
#define GELU_K 0.044715

/* One loop per (op, dtype). P is a copy of the parameters, so that the
 * compiler knows the output stores cannot change them. */
#define UNARY_LOOP(name, T, EXPR)                                                    \
    NB_SIMD_CLONES static void name(int64_t n, char *const p[], const int64_t s[], const void *aux) \
    {                                                                                \
        const nb_ew_params P = *(const nb_ew_params *)aux;                           \
        (void)P;                                                                     \
        NB_MAP_LOOP_BODY(T, T, EXPR)                                                 \
    }

/* The exp, tanh and erf for each float type (S is the suffix of T). */
#define EXP_f32 nb_fast_expf
#define EXP_f64 exp
#define TANH_f32 nb_fast_tanhf
#define TANH_f64 tanh
#define ERF_f32 nb_fast_erff
#define ERF_f64 erf

/* v clamped to [-40, 40]; for float on the bits (nb_fast_clamp_abs). */
#define CLAMP40_f32(v) nb_fast_clamp_abs(v, 40.0f)
#define CLAMP40_f64(v) (v < -40 ? -40 : (v > 40 ? 40 : v))

#define FLOAT_HELPERS(T, S)                                                        \
    static inline T f_sigmoid_##S(T v) { return (T)1 / ((T)1 + EXP_##S(-v)); }     \
    static inline T f_softplus_##S(T v, T beta, T threshold)                       \
    {                                                                              \
        T z = beta * v;                                                            \
        if (z > threshold) return v;                                               \
        return (fmax(z, (T)0) + log1p(exp(-fabs(z)))) / beta;                      \
    }                                                                              \
    static inline T f_gelu_tanh_##S(T v)                                           \
    {                                                                              \
        T u = (T)SQRT_2_OVER_PI * (v + (T)GELU_K * v * v * v);                     \
        return v * f_sigmoid_##S((T)2 * u);                                        \
    }                                                                              \
    /* Its derivative, with s = sigmoid(2u) and 2u' = 2c (1 + 3k v^2):             \
     * s + v s (1 - s) 2u' = s (1 + v (1 - s) 2u'), made in two steps (see          \
     * gelu_tanh_grad_f32) from E = exp(-2u): s = 1 / (1 + E), and 1 - s as E s     \
     * where s > 1/2, without the cancellation of 1 - s (a 1e-6 error in float at  \
     * v = 4.5, where gelu' is 1 + 4e-5). Past |v| = 40, s is 0 or 1 in either     \
     * type; v clamped there keeps infinities at 0 and 1 (not inf * 0) and NaN    \
     * NaN (through E). */                                                         \
    static inline T f_gelu_tanh_e_##S(T v)                                         \
    {                                                                              \
        return EXP_##S((T)(-2 * SQRT_2_OVER_PI) * (v + (T)GELU_K * v * v * v));    \
    }                                                                              \
    static inline T f_gelu_tanh_grad_e_##S(T v, T e)                               \
    {                                                                              \
        T s = (T)1 / ((T)1 + e);                                                   \
        T oms = e < (T)1 ? e * s : (T)1 - s;                                       \
        T x = CLAMP40_##S(v);                                                      \
        T du = (T)(2 * SQRT_2_OVER_PI) + (T)(6 * SQRT_2_OVER_PI * GELU_K) * x * x; \
        return s * ((T)1 + x * oms * du);                                          \
    }                                                                              \
    static inline T f_gelu_tanh_grad_##S(T v) { return f_gelu_tanh_grad_e_##S(v, f_gelu_tanh_e_##S(v)); }

FLOAT_HELPERS(float, f32)
FLOAT_HELPERS(double, f64)

/* Exact gelu, x Phi(x), and its derivative gelu' = Phi + x phi. Double
 * stays on libm (x clamped at +-40 in x phi, so that infinities give 0 and
 * 1, not inf * 0). Float takes Phi as nb_fast_normcdff does, from a = |x|
 * (clamped at 15, where e = exp(-x^2/2) is 0) and Phi's tail
 * t = erfcx(a / sqrt 2) e / 2 (Phi = t for x < 0, 1 - t above):
 *     gelu  = -m for x < 0, x - m for x >= 0, m = a t made as
 *             (a erfcx / 2) e, so that a result near the subnormals is
 *             rounded once; gelu(inf) = inf, gelu(-inf) = -0; and
 *             x (1/2 + erf(x / sqrt 2) / 2) near 0, as Phi;
 *     gelu' = w for x < 0, 1 - w for x >= 0, w = t - a e / sqrt(2 pi):
 *             one exp and one erfcx, and no erf branch near 0, where a
 *             gradient can afford erfcx's 3.4e-7 relative error. */
static inline float f_gelu_f32(float v)
{
    const float S = (float)SQRT1_2;
    float a = nb_fast_normcdf_abs(v);
    float m = (a * (0.5f * nb_fast_erfcx_pos(a * S))) * nb_fast_expf_nsq(a, 0.5f);
    float tail = v < 0 ? -m : v - m;
    return a < 0.75f / S ? v * (0.5f + 0.5f * nb_fast_erf_small(v * S)) : tail;
}
static inline double f_gelu_f64(double v) { return 0.5 * v * erfc(-v * SQRT1_2); }
static inline float f_gelu_grad_f32(float v)
{
    float a = nb_fast_normcdf_abs(v);
    float e = nb_fast_expf_nsq(a, 0.5f);
    float w = e * (0.5f * nb_fast_erfcx_pos(a * (float)SQRT1_2) - a * (float)INV_SQRT_2PI); /* t - a phi */
    return v < 0 ? w : 1.0f - w;
}
static inline double f_gelu_grad_f64(double v)
{
    double x = v < -40 ? -40 : (v > 40 ? 40 : v);
    return 0.5 * erfc(-v * SQRT1_2) + x * (INV_SQRT_2PI * exp(-0.5 * x * x));
}

/* ---- the math: F_<op> for float and double, I_<op> for the integers ----------
 * v is the element, T its type (S its suffix; U the unsigned type of an
 * integer T), P the parameters. */
#define F_neg(T, S, v) (-v)
#define I_neg(T, U, v) ((T)((U)0 - (U)v))
#define F_abs(T, S, v) fabs(v)
#define I_abs(T, U, v) (v < 0 ? (T)((U)0 - (U)v) : v)
#define F_sign(T, S, v) (v > 0 ? (T)1 : (v < 0 ? (T)-1 : v))
#define I_sign(T, U, v) ((T)((v > 0) - (v < 0)))
/* rint rounds in the current mode, which nabla leaves at to-nearest-even. */
#define F_floor(T, S, v) floor(v)
#define F_ceil(T, S, v) ceil(v)
#define F_round(T, S, v) rint(v)
#define F_square(T, S, v) (v * v)
#define I_square(T, U, v) ((T)((U)v * (U)v))
#define F_sqrt(T, S, v) sqrt(v)
#define F_rsqrt(T, S, v) ((T)1 / sqrt(v))
#define F_exp(T, S, v) EXP_##S(v)
#define F_log(T, S, v) log(v)
#define F_log1p(T, S, v) log1p(v)
#define F_sin(T, S, v) sin(v)
#define F_cos(T, S, v) cos(v)
#define F_tan(T, S, v) tan(v)
#define F_atan(T, S, v) atan(v)
#define F_tanh(T, S, v) TANH_##S(v)
#define F_erf(T, S, v) ERF_##S(v)
#define F_sigmoid(T, S, v) f_sigmoid_##S(v)
#define F_relu(T, S, v) (v < 0 ? (T)0 : v)
#define I_relu(T, U, v) (v < 0 ? (T)0 : v)
#define F_silu(T, S, v) (v * f_sigmoid_##S(v))
#define F_leaky_relu(T, S, v) (v > 0 ? v : (T)P.alpha * v)
#define F_elu(T, S, v) (v > 0 ? v : (T)P.alpha * expm1(v))
#define F_softplus(T, S, v) f_softplus_##S(v, (T)P.beta, (T)P.threshold)
/* The ops written out in full. */
#define F_gelu(T, S, v) f_gelu_##S(v)
#define F_gelu_tanh(T, S, v) f_gelu_tanh_##S(v)
#define F_clip(T, S, v) (v < (T)P.min ? (T)P.min : (v > (T)P.max ? (T)P.max : v))
#define F_scale(T, S, v) ((T)P.scale * v + (T)P.bias)
#define F_scale_first(T, S, v) ((T)P.scale * (v + (T)P.bias))

#define FLOAT_LOOPS(op)                                    \
    UNARY_LOOP(op##_f32, float, F_##op(float, f32, v))     \
    UNARY_LOOP(op##_f64, double, F_##op(double, f64, v))
#define INT_LOOPS(op)                                                  \
    UNARY_LOOP(op##_i32, int32_t, I_##op(int32_t, uint32_t, v))        \
    UNARY_LOOP(op##_i64, int64_t, I_##op(int64_t, uint64_t, v))
#define LOOPS_FLOAT(op) FLOAT_LOOPS(op)
#define LOOPS_NUMERIC(op) FLOAT_LOOPS(op) INT_LOOPS(op)

#define NB_UNARY(name, dtypes, ...) LOOPS_##dtypes(name)
#define NB_UNARY_A1(name, dtypes, ...) LOOPS_##dtypes(name)
#define NB_UNARY_A2(name, dtypes, ...) LOOPS_##dtypes(name)
#include "nabla/elementwise_ops.h"
FLOAT_LOOPS(gelu)
FLOAT_LOOPS(gelu_tanh)
FLOAT_LOOPS(clip)
FLOAT_LOOPS(scale)
FLOAT_LOOPS(scale_first)

/* Integer clip and scale: bounds rounded inward and saturated; a scale that
 * is not whole goes through double, truncated and saturated like a cast. */
typedef struct int_scale {
    int64_t scale, bias;
} int_scale;

#define INT_SPECIAL_LOOPS(T, U, sfx, TMIN, TMAX)                                                         \
    UNARY_LOOP(clip_##sfx, T,                                                                            \
               v < (T)nb_ew_sat_i64(ceil(P.min), TMIN, TMAX) ? (T)nb_ew_sat_i64(ceil(P.min), TMIN, TMAX) \
               : v > (T)nb_ew_sat_i64(floor(P.max), TMIN, TMAX) ? (T)nb_ew_sat_i64(floor(P.max), TMIN, TMAX) \
               : v)                                                                                      \
    UNARY_LOOP(scale_##sfx, T, (T)nb_ew_sat_i64(P.scale * (double)v + P.bias, TMIN, TMAX))               \
    UNARY_LOOP(scale_first_##sfx, T, (T)nb_ew_sat_i64(P.scale * ((double)v + P.bias), TMIN, TMAX))       \
    static void scale_exact_##sfx(int64_t n, char *const p[], const int64_t s[], const void *aux)        \
    {                                                                                                    \
        const int_scale *q = aux;                                                                        \
        const U sc = (U)q->scale, bi = (U)q->bias;                                                       \
        const T *x = (const T *)p[0];                                                                    \
        T *o = (T *)p[1];                                                                                \
        for (int64_t i = 0; i < n; i++) o[i * s[1]] = (T)(sc * (U)x[i * s[0]] + bi);                     \
    }

INT_SPECIAL_LOOPS(int32_t, uint32_t, i32, INT32_MIN, INT32_MAX)
INT_SPECIAL_LOOPS(int64_t, uint64_t, i64, INT64_MIN, INT64_MAX)

#define ROW_NUMERIC(op) {[NB_F32] = op##_f32, [NB_F64] = op##_f64, [NB_I32] = op##_i32, [NB_I64] = op##_i64}
#define ROW_FLOAT(op) {[NB_F32] = op##_f32, [NB_F64] = op##_f64}

static const nb_bcast_loop loops[NB_EW_UNARY_COUNT][NB_DTYPE_COUNT] = {
#define NB_UNARY(name, dtypes, ...) [NB_EW_##name] = ROW_##dtypes(name),
#define NB_UNARY_A1(name, dtypes, ...) [NB_EW_##name] = ROW_##dtypes(name),
#define NB_UNARY_A2(name, dtypes, ...) [NB_EW_##name] = ROW_##dtypes(name),
#include "nabla/elementwise_ops.h"
    [NB_EW_gelu] = ROW_FLOAT(gelu),
    [NB_EW_gelu_tanh] = ROW_FLOAT(gelu_tanh),
    [NB_EW_clip] = ROW_NUMERIC(clip),
    [NB_EW_scale] = ROW_NUMERIC(scale),
    [NB_EW_scale_first] = ROW_NUMERIC(scale_first),
};

/* Ops cheap enough that threads only pay off on large tensors. */
#define CHEAP true
#define MATH false
static const bool cheap[NB_EW_UNARY_COUNT] = {
#define NB_UNARY(name, dtypes, cost, ...) [NB_EW_##name] = cost,
#define NB_UNARY_A1(name, dtypes, cost, ...) [NB_EW_##name] = cost,
#define NB_UNARY_A2(name, dtypes, cost, ...) [NB_EW_##name] = cost,
#include "nabla/elementwise_ops.h"
    [NB_EW_clip] = true,
    [NB_EW_scale] = true,
    [NB_EW_scale_first] = true,
};
#undef CHEAP
#undef MATH

/* Ops cheap enough that threads only pay off on large tensors. */
bool nb_ew_unary_supports(nb_ew_unary_op op, nb_dtype dt)
{
    return (unsigned)op < NB_EW_UNARY_COUNT && nb_dtype_valid((int)dt) && loops[op][dt] != NULL;
}

static bool whole(double v) { return v == trunc(v) && fabs(v) < 4e18; }

bool nb_ew_unary_pointwise(nb_ew_unary_op op, nb_dtype dt, const nb_ew_params *params, nb_pointwise *f)
{
    static const nb_ew_params none = {.alpha = 0};
    bool is_int = dt == NB_I32 || dt == NB_I64;
    if (!nb_ew_unary_supports(op, dt) || (is_int && (op == NB_EW_scale || op == NB_EW_scale_first))) return false;
    *f = (nb_pointwise){.loop = loops[op][dt], .aux = params ? params : &none, .math = !cheap[op]};
    return true;
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
    static const nb_ew_params none = {.alpha = 0};
    if (!params) params = &none;
    nb_bcast_loop loop = loops[op][x->dtype];
    const void *aux = params;
    int_scale iscale;
    bool is_int = x->dtype == NB_I32 || x->dtype == NB_I64;
    if (is_int && (op == NB_EW_scale || op == NB_EW_scale_first) && whole(params->scale) && whole(params->bias)) {
        /* Two's complement arithmetic is a ring, so scale * (x + bias) is
         * scale * x + scale * bias exactly, wrapping included. */
        uint64_t s = (uint64_t)(int64_t)params->scale, b = (uint64_t)(int64_t)params->bias;
        iscale = (int_scale){(int64_t)s, (int64_t)(op == NB_EW_scale ? b : s * b)};
        loop = x->dtype == NB_I32 ? scale_exact_i32 : scale_exact_i64;
        aux = &iscale;
    }
    int64_t grain = cheap[op] ? NB_BCAST_GRAIN_CHEAP : NB_BCAST_GRAIN_MATH;
    if (nb_bcast_run_small_flat(1, &x, out, loop, aux, grain)) return NB_OK;
    nb_bcast_plan plan;
    nb_status st = nb_bcast_plan_init(&plan, label, 1, &x, out);
    if (st) return st;
    nb_bcast_run(&plan, loop, aux, grain);
    return NB_OK;
}

/* ---- gelu_grad: DX = DOut * gelu'(X) ---------------------------------------------
 * One pass over X and DOut instead of the dozen elementwise ops gelu's rule
 * would otherwise emit. The inner loops are written as UNARY_LOOP's, with a
 * second input. */
#define GELU_GRAD_LOOP(name, T, EXPR)                                                \
    NB_SIMD_CLONES static void name(int64_t n, char *const p[], const int64_t s[], const void *aux) \
    {                                                                                \
        (void)aux;                                                                   \
        const T *x = (const T *)p[0], *d = (const T *)p[1];                          \
        T *o = (T *)p[2];                                                            \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                   \
            for (int64_t i = 0; i < n; i++) {                                        \
                T v = x[i];                                                          \
                o[i] = d[i] * (EXPR);                                                \
            }                                                                        \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++) {                                        \
                T v = x[i * s[0]];                                                   \
                o[i * s[2]] = d[i * s[1]] * (EXPR);                                  \
            }                                                                        \
        }                                                                            \
    }

GELU_GRAD_LOOP(gelu_grad_f32, float, f_gelu_grad_f32(v))
GELU_GRAD_LOOP(gelu_grad_f64, double, f_gelu_grad_f64(v))
GELU_GRAD_LOOP(gelu_tanh_grad_f64, double, f_gelu_tanh_grad_f64(v))

/* The tanh form in float, in blocks that stay in L1: E = exp(-2u) for the
 * block first, then the rest. In one loop the two make one long chain of
 * dependent operations (exp's polynomial, the division, then
 * s (1 + x (1 - s) 2u')), and the processor runs out of room to overlap
 * iterations; as two loops each overlaps well, a fifth faster. (The exact
 * form, whose exp and erfcx are two chains side by side, is faster in one.) */
NB_SIMD_CLONES static void gelu_tanh_grad_f32(int64_t n, char *const p[], const int64_t s[], const void *aux)
{
    (void)aux;
    const float *x = (const float *)p[0], *d = (const float *)p[1];
    float *o = (float *)p[2];
    if (s[0] != 1 || s[1] != 1 || s[2] != 1) {
        for (int64_t i = 0; i < n; i++) o[i * s[2]] = d[i * s[1]] * f_gelu_tanh_grad_f32(x[i * s[0]]);
        return;
    }
    enum { BLOCK = 256 };
    float e[BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
        const int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        const float *xb = x + i0, *db = d + i0;
        float *ob = o + i0;
        for (int64_t i = 0; i < m; i++) e[i] = f_gelu_tanh_e_f32(xb[i]);
        for (int64_t i = 0; i < m; i++) ob[i] = db[i] * f_gelu_tanh_grad_e_f32(xb[i], e[i]);
    }
}

static nb_bcast_loop gelu_grad_loop(bool approximate, nb_dtype dt)
{
    return dt == NB_F32 ? (approximate ? gelu_tanh_grad_f32 : gelu_grad_f32)
                        : (approximate ? gelu_tanh_grad_f64 : gelu_grad_f64);
}

bool nb_ew_gelu_grad_pointwise(bool approximate, nb_dtype dt, nb_pointwise *f)
{
    if (dt != NB_F32 && dt != NB_F64) return false;
    *f = (nb_pointwise){.loop = gelu_grad_loop(approximate, dt), .math = true};
    return true;
}

nb_status nb_ew_gelu_grad(const nb_tensor *x, const nb_tensor *dout, nb_tensor *out, bool approximate,
                          const char *label)
{
    if (dout->dtype != x->dtype || out->dtype != x->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: X is %s, DOut is %s and DX is %s; they must have the same dtype", label,
                        nb_dtype_name(x->dtype), nb_dtype_name(dout->dtype), nb_dtype_name(out->dtype));
    if (x->dtype != NB_F32 && x->dtype != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: does not take %s", label, nb_dtype_name(x->dtype));
    nb_bcast_plan plan;
    const nb_tensor *in[2] = {x, dout};
    nb_status st = nb_bcast_plan_init(&plan, label, 2, in, out);
    if (st) return st;
    nb_bcast_run(&plan, gelu_grad_loop(approximate, x->dtype), NULL, NB_BCAST_GRAIN_MATH);
    return NB_OK;
}
