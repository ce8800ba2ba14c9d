/* CPU kernels of the creation family, and the family's kernel table. */
#include <math.h>
#include <string.h>
#include "../kernels.h"
#include "core/tensor_internal.h"
#include "creation.h"
#include "simd.h"
#include "team.h"

/* Splitting a fill over threads only pays off for large outputs. */
#define PAR_MIN 32768

/* ---- constant fills --------------------------------------------------------- */

#define DEFINE_FILL(T)                                                      \
    typedef struct fill_job_##T {                                           \
        T *p;                                                               \
        T v;                                                                \
    } fill_job_##T;                                                         \
    NB_SIMD_CLONES static void fill_range_##T(void *arg, int64_t lo, int64_t hi) \
    {                                                                       \
        const fill_job_##T *j = arg;                                        \
        T *p = j->p;                                                        \
        const T v = j->v;                                                   \
        for (int64_t i = lo; i < hi; i++) p[i] = v;                         \
    }                                                                       \
    static void fill_##T(T *p, int64_t n, T v)                              \
    {                                                                       \
        fill_job_##T j = {p, v};                                            \
        nb_team_for(n, n >= PAR_MIN, fill_range_##T, &j);                  \
    }
DEFINE_FILL(float)
DEFINE_FILL(double)
DEFINE_FILL(int32_t)
DEFINE_FILL(int64_t)

/* The conversion of `value` goes through nb_store, which never invokes
 * undefined behaviour on out-of-range values (infer rejects those anyway). */
/* Every element of `out` = value, converted to out's dtype (float32,
 * float64, int32, int64, uint8 or bool; NB_ERR_DTYPE naming `label` for
 * others). */
static nb_status fill_tensor(const char *label, nb_tensor *out, double value)
{
    int64_t n = nb_tensor_numel(out);
    void *p = nb_tensor_data(out);
    switch (out->dtype) {
    case NB_F32: {
        float v;
        nb_store(NB_F32, &v, 0, value);
        fill_float(p, n, v);
        return NB_OK;
    }
    case NB_F64: fill_double(p, n, value); return NB_OK;
    case NB_I32: {
        int32_t v;
        nb_store(NB_I32, &v, 0, value);
        fill_int32_t(p, n, v);
        return NB_OK;
    }
    case NB_I64: {
        int64_t v;
        nb_store(NB_I64, &v, 0, value);
        fill_int64_t(p, n, v);
        return NB_OK;
    }
    case NB_U8:
    case NB_BOOL: {
        uint8_t v;
        nb_store(out->dtype, &v, 0, value);
        memset(p, v, (size_t)n);
        return NB_OK;
    }
    default: return nb_error(NB_ERR_DTYPE, "%s: cannot fill a tensor of dtype %s", label, nb_dtype_name(out->dtype));
    }
}

/* fill_constant, fill_constant_batch_size_like: Out (Input only gave a size). */
static nb_status run_fill_constant(const nb_kernel_ctx *k)
{
    const nb_fill_constant_params *p = k->params;
    return fill_tensor(k->label, nb_kout(k, 0, 0), p->value);
}

/* assign_value: element i from the values the program holds. */
static nb_status run_assign_value(const nb_kernel_ctx *k)
{
    const nb_assign_value_params *p = k->params;
    nb_tensor *out = nb_kout(k, 0, 0);
    void *d = nb_tensor_data(out);
    int64_t n = nb_tensor_numel(out);
    if (n != p->n)
        return nb_error(NB_ERR_SHAPE, "%s: %lld values for %lld elements", k->label, (long long)p->n, (long long)n);
    for (int64_t i = 0; i < n; i++) switch (out->dtype) {
        case NB_F32: ((float *)d)[i] = (float)p->fp_values[i]; break;
        case NB_F64: ((double *)d)[i] = p->fp_values[i]; break;
        case NB_I32: ((int32_t *)d)[i] = (int32_t)p->int_values[i]; break;
        case NB_I64: ((int64_t *)d)[i] = p->int_values[i]; break;
        case NB_U8: ((uint8_t *)d)[i] = (uint8_t)p->int_values[i]; break;
        case NB_BOOL: ((uint8_t *)d)[i] = p->int_values[i] != 0; break;
        default: return nb_error(NB_ERR_DTYPE, "%s: cannot hold %s", k->label, nb_dtype_name(out->dtype));
        }
    return NB_OK;
}

static nb_status run_fill_zeros_like(const nb_kernel_ctx *k) { return fill_tensor(k->label, nb_kout(k, 0, 0), 0.0); }
static nb_status run_ones_like(const nb_kernel_ctx *k) { return fill_tensor(k->label, nb_kout(k, 0, 0), 1.0); }

/* out = x, any dtype, same size; out may be x itself. */
static nb_status assign_tensor(const nb_tensor *x, nb_tensor *out)
{
    size_t bytes = (size_t)nb_tensor_numel(x) * nb_dtype_size(x->dtype);
    /* In place (Out is X) there is nothing to move; memmove covers any
     * other overlap of two views of one storage. */
    if (bytes && nb_tensor_data(out) != nb_tensor_data(x)) memmove(nb_tensor_data(out), nb_tensor_data(x), bytes);
    return NB_OK;
}

static nb_status run_assign(const nb_kernel_ctx *k) { return assign_tensor(nb_kin(k, 0, 0), nb_kout(k, 0, 0)); }

/* ---- random initialisers ---------------------------------------------------- */

/* The generator is counter based, so element i can draw from its own
 * positions (base + i*stride ...) without touching a shared state. */
static inline nb_rng rng_at(const nb_rng *base, uint64_t pos)
{
    nb_rng s = {base->key, base->counter + pos};
    return s;
}

static nb_status no_rng(const nb_kernel_ctx *k)
{
    return nb_error(NB_ERR_STATE, "%s: no random generator was given to the kernel", k->label);
}

static nb_status random_dtype_error(const nb_kernel_ctx *k, nb_dtype dt)
{
    return nb_error(NB_ERR_DTYPE, "%s: random values are float32 or float64, not %s", k->label, nb_dtype_name(dt));
}

/* lo + (hi - lo) * u with u in [0, 1) can still round up to hi (or, in
 * float32, land just outside [lo, hi)); clamping to the representable
 * values inside the interval keeps the documented half-open range. */
typedef struct uniform_f32_job {
    float *p;
    const nb_rng *base;
    double lo, span;
    float top, bottom;
} uniform_f32_job;

static void uniform_f32_range(void *arg, int64_t i0, int64_t i1)
{
    const uniform_f32_job *j = arg;
    float *p = j->p;
    const double lo = j->lo, span = j->span;
    const float top = j->top, bottom = j->bottom;
    for (int64_t i = i0; i < i1; i++) {
        nb_rng s = rng_at(j->base, (uint64_t)i);
        float v = (float)(lo + span * nb_rng_uniform(&s));
        p[i] = v > top ? top : v < bottom ? bottom : v;
    }
}

static void uniform_f32(float *p, int64_t n, const nb_rng *base, double lo, double hi)
{
    double span = hi - lo;
    float top = (float)hi, bottom = (float)lo;
    while (hi > lo && (double)top >= hi) top = nextafterf(top, -INFINITY);
    while (hi > lo && (double)bottom < lo) bottom = nextafterf(bottom, INFINITY);
    if (!(hi > lo) || bottom > top) top = bottom = (float)lo;
    uniform_f32_job j = {p, base, lo, span, top, bottom};
    nb_team_for(n, n >= PAR_MIN, uniform_f32_range, &j);
}

typedef struct uniform_f64_job {
    double *p;
    const nb_rng *base;
    double lo, span, top;
} uniform_f64_job;

static void uniform_f64_range(void *arg, int64_t i0, int64_t i1)
{
    const uniform_f64_job *j = arg;
    double *p = j->p;
    const double lo = j->lo, span = j->span, top = j->top;
    for (int64_t i = i0; i < i1; i++) {
        nb_rng s = rng_at(j->base, (uint64_t)i);
        double v = lo + span * nb_rng_uniform(&s);
        p[i] = v > top ? top : v;
    }
}

static void uniform_f64(double *p, int64_t n, const nb_rng *base, double lo, double hi)
{
    double span = hi - lo, top = hi > lo ? nextafter(hi, -INFINITY) : lo;
    uniform_f64_job j = {p, base, lo, span, top};
    nb_team_for(n, n >= PAR_MIN, uniform_f64_range, &j);
}

/* uniform_random, and the other random kernels below: Out drawn from
 * k->rng. Element i reads generator positions that depend only on i and the
 * generator's state on entry, so the values do not depend on the number of
 * threads; on return k->rng has moved past every position used. */
static nb_status run_uniform_random(const nb_kernel_ctx *k)
{
    const nb_uniform_random_params *p = k->params;
    nb_tensor *out = nb_kout(k, 0, 0);
    int64_t n = nb_tensor_numel(out);
    double lo = p->min, hi = p->max;
    if (!k->rng) return no_rng(k);
    switch (out->dtype) {
    case NB_F32: uniform_f32(nb_tensor_data(out), n, k->rng, lo, hi); break;
    case NB_F64: uniform_f64(nb_tensor_data(out), n, k->rng, lo, hi); break;
    default: return random_dtype_error(k, out->dtype);
    }
    k->rng->counter += (uint64_t)n;
    return NB_OK;
}

/* nb_rng_normal consumes two positions (Box-Muller). */
#define NORMAL_POSITIONS 2

/* Rejection sampling needs a variable number of draws. Each element gets a
 * fixed budget of TRUNC_TRIES normals: a draw lands within 2 std with
 * probability 0.954, so running out (p ~ 0.046^32, about 1e-43) never
 * happens in practice, and the budget keeps elements independent of one
 * another, hence parallel and reproducible. */
#define TRUNC_TRIES 32
#define TRUNC_BOUND 2.0

static inline double truncated_normal(nb_rng s)
{
    for (int k = 0; k < TRUNC_TRIES; k++) {
        double z = nb_rng_normal(&s);
        if (fabs(z) <= TRUNC_BOUND) return z;
    }
    return 0.0;
}

/* The job of the normal initialisers below: element i draws from positions
 * i * stride on of base, stride NORMAL_POSITIONS (plain) or that times
 * TRUNC_TRIES (truncated). */
typedef struct normal_job {
    void *p;
    const nb_rng *base;
    double mean, std;
    bool truncated;
} normal_job;

static uint64_t normal_stride(bool truncated) { return NORMAL_POSITIONS * (truncated ? TRUNC_TRIES : 1); }

#define DEFINE_NORMAL(T)                                                                       \
    static void normal_range_##T(void *arg, int64_t lo, int64_t hi)                            \
    {                                                                                          \
        const normal_job *j = arg;                                                             \
        T *p = j->p;                                                                           \
        const double mean = j->mean, std = j->std;                                             \
        const uint64_t stride = normal_stride(j->truncated);                                   \
        for (int64_t i = lo; i < hi; i++) {                                                    \
            nb_rng s = rng_at(j->base, (uint64_t)i * stride);                                  \
            p[i] = (T)(mean + std * (j->truncated ? truncated_normal(s) : nb_rng_normal(&s))); \
        }                                                                                      \
    }
DEFINE_NORMAL(float)
DEFINE_NORMAL(double)

static nb_status run_normal(const nb_kernel_ctx *k, bool truncated)
{
    const nb_gaussian_random_params *p = k->params;
    nb_tensor *out = nb_kout(k, 0, 0);
    int64_t n = nb_tensor_numel(out);
    if (!k->rng) return no_rng(k);
    normal_job j = {nb_tensor_data(out), k->rng, p->mean, p->std, truncated};
    switch (out->dtype) {
    case NB_F32: nb_team_for(n, n >= PAR_MIN, normal_range_float, &j); break;
    case NB_F64: nb_team_for(n, n >= PAR_MIN, normal_range_double, &j); break;
    default: return random_dtype_error(k, out->dtype);
    }
    k->rng->counter += (uint64_t)n * normal_stride(truncated);
    return NB_OK;
}

static nb_status run_gaussian_random(const nb_kernel_ctx *k) { return run_normal(k, false); }

static nb_status run_truncated_gaussian_random(const nb_kernel_ctx *k) { return run_normal(k, true); }

/* ---- increment --------------------------------------------------------------- */

/* Out = X + step for a one-element X (Out may be X). */
static nb_status run_increment(const nb_kernel_ctx *k)
{
    const char *label = k->label;
    const nb_tensor *x = nb_kin(k, 0, 0);
    nb_tensor *out = nb_kout(k, 0, 0);
    double step = ((const nb_increment_params *)k->params)->step;
    if (nb_tensor_numel(x) != 1 || nb_tensor_numel(out) != 1)
        return nb_error(NB_ERR_SHAPE, "%s: X must hold exactly one element, it holds %lld", label,
                        (long long)nb_tensor_numel(x));
    const void *xp = nb_tensor_data(x);
    void *op = nb_tensor_data(out);
    /* Read before write: Out is usually X itself. */
    switch (x->dtype) {
    case NB_F32: *(float *)op = *(const float *)xp + (float)step; return NB_OK;
    case NB_F64: *(double *)op = *(const double *)xp + step; return NB_OK;
    case NB_I32: {
        int32_t v = *(const int32_t *)xp, s, r;
        nb_store(NB_I32, &s, 0, step);
        if (__builtin_add_overflow(v, s, &r))
            return nb_error(NB_ERR_ARG, "%s: int32 counter %d + %d overflows", label, (int)v, (int)s);
        *(int32_t *)op = r;
        return NB_OK;
    }
    case NB_I64: {
        int64_t v = *(const int64_t *)xp, s, r;
        nb_store(NB_I64, &s, 0, step);
        if (__builtin_add_overflow(v, s, &r))
            return nb_error(NB_ERR_ARG, "%s: int64 counter %lld + %lld overflows", label, (long long)v, (long long)s);
        *(int64_t *)op = r;
        return NB_OK;
    }
    default:
        return nb_error(NB_ERR_DTYPE, "%s: X is %s; increment takes float32, float64, int32 or int64", label,
                        nb_dtype_name(x->dtype));
    }
}

/* ---- table ---------------------------------------------------------------------- */

#define CPU_KERNEL(name, dts) \
    static const nb_kernel_def k_##name = {.op = #name, .device = NB_DEVICE_CPU, .dtypes = (dts), .provider = "nabla", \
                                           .run = run_##name}

/* The fills and assign take every dtype (fill reports the ones it cannot
 * write); fill_constant is typed by its output, fill_constant_batch_size_like
 * by its Input, which only gives a size. Random values are float (as
 * inference demands); increment takes what inference takes. */
CPU_KERNEL(fill_constant, NB_DT_ALL);
static const nb_kernel_def k_fill_constant_batch_size_like = {.op = "fill_constant_batch_size_like",
                                                              .device = NB_DEVICE_CPU,
                                                              .dtypes = NB_DT_ALL,
                                                              .provider = "nabla",
                                                              .run = run_fill_constant};
CPU_KERNEL(fill_zeros_like, NB_DT_ALL);
CPU_KERNEL(assign_value, NB_DT_ALL);
CPU_KERNEL(ones_like, NB_DT_ALL);
CPU_KERNEL(assign, NB_DT_ALL);
CPU_KERNEL(uniform_random, NB_DT_FLOAT);
CPU_KERNEL(gaussian_random, NB_DT_FLOAT);
CPU_KERNEL(truncated_gaussian_random, NB_DT_FLOAT);
CPU_KERNEL(increment, NB_DT_NUMERIC);

const nb_kernel_def *const nb_cpu_kernels_creation[] = {
    &k_fill_constant,
    &k_assign_value,
    &k_fill_constant_batch_size_like,
    &k_fill_zeros_like,
    &k_ones_like,
    &k_assign,
    &k_uniform_random,
    &k_gaussian_random,
    &k_truncated_gaussian_random,
    &k_increment,
    NULL,
};
