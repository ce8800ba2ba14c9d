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
#include "../params/norm.h"
#include "simd.h"
#include "team.h"

#define PAR_MIN_WORK 32768.0
/* Columns per task when layer_norm_grad sums DScale and DBias over rows. */
#define COL_BLOCK 64
/* Of which a task sums this many at a time: two sums a column, sixteen
 * columns of doubles, are eight AVX2 registers. (All 64 at once went through
 * memory at every row.) */
#define COL_REG 16

static double *dalloc(int64_t count) { return nb_malloc(count > 0 ? (size_t)count * sizeof(double) : 1); }

/* Per-channel totals of per-plane sums laid out as [n, c]. */
static void sum_planes(const double *planes, int64_t n, int64_t c, double *out)
{
    for (int64_t ch = 0; ch < c; ch++) out[ch] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++) out[ch] += planes[i * c + ch];
}

/* The tensors of batch_norm: x viewed as [n, c, s], the per-channel
 * inputs, and the outputs, each NULL when not given or not wanted. */
typedef struct bn_tensors {
    int64_t n, c, s;
    const void *x, *scale, *bias, *mean, *var;
    void *y, *mean_out, *var_out, *saved_mean, *saved_invstd;
} bn_tensors;

/* The tensors of batch_norm_grad. `mean` is the mean the forward pass used
 * and `stat` its spread: a variance when stat_is_var (then 1 / sqrt(stat +
 * eps) is used), else the inverse standard deviation. */
typedef struct bn_grad_tensors {
    int64_t n, c, s;
    const void *x, *scale, *mean, *stat, *dy;
    bool stat_is_var;
    void *dx, *dscale, *dbias;
} bn_grad_tensors;

/* The tensors of layer_norm: x viewed as [rows, cols]; scale and bias
 * ([cols]) may be NULL; mean/var ([rows]) get the row mean and biased
 * variance. Any output may be NULL; y may be x. */
typedef struct ln_tensors {
    int64_t rows, cols;
    const void *x, *scale, *bias;
    void *y, *mean, *var;
} ln_tensors;

/* The tensors of layer_norm_grad; mean and var are the rows' statistics. */
typedef struct ln_grad_tensors {
    int64_t rows, cols;
    const void *x, *scale, *mean, *var, *dy;
    void *dx, *dscale, *dbias;
} ln_grad_tensors;

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

/* Batch normalisation of x viewed as [n, c, s] (s: the product of the
 * spatial dims, 1 for [N, C]), per channel.
 * Training (not p->global_stats): normalises with the batch mean and biased
 * variance; mean_out/var_out = momentum * running + (1 - momentum) * batch
 * statistic, the variance unbiased; saved_mean = batch mean, saved_invstd =
 * 1 / sqrt(batch var + eps).
 * global_stats: normalises with mean/var; mean_out/var_out copy them and
 * saved_mean/saved_invstd hold mean and 1 / sqrt(var + eps).
 * mean_out/var_out may be mean/var, and y may be x. Training needs n * s > 1. */
static nb_status batch_norm(const char *label, nb_dtype dt, const nb_batch_norm_params *p, const bn_tensors *t)
{
    switch (dt) {
    case NB_F32: return batch_norm_f32(label, p, t);
    case NB_F64: return batch_norm_f64(label, p, t);
    default: return no_kernel(label, dt);
    }
}

/* Gradients of batch_norm. p->momentum is not read. In training (not
 * p->global_stats) t->mean and t->stat may be NULL: the batch's statistics
 * are then computed from x, in the pass that sums dy. dx may be dy. */
static nb_status batch_norm_grad(const char *label, nb_dtype dt, const nb_batch_norm_params *p,
                                 const bn_grad_tensors *t)
{
    switch (dt) {
    case NB_F32: return batch_norm_grad_f32(label, p, t);
    case NB_F64: return batch_norm_grad_f64(label, p, t);
    default: return no_kernel(label, dt);
    }
}

/* Layer normalisation of x viewed as [rows, cols], each row on its own. */
static nb_status layer_norm(const char *label, nb_dtype dt, double eps, const ln_tensors *t)
{
    switch (dt) {
    case NB_F32: layer_norm_f32(eps, t); return NB_OK;
    case NB_F64: layer_norm_f64(eps, t); return NB_OK;
    default: return no_kernel(label, dt);
    }
}

