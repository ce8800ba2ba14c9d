/* Gradient rules of the norm family (private to the library). */
#ifndef NABLA_OPS_NORM_GRAD_H
#define NABLA_OPS_NORM_GRAD_H

#include "nabla/grad_rule.h"

nb_status nb_batch_norm_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_layer_norm_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_batch_norm_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_layer_norm_jvp(nb_builder *b, nb_grad_ctx *g);
/* The fused gradient ops' own rules (norm_composite.c). */
nb_status nb_batch_norm_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_batch_norm_grad_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_layer_norm_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_layer_norm_grad_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
