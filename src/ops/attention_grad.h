/* Rules of the attention family (private to the library). */
#ifndef NABLA_OPS_ATTENTION_GRAD_H
#define NABLA_OPS_ATTENTION_GRAD_H

#include "nabla/grad_rule.h"

nb_status nb_attention_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_attention_jvp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_attention_grad_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_attention_grad_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
