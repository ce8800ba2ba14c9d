/* Private to the shape family: the VJP and JVP rules of its ops (see
 * nabla/autodiff.h). Layout and join rules are in shape_grad.c, the rules of
 * slice, pad and the index ops in shape_grad_index.c.
 *
 * Every op of the family is linear in its differentiable inputs, so each
 * rule is another op of the family applied to dOut, and the rules of those
 * ops make gradients of gradients. */
#ifndef NABLA_OPS_SHAPE_GRAD_H
#define NABLA_OPS_SHAPE_GRAD_H

#include "nabla/grad_rule.h"

/* shape_grad.c */
nb_status nb_reshape_vjp(nb_builder *b, nb_grad_ctx *g); /* reshape, flatten, squeeze, unsqueeze, reshape_as */
nb_status nb_transpose_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_expand_vjp(nb_builder *b, nb_grad_ctx *g); /* expand, expand_as */
nb_status nb_concat_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_split_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_stack_vjp(nb_builder *b, nb_grad_ctx *g);

/* shape_grad_index.c */
nb_status nb_slice_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pad_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_gather_vjp(nb_builder *b, nb_grad_ctx *g); /* gather, index_select */
nb_status nb_scatter_add_vjp(nb_builder *b, nb_grad_ctx *g);

/* shape_jvp.c: JVP rules, each the op itself applied to the tangents */
nb_status nb_shape_jvp(nb_builder *b, nb_grad_ctx *g); /* ops linear in X alone */
nb_status nb_join_jvp(nb_builder *b, nb_grad_ctx *g);  /* concat, stack */
nb_status nb_scatter_add_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
