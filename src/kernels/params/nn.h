/* Parameter structs of the nn family (src/ops/nn.c), filled once from the
 * attributes by the ops' params functions and read by every backend's
 * kernels, with the small device-independent helpers that shape inference
 * and the kernels share. */
#ifndef NABLA_KERNELS_PARAMS_NN_H
#define NABLA_KERNELS_PARAMS_NN_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* softmax and log_softmax: the class axis as given, in [-ndim, ndim); the
 * kernel makes it non-negative with nb_nn_axis, as only it knows the rank. */
typedef struct nb_softmax_params {
    int64_t axis;
} nb_softmax_params;

/* softmax_with_cross_entropy and its gradient op. */
typedef struct nb_softmax_with_cross_entropy_params {
    int64_t axis;
    bool soft_label;
    int64_t ignore_index; /* hard labels equal to it give a zero loss and gradient */
} nb_softmax_with_cross_entropy_params;

/* cross_entropy: classes on the last axis. */
typedef struct nb_cross_entropy_params {
    bool soft_label;
    int64_t ignore_index;
} nb_cross_entropy_params;

/* The loss reductions, parsed from the "reduction" attribute. */
typedef enum { NB_RED_BAD = -1, NB_RED_NONE, NB_RED_MEAN, NB_RED_SUM } nb_nn_reduction;

static inline nb_nn_reduction nb_nn_parse_reduction(const char *s)
{
    if (!strcmp(s, "mean")) return NB_RED_MEAN;
    if (!strcmp(s, "sum")) return NB_RED_SUM;
    if (!strcmp(s, "none")) return NB_RED_NONE;
    return NB_RED_BAD;
}

/* mse_loss and bce_with_logits. */
typedef struct nb_pointwise_loss_params {
    nb_nn_reduction reduction;
} nb_pointwise_loss_params;

/* dropout. */
typedef struct nb_dropout_params {
    double prob; /* dropout_prob, in [0, 1) */
    bool is_test;
    bool upscale; /* mode "upscale_in_train" (else "downgrade_in_infer") */
} nb_dropout_params;

/* embedding and embedding_grad. */
typedef struct nb_embedding_params {
    int64_t padding_idx; /* -1: none */
} nb_embedding_params;

/* accuracy. */
typedef struct nb_accuracy_params {
    int64_t k;
} nb_accuracy_params;

/* An axis in [-ndim, ndim) made non-negative; a 0-d tensor is treated as
 * one class along axis 0. Shape inference has already range-checked it. */
static inline int nb_nn_axis(int64_t axis, int ndim)
{
    if (ndim == 0) return 0;
    return (int)(axis < 0 ? axis + ndim : axis);
}

#endif
