/* CPU kernels of the reduction family.
 *
 * Every reduction is brought to the shape [outer, R, inner]: size-1 dims
 * are dropped and neighbouring dims that are both reduced or both kept are
 * merged, which leaves one reduced run in the common cases (a suffix, a
 * prefix, one middle axis); scattered reduced runs are reduced one after
 * the other (see reduce_groups). With inner == 1 each output is a reduction over a contiguous run,
 * done with eight partial accumulators so the compiler can vectorise it;
 * with inner > 1 whole rows of `inner` values are folded into a row of
 * accumulators, which is unit-stride as well.
 *
 * Floating sums and products accumulate in double (as the partial sums do,
 * this keeps float32 means of large tensors accurate); integer ones in
 * uint64_t, so that overflow wraps as it does in NumPy instead of being
 * undefined behaviour. */
#include <math.h>
#include "../kernels.h"
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "reduce.h"
#include "simd.h"
#include "team.h"

/* Loops over at least this many elements are split among threads. */
#define RED_PAR_MIN 32768
/* Row chunk for inner > 1: accumulators live on the stack. */
#define RED_CHUNK 256
/* Outputs a column reduction keeps in registers at once: 32 double
 * accumulators are eight AVX2 registers. With all 256 of a chunk, each
 * row's pass loaded and stored every accumulator, and the column sums of a
 * 1024 x 384 bias gradient took 60-82 us against 43-45 (Zen 3, one thread). */
#define RED_REG 32

typedef enum red_kind { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_LSE, RED_KINDS } red_kind;

typedef void (*red_fn)(const void *x, void *out, int64_t outer, int64_t R, int64_t inner);

/* A reduction over R rows `inner` apart, split into chunks of at most
 * RED_CHUNK neighbouring outputs of one outer slice (chunk t: slice o,
 * outputs [i0, i0 + n)), which every typed kernel below shares out among
 * the team the same way. */
typedef struct red_job {
    const void *x;
    void *out;
    int64_t R, inner, nch;
} red_job;

static inline void red_chunk(const red_job *j, int64_t t, int64_t *o, int64_t *i0, int64_t *n)
{
    *o = t / j->nch;
    *i0 = (t % j->nch) * RED_CHUNK;
    *n = j->inner - *i0 < RED_CHUNK ? j->inner - *i0 : RED_CHUNK;
}

/* fn over every chunk, in parallel from par_min elements. */
static void red_run_chunks(const void *x, void *out, int64_t outer, int64_t R, int64_t inner, int64_t par_min,
                           nb_range_fn fn)
{
    red_job j = {x, out, R, inner, (inner + RED_CHUNK - 1) / RED_CHUNK};
    nb_team_for(outer * j.nch, outer * j.nch > 1 && outer * R * inner >= par_min, fn, &j);
}

/* ---- axes ------------------------------------------------------------------ */

/* "[0, 2, -1]", for messages (the list is cut short with "..." when long). */
static const char *axes_str(char *buf, size_t size, int n, const int64_t *axes)
{
    size_t u = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < n && u + 24 < size; k++)
        u += (size_t)snprintf(buf + u, size - u, k ? ", %lld" : "%lld", (long long)axes[k]);
    snprintf(buf + u, size - u, u + 24 < size ? "]" : "...]");
    return buf;
}

nb_status nb_reduce_axes_mask(const char *label, int n, const int64_t *axes, int ndim, const int64_t *shape,
                              bool mask[NB_MAX_DIMS])
{
    char xs[NB_SHAPE_STR_MAX], as[NB_SHAPE_STR_MAX];
    bool all = n == 0;
    for (int d = 0; d < NB_MAX_DIMS; d++) mask[d] = all && d < ndim;
    if (all) return NB_OK;
    for (int k = 0; k < n; k++) {
        int64_t a = axes[k];
        if (a < -ndim || a >= ndim)
            return nb_error(NB_ERR_ARG, "%s: axis %lld is out of range for X of shape %s (rank %d)", label,
                            (long long)a, nb_shape_str(xs, sizeof xs, ndim, shape), ndim);
        if (a < 0) a += ndim;
        if (mask[a])
            return nb_error(NB_ERR_ARG, "%s: axes %s name dim %lld twice (X has shape %s)", label,
                            axes_str(as, sizeof as, n, axes), (long long)a, nb_shape_str(xs, sizeof xs, ndim, shape));
        mask[a] = true;
    }
    return NB_OK;
}

