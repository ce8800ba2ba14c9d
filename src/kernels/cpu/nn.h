/* CPU kernels of the nn family (softmax, losses, dropout, embedding,
 * accuracy) and the small helpers they share. The ops are defined in
 * src/ops/nn.c, their parameter structs in kernels/params/nn.h; nn.c lists
 * the kernels in nb_cpu_kernels_nn. */
#ifndef NABLA_KERNELS_CPU_NN_H
#define NABLA_KERNELS_CPU_NN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "nabla/kernel.h"
#include "kernels/params/nn.h"

/* The kernels, listed in nb_cpu_kernels_nn (nn.c), with the parameter
 * structs they read. */
/* nn_softmax.c: nb_softmax_params, nb_softmax_with_cross_entropy_params */
nb_status nb_cpu_softmax(const nb_kernel_ctx *k);
nb_status nb_cpu_log_softmax(const nb_kernel_ctx *k);
nb_status nb_cpu_softmax_with_cross_entropy(const nb_kernel_ctx *k);
nb_status nb_cpu_softmax_with_cross_entropy_grad(const nb_kernel_ctx *k);

/* nn_loss.c: nb_cross_entropy_params, nb_pointwise_loss_params */
nb_status nb_cpu_cross_entropy(const nb_kernel_ctx *k);
nb_status nb_cpu_mse_loss(const nb_kernel_ctx *k);
nb_status nb_cpu_bce_with_logits(const nb_kernel_ctx *k);

/* nn.c itself has the kernels of dropout, embedding, embedding_grad and
 * accuracy (nb_dropout_params, nb_embedding_params, nb_accuracy_params). */

/* ---- shared helpers ------------------------------------------------------ */

/* Work (in elements) below which kernels stay on one thread: forking costs
 * more than it saves on small tensors. */
#define NB_NN_PAR_MIN 32768

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
 * naming the op (`op`, the kernel's label), the value and its position.
 * Kernels call it before they write anything, so the loops after it may
 * index with the labels freely. */
nb_status nb_nn_check_labels(const char *op, const nb_tensor *label, int64_t C, const int64_t *ignore_index);

/* Formats the multi-index of flat element i of a shape, "[1, 0]", into buf. */
char *nb_nn_index_str(char *buf, size_t size, int ndim, const int64_t *shape, int64_t i);

#endif
