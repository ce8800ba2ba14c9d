/* Private to the shape family, whose ops live in three files: shape.c
 * (layout ops, shared helpers and the family table), join.c (concat, stack,
 * split) and index.c (slice, pad and the index ops). */
#ifndef NABLA_OPS_SHAPE_INTERNAL_H
#define NABLA_OPS_SHAPE_INTERNAL_H

#include "nabla/op.h"

/* Names here carry nb_shapeop_ so that they never meet the public nb_shape_*
 * functions of nabla/tensor.h. */

/* Defined in join.c and index.c, listed in shape.c's table. */
extern const nb_op_def nb_op_concat, nb_op_split, nb_op_stack;
extern const nb_op_def nb_op_slice, nb_op_pad, nb_op_pad_grad, nb_op_gather, nb_op_index_select, nb_op_scatter_add,
    nb_op_one_hot;

/* Product of shape[from..to), -1 if any of those dims is unknown. */
static inline int64_t nb_shapeop_product(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) {
        if (shape[d] < 0) return -1;
        p *= shape[d];
    }
    return p;
}

/* Where slice starts along a dim of size n and how many elements it takes:
 * Python's rule for a positive step (negative bounds count from the end,
 * then both are clamped to [0, n]). Its gradient rule needs the same. */
static inline void nb_shapeop_slice_range(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first,
                                          int64_t *count)
{
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < 0 ? 0 : end > n ? n : end;
    *first = start;
    *count = end > start ? 1 + (end - start - 1) / step : 0;
}

#define SHAPE_STR(buf, info) nb_shape_str((buf), sizeof(buf), (info)->ndim, (info)->shape)

/* Maps `axis` (negative counts from the end) into [0, rank). On failure the
 * error names the op, the attribute and the slot's shape. `rank` may exceed
 * the rank of x where the axis counts in an output with new dims (stack,
 * unsqueeze). */
nb_status nb_shapeop_axis(const nb_op_ctx *c, const char *attr, int64_t axis, int rank, const char *slot,
                        const nb_var_info *x, int *out);

/* Whether the bytes of two tensors' elements intersect. */
bool nb_shapeop_overlap(const nb_tensor *a, const nb_tensor *b);

/* Kernels that move elements around cannot write into memory they still
 * read, and an output may be an input's own tensor. nb_shapeop_out_begin gives
 * the place to write: the output itself, or, when it overlaps any input,
 * a scratch buffer that nb_shapeop_out_end copies into it afterwards. */
typedef struct nb_shapeop_out {
    nb_tensor *t;
    void *data;
    void *scratch;
} nb_shapeop_out;

nb_status nb_shapeop_out_begin(const nb_op_ctx *c, nb_tensor *out, nb_shapeop_out *b);
void nb_shapeop_out_end(nb_shapeop_out *b);

#endif
