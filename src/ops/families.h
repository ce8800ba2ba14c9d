/* The op families that make up the built-in registry. Each family file
 * defines a NULL-terminated table of its ops; registry.c lists the tables.
 * The control-flow ops (src/control/) register themselves: see
 * nb_control_register_ops in nabla/control.h. */
#ifndef NABLA_FAMILIES_H
#define NABLA_FAMILIES_H

#include "nabla/op.h"

extern const nb_op_def *const nb_ops_elementwise[]; /* elementwise.c: arithmetic, math, activations */
extern const nb_op_def *const nb_ops_compare[];     /* compare.c: comparisons, logic, where */
extern const nb_op_def *const nb_ops_reduce[];      /* reduce.c: reductions, arg-reductions, variadic sum */
extern const nb_op_def *const nb_ops_scan[];        /* scan.c: the scans of nabla/scan_ops.h */
extern const nb_op_def *const nb_ops_linalg[];      /* linalg.c: matmul, fc */
extern const nb_op_def *const nb_ops_shape[];       /* shape.c: reshape, concat, gather, ... */
extern const nb_op_def *const nb_ops_nn[];          /* nn.c: softmax, losses, dropout, embedding, accuracy */
extern const nb_op_def *const nb_ops_conv[];        /* conv.c: conv2d, pool2d */
extern const nb_op_def *const nb_ops_norm[];        /* norm.c: batch_norm, layer_norm */
extern const nb_op_def *const nb_ops_creation[];    /* creation.c: fill, random, assign, increment */
extern const nb_op_def *const nb_ops_optimizer[];   /* optimizer.c: sgd, momentum, adam, rmsprop, ..., lr_schedule */
extern const nb_op_def *const nb_ops_rnn[];         /* rnn.c: lstm_cell and its grad */
extern const nb_op_def *const nb_ops_attention[];   /* attention.c: scaled_dot_product_attention and its grad */
/* collective.c: c_allreduce_sum, c_allreduce_start and _wait, c_broadcast (data parallelism) */
extern const nb_op_def *const nb_ops_collective[];
extern const nb_op_def *const nb_ops_composite[]; /* composite_ops.c: softsign, mish, hardswish (expansions) */

#endif
