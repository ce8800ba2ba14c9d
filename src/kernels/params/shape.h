/* The parameter structs of the shape family's kernels (reshape, transpose,
 * slice, pad, the join and index ops). The op definitions in src/ops/ fill
 * them from the attributes once; every device's kernels read the same
 * structs. They hold the attributes as given: an axis may still count from
 * the end, since only the kernel knows the rank of its tensors. */
#ifndef NABLA_KERNELS_PARAMS_SHAPE_H
#define NABLA_KERNELS_PARAMS_SHAPE_H

#include <stdint.h>
#include "nabla/tensor.h"

/* concat, stack, split, gather, index_select (its "dim"), scatter_add. */
typedef struct nb_shape_axis_params {
    int64_t axis;
} nb_shape_axis_params;

/* transpose: dim i of Out is dim perm[i] of X (perm[i] may be negative). */
typedef struct nb_transpose_params {
    int n;
    int64_t perm[NB_MAX_DIMS];
} nb_transpose_params;

/* slice: entry i takes starts[i]:ends[i]:strides[i] along axes[i]. Axes are
 * int32 so that the struct stays within the size an op's parameters may
 * have; strides are 1 where the attribute was not given. */
typedef struct nb_slice_params {
    int n;
    int32_t axes[NB_MAX_DIMS];
    int64_t starts[NB_MAX_DIMS], ends[NB_MAX_DIMS], strides[NB_MAX_DIMS];
} nb_slice_params;

typedef enum nb_pad_mode { NB_PAD_CONSTANT, NB_PAD_REFLECT, NB_PAD_EDGE } nb_pad_mode;

/* pad and pad_grad: paddings[2d] elements before and paddings[2d+1] after
 * dim d; value is the constant border's (pad only). */
typedef struct nb_pad_params {
    nb_pad_mode mode;
    int n;
    double value;
    int64_t paddings[2 * NB_MAX_DIMS];
} nb_pad_params;

/* one_hot: the size of the new last dim (Out's dtype is the output's own). */
typedef struct nb_one_hot_params {
    int64_t depth;
} nb_one_hot_params;

/* An axis that counts from the end (negative) as a dim of a rank-`rank`
 * value. Shape inference has checked the range; kernels only map it. */
static inline int nb_shapeparam_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

/* Where slice starts along a dim of size n and how many elements it takes:
 * Python's rule for a positive step (negative bounds count from the end,
 * then both are clamped to [0, n]). Shape inference, the kernels of every
 * device and the gradient rule all need the same answer. */
static inline void nb_slice_range(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count)
{
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < 0 ? 0 : end > n ? n : end;
    *first = start;
    *count = end > start ? 1 + (end - start - 1) / step : 0;
}

#endif
