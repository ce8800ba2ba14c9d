/* Parameters of the normalisation ops, as their kernels read them
 * (nabla/kernel.h). The op definitions (src/ops/norm.c) fill them from the
 * attributes once. Device independent. */
#ifndef NABLA_KERNELS_PARAMS_NORM_H
#define NABLA_KERNELS_PARAMS_NORM_H

#include <stdbool.h>
#include <stdint.h>

/* batch_norm and batch_norm_grad (which has no momentum and leaves it 0). */
typedef struct nb_batch_norm_params {
    double momentum;
    double epsilon;
    bool global_stats; /* is_test or use_global_stats: normalise with the running statistics */
} nb_batch_norm_params;

/* layer_norm and layer_norm_grad. begin_norm_axis is the attribute as given:
 * a negative one counts from the end of X's dims, which only the kernel
 * knows. */
typedef struct nb_layer_norm_params {
    int64_t begin_norm_axis;
    double epsilon;
} nb_layer_norm_params;

#endif
