/* Losses on probabilities and pointwise losses: cross_entropy, mse_loss,
 * bce_with_logits. Reductions add in double over a fixed split of the
 * elements, so "mean" and "sum" give the same bits whatever the number of
 * threads. */
#include <math.h>
#include <stdint.h>
#include "nn.h"
#include "simd.h"
#include "team.h"

/* cross_entropy takes -log of a probability; clamping it here keeps a zero
 * probability from giving inf (Paddle clamps at the same 1e-20). */
#define PROB_EPS 1e-20

/* ---- cross_entropy ------------------------------------------------------------ */

#define DEFINE_CE(T, SUF, LOG)                                                              \
    typedef struct ce_job_##SUF {                                                           \
        const T *x;                                                                         \
        const void *lab;                                                                    \
        nb_dtype ldt;                                                                       \
        bool soft;                                                                          \
        int64_t ignore;                                                                     \
        T *y;                                                                               \
        int64_t C;                                                                          \
    } ce_job_##SUF;                                                                         \
    static void ce_range_##SUF(void *arg, int64_t lo, int64_t hi)                           \
    {                                                                                       \
        const ce_job_##SUF *j = arg;                                                        \
        const T *x = j->x;                                                                  \
        const void *lab = j->lab;                                                           \
        T *y = j->y;                                                                        \
        const int64_t C = j->C, ignore = j->ignore;                                         \
        for (int64_t r = lo; r < hi; r++) {                                                 \
            const T *xr = x + r * C;                                                        \
            if (j->soft) {                                                                  \
                const T *lr = (const T *)lab + r * C;                                       \
                double acc = 0;                                                             \
                for (int64_t c = 0; c < C; c++)                                             \
                    acc -= (double)lr[c] * LOG(xr[c] > (T)PROB_EPS ? xr[c] : (T)PROB_EPS);  \
                y[r] = (T)acc;                                                              \
            } else {                                                                        \
                int64_t l = nb_nn_index_at(lab, j->ldt, r);                                 \
                y[r] = l == ignore ? 0 : -LOG(xr[l] > (T)PROB_EPS ? xr[l] : (T)PROB_EPS);   \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    static void ce_##SUF(const T *x, const void *lab, nb_dtype ldt, bool soft, int64_t ignore, \
                         T *y, int64_t rows, int64_t C)                                     \
    {                                                                                       \
        ce_job_##SUF j = {x, lab, ldt, soft, ignore, y, C};                                 \
        nb_team_for(rows, rows * C >= NB_NN_PAR_MIN, ce_range_##SUF, &j);                   \
    }

DEFINE_CE(float, f32, logf)
DEFINE_CE(double, f64, log)

nb_status nb_cpu_cross_entropy(const nb_kernel_ctx *k)
{
    const nb_cross_entropy_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *lab = nb_kin(k, 1, 0), *y = nb_kout(k, 0, 0);
    bool soft = p->soft_label;
    int64_t ignore = p->ignore_index;
    int64_t C = x->shape[x->ndim - 1], rows = nb_tensor_numel(y);
    nb_status st;
    if (!soft && (st = nb_nn_check_labels(k->label, lab, C, &ignore))) return st;
    switch (x->dtype) {
    case NB_F32:
        ce_f32(nb_tensor_data(x), nb_tensor_data(lab), lab->dtype, soft, ignore, nb_tensor_data(y), rows, C);
        return NB_OK;
    case NB_F64:
        ce_f64(nb_tensor_data(x), nb_tensor_data(lab), lab->dtype, soft, ignore, nb_tensor_data(y), rows, C);
        return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    }
}

/* ---- pointwise losses ------------------------------------------------------------- */

/* The fixed split of a reduction: always NCHUNK parts, whatever the thread
 * count, so the order of the additions depends only on n. */
#define NCHUNK 64

/* A pointwise loss f(x, y) with its reductions; Out may share memory with X
 * (reduction "none"), which is fine as each element is read before it is
 * written. The sums of "mean" and "sum" go chunk by chunk into `part`, in
 * double, and the chunks are added in order afterwards. CLONES is
 * NB_SIMD_CLONES where the "none" loop vectorises (mse); bce's calls log1p
 * and exp, so an AVX2 copy of it would gain nothing but an FMA that changes
 * its bits. */
#define DEFINE_POINTWISE(NAME, T, SUF, F, CLONES)                                       \
    typedef struct NAME##_job_##SUF {                                                   \
        const T *x, *y;                                                                 \
        T *out;                                                                         \
        int64_t n;                                                                      \
        double *part; /* NCHUNK sums */                                                 \
    } NAME##_job_##SUF;                                                                 \
    CLONES static void NAME##_range_##SUF(void *arg, int64_t lo, int64_t hi)            \
    {                                                                                   \
        const NAME##_job_##SUF *j = arg;                                                \
        const T *x = j->x, *y = j->y;                                                   \
        T *out = j->out;                                                                \
        for (int64_t i = lo; i < hi; i++) out[i] = F(x[i], y[i]);                       \
    }                                                                                   \
    static void NAME##_chunks_##SUF(void *arg, int64_t lo, int64_t hi)                  \
    {                                                                                   \
        const NAME##_job_##SUF *j = arg;                                                \
        const T *x = j->x, *y = j->y;                                                   \
        const int64_t n = j->n, per = (n + NCHUNK - 1) / NCHUNK;                        \
        for (int64_t k = lo; k < hi; k++) {                                             \
            int64_t i0 = k * per, i1 = i0 + per < n ? i0 + per : n;                     \
            double a = 0;                                                               \
            for (int64_t i = i0; i < i1; i++) a += (double)F(x[i], y[i]);               \
            j->part[k] = a;                                                             \
        }                                                                               \
    }                                                                                   \
    static void NAME##_##SUF(const T *x, const T *y, T *out, int64_t n, nb_nn_reduction r) \
    {                                                                                   \
        double part[NCHUNK];                                                            \
        NAME##_job_##SUF j = {x, y, out, n, part};                                      \
        if (r == NB_RED_NONE) {                                                         \
            nb_team_for(n, n >= NB_NN_PAR_MIN, NAME##_range_##SUF, &j);                 \
            return;                                                                     \
        }                                                                               \
        nb_team_for(NCHUNK, n >= NB_NN_PAR_MIN, NAME##_chunks_##SUF, &j);               \
        double s = 0;                                                                   \
        for (int k = 0; k < NCHUNK; k++) s += part[k];                                  \
        out[0] = (T)(r == NB_RED_MEAN ? s / (double)n : s);                             \
    }

#define SQ_DIFF(a, b) (((a) - (b)) * ((a) - (b)))
DEFINE_POINTWISE(mse, float, f32, SQ_DIFF, NB_SIMD_CLONES)
DEFINE_POINTWISE(mse, double, f64, SQ_DIFF, NB_SIMD_CLONES)

/* The stable form of -(y log sigmoid(x) + (1-y) log(1 - sigmoid(x))): no
 * exp of a positive number, and log1p keeps precision for large |x|. */
static inline float bce_f(float x, float y) { return fmaxf(x, 0) - x * y + log1pf(expf(-fabsf(x))); }
static inline double bce_d(double x, double y) { return fmax(x, 0) - x * y + log1p(exp(-fabs(x))); }
DEFINE_POINTWISE(bce, float, f32, bce_f, )
DEFINE_POINTWISE(bce, double, f64, bce_d, )

typedef void (*pointwise_f32)(const float *, const float *, float *, int64_t, nb_nn_reduction);
typedef void (*pointwise_f64)(const double *, const double *, double *, int64_t, nb_nn_reduction);

static nb_status run_pointwise(const nb_kernel_ctx *k, pointwise_f32 f32, pointwise_f64 f64)
{
    nb_tensor *x = nb_kin(k, 0, 0), *y = nb_kin(k, 1, 0), *out = nb_kout(k, 0, 0);
    nb_nn_reduction r = ((const nb_pointwise_loss_params *)k->params)->reduction;
    int64_t n = nb_tensor_numel(x);
    switch (x->dtype) {
    case NB_F32: f32(nb_tensor_data(x), nb_tensor_data(y), nb_tensor_data(out), n, r); return NB_OK;
    case NB_F64: f64(nb_tensor_data(x), nb_tensor_data(y), nb_tensor_data(out), n, r); return NB_OK;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    }
}

nb_status nb_cpu_mse_loss(const nb_kernel_ctx *k) { return run_pointwise(k, mse_f32, mse_f64); }
nb_status nb_cpu_bce_with_logits(const nb_kernel_ctx *k) { return run_pointwise(k, bce_f32, bce_f64); }
