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

/* argmax, argmin. */
typedef struct nb_arg_params {
    int64_t axis;
    bool keepdim;
} nb_arg_params;

#endif
