/* Forward mode over one block, for the JVP rules of control-flow ops. */
#ifndef NABLA_FORWARD_INTERNAL_H
#define NABLA_FORWARD_INTERNAL_H

#include "nabla/grad_rule.h"
#include "../core/strmap.h"

/* Appends to block `blk` the JVP rule of each of its first n_ops ops that a
 * tangent reaches (and, when `needed` is not NULL, that needed[i] marks).
 * `tan` maps var names to their tangents' nb_var (NULL or
 * absent: zero) and receives the tangents of the ops' outputs. */
nb_status nb_jvp_block(nb_program *p, nb_block *blk, int n_ops, const bool *needed, nb_strmap *tan);

#endif
