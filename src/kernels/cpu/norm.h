/* CPU kernels of batch and layer normalisation and their gradients.
 * Private to the library. Every output pointer may be NULL (not wanted). */
#ifndef NABLA_KERNELS_CPU_NORM_H
#define NABLA_KERNELS_CPU_NORM_H

#include <stdbool.h>
#include "nabla/tensor.h"
#include "../params/norm.h"

/* Batch normalisation of x viewed as [n, c, s] (s: the product of the
 * spatial dims, 1 for [N, C]), per channel.
 * Training (global_stats false): normalises with the batch mean and biased
 * variance; mean_out/var_out = momentum * running + (1 - momentum) * batch
 * statistic, the variance unbiased; saved_mean = batch mean, saved_invstd =
 * 1 / sqrt(batch var + eps).
 * global_stats: normalises with mean/var; mean_out/var_out copy them and
 * saved_mean/saved_invstd hold mean and 1 / sqrt(var + eps).
 * mean_out/var_out may be mean/var, and y may be x. Training needs n * s > 1. */
nb_status nb_cpu_batch_norm(const char *label, nb_dtype dt, int64_t n, int64_t c, int64_t s, const void *x,
                            const void *scale, const void *bias, const void *mean, const void *var,
                            bool global_stats, double momentum, double eps, void *y, void *mean_out,
                            void *var_out, void *saved_mean, void *saved_invstd);

/* Gradients of batch_norm. `mean` is the mean used by the forward pass and
 * `stat` its spread: a variance when stat_is_var (then 1 / sqrt(stat + eps)
 * is used), else the inverse standard deviation. global_stats: the
 * statistics were constants of the forward pass. In training (not
 * global_stats) mean and stat may be NULL: the batch's statistics are then
 * computed from x, in the pass that sums dy. dx may be dy. */
nb_status nb_cpu_batch_norm_grad(const char *label, nb_dtype dt, int64_t n, int64_t c, int64_t s, const void *x,
                                 const void *scale, const void *mean, const void *stat, bool stat_is_var,
                                 bool global_stats, double eps, const void *dy, void *dx, void *dscale,
                                 void *dbias);

/* Layer normalisation of x viewed as [rows, cols], each row on its own.
 * scale and bias ([cols]) may be NULL; mean/var ([rows]) get the row mean and
 * biased variance. y may be x. */
nb_status nb_cpu_layer_norm(const char *label, nb_dtype dt, int64_t rows, int64_t cols, const void *x,
                            const void *scale, const void *bias, double eps, void *y, void *mean, void *var);

/* Gradients of layer_norm from the saved row mean and variance. dx may be dy. */
nb_status nb_cpu_layer_norm_grad(const char *label, nb_dtype dt, int64_t rows, int64_t cols, const void *x,
                                 const void *scale, const void *mean, const void *var, double eps, const void *dy,
                                 void *dx, void *dscale, void *dbias);

#endif
