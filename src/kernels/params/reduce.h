/* Parameters of the reduction family's kernels, filled from the attributes
 * by the op definitions (src/ops/reduce.c). Device independent. */
#ifndef NABLA_KERNELS_PARAMS_REDUCE_H
#define NABLA_KERNELS_PARAMS_REDUCE_H

#include <stdbool.h>
#include <stdint.h>
#include "nabla/tensor.h"

/* reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod, logsumexp:
 * the axes as given (none: all; negative ones count from the end). Shape
 * inference has refused lists longer than a rank can be. */
typedef struct nb_reduce_params {
    int n_axes;
    int64_t axes[NB_MAX_DIMS];
    bool keepdim;
} nb_reduce_params;

/* argmax, argmin; `last`: the last of equal values wins (ONNX's
 * select_last_index). */
typedef struct nb_arg_params {
    int64_t axis;
    bool keepdim, last;
} nb_arg_params;

/* topk: the k largest (or smallest) along axis. */
typedef struct nb_topk_params {
    int64_t k, axis;
    bool largest;
} nb_topk_params;

/* gather_elements, scatter_elements: the indexed axis, and how an update
 * meets the element it lands on. */
typedef enum nb_scatter_reduction { NB_SCATTER_NONE, NB_SCATTER_ADD, NB_SCATTER_MUL } nb_scatter_reduction;
typedef struct nb_elements_params {
    int64_t axis;
    nb_scatter_reduction reduction;
} nb_elements_params;

#endif
