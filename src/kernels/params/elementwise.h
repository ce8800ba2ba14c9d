/* The parameters of the elementwise ops, one struct for the family: each op
 * reads the fields named after its attributes (nabla/elementwise_ops.h) and
 * ignores the rest. */
#ifndef NABLA_PARAMS_ELEMENTWISE_H
#define NABLA_PARAMS_ELEMENTWISE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nb_ew_params {
    double alpha;           /* leaky_relu, elu */
    double beta, threshold; /* softplus */
    double min, max;        /* clip */
    double scale, bias;     /* scale */
    bool bias_after_scale;  /* scale: scale * x + bias, else scale * (x + bias) */
    bool approximate;       /* gelu: the tanh form */
} nb_ew_params;

#endif
