/* CPU kernels of the nn family (softmax, losses, dropout, embedding,
 * accuracy) and the small helpers they share. The op definitions that point
 * at these live in src/ops/nn.c. */
#ifndef NABLA_KERNELS_CPU_NN_H
#define NABLA_KERNELS_CPU_NN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "nabla/op.h"

/* nn_softmax.c */
nb_status nb_cpu_softmax(nb_op_ctx *ctx);
nb_status nb_cpu_log_softmax(nb_op_ctx *ctx);
nb_status nb_cpu_softmax_with_cross_entropy(nb_op_ctx *ctx);
nb_status nb_cpu_softmax_with_cross_entropy_grad(nb_op_ctx *ctx);

/* nn_loss.c */
nb_status nb_cpu_cross_entropy(nb_op_ctx *ctx);
nb_status nb_cpu_mse_loss(nb_op_ctx *ctx);
nb_status nb_cpu_bce_with_logits(nb_op_ctx *ctx);

/* nn.c */
nb_status nb_cpu_dropout(nb_op_ctx *ctx);
nb_status nb_cpu_embedding(nb_op_ctx *ctx);
nb_status nb_cpu_embedding_grad(nb_op_ctx *ctx);
nb_status nb_cpu_accuracy(nb_op_ctx *ctx);

/* ---- shared helpers ------------------------------------------------------ */

/* Work (in elements) below which kernels stay on one thread: forking costs
 * more than it saves on small tensors. */
#define NB_NN_PAR_MIN 32768

/* Put before a for loop; it runs in parallel when a local `par` is true. */
#ifdef NABLA_HAVE_OPENMP
#define NB_NN_PARALLEL_FOR _Pragma("omp parallel for schedule(static) if (par)")
#else
#define NB_NN_PARALLEL_FOR
#endif

/* The loss reductions, parsed from the "reduction" attribute. */
typedef enum { NB_RED_BAD = -1, NB_RED_NONE, NB_RED_MEAN, NB_RED_SUM } nb_nn_reduction;

static inline nb_nn_reduction nb_nn_parse_reduction(const char *s)
{
    if (!strcmp(s, "mean")) return NB_RED_MEAN;
    if (!strcmp(s, "sum")) return NB_RED_SUM;
    if (!strcmp(s, "none")) return NB_RED_NONE;
    return NB_RED_BAD;
}

/* An axis attribute in [-ndim, ndim) made non-negative; a 0-d tensor is
 * treated as one class along axis 0. Infer has already range-checked it. */
static inline int nb_nn_axis(int64_t axis, int ndim)
{
    if (ndim == 0) return 0;
    return (int)(axis < 0 ? axis + ndim : axis);
}

/* Views a shape as [outer, C, inner] around `axis` (already normalised). */
static inline void nb_nn_split_axis(int ndim, const int64_t *shape, int axis, int64_t *outer, int64_t *C,
                                    int64_t *inner)
{
    int64_t o = 1, in = 1;
    for (int d = 0; d < axis; d++) o *= shape[d];
    for (int d = axis + 1; d < ndim; d++) in *= shape[d];
    *outer = o;
    *C = ndim ? shape[axis] : 1;
    *inner = in;
}

/* Element i of an int32 or int64 index tensor. Labels and ids are few next
 * to the values they index, so the dtype branch costs little. */
static inline int64_t nb_nn_index_at(const void *p, nb_dtype dt, int64_t i)
{
    return dt == NB_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* Checks every hard label of `label` is in [0, C) or equal to
 * *ignore_index (NULL: no label is ignored); on the first bad one, fails
 * naming the op, the value and its position. Kernels call it before they
 * write anything, so the loops after it may index with the labels freely. */
nb_status nb_nn_check_labels(const nb_op_ctx *ctx, const nb_tensor *label, int64_t C, const int64_t *ignore_index);

/* Formats the multi-index of flat element i of a shape, "[1, 0]", into buf. */
char *nb_nn_index_str(char *buf, size_t size, int ndim, const int64_t *shape, int64_t i);

#endif
