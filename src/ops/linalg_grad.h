/* Gradient rules of the linear-algebra family (linalg.c); see linalg_grad.c. */
#ifndef NABLA_OPS_LINALG_GRAD_H
#define NABLA_OPS_LINALG_GRAD_H

#include "nabla/grad_rule.h"

nb_status nb_vjp_matmul(nb_builder *b, nb_grad_ctx *g);
nb_status nb_vjp_fc(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_matmul(nb_builder *b, nb_grad_ctx *g);
nb_status nb_jvp_fc(nb_builder *b, nb_grad_ctx *g);

#endif
