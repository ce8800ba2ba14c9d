/* CPU kernels of the reduction family (src/ops/reduce.c): reductions over
 * axes, arg-reductions, the variadic sum and sum_to. */
#ifndef NABLA_KERNELS_CPU_REDUCE_H
#define NABLA_KERNELS_CPU_REDUCE_H

#include "nabla/kernel.h"
#include "nabla/tensor.h"
#include "../params/reduce.h"

/* Turns a list of n axes into a mask over the ndim dims of X (an empty list
 * selects them all). Negative axes count from the end; an axis out of range
 * or given twice is an NB_ERR_ARG naming `label` and X's shape. Shared by
 * shape inference, the kernels and the rules, so that all read axes alike. */
nb_status nb_reduce_axes_mask(const char *label, int n, const int64_t *axes, int ndim, const int64_t *shape,
                              bool mask[NB_MAX_DIMS]);

/* Which dims of X sum_to adds up so that X takes Like's shape: the leading
 * dims Like lacks, and those where Like has 1 and X does not. False if Like
 * does not broadcast to X (dims of -1 match anything). */
bool nb_sum_to_mask(int x_ndim, const int64_t *x_shape, int like_ndim, const int64_t *like_shape,
                    bool mask[NB_MAX_DIMS]);

/* The kernels of the ops along one axis (reduce_topk.c, reduce_index.c),
 * listed in the family's table. */
extern const nb_kernel_def nb_cpu_kernel_topk, nb_cpu_kernel_gather_elements, nb_cpu_kernel_scatter_elements;

#endif
