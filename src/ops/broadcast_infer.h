/* Shape inference shared by ops that broadcast their inputs NumPy-style
 * (arithmetic, comparisons, where). Works on build-time shapes, where -1
 * (unknown) broadcasts with anything but a conflicting known size. */
#ifndef NABLA_OPS_BROADCAST_INFER_H
#define NABLA_OPS_BROADCAST_INFER_H

#include "nabla/op.h"

/* Broadcasts the shapes of input slots slots[0..n) (first value of each)
 * into out->ndim and out->shape, leaving out->dtype alone. On a mismatch
 * returns NB_ERR_SHAPE with a message naming the op and every slot's shape:
 *     add: cannot broadcast X of shape [2, 3] with Y of shape [4] */
nb_status nb_infer_broadcast(const nb_op_ctx *ctx, int n, const int *slots, nb_var_info *out);

/* NB_ERR_DTYPE unless input slots a and b have the same dtype:
 *     add: X is float32 but Y is float64; they must have the same dtype */
nb_status nb_infer_same_dtype(const nb_op_ctx *ctx, int a, int b);

#endif
