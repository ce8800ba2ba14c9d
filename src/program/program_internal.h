/* Private parts of the program model. */
#ifndef NABLA_PROGRAM_INTERNAL_H
#define NABLA_PROGRAM_INTERNAL_H

#include "nabla/program.h"
#include "../core/strmap.h"
#include "../ops/op_internal.h"

void nb_op_free(nb_op *op);
nb_op *nb_op_clone(const nb_op *op);
/* Inserts an already-built op at pos (no checks); bumps the version. */
nb_status nb_block_push_op(nb_block *b, int pos, nb_op *op);

#endif
