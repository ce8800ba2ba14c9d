/* Private to the shape family, whose ops live in three files: shape.c
 * (layout ops, shared helpers and the family table), join.c (concat, stack,
 * split) and index.c (slice, pad and the index ops). */
#ifndef NABLA_OPS_SHAPE_INTERNAL_H
#define NABLA_OPS_SHAPE_INTERNAL_H

#include "kernels/params/shape.h"
#include "nabla/op.h"

/* Names here carry nb_shapeop_ so that they never meet the public nb_shape_*
 * functions of nabla/tensor.h. */

/* Defined in join.c and index.c, listed in shape.c's table. */
extern const nb_op_def nb_op_concat, nb_op_split, nb_op_stack;
extern const nb_op_def nb_op_slice, nb_op_pad, nb_op_pad_grad, nb_op_gather, nb_op_index_select, nb_op_scatter_add,
    nb_op_one_hot;

/* The slice rule of kernels/params/shape.h, under the name the gradient
 * rule (shape_grad_index.c) knows it by. */
static inline void nb_shapeop_slice_range(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first,
                                          int64_t *count)
{
    nb_slice_range(n, start, end, step, first, count);
}

#define SHAPE_STR(buf, info) nb_shape_str((buf), sizeof(buf), (info)->ndim, (info)->shape)

/* Maps `axis` (negative counts from the end) into [0, rank). On failure the
 * error names the op, the attribute and the slot's shape. `rank` may exceed
 * the rank of x where the axis counts in an output with new dims (stack,
 * unsqueeze). */
nb_status nb_shapeop_axis(const nb_op_ctx *c, const char *attr, int64_t axis, int rank, const char *slot,
                          const nb_var_info *x, int *out);

/* The params function of the ops whose one parameter is the attribute
 * "axis" (nb_shape_axis_params): concat, stack, split, gather, scatter_add. */
nb_status nb_shapeop_axis_params(const nb_op_ctx *c, void *params);

#endif
