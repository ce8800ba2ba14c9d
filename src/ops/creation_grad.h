/* Private to the creation family: the VJP and JVP rules of its ops. Only assign is
 * differentiable; fills, random initialisers and increment are not. */
#ifndef NABLA_OPS_CREATION_GRAD_H
#define NABLA_OPS_CREATION_GRAD_H

#include "nabla/grad_rule.h"

nb_status nb_assign_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_assign_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
