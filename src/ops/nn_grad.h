/* Gradient (VJP) and forward-mode (JVP) rules of the nn family; the op definitions in nn.c point
 * at them. See nabla/autodiff.h for the rule interface. */
#ifndef NABLA_OPS_NN_GRAD_H
#define NABLA_OPS_NN_GRAD_H

#include "nabla/grad_rule.h"

nb_status nb_nn_softmax_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_log_softmax_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_softmax_with_cross_entropy_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_cross_entropy_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_mse_loss_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_bce_with_logits_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_dropout_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_embedding_vjp(nb_builder *b, nb_grad_ctx *g);

nb_status nb_nn_softmax_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_log_softmax_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_softmax_with_cross_entropy_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_cross_entropy_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_mse_loss_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_bce_with_logits_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_dropout_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_embedding_jvp(nb_builder *b, nb_grad_ctx *g);

/* The fused gradient ops' own rules. */
nb_status nb_nn_softmax_with_cross_entropy_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_softmax_with_cross_entropy_grad_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_embedding_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_nn_embedding_grad_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
