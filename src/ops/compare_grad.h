/* VJP and JVP rules of the comparison family. Comparisons and logic ops have no
 * gradient (NB_OP_NOT_DIFFERENTIABLE); only where has rules. */
#ifndef NABLA_OPS_COMPARE_GRAD_H
#define NABLA_OPS_COMPARE_GRAD_H

#include "nabla/grad_rule.h"

nb_status nb_where_vjp(nb_builder *b, nb_grad_ctx *g);
nb_status nb_where_jvp(nb_builder *b, nb_grad_ctx *g);

#endif