/* Gradients of layer_norm from the saved row mean and variance. dx may be dy. */
static nb_status layer_norm_grad(const char *label, nb_dtype dt, double eps, const ln_grad_tensors *t)
{
    switch (dt) {
    case NB_F32: return layer_norm_grad_f32(label, eps, t);
    case NB_F64: return layer_norm_grad_f64(label, eps, t);
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
    const bn_tensors t = {n,
                          c,
                          s,
                          nb_tensor_data(x),
                          in_data(k, 1),
                          in_data(k, 2),
                          in_data(k, 3),
                          in_data(k, 4),
                          out_data(k, 0),
                          out_data(k, 1),
                          out_data(k, 2),
                          out_data(k, 3),
                          out_data(k, 4)};
    return batch_norm(k->label, x->dtype, p, &t);
}

/* batch_norm_grad: X 0, Scale 1, SavedMean 2, SavedVariance 3, DY 4, Mean 5,
 * Variance 6 -> DX 0, DScale 1, DBias 2. */
static nb_status run_batch_norm_grad(const nb_kernel_ctx *k)
{
    const nb_batch_norm_params *p = k->params;
    int64_t n, c, s;
    const nb_tensor *x = nb_kin(k, 0, 0);
    bn_dims(x, &n, &c, &s);
    /* With global statistics the running Mean and Variance, when given, are
     * the statistics; otherwise the saved ones are (the forward op saves the
     * running ones in that mode too). In training the batch's statistics
     * are recomputed from X, not read from SavedMean/SavedVariance: that
     * makes the op a function of X, Scale and DY alone, which is what its
     * own rules differentiate (ops/norm_composite.c). */
    const bool global = p->global_stats, running = global && nb_khas_in(k, 5);
    const bn_grad_tensors t = {n,
                               c,
                               s,
                               nb_tensor_data(x),
                               in_data(k, 1),
                               global ? in_data(k, running ? 5 : 2) : NULL,
                               global ? in_data(k, running ? 6 : 3) : NULL,
                               in_data(k, 4),
                               running,
                               out_data(k, 0),
                               out_data(k, 1),
                               out_data(k, 2)};
    return batch_norm_grad(k->label, x->dtype, p, &t);
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
    const ln_tensors t = {rows,          cols,           nb_tensor_data(x), in_data(k, 1),
                          in_data(k, 2), out_data(k, 0), out_data(k, 1),    out_data(k, 2)};
    return layer_norm(k->label, x->dtype, p->epsilon, &t);
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
    const ln_tensors stats = {rows, cols, nb_tensor_data(x), NULL, NULL, NULL, mean, var};
    nb_status st = layer_norm(k->label, x->dtype, p->epsilon, &stats);
    if (!st) {
        const ln_grad_tensors t = {rows, cols,          nb_tensor_data(x), in_data(k, 1),  mean,
                                   var,  in_data(k, 4), out_data(k, 0),    out_data(k, 1), out_data(k, 2)};
        st = layer_norm_grad(k->label, x->dtype, p->epsilon, &t);
    }
    nb_free(mean);
    return st;
}

/* Inference takes float32 and float64 only. */
static const nb_kernel_def k_batch_norm = {
    .op = "batch_norm", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_batch_norm};
static const nb_kernel_def k_batch_norm_grad = {.op = "batch_norm_grad",
                                                .device = NB_DEVICE_CPU,
                                                .dtypes = NB_DT_FLOAT,
                                                .provider = "nabla",
                                                .run = run_batch_norm_grad};
static const nb_kernel_def k_layer_norm = {
    .op = "layer_norm", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_layer_norm};
static const nb_kernel_def k_layer_norm_grad = {.op = "layer_norm_grad",
                                                .device = NB_DEVICE_CPU,
                                                .dtypes = NB_DT_FLOAT,
                                                .provider = "nabla",
                                                .run = run_layer_norm_grad};

const nb_kernel_def *const nb_cpu_kernels_norm[] = {&k_batch_norm, &k_batch_norm_grad, &k_layer_norm,
                                                    &k_layer_norm_grad, NULL};
