/* Gradient rules of the reduction family (reduce.c); see reduce_grad.c. */
#ifndef NABLA_OPS_REDUCE_GRAD_H
#define NABLA_OPS_REDUCE_GRAD_H

#include "nabla/grad_rule.h"
#include "nabla/op.h"

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

/* The family's ops along one axis (reduce_topk.c, reduce_index.c), which
 * reduce.c's table lists, and the calls their rules emit. */
extern const nb_op_def nb_op_topk, nb_op_gather_elements, nb_op_scatter_elements;
nb_value nb_gather_elements(nb_builder *b, nb_value x, nb_value index, int axis);
/* The rules of an op whose output 0 is gather_elements(X, index) along its
 * "axis" attribute (gather_elements itself, topk): dX scatters dOut back,
 * summed, and the tangent is gathered alike. */
nb_status nb_rule_gathered_vjp(nb_builder *b, nb_grad_ctx *g, nb_value index);
nb_status nb_rule_gathered_jvp(nb_builder *b, nb_grad_ctx *g, nb_value index);
/* reduction: "none", "add" or "mul". */
nb_value nb_scatter_elements(nb_builder *b, nb_value x, nb_value index, nb_value updates, int axis,
                             const char *reduction);

#endif
