/* Gradient rules of the reduction family (reduce.c); see reduce_grad.c. */
#ifndef NABLA_OPS_REDUCE_GRAD_H
#define NABLA_OPS_REDUCE_GRAD_H

#include "nabla/autodiff.h"

nb_status nb_vjp_reduce_sum(nb_builder *b, nb_grad_ctx *g);
nb_status nb_vjp_reduce_mean(nb_builder *b, nb_grad_ctx *g);
nb_status nb_vjp_reduce_max(nb_builder *b, nb_grad_ctx *g); /* reduce_min too */
nb_status nb_vjp_reduce_prod(nb_builder *b, nb_grad_ctx *g);
nb_status nb_vjp_logsumexp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_vjp_sum(nb_builder *b, nb_grad_ctx *g);
nb_status nb_vjp_sum_to(nb_builder *b, nb_grad_ctx *g);

nb_status nb_jvp_reduce_sum(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_reduce_mean(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_reduce_max(nb_builder *b, nb_grad_ctx *g); /* reduce_min too */
nb_status nb_jvp_reduce_prod(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_logsumexp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_sum(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_sum_to(nb_builder *b, nb_grad_ctx *g);

#endif
