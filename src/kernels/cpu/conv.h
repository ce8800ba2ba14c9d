/* CPU kernels of 2-D convolution (NCHW): im2col + GEMM forward and the fused
 * backward pass (col2im for the input gradient). Private to the library. */
#ifndef NABLA_KERNELS_CPU_CONV_H
#define NABLA_KERNELS_CPU_CONV_H

#include "nabla/tensor.h"
#include "../params/conv.h"

/* Everything a convolution kernel needs to know about its shapes; the
 * kernels fill it from the tensors (validated by inference) and the
 * parameters. Only the top and left paddings appear:
 * the bottom and right ones have already decided ho and wo. */
typedef struct nb_conv2d_geom {
    int64_t n, c, h, w; /* Input [n, c, h, w] */
    int64_t m, kh, kw;  /* Filter [m, c / groups, kh, kw] */
    int64_t ho, wo;     /* Output [n, m, ho, wo] */
    int64_t stride_h, stride_w;
    int64_t pad_top, pad_left;
    int64_t dil_h, dil_w;
    int64_t groups;
} nb_conv2d_geom;

#endif
