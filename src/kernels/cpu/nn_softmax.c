/* Softmax, log-softmax and the fused softmax cross-entropy with its gradient.
 *
 * Every softmax subtracts the row's maximum before exponentiating, so logits
 * in the thousands stay finite, and sums of exponentials accumulate in double
 * even for float32. The loss is computed as log(sum exp(x - m)) - (x_l - m),
 * never as -log(softmax), which would underflow to -log(0) for confident
 * wrong answers.
 *
 * A tensor is viewed as [outer, C, inner] around the class axis. When the
 * classes are the last axis (inner == 1) each row is contiguous; otherwise a
 * tile of up to TILE neighbouring columns is processed together so that the
 * innermost loops run over contiguous memory. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "nn.h"
#include "team.h"

#define TILE 256

typedef struct {
    int64_t outer, C, inner;
} dims3;

/* `axis` as the op's attribute gave it, in [-ndim, ndim). */
static dims3 class_dims(int64_t axis_attr, const nb_tensor *x)
{
    dims3 d;
    int axis = nb_nn_axis(axis_attr, x->ndim);
    nb_nn_split_axis(x->ndim, x->shape, axis, &d.outer, &d.C, &d.inner);
    return d;
}

/* ---- softmax and log_softmax ------------------------------------------------ */

#define DEFINE_SOFTMAX(T, SUF, EXP)                                                          \
    typedef struct softmax_job_##SUF {                                                       \
        const T *x;                                                                          \
        T *y;                                                                                \
        dims3 d;                                                                             \
        bool lg;                                                                             \
    } softmax_job_##SUF;                                                                     \
                                                                                             \
    static void softmax_rows_range_##SUF(void *arg, int64_t lo, int64_t hi)                  \
    {                                                                                        \
        const softmax_job_##SUF *j = arg;                                                    \
        const T *x = j->x;                                                                   \
        T *y = j->y;                                                                         \
        const bool lg = j->lg;                                                               \
        const int64_t C = j->d.C;                                                            \
        for (int64_t r = lo; r < hi; r++) {                                                  \
            const T *xr = x + r * C;                                                         \
            T *yr = y + r * C;                                                               \
            T m = -INFINITY;                                                                 \
            for (int64_t c = 0; c < C; c++) m = xr[c] > m ? xr[c] : m;                       \
            double s = 0;                                                                    \
            if (lg) {                                                                        \
                for (int64_t c = 0; c < C; c++) s += EXP(xr[c] - m);                         \
                T ls = (T)log(s);                                                            \
                for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - m) - ls;                    \
            } else {                                                                         \
                for (int64_t c = 0; c < C; c++) {                                            \
                    T e = EXP(xr[c] - m);                                                    \
                    yr[c] = e;                                                               \
                    s += e;                                                                  \
                }                                                                            \
                T inv = (T)(1.0 / s);                                                        \
                for (int64_t c = 0; c < C; c++) yr[c] *= inv;                                \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    static void softmax_rows_##SUF(const T *x, T *y, dims3 d, bool lg)                       \
    {                                                                                        \
        softmax_job_##SUF j = {x, y, d, lg};                                                 \
        nb_team_for(d.outer, d.outer * d.C >= NB_NN_PAR_MIN, softmax_rows_range_##SUF, &j);  \
    }                                                                                        \
                                                                                             \
    static void softmax_tiles_range_##SUF(void *arg, int64_t lo, int64_t hi)                 \
    {                                                                                        \
        const softmax_job_##SUF *jb = arg;                                                   \
        const T *x = jb->x;                                                                  \
        T *y = jb->y;                                                                        \
        const bool lg = jb->lg;                                                              \
        const int64_t C = jb->d.C, inner = jb->d.inner, ntile = (inner + TILE - 1) / TILE;   \
        for (int64_t t = lo; t < hi; t++) {                                                  \
            const int64_t o = t / ntile, j0 = (t % ntile) * TILE;                            \
            const int64_t w = inner - j0 < TILE ? inner - j0 : TILE;                         \
            const T *xb = x + o * C * inner + j0;                                            \
            T *yb = y + o * C * inner + j0;                                                  \
            T m[TILE], f[TILE];                                                              \
            double s[TILE];                                                                  \
            for (int64_t j = 0; j < w; j++) m[j] = -INFINITY, s[j] = 0;                      \
            for (int64_t c = 0; c < C; c++)                                                  \
                for (int64_t j = 0; j < w; j++) {                                            \
                    T v = xb[c * inner + j];                                                 \
                    m[j] = v > m[j] ? v : m[j];                                              \
                }                                                                            \
            for (int64_t c = 0; c < C; c++)                                                  \
                for (int64_t j = 0; j < w; j++) {                                            \
                    T e = EXP(xb[c * inner + j] - m[j]);                                     \
                    if (!lg) yb[c * inner + j] = e;                                          \
                    s[j] += e;                                                               \
                }                                                                            \
            for (int64_t j = 0; j < w; j++) f[j] = lg ? (T)log(s[j]) : (T)(1.0 / s[j]);      \
            for (int64_t c = 0; c < C; c++)                                                  \
                for (int64_t j = 0; j < w; j++) {                                            \
                    int64_t i = c * inner + j;                                               \
                    yb[i] = lg ? (xb[i] - m[j]) - f[j] : yb[i] * f[j];                       \
                }                                                                            \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    static void softmax_tiles_##SUF(const T *x, T *y, dims3 d, bool lg)                      \
    {                                                                                        \
        const int64_t ntile = (d.inner + TILE - 1) / TILE;                                   \
        softmax_job_##SUF jb = {x, y, d, lg};                                                \
        nb_team_for(d.outer * ntile, d.outer * d.C * d.inner >= NB_NN_PAR_MIN, softmax_tiles_range_##SUF, &jb); \
    }

DEFINE_SOFTMAX(float, f32, expf)
DEFINE_SOFTMAX(double, f64, exp)

static nb_status run_softmax(const nb_kernel_ctx *k, bool lg)
{
    nb_tensor *x = nb_kin(k, 0, 0), *y = nb_kout(k, 0, 0);
    dims3 d = class_dims(((const nb_softmax_params *)k->params)->axis, x);
    switch (x->dtype) {
    case NB_F32:
        (d.inner == 1 ? softmax_rows_f32 : softmax_tiles_f32)(nb_tensor_data(x), nb_tensor_data(y), d, lg);
        return NB_OK;
    case NB_F64:
        (d.inner == 1 ? softmax_rows_f64 : softmax_tiles_f64)(nb_tensor_data(x), nb_tensor_data(y), d, lg);
        return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    }
}

nb_status nb_cpu_softmax(const nb_kernel_ctx *k) { return run_softmax(k, false); }
nb_status nb_cpu_log_softmax(const nb_kernel_ctx *k) { return run_softmax(k, true); }

/* ---- softmax_with_cross_entropy -------------------------------------------------- */

/* What the loss kernels need to know about the labels. */
typedef struct {
    const void *p;
    nb_dtype dt;
    bool soft;
    int64_t ignore;
} labels;

/* The logit of the label of row r is read before the softmax is written, so
 * Softmax may share memory with Logits. */
#define DEFINE_SWCE(T, SUF, EXP)                                                             \
    typedef struct swce_job_##SUF {                                                          \
        const T *x;                                                                          \
        labels lb;                                                                           \
        T *sm, *loss;                                                                        \
        dims3 d;                                                                             \
    } swce_job_##SUF;                                                                        \
                                                                                             \
    static void swce_rows_range_##SUF(void *arg, int64_t lo, int64_t hi)                     \
    {                                                                                        \
        const swce_job_##SUF *j = arg;                                                       \
        const T *x = j->x;                                                                   \
        const labels lb = j->lb;                                                             \
        T *sm = j->sm, *loss = j->loss;                                                      \
        const int64_t C = j->d.C;                                                            \
        for (int64_t r = lo; r < hi; r++) {                                                  \
            const T *xr = x + r * C;                                                         \
            T *sr = sm + r * C;                                                              \
            T m = -INFINITY;                                                                 \
            for (int64_t c = 0; c < C; c++) m = xr[c] > m ? xr[c] : m;                       \
            double s = 0;                                                                    \
            if (lb.soft) {                                                                   \
                const T *yr = (const T *)lb.p + r * C;                                       \
                double dot = 0, ysum = 0;                                                    \
                for (int64_t c = 0; c < C; c++) {                                            \
                    T z = xr[c] - m, e = EXP(z);                                             \
                    dot += (double)yr[c] * z;                                                \
                    ysum += yr[c];                                                           \
                    sr[c] = e;                                                               \
                    s += e;                                                                  \
                }                                                                            \
                loss[r] = (T)(ysum * log(s) - dot);                                          \
            } else {                                                                         \
                int64_t l = nb_nn_index_at(lb.p, lb.dt, r);                                  \
                bool skip = l == lb.ignore;                                                  \
                T zl = skip ? 0 : xr[l] - m;                                                 \
                for (int64_t c = 0; c < C; c++) {                                            \
                    T e = EXP(xr[c] - m);                                                    \
                    sr[c] = e;                                                               \
                    s += e;                                                                  \
                }                                                                            \
                loss[r] = skip ? 0 : (T)(log(s) - zl);                                       \
            }                                                                                \
            T inv = (T)(1.0 / s);                                                            \
            for (int64_t c = 0; c < C; c++) sr[c] *= inv;                                    \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    static void swce_rows_##SUF(const T *x, labels lb, T *sm, T *loss, dims3 d)              \
    {                                                                                        \
        swce_job_##SUF j = {x, lb, sm, loss, d};                                             \
        nb_team_for(d.outer, d.outer * d.C >= NB_NN_PAR_MIN, swce_rows_range_##SUF, &j);     \
    }                                                                                        \
                                                                                             \
    static void swce_tiles_range_##SUF(void *arg, int64_t lo, int64_t hi)                    \
    {                                                                                        \
        const swce_job_##SUF *jb = arg;                                                      \
        const T *x = jb->x;                                                                  \
        const labels lb = jb->lb;                                                            \
        T *sm = jb->sm, *loss = jb->loss;                                                    \
        const int64_t C = jb->d.C, inner = jb->d.inner, ntile = (inner + TILE - 1) / TILE;   \
        for (int64_t t = lo; t < hi; t++) {                                                  \
            const int64_t o = t / ntile, j0 = (t % ntile) * TILE;                            \
            const int64_t w = inner - j0 < TILE ? inner - j0 : TILE;                         \
            const int64_t base = o * C * inner + j0, row = o * inner + j0;                   \
            const T *xb = x + base;                                                          \
            const T *yb = lb.soft ? (const T *)lb.p + base : NULL;                           \
            T *sb = sm + base;                                                               \
            T m[TILE], zl[TILE];                                                             \
            bool skip[TILE];                                                                 \
            double s[TILE], dot[TILE], ysum[TILE];                                           \
            for (int64_t j = 0; j < w; j++) m[j] = -INFINITY, s[j] = dot[j] = ysum[j] = 0;   \
            for (int64_t c = 0; c < C; c++)                                                  \
                for (int64_t j = 0; j < w; j++) {                                            \
                    T v = xb[c * inner + j];                                                 \
                    m[j] = v > m[j] ? v : m[j];                                              \
                }                                                                            \
            if (!lb.soft)                                                                    \
                for (int64_t j = 0; j < w; j++) {                                            \
                    int64_t l = nb_nn_index_at(lb.p, lb.dt, row + j);                        \
                    skip[j] = l == lb.ignore;                                                \
                    zl[j] = skip[j] ? 0 : xb[l * inner + j] - m[j];                          \
                }                                                                            \
            for (int64_t c = 0; c < C; c++)                                                  \
                for (int64_t j = 0; j < w; j++) {                                            \
                    int64_t i = c * inner + j;                                               \
                    T z = xb[i] - m[j], e = EXP(z);                                          \
                    if (yb) {                                                                \
                        dot[j] += (double)yb[i] * z;                                         \
                        ysum[j] += yb[i];                                                    \
                    }                                                                        \
                    sb[i] = e;                                                               \
                    s[j] += e;                                                               \
                }                                                                            \
            for (int64_t j = 0; j < w; j++) {                                                \
                if (yb) loss[row + j] = (T)(ysum[j] * log(s[j]) - dot[j]);                   \
                else if (skip[j]) loss[row + j] = 0;                                         \
                else loss[row + j] = (T)(log(s[j]) - zl[j]);                                 \
                s[j] = 1.0 / s[j];                                                           \
            }                                                                                \
            for (int64_t c = 0; c < C; c++)                                                  \
                for (int64_t j = 0; j < w; j++) sb[c * inner + j] *= (T)s[j];                \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    static void swce_tiles_##SUF(const T *x, labels lb, T *sm, T *loss, dims3 d)             \
    {                                                                                        \
        const int64_t ntile = (d.inner + TILE - 1) / TILE;                                   \
        swce_job_##SUF jb = {x, lb, sm, loss, d};                                            \
        nb_team_for(d.outer * ntile, d.outer * d.C * d.inner >= NB_NN_PAR_MIN, swce_tiles_range_##SUF, &jb); \
    }

DEFINE_SWCE(float, f32, expf)
DEFINE_SWCE(double, f64, exp)

static labels get_labels(const nb_softmax_with_cross_entropy_params *p, const nb_tensor *lab)
{
    return (labels){nb_tensor_data(lab), lab->dtype, p->soft_label, p->ignore_index};
}

nb_status nb_cpu_softmax_with_cross_entropy(const nb_kernel_ctx *k)
{
    const nb_softmax_with_cross_entropy_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *lab = nb_kin(k, 1, 0);
    nb_tensor *sm = nb_kout(k, 0, 0), *loss = nb_kout(k, 1, 0);
    dims3 d = class_dims(p->axis, x);
    labels lb = get_labels(p, lab);
    nb_status st;
    if (!lb.soft && (st = nb_nn_check_labels(k->label, lab, d.C, &lb.ignore))) return st;
    switch (x->dtype) {
    case NB_F32:
        (d.inner == 1 ? swce_rows_f32 : swce_tiles_f32)(nb_tensor_data(x), lb, nb_tensor_data(sm), nb_tensor_data(loss),
                                                        d);
        return NB_OK;
    case NB_F64:
        (d.inner == 1 ? swce_rows_f64 : swce_tiles_f64)(nb_tensor_data(x), lb, nb_tensor_data(sm), nb_tensor_data(loss),
                                                        d);
        return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    }
}

/* ---- its gradient ------------------------------------------------------------------- */

/* d loss / d logit_c = softmax_c * sum(label) - label_c, times DLoss. With
 * hard labels sum(label) is 1; with soft ones that do not sum to 1 the extra
 * factor keeps the gradient exact. Rows are visited one (outer, inner) pair
 * at a time; for inner > 1 the classes are strided, but a row's C elements
 * stay in cache for the neighbouring rows that share their lines. DLogits
 * may share memory with Softmax: each element is read before it is written. */
#define DEFINE_SWCE_GRAD(T, SUF)                                                             \
    typedef struct swce_grad_job_##SUF {                                                     \
        const T *sm;                                                                         \
        labels lb;                                                                           \
        const T *dloss;                                                                      \
        T *dx;                                                                               \
        dims3 d;                                                                             \
    } swce_grad_job_##SUF;                                                                   \
                                                                                             \
    static void swce_grad_range_##SUF(void *arg, int64_t lo, int64_t hi)                     \
    {                                                                                        \
        const swce_grad_job_##SUF *jb = arg;                                                 \
        const T *sm = jb->sm, *dloss = jb->dloss;                                            \
        const labels lb = jb->lb;                                                            \
        T *dx = jb->dx;                                                                      \
        const int64_t C = jb->d.C, inner = jb->d.inner;                                      \
        for (int64_t o = lo; o < hi; o++)                                                    \
            for (int64_t j = 0; j < inner; j++) {                                            \
                const int64_t r = o * inner + j, base = o * C * inner + j;                   \
                const T g = dloss[r];                                                        \
                if (lb.soft) {                                                               \
                    const T *y = (const T *)lb.p + base;                                     \
                    double ysum = 0;                                                         \
                    for (int64_t c = 0; c < C; c++) ysum += y[c * inner];                    \
                    for (int64_t c = 0; c < C; c++) {                                        \
                        int64_t i = base + c * inner;                                        \
                        dx[i] = (T)((sm[i] * ysum - y[c * inner]) * g);                      \
                    }                                                                        \
                } else {                                                                     \
                    int64_t l = nb_nn_index_at(lb.p, lb.dt, r);                              \
                    if (l == lb.ignore) {                                                    \
                        for (int64_t c = 0; c < C; c++) dx[base + c * inner] = 0;            \
                    } else {                                                                 \
                        for (int64_t c = 0; c < C; c++) dx[base + c * inner] = sm[base + c * inner] * g; \
                        dx[base + l * inner] -= g;                                           \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
    }                                                                                        \
                                                                                             \
    static void swce_grad_##SUF(const T *sm, labels lb, const T *dloss, T *dx, dims3 d)      \
    {                                                                                        \
        swce_grad_job_##SUF jb = {sm, lb, dloss, dx, d};                                     \
        nb_team_for(d.outer, d.outer * d.C * d.inner >= NB_NN_PAR_MIN, swce_grad_range_##SUF, &jb); \
    }

DEFINE_SWCE_GRAD(float, f32)
DEFINE_SWCE_GRAD(double, f64)

nb_status nb_cpu_softmax_with_cross_entropy_grad(const nb_kernel_ctx *k)
{
    const nb_softmax_with_cross_entropy_params *p = k->params;
    nb_tensor *sm = nb_kin(k, 0, 0), *lab = nb_kin(k, 1, 0), *dl = nb_kin(k, 2, 0);
    nb_tensor *dx = nb_kout(k, 0, 0);
    dims3 d = class_dims(p->axis, sm);
    labels lb = get_labels(p, lab);
    nb_status st;
    if (!lb.soft && (st = nb_nn_check_labels(k->label, lab, d.C, &lb.ignore))) return st;
    switch (sm->dtype) {
    case NB_F32: swce_grad_f32(nb_tensor_data(sm), lb, nb_tensor_data(dl), nb_tensor_data(dx), d); return NB_OK;
    case NB_F64: swce_grad_f64(nb_tensor_data(sm), lb, nb_tensor_data(dl), nb_tensor_data(dx), d); return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(sm->dtype));
    }
}
