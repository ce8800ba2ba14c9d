/* Batch and layer normalisation on the CPU. Statistics accumulate in double
 * whatever the dtype. Batch norm reduces per plane (one channel of one
 * image, contiguous) in parallel and then per channel, so NCHW is read in
 * order; layer norm works row by row. The typed code lives in norm_impl.h,
 * included once per dtype. */
#include <math.h>
#include "../kernels.h"
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "norm.h"
#ifdef NABLA_HAVE_OPENMP
#define NB_PRAGMA(x) _Pragma(#x)
#define OMP_FOR_IF(cond) NB_PRAGMA(omp parallel for schedule(static) if(cond))
#else
#define OMP_FOR_IF(cond) (void)(cond);
#endif

#define PAR_MIN_WORK 32768.0
/* Columns per task when layer_norm_grad sums DScale and DBias over rows. */
#define COL_BLOCK 64

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

/* TRANSITION: filled as the family's kernels move to the registry. */
const nb_kernel_def *const nb_cpu_kernels_norm[] = {NULL};
