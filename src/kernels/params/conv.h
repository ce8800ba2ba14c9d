/* Parameters of the convolution and pooling ops, as their kernels read them
 * (nabla/kernel.h). The op definitions (src/ops/conv.c) fill them from the
 * attributes once; they hold nothing that depends on the inputs' shapes,
 * which the kernels read from the tensors. Device independent. */
#ifndef NABLA_KERNELS_PARAMS_CONV_H
#define NABLA_KERNELS_PARAMS_CONV_H

#include <stdbool.h>
#include <stdint.h>

/* conv2d and conv2d_grad. The bottom and right paddings have already decided
 * the output's height and width, which the kernels take from the tensors. */
typedef struct nb_conv2d_params {
    int64_t strides[2];   /* h, w */
    int64_t paddings[4];  /* top, bottom, left, right */
    int64_t dilations[2]; /* h, w */
    int64_t groups;
} nb_conv2d_params;

/* pool2d and pool2d_grad. ceil_mode only decides the output's size, which
 * the kernels take from the tensors, so it is not here. */
typedef struct nb_pool2d_params {
    int64_t ksize[2];    /* h, w; ignored with global_pooling */
    int64_t strides[2];  /* h, w; ignored with global_pooling */
    int64_t paddings[4]; /* top, bottom, left, right; ignored with global_pooling */
    bool is_max;         /* pooling_type "max", else "avg" */
    bool global_pooling; /* one window covering the whole image */
    bool exclusive;      /* avg: divide by the non-padding count, else by the window's size */
} nb_pool2d_params;

#endif
