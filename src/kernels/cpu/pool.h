/* CPU kernels of 2-D max and average pooling (NCHW) and their gradients.
 * Private to the library. */
#ifndef NABLA_KERNELS_CPU_POOL_H
#define NABLA_KERNELS_CPU_POOL_H

#include <stdbool.h>
#include "nabla/kernel.h"
#include "nabla/tensor.h"
#include "../params/conv.h"

/* Shapes and window of a pooling; the kernels fill it from the tensors
 * (validated by inference) and the parameters (global pooling arrives as a window the size of the image). The window of
 * output (i, j) starts at input row i * stride_h - pad_top and column
 * j * stride_w - pad_left; the parts outside the image are padding. */
typedef struct nb_pool2d_geom {
    int64_t n, c, h, w; /* X [n, c, h, w] */
    int64_t ho, wo;     /* Out [n, c, ho, wo] */
    int64_t kh, kw, stride_h, stride_w, pad_top, pad_left;
    bool is_max;
    bool exclusive; /* avg: divide by the non-padding count, else by kh * kw */
} nb_pool2d_geom;

/* The kernels of pool2d and pool2d_grad (nb_pool2d_params), which conv.c
 * lists in the family's table. */
nb_status nb_cpu_run_pool2d(const nb_kernel_ctx *k);
nb_status nb_cpu_run_pool2d_grad(const nb_kernel_ctx *k);

#endif
