/* nb_program_clone_for_test: the inference copy of a training program. */
#include <string.h>
#include "program_internal.h"

/* Whether op belongs to the training-only part: gradients and updates. */
static bool training_only(const nb_op *op)
{
    if (op->role == NB_ROLE_BACKWARD || op->role == NB_ROLE_OPTIMIZE) return true;
    /* The op seeding loss@GRAD carries the loss role too. */
    for (int k = 0; k < nb_op_n_outputs(op); k++)
        if (strstr(op->outputs[k], "@GRAD")) return true;
    return false;
}

nb_status nb_program_clone_for_test(nb_program **out, const nb_program *p)
{
    nb_status st = nb_program_clone(out, p);
    if (st) return st;
    for (int bi = 0; bi < (*out)->n_blocks; bi++) {
        nb_block *b = (*out)->blocks[bi];
        for (int i = b->n_ops - 1; i >= 0; i--) {
            if (training_only(b->ops[i])) {
                nb_block_remove_op(b, i);
                continue;
            }
            int a = nb_op_attr_index(b->ops[i]->def, "is_test");
            if (a >= 0 && b->ops[i]->attrs[a].type == NB_ATTR_BOOL) b->ops[i]->attrs[a].b = true;
        }
    }
    (*out)->version++;
    return NB_OK;
}
