/* Batch and layer normalisation on the CPU. Statistics accumulate in double
 * whatever the dtype. Batch norm reduces per plane (one channel of one
 * image, contiguous) in parallel and then per channel, so NCHW is read in
 * order; layer norm works row by row. The typed code lives in norm_impl.h,
 * included once per dtype; the kernels that the registry runs, and the
 * family's table, are at the end. */
/* The row loops vectorise at -O3. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <math.h>
#include "../kernels.h"
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "norm.h"
#include "simd.h"
#include "team.h"

#define PAR_MIN_WORK 32768.0
/* Columns per task when layer_norm_grad sums DScale and DBias over rows. */
#define COL_BLOCK 64
/* Of which a task sums this many at a time: two sums a column, sixteen
 * columns of doubles, are eight AVX2 registers. (All 64 at once went through
 * memory at every row.) */
#define COL_REG 16

static double *dalloc(int64_t count)
{
    return nb_malloc(count > 0 ? (size_t)count * sizeof(double) : 1);
}

/* Per-channel totals of per-plane sums laid out as [n, c]. */
static void sum_planes(const double *planes, int64_t n, int64_t c, double *out)
{
    for (int64_t ch = 0; ch < c; ch++) out[ch] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++) out[ch] += planes[i * c + ch];
}

#define T float
#define SFX f32
#include "norm_impl.h"
#undef T
#undef SFX

#define T double
#define SFX f64
#include "norm_impl.h"
#undef T
#undef SFX

static nb_status no_kernel(const char *label, nb_dtype dt)
{
    return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label, nb_dtype_name(dt));
}

nb_status nb_cpu_batch_norm(const char *label, nb_dtype dt, int64_t n, int64_t c, int64_t s, const void *x,
                            const void *scale, const void *bias, const void *mean, const void *var,
                            bool global_stats, double momentum, double eps, void *y, void *mean_out,
                            void *var_out, void *saved_mean, void *saved_invstd)
{
    switch (dt) {
    case NB_F32:
        return batch_norm_f32(label, n, c, s, x, scale, bias, mean, var, global_stats, momentum, eps, y, mean_out,
                              var_out, saved_mean, saved_invstd);
    case NB_F64:
        return batch_norm_f64(label, n, c, s, x, scale, bias, mean, var, global_stats, momentum, eps, y, mean_out,
                              var_out, saved_mean, saved_invstd);
    default: return no_kernel(label, dt);
    }
}

nb_status nb_cpu_batch_norm_grad(const char *label, nb_dtype dt, int64_t n, int64_t c, int64_t s, const void *x,
                                 const void *scale, const void *mean, const void *stat, bool stat_is_var,
                                 bool global_stats, double eps, const void *dy, void *dx, void *dscale,
                                 void *dbias)
{
    switch (dt) {
    case NB_F32:
        return batch_norm_grad_f32(label, n, c, s, x, scale, mean, stat, stat_is_var, global_stats, eps, dy, dx,
                                   dscale, dbias);
    case NB_F64:
        return batch_norm_grad_f64(label, n, c, s, x, scale, mean, stat, stat_is_var, global_stats, eps, dy, dx,
                                   dscale, dbias);
    default: return no_kernel(label, dt);
    }
}

nb_status nb_cpu_layer_norm(const char *label, nb_dtype dt, int64_t rows, int64_t cols, const void *x,
                            const void *scale, const void *bias, double eps, void *y, void *mean, void *var)
{
    switch (dt) {
    case NB_F32: layer_norm_f32(rows, cols, x, scale, bias, eps, y, mean, var); return NB_OK;
    case NB_F64: layer_norm_f64(rows, cols, x, scale, bias, eps, y, mean, var); return NB_OK;
    default: return no_kernel(label, dt);
    }
}

nb_status nb_cpu_layer_norm_grad(const char *label, nb_dtype dt, int64_t rows, int64_t cols, const void *x,
                                 const void *scale, const void *mean, const void *var, double eps, const void *dy,
                                 void *dx, void *dscale, void *dbias)
{
    switch (dt) {
    case NB_F32:
        return layer_norm_grad_f32(label, rows, cols, x, scale, mean, var, eps, dy, dx, dscale, dbias);
    case NB_F64:
        return layer_norm_grad_f64(label, rows, cols, x, scale, mean, var, eps, dy, dx, dscale, dbias);
    default: return no_kernel(label, dt);
    }
}

/* ---- kernels ------------------------------------------------------------------- */

static const void *in_data(const nb_kernel_ctx *k, int slot)
{
    return nb_khas_in(k, slot) ? nb_tensor_data(nb_kin(k, slot, 0)) : NULL;
}

/* An optional output's data, NULL when it is not wanted. */
static void *out_data(const nb_kernel_ctx *k, int slot)
{
    return nb_kout_count(k, slot) ? nb_tensor_data(nb_kout(k, slot, 0)) : NULL;
}

/* X as [n, c, s]. */
static void bn_dims(const nb_tensor *x, int64_t *n, int64_t *c, int64_t *s)
{
    *n = x->shape[0];
    *c = x->shape[1];
    *s = 1;
    for (int i = 2; i < x->ndim; i++) *s *= x->shape[i];
}

/* batch_norm: X 0, Scale 1, Bias 2, Mean 3, Variance 4 -> Y 0, MeanOut 1,
 * VarianceOut 2, SavedMean 3, SavedVariance 4. */
