/* Pruning a block by its fetches, as Fluid's executor does. */
#include "nabla/device.h"
#include "prune.h"
#include "../core/strmap.h"
#include "../program/program_internal.h"

/* Which ops of block b a run needs (Fluid's pruning by fetch list): those
 * that write a fetched var, a persistable one (the run's lasting effects:
 * parameters, optimiser state) or an input in place, those that hold blocks,
 * and, transitively, those that write what a needed op reads. So fetching a
 * test clone's logits needs no label. A sub-block keeps every op, since its
 * control op reads its vars by name. */
nb_status nb_exec_needed_ops(const nb_block *b, int n_fetch, const char *const *fetch, bool *keep)
{
    nb_strmap live;
    nb_strmap_init(&live);
    nb_status st = NB_OK;
    for (int i = 0; i < n_fetch && !st; i++)
        if (fetch[i] && nb_strmap_put(&live, fetch[i], NULL)) st = NB_ERR_NOMEM;
    for (int i = b->n_ops - 1; i >= 0 && !st; i--) {
        const nb_op *op = b->ops[i];
        bool need = (op->def->flags & (NB_OP_STATEFUL | NB_OP_CONTROL)) != 0;
        for (int k = 0; k < nb_op_n_outputs(op) && !need; k++) {
            int found = 0;
            nb_strmap_get(&live, op->outputs[k], &found);
            const nb_var *v = nb_block_find_var_recursive(b, op->outputs[k]);
            need = found || (v && v->persistable);
        }
        keep[i] = need;
        for (int k = 0; need && k < nb_op_n_inputs(op) && !st; k++)
            if (op->inputs[k] && nb_strmap_put(&live, op->inputs[k], NULL)) st = NB_ERR_NOMEM;
    }
    nb_strmap_free(&live);
    return st ? nb_error(st, "prepare: out of memory") : NB_OK;
}
