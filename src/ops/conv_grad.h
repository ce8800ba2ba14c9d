/* Gradient rules of the conv and norm families (private to the library). */
#ifndef NABLA_OPS_CONV_GRAD_H
#define NABLA_OPS_CONV_GRAD_H

#include "nabla/grad_rule.h"
#include "nabla/op.h"

/* Copies into `out` the forward op's attributes that op `type` declares too
 * (all of them for conv2d -> conv2d_grad); returns how many. The values point
 * into the forward op: use them before it goes. */
int nb_convgrad_attrs(const nb_grad_ctx *g, const char *type, nb_attr out[NB_MAX_ATTRS]);

/* conv.c */
nb_status nb_conv2d_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pool2d_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_conv2d_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pool2d_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_conv2d_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pool2d_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_conv2d_grad_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_pool2d_grad_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