bool nb_sum_to_mask(int x_ndim, const int64_t *x_shape, int like_ndim, const int64_t *like_shape,
                    bool mask[NB_MAX_DIMS])
{
    if (like_ndim > x_ndim) return false;
    int off = x_ndim - like_ndim;
    for (int d = 0; d < NB_MAX_DIMS; d++) mask[d] = false;
    for (int d = 0; d < x_ndim; d++) {
        if (d < off) {
            mask[d] = true;
            continue;
        }
        int64_t l = like_shape[d - off], x = x_shape[d];
        if (l == x) continue;
        if (l == 1) mask[d] = true;            /* Like was broadcast along d */
        else if (l == -1 || x == -1) continue; /* unknown until run time */
        else return false;
    }
    return true;
}

/* ---- typed reduction loops ----------------------------------------------------- */

/* Stamps out red_<kind>_<suffix>. A: accumulator type; INIT(p): the starting
 * value given a pointer to the first element; STEP(a, v) folds v into a;
 * FIN(a): the result (may use R). STEP must also merge two partial
 * accumulators. NAME_row makes one output from a contiguous run of R (the
 * loops live in functions of their own so that they get the AVX2 copy). */
#define DEF_RED(NAME, T, A, INIT, STEP, FIN)                                                       \
    NB_SIMD_CLONES static T NAME##_row(const T *restrict p, int64_t R)                             \
    {                                                                                              \
        A s[8];                                                                                    \
        for (int u = 0; u < 8; u++) s[u] = INIT(p);                                                \
        int64_t r = 0;                                                                             \
        for (; r + 8 <= R; r += 8)                                                                 \
            for (int u = 0; u < 8; u++) STEP(s[u], p[r + u]);                                      \
        for (; r < R; r++) STEP(s[0], p[r]);                                                       \
        STEP(s[0], s[4]);                                                                          \
        STEP(s[1], s[5]);                                                                          \
        STEP(s[2], s[6]);                                                                          \
        STEP(s[3], s[7]);                                                                          \
        STEP(s[0], s[2]);                                                                          \
        STEP(s[1], s[3]);                                                                          \
        STEP(s[0], s[1]);                                                                          \
        return FIN(s[0]);                                                                          \
    }                                                                                              \
    /* n (at most RED_CHUNK) neighbouring outputs, each over R rows inner apart: \
     * RED_REG at a time, whose accumulators stay in vector registers, and the   \
     * rest together. */                                                         \
    NB_SIMD_CLONES static void NAME##_cols(const T *restrict base, int64_t R, int64_t inner,        \
                                           int64_t n, T *restrict o_row)                           \
    {                                                                                              \
        int64_t i0 = 0;                                                                            \
        for (; i0 + RED_REG <= n; i0 += RED_REG) {                                                 \
            A acc[RED_REG];                                                                        \
            for (int i = 0; i < RED_REG; i++) acc[i] = INIT(base + i0 + i);                        \
            for (int64_t r = 0; r < R; r++) {                                                      \
                const T *restrict row = base + r * inner + i0;                                     \
                for (int i = 0; i < RED_REG; i++) STEP(acc[i], row[i]);                            \
            }                                                                                      \
            for (int i = 0; i < RED_REG; i++) o_row[i0 + i] = FIN(acc[i]);                         \
        }                                                                                          \
        A acc[RED_REG];                                                                            \
        for (int64_t i = i0; i < n; i++) acc[i - i0] = INIT(base + i);                             \
        for (int64_t r = 0; r < R && i0 < n; r++) {                                                \
            const T *restrict row = base + r * inner;                                              \
            for (int64_t i = i0; i < n; i++) STEP(acc[i - i0], row[i]);                            \
        }                                                                                          \
        for (int64_t i = i0; i < n; i++) o_row[i] = FIN(acc[i - i0]);                              \
    }                                                                                              \
    /* Outputs [lo, hi) when inner == 1. */                                                        \
    static void NAME##_row_range(void *arg, int64_t lo, int64_t hi)                                \
    {                                                                                              \
        const red_job *j = arg;                                                                    \
        const T *restrict x = j->x;                                                                \
        T *restrict out = j->out;                                                                  \
        for (int64_t o = lo; o < hi; o++) out[o] = NAME##_row(x + o * j->R, j->R);                 \
    }                                                                                              \
    /* Chunks [lo, hi) when inner > 1. */                                                          \
    static void NAME##_chunk_range(void *arg, int64_t lo, int64_t hi)                              \
    {                                                                                              \
        const red_job *j = arg;                                                                    \
        for (int64_t t = lo, o, i0, n; t < hi; t++) {                                              \
            red_chunk(j, t, &o, &i0, &n);                                                          \
            NAME##_cols((const T *)j->x + o * j->R * j->inner + i0, j->R, j->inner, n,             \
                        (T *)j->out + o * j->inner + i0);                                          \
        }                                                                                          \
    }                                                                                              \
    static void NAME(const void *xv, void *ov, int64_t outer, int64_t R, int64_t inner)            \
    {                                                                                              \
        if (inner == 1) {                                                                          \
            red_job j = {xv, ov, R, 1, 1};                                                         \
            nb_team_for(outer, outer > 1 && outer * R >= RED_PAR_MIN, NAME##_row_range, &j);        \
            return;                                                                                \
        }                                                                                          \
        red_run_chunks(xv, ov, outer, R, inner, RED_PAR_MIN, NAME##_chunk_range);                  \
    }

#define INIT_ZERO(p) 0
#define INIT_ONE(p) 1
#define INIT_FIRST(p) (*(p))
#define STEP_ADD(a, v) ((a) += (v))
#define STEP_MUL(a, v) ((a) *= (v))
/* NaN wins and stays: once a is NaN, no comparison with it is true. */
#define STEP_MAX(a, v) ((a) = ((v) > (a) || (v) != (v)) ? (v) : (a))
#define STEP_MIN(a, v) ((a) = ((v) < (a) || (v) != (v)) ? (v) : (a))
#define STEP_IMAX(a, v) ((a) = (v) > (a) ? (v) : (a))
#define STEP_IMIN(a, v) ((a) = (v) < (a) ? (v) : (a))
/* Integer sums and products in uint64_t: wrapping, never undefined. */
#define STEP_UADD(a, v) ((a) += (uint64_t)(int64_t)(v))
#define STEP_UMUL(a, v) ((a) *= (uint64_t)(int64_t)(v))
#define FIN_F32(a) ((float)(a))
#define FIN_F64(a) ((double)(a))
#define FIN_I32(a) ((int32_t)(int64_t)(a))
#define FIN_I64(a) ((int64_t)(a))
#define FIN_MEAN_F32(a) ((float)((a) / (double)R))
#define FIN_MEAN_F64(a) ((a) / (double)R)

DEF_RED(red_sum_f32, float, double, INIT_ZERO, STEP_ADD, FIN_F32)
DEF_RED(red_sum_f64, double, double, INIT_ZERO, STEP_ADD, FIN_F64)
DEF_RED(red_sum_i32, int32_t, uint64_t, INIT_ZERO, STEP_UADD, FIN_I32)
DEF_RED(red_sum_i64, int64_t, uint64_t, INIT_ZERO, STEP_UADD, FIN_I64)
DEF_RED(red_mean_f32, float, double, INIT_ZERO, STEP_ADD, FIN_MEAN_F32)
DEF_RED(red_mean_f64, double, double, INIT_ZERO, STEP_ADD, FIN_MEAN_F64)
DEF_RED(red_prod_f32, float, double, INIT_ONE, STEP_MUL, FIN_F32)
DEF_RED(red_prod_f64, double, double, INIT_ONE, STEP_MUL, FIN_F64)
DEF_RED(red_prod_i32, int32_t, uint64_t, INIT_ONE, STEP_UMUL, FIN_I32)
DEF_RED(red_prod_i64, int64_t, uint64_t, INIT_ONE, STEP_UMUL, FIN_I64)
DEF_RED(red_max_f32, float, float, INIT_FIRST, STEP_MAX, FIN_F32)
DEF_RED(red_max_f64, double, double, INIT_FIRST, STEP_MAX, FIN_F64)
DEF_RED(red_max_i32, int32_t, int32_t, INIT_FIRST, STEP_IMAX, FIN_I32)
DEF_RED(red_max_i64, int64_t, int64_t, INIT_FIRST, STEP_IMAX, FIN_I64)
DEF_RED(red_min_f32, float, float, INIT_FIRST, STEP_MIN, FIN_F32)
DEF_RED(red_min_f64, double, double, INIT_FIRST, STEP_MIN, FIN_F64)
DEF_RED(red_min_i32, int32_t, int32_t, INIT_FIRST, STEP_IMIN, FIN_I32)
DEF_RED(red_min_i64, int64_t, int64_t, INIT_FIRST, STEP_IMIN, FIN_I64)

/* log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum, so that
 * no exp overflows. When m is infinite or NaN the answer is m itself (all
 * -inf, some +inf, or a NaN), and the shifted form would give NaN. */
#define DEF_LSE(NAME, T, EXP)                                                                      \
    NB_SIMD_CLONES static void NAME##_chunk_range(void *arg, int64_t lo, int64_t hi)               \
    {                                                                                              \
        const red_job *j = arg;                                                                    \
        const T *restrict x = j->x;                                                                \
        T *restrict out = j->out;                                                                  \
        const int64_t R = j->R, inner = j->inner;                                                  \
        for (int64_t t = lo, o, i0, n; t < hi; t++) {                                              \
            red_chunk(j, t, &o, &i0, &n);                                                          \
            const T *base = x + o * R * inner + i0;                                                \
            T m[RED_CHUNK];                                                                        \
            double s[RED_CHUNK];                                                                   \
            for (int64_t i = 0; i < n; i++) m[i] = base[i], s[i] = 0;                              \
            for (int64_t r = 0; r < R; r++)                                                        \
                for (int64_t i = 0; i < n; i++) STEP_MAX(m[i], base[r * inner + i]);               \
            for (int64_t r = 0; r < R; r++)                                                        \
                for (int64_t i = 0; i < n; i++) s[i] += EXP(base[r * inner + i] - m[i]);           \
            T *o_row = out + o * inner + i0;                                                       \
            for (int64_t i = 0; i < n; i++)                                                        \
                o_row[i] = isfinite(m[i]) ? (T)(m[i] + log(s[i])) : m[i];                          \
        }                                                                                          \
    }                                                                                              \
    static void NAME(const void *xv, void *ov, int64_t outer, int64_t R, int64_t inner)            \
    {                                                                                              \
        red_run_chunks(xv, ov, outer, R, inner, RED_PAR_MIN / 8, NAME##_chunk_range);              \
    }

DEF_LSE(red_lse_f32, float, expf)
DEF_LSE(red_lse_f64, double, exp)

/* Indexed by kind, then dtype (f32, f64, i32, i64). NULL: not supported. */
static const red_fn red_table[RED_KINDS][4] = {
    [RED_SUM] = {red_sum_f32, red_sum_f64, red_sum_i32, red_sum_i64},
    [RED_MEAN] = {red_mean_f32, red_mean_f64, NULL, NULL},
    [RED_MAX] = {red_max_f32, red_max_f64, red_max_i32, red_max_i64},
    [RED_MIN] = {red_min_f32, red_min_f64, red_min_i32, red_min_i64},
    [RED_PROD] = {red_prod_f32, red_prod_f64, red_prod_i32, red_prod_i64},
    [RED_LSE] = {red_lse_f32, red_lse_f64, NULL, NULL},
};

static int dtype_column(nb_dtype dt)
{
    switch (dt) {
    case NB_F32: return 0;
    case NB_F64: return 1;
    case NB_I32: return 2;
    case NB_I64: return 3;
    default: return -1;
    }
}

/* What a reduction over nothing gives: NumPy's identities, NaN for a mean. */
static nb_status fill_empty(const char *label, red_kind kind, const nb_tensor *x, nb_tensor *out)
{
    double v;
    switch (kind) {
    case RED_SUM: v = 0; break;
    case RED_PROD: v = 1; break;
    case RED_MEAN: v = NAN; break;
    case RED_LSE: v = -INFINITY; break;
    default: {
        char xs[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: cannot take the %s of an empty set (X has shape %s)", label,
                        kind == RED_MAX ? "maximum" : "minimum", nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    }
    }
    int64_t n = nb_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) nb_tensor_set(out, i, v);
    return NB_OK;
}

/* Reduces x, seen as groups of dims (gsize, gred: reduced or kept, kept and
 * reduced alternating), into out. One reduced group is a single pass. With
 * several, the innermost reduced group goes first, into a buffer that has
 * only that group removed, and the rest recurses on it: every kind here is
 * a reduction of reductions (a mean of equal-sized means is the mean, a
 * logsumexp of logsumexps the logsumexp), and the buffer is smaller than the
 * transposed copy of X that the alternative would need. Returns -1 if the
 * buffer cannot be allocated. */
static int reduce_groups(red_fn fn, const void *x, void *out, size_t esize, int ng, const int64_t *gsize,
                         const bool *gred)
{
    int last = -1, nred = 0;
    for (int g = 0; g < ng; g++)
        if (gred[g]) last = g, nred++;
    int64_t outer = 1, R = 1, inner = 1;
    for (int g = 0; g < ng; g++) {
        if (g < last) outer *= gsize[g];
        else if (g == last) R = gsize[g];
        else inner *= gsize[g];
    }
    if (nred <= 1) {
        fn(x, out, outer, R, inner); /* with nothing reduced, a copy */
        return 0;
    }
    void *part = nb_malloc((size_t)(outer * inner) * esize);
    if (!part) return -1;
    fn(x, part, outer, R, inner);
    /* Drop the group just reduced; the kept groups on either side of it
     * then touch, which the product-based split above does not mind. */
    int64_t rsize[NB_MAX_DIMS];
    bool rred[NB_MAX_DIMS];
    int n = 0;
    for (int g = 0; g < ng; g++)
        if (g != last) rsize[n] = gsize[g], rred[n] = gred[g], n++;
    int rc = reduce_groups(fn, part, out, esize, n, rsize, rred);
    nb_free(part);
    return rc;
}

/* Reduces contiguous x over the dims in mask into out, whose elements are
 * the kept dims in order (its own shape may add or drop 1s). */
static nb_status reduce_masked(const char *label, red_kind kind, nb_tensor *x, const bool *mask, nb_tensor *out)
{
    int col = dtype_column(x->dtype);
    red_fn fn = col >= 0 ? red_table[kind][col] : NULL;
    if (!fn || out->dtype != x->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for X of dtype %s", label, nb_dtype_name(x->dtype));

    /* Merge neighbouring dims that are both kept or both reduced; dims of
     * size 1 fit either group and are dropped. */
    int64_t gsize[NB_MAX_DIMS];
    bool gred[NB_MAX_DIMS];
    int ng = 0;
    int64_t R = 1, O = 1;
    for (int d = 0; d < x->ndim; d++) {
        int64_t n = x->shape[d];
        if (mask[d]) R *= n;
        else O *= n;
        if (n == 1) continue;
        if (ng && gred[ng - 1] == mask[d]) {
            gsize[ng - 1] *= n;
        } else {
            gsize[ng] = n;
            gred[ng] = mask[d];
            ng++;
        }
    }
    if (O == 0) return NB_OK;
    if (R == 0) return fill_empty(label, kind, x, out);
    /* An output written over its own input: only possible when nothing is
     * reduced, and every reduction of one element is that element. */
    if (nb_tensor_data(out) == nb_tensor_data(x)) return NB_OK;

    if (reduce_groups(fn, nb_tensor_data(x), nb_tensor_data(out), nb_dtype_size(x->dtype), ng, gsize, gred))
        return nb_error(NB_ERR_NOMEM, "%s: out of memory for a partial reduction", label);
    return NB_OK;
}

static nb_status reduce_kernel(const nb_kernel_ctx *k, red_kind kind)
{
    const nb_reduce_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0);
    bool mask[NB_MAX_DIMS];
    nb_status st = nb_reduce_axes_mask(k->label, p->n_axes, p->axes, x->ndim, x->shape, mask);
    if (st) return st;
    return reduce_masked(k->label, kind, x, mask, nb_kout(k, 0, 0));
}

static nb_status run_reduce_sum(const nb_kernel_ctx *k) { return reduce_kernel(k, RED_SUM); }
static nb_status run_reduce_mean(const nb_kernel_ctx *k) { return reduce_kernel(k, RED_MEAN); }
static nb_status run_reduce_max(const nb_kernel_ctx *k) { return reduce_kernel(k, RED_MAX); }
static nb_status run_reduce_min(const nb_kernel_ctx *k) { return reduce_kernel(k, RED_MIN); }
static nb_status run_reduce_prod(const nb_kernel_ctx *k) { return reduce_kernel(k, RED_PROD); }
static nb_status run_logsumexp(const nb_kernel_ctx *k) { return reduce_kernel(k, RED_LSE); }

static nb_status run_sum_to(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *like = nb_kin(k, 1, 0);
    bool mask[NB_MAX_DIMS];
    if (!nb_sum_to_mask(x->ndim, x->shape, like->ndim, like->shape, mask)) {
        char xs[NB_SHAPE_STR_MAX], ls[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: Like has shape %s, which does not broadcast to X's shape %s", k->label,
                        nb_shape_str(ls, sizeof ls, like->ndim, like->shape),
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    }
    return reduce_masked(k->label, RED_SUM, x, mask, nb_kout(k, 0, 0));
}

/* ---- argmax / argmin ------------------------------------------------------------ */

/* BETTER(v, best): v replaces the best so far. Strict, so the first of
 * equal values wins; for floats the first NaN wins, as in NumPy. */
#define DEF_ARG(NAME, T, BETTER)                                                                   \
    NB_SIMD_CLONES static void NAME##_chunk_range(void *arg, int64_t lo, int64_t hi)               \
    {                                                                                              \
        const red_job *j = arg;                                                                    \
        const T *restrict x = j->x;                                                                \
        int64_t *restrict out = j->out;                                                            \
        const int64_t R = j->R, inner = j->inner;                                                  \
        for (int64_t t = lo, o, i0, n; t < hi; t++) {                                              \
            red_chunk(j, t, &o, &i0, &n);                                                          \
            const T *base = x + o * R * inner + i0;                                                \
            int64_t *restrict idx = out + o * inner + i0;                                          \
            T best[RED_CHUNK];                                                                     \
            for (int64_t i = 0; i < n; i++) best[i] = base[i], idx[i] = 0;                         \
            for (int64_t r = 1; r < R; r++) {                                                      \
                const T *row = base + r * inner;                                                   \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    T v = row[i];                                                                  \
                    if (BETTER(v, best[i])) best[i] = v, idx[i] = r;                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void NAME(const void *xv, int64_t *out, int64_t outer, int64_t R, int64_t inner)        \
    {                                                                                              \
        red_run_chunks(xv, out, outer, R, inner, RED_PAR_MIN, NAME##_chunk_range);                 \
    }

#define BETTER_FMAX(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define BETTER_FMIN(v, b) ((v) < (b) || ((v) != (v) && (b) == (b)))
#define BETTER_IMAX(v, b) ((v) > (b))
#define BETTER_IMIN(v, b) ((v) < (b))
/* select_last: a later equal value wins too. */
#define LATER_FMAX(v, b) ((v) >= (b) || ((v) != (v) && (b) == (b)))
#define LATER_FMIN(v, b) ((v) <= (b) || ((v) != (v) && (b) == (b)))
#define LATER_IMAX(v, b) ((v) >= (b))
#define LATER_IMIN(v, b) ((v) <= (b))

DEF_ARG(argmax_f32, float, BETTER_FMAX)
DEF_ARG(argmax_f64, double, BETTER_FMAX)
DEF_ARG(argmax_i32, int32_t, BETTER_IMAX)
DEF_ARG(argmax_i64, int64_t, BETTER_IMAX)
DEF_ARG(argmin_f32, float, BETTER_FMIN)
DEF_ARG(argmin_f64, double, BETTER_FMIN)
DEF_ARG(argmin_i32, int32_t, BETTER_IMIN)
DEF_ARG(argmin_i64, int64_t, BETTER_IMIN)
DEF_ARG(argmax_last_f32, float, LATER_FMAX)
DEF_ARG(argmax_last_f64, double, LATER_FMAX)
DEF_ARG(argmax_last_i32, int32_t, LATER_IMAX)
DEF_ARG(argmax_last_i64, int64_t, LATER_IMAX)
DEF_ARG(argmin_last_f32, float, LATER_FMIN)
DEF_ARG(argmin_last_f64, double, LATER_FMIN)
DEF_ARG(argmin_last_i32, int32_t, LATER_IMIN)
DEF_ARG(argmin_last_i64, int64_t, LATER_IMIN)

typedef void (*arg_fn)(const void *x, int64_t *out, int64_t outer, int64_t R, int64_t inner);
static const arg_fn arg_table[2][2][4] = {
    {{argmax_f32, argmax_f64, argmax_i32, argmax_i64}, {argmin_f32, argmin_f64, argmin_i32, argmin_i64}},
    {{argmax_last_f32, argmax_last_f64, argmax_last_i32, argmax_last_i64},
     {argmin_last_f32, argmin_last_f64, argmin_last_i32, argmin_last_i64}},
};

static nb_status arg_kernel(const nb_kernel_ctx *k, bool is_min)
{
    nb_tensor *x = nb_kin(k, 0, 0), *out = nb_kout(k, 0, 0);
    char xs[NB_SHAPE_STR_MAX];
    int col = dtype_column(x->dtype);
    if (col < 0 || out->dtype != NB_I64)
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for X of dtype %s", k->label, nb_dtype_name(x->dtype));
    const nb_arg_params *p = k->params;
    int64_t axis = p->axis;
    /* A 0-d X is one element: its arg-reduction is index 0. */
    int nd = x->ndim ? x->ndim : 1;
    if (axis < -nd || axis >= nd)
        return nb_error(NB_ERR_ARG, "%s: axis %lld is out of range for X of shape %s", k->label, (long long)axis,
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
    if (axis < 0) axis += nd;
    int64_t outer = 1, R = 1, inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < axis) outer *= x->shape[d];
        else if (d == axis) R = x->shape[d];
        else inner *= x->shape[d];
    }
    if (outer * inner == 0) return NB_OK;
    if (R == 0)
        return nb_error(NB_ERR_SHAPE, "%s: X has shape %s: axis %lld is empty, so there is no %s", k->label,
                        nb_shape_str(xs, sizeof xs, x->ndim, x->shape), (long long)axis,
                        is_min ? "minimum" : "maximum");
    arg_table[p->last][is_min][col](nb_tensor_data(x), nb_tensor_data(out), outer, R, inner);
    return NB_OK;
}

static nb_status run_argmax(const nb_kernel_ctx *k) { return arg_kernel(k, false); }
static nb_status run_argmin(const nb_kernel_ctx *k) { return arg_kernel(k, true); }

/* ---- sum of several tensors -------------------------------------------------------- */

/* Out may be one of the inputs (in-place accumulation of gradients), so a
 * block of every input is read before that block of Out is written. */
#define SUMN_BLOCK 1024
#define DEF_SUMN(NAME, T, ADD)                                                                     \
    typedef struct NAME##_job {                                                                    \
        int n_in;                                                                                  \
        nb_tensor *const *xs;                                                                      \
        T *out;                                                                                    \
        int64_t numel;                                                                             \
    } NAME##_job;                                                                                  \
    /* Blocks [lo, hi) of SUMN_BLOCK elements. */                                                  \
    NB_SIMD_CLONES static void NAME##_block_range(void *arg, int64_t lo, int64_t hi)               \
    {                                                                                              \
        const NAME##_job *j = arg;                                                                 \
        const int n_in = j->n_in;                                                                  \
        nb_tensor *const *xs = j->xs;                                                              \
        T *out = j->out;                                                                           \
        const int64_t numel = j->numel;                                                            \
        for (int64_t b = lo; b < hi; b++) {                                                        \
            int64_t i0 = b * SUMN_BLOCK, n = numel - i0 < SUMN_BLOCK ? numel - i0 : SUMN_BLOCK;    \
            if (n_in == 2) {                                                                       \
                /* Two (a gradient and its accumulator): straight through, each element of \
                 * both read before Out's is written, the same sum. */                     \
                const T *x0 = (const T *)nb_tensor_data(xs[0]) + i0;                               \
                const T *x1 = (const T *)nb_tensor_data(xs[1]) + i0;                               \
                T *o = out + i0;                                                                   \
                NB_OMP_SIMD for (int64_t i = 0; i < n; i++) {                                      \
                    T t = x0[i];                                                                   \
                    ADD(t, x1[i]);                                                                 \
                    o[i] = t;                                                                      \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            T acc[SUMN_BLOCK];                                                                     \
            const T *x0 = (const T *)nb_tensor_data(xs[0]) + i0;                                   \
            for (int64_t i = 0; i < n; i++) acc[i] = x0[i];                                        \
            for (int k = 1; k < n_in; k++) {                                                       \
                const T *restrict xk = (const T *)nb_tensor_data(xs[k]) + i0;                      \
                for (int64_t i = 0; i < n; i++) ADD(acc[i], xk[i]);                                \
            }                                                                                      \
            memcpy(out + i0, acc, (size_t)n * sizeof(T));                                          \
        }                                                                                          \
    }                                                                                              \
    static void NAME(int n_in, nb_tensor *const *xs, T *out, int64_t numel)                        \
    {                                                                                              \
        int64_t nblk = (numel + SUMN_BLOCK - 1) / SUMN_BLOCK;                                      \
        NAME##_job j = {n_in, xs, out, numel};                                                     \
        nb_team_for(nblk, nblk > 1 && numel * n_in >= RED_PAR_MIN, NAME##_block_range, &j);        \
    }

#define ADD_PLAIN(a, v) ((a) += (v))
/* Wrapping integer addition without signed overflow. */
#define ADD_I32(a, v) ((a) = (int32_t)((uint32_t)(a) + (uint32_t)(v)))
#define ADD_I64(a, v) ((a) = (int64_t)((uint64_t)(a) + (uint64_t)(v)))

DEF_SUMN(sumn_f32, float, ADD_PLAIN)
DEF_SUMN(sumn_f64, double, ADD_PLAIN)
DEF_SUMN(sumn_i32, int32_t, ADD_I32)
DEF_SUMN(sumn_i64, int64_t, ADD_I64)

static nb_status run_sum(const nb_kernel_ctx *k)
{
    int n = nb_kin_count(k, 0);
    nb_tensor *const *xs = &k->in[k->in_begin[0]];
    nb_tensor *out = nb_kout(k, 0, 0);
    int64_t numel = nb_tensor_numel(out);
    for (int i = 0; i < n; i++)
        if (xs[i]->dtype != out->dtype || nb_tensor_numel(xs[i]) != numel)
            return nb_error(NB_ERR_SHAPE, "%s: X[%d] does not match the output", k->label, i);
    switch (out->dtype) {
    case NB_F32: sumn_f32(n, xs, nb_tensor_data(out), numel); break;
    case NB_F64: sumn_f64(n, xs, nb_tensor_data(out), numel); break;
    case NB_I32: sumn_i32(n, xs, nb_tensor_data(out), numel); break;
    case NB_I64: sumn_i64(n, xs, nb_tensor_data(out), numel); break;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for dtype %s", k->label, nb_dtype_name(out->dtype));
    }
    return NB_OK;
}

/* ---- the family's kernels ------------------------------------------------------------ */

#define KERNEL(id, dts) static const nb_kernel_def kernel_##id = {#id, NB_DEVICE_CPU, dts, "nabla", 0, run_##id, NULL, NULL};
KERNEL(reduce_sum, NB_DT_NUMERIC)
KERNEL(reduce_mean, NB_DT_FLOAT)
KERNEL(reduce_max, NB_DT_NUMERIC)
KERNEL(reduce_min, NB_DT_NUMERIC)
KERNEL(reduce_prod, NB_DT_NUMERIC)
KERNEL(logsumexp, NB_DT_FLOAT)
KERNEL(argmax, NB_DT_NUMERIC)
KERNEL(argmin, NB_DT_NUMERIC)
KERNEL(sum, NB_DT_NUMERIC)
KERNEL(sum_to, NB_DT_NUMERIC)

const nb_kernel_def *const nb_cpu_kernels_reduce[] = {
    &kernel_reduce_sum,
    &kernel_reduce_mean,
    &kernel_reduce_max,
    &kernel_reduce_min,
    &kernel_reduce_prod,
    &kernel_logsumexp,
    &kernel_argmax,
    &kernel_argmin,
    &kernel_sum,
    &kernel_sum_to,
    &nb_cpu_kernel_topk,
    &nb_cpu_kernel_gather_elements,
    &nb_cpu_kernel_scatter_elements,
    NULL,
};