static nb_status run_batch_norm(const nb_kernel_ctx *k)
{
    const nb_batch_norm_params *p = k->params;
    int64_t n, c, s;
    const nb_tensor *x = nb_kin(k, 0, 0);
    bn_dims(x, &n, &c, &s);
    return nb_cpu_batch_norm(k->label, x->dtype, n, c, s, nb_tensor_data(x), in_data(k, 1), in_data(k, 2),
                             in_data(k, 3), in_data(k, 4), p->global_stats, p->momentum, p->epsilon, out_data(k, 0),
                             out_data(k, 1), out_data(k, 2), out_data(k, 3), out_data(k, 4));
}

/* batch_norm_grad: X 0, Scale 1, SavedMean 2, SavedVariance 3, DY 4, Mean 5,
 * Variance 6 -> DX 0, DScale 1, DBias 2. */
static nb_status run_batch_norm_grad(const nb_kernel_ctx *k)
{
    const nb_batch_norm_params *p = k->params;
    int64_t n, c, s;
    const nb_tensor *x = nb_kin(k, 0, 0);
    bn_dims(x, &n, &c, &s);
    const bool global = p->global_stats;
    const double eps = p->epsilon;
    /* With global statistics the running Mean and Variance, when given, are
     * the statistics; otherwise the saved ones are (the forward op saves the
     * running ones in that mode too). In training the batch's statistics
     * are recomputed from X, not read from SavedMean/SavedVariance: that
     * makes the op a function of X, Scale and DY alone, which is what its
     * own rules differentiate (ops/norm_composite.c). */
    const bool running = global && nb_khas_in(k, 5);
    if (global)
        return nb_cpu_batch_norm_grad(k->label, x->dtype, n, c, s, nb_tensor_data(x), in_data(k, 1),
                                      in_data(k, running ? 5 : 2), in_data(k, running ? 6 : 3), running, global, eps,
                                      in_data(k, 4), out_data(k, 0), out_data(k, 1), out_data(k, 2));
    return nb_cpu_batch_norm_grad(k->label, x->dtype, n, c, s, nb_tensor_data(x), in_data(k, 1), NULL, NULL, false,
                                  false, eps, in_data(k, 4), out_data(k, 0), out_data(k, 1), out_data(k, 2));
}

/* X as [rows, cols]: the dims before begin_norm_axis (negative: counted
 * from the end, which inference has checked) and those from it on. */
static void ln_dims(const nb_layer_norm_params *p, const nb_tensor *x, int64_t *rows, int64_t *cols)
{
    int64_t a = p->begin_norm_axis;
    if (a < 0) a += x->ndim;
    *rows = 1;
    *cols = 1;
    for (int i = 0; i < x->ndim; i++) *(i < a ? rows : cols) *= x->shape[i];
}

/* layer_norm: X 0, Scale 1, Bias 2 (both optional) -> Y 0, Mean 1, Variance 2. */
static nb_status run_layer_norm(const nb_kernel_ctx *k)
{
    const nb_layer_norm_params *p = k->params;
    int64_t rows, cols;
    const nb_tensor *x = nb_kin(k, 0, 0);
    ln_dims(p, x, &rows, &cols);
    return nb_cpu_layer_norm(k->label, x->dtype, rows, cols, nb_tensor_data(x), in_data(k, 1), in_data(k, 2),
                             p->epsilon, out_data(k, 0), out_data(k, 1), out_data(k, 2));
}

/* layer_norm_grad: X 0, Scale 1, Mean 2, Variance 3, DY 4 -> DX 0, DScale 1,
 * DBias 2. The row statistics are recomputed from X rather than read from
 * Mean and Variance, so that the op is a function of X, Scale and DY alone
 * (see run_batch_norm_grad), by the forward's row pass writing no Y. */
static nb_status run_layer_norm_grad(const nb_kernel_ctx *k)
{
    const nb_layer_norm_params *p = k->params;
    int64_t rows, cols;
    const nb_tensor *x = nb_kin(k, 0, 0);
    ln_dims(p, x, &rows, &cols);
    const size_t es = nb_dtype_size(x->dtype);
    char *mean = nb_malloc((size_t)(2 * rows + 1) * es);
    if (!mean) return nb_error(NB_ERR_NOMEM, "%s: out of memory", k->label);
    char *var = mean + (size_t)rows * es;
    nb_status st = nb_cpu_layer_norm(k->label, x->dtype, rows, cols, nb_tensor_data(x), NULL, NULL, p->epsilon,
                                     NULL, mean, var);
    if (!st)
        st = nb_cpu_layer_norm_grad(k->label, x->dtype, rows, cols, nb_tensor_data(x), in_data(k, 1), mean, var,
                                    p->epsilon, in_data(k, 4), out_data(k, 0), out_data(k, 1), out_data(k, 2));
    nb_free(mean);
    return st;
}

/* Inference takes float32 and float64 only. */
static const nb_kernel_def k_batch_norm = {.op = "batch_norm", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT,
                                           .provider = "nabla", .run = run_batch_norm};
static const nb_kernel_def k_batch_norm_grad = {.op = "batch_norm_grad", .device = NB_DEVICE_CPU,
                                                .dtypes = NB_DT_FLOAT, .provider = "nabla",
                                                .run = run_batch_norm_grad};
static const nb_kernel_def k_layer_norm = {.op = "layer_norm", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT,
                                           .provider = "nabla", .run = run_layer_norm};
static const nb_kernel_def k_layer_norm_grad = {.op = "layer_norm_grad", .device = NB_DEVICE_CPU,
                                                .dtypes = NB_DT_FLOAT, .provider = "nabla",
                                                .run = run_layer_norm_grad};

const nb_kernel_def *const nb_cpu_kernels_norm[] = {&k_batch_norm, &k_batch_norm_grad, &k_layer_norm,
                                                    &k_layer_norm_grad, NULL};
