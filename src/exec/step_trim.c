/* Trimming a loop's kept iteration scopes (nb_exec_trim_step, exec_env.h).
 *
 * A loop that will be differentiated keeps every iteration's scope, and an
 * iteration's scope holds every value its block wrote: an LSTM step's gate
 * pre-activations, the sums before them, the split gates... But the
 * gradient block reads only some of them, and some only for their shape
 * (sum_to's Like). Nothing else reads an iteration's scope, so the rest can
 * go as soon as the iteration is over: a char-rnn LSTM step keeps 7 of its
 * 16 values, and shapes for 6 more. */
#include <string.h>
#include "nabla/device.h"
#include "executor_internal.h"
#include "exec_env.h"

enum { TRIM_KEEP = 0, TRIM_DROP, TRIM_SHAPE };

/* How ops outside block `self` read `name`: bit 0 for its elements, bit 1
 * for its shape only. */
static unsigned reads_elsewhere(const nb_program *p, int self, const char *name)
{
    unsigned how = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        if (b == self) continue;
        const nb_block *blk = p->blocks[b];
        for (int j = 0; j < blk->n_ops; j++) {
            const nb_op *op = blk->ops[j];
            for (int s = 0; s < NB_MAX_SLOTS && op->def->inputs[s].name; s++)
                for (int k = op->in_begin[s]; k < op->in_begin[s + 1]; k++)
                    if (!strcmp(op->inputs[k], name)) how |= op->def->inputs[s].flags & NB_SLOT_SHAPE_ONLY ? 2u : 1u;
        }
    }
    return how;
}

static nb_status plan_trim(nb_prepared *pp)
{
    if (!(pp->trim = nb_calloc((size_t)pp->n_values + 1, 1))) return nb_error(NB_ERR_NOMEM, "run: out of memory");
    const nb_block *blk = pp->program->blocks[pp->block_idx];
    for (int i = 0; i < pp->n_values; i++) {
        const value *v = &pp->values[i];
        /* Only what this block itself writes, as a var of its own. */
        if (!v->written || !nb_block_find_var(blk, v->name)) continue;
        unsigned how = reads_elsewhere(pp->program, pp->block_idx, v->name);
        pp->trim[i] = how & 1 ? TRIM_KEEP : how & 2 ? TRIM_SHAPE : TRIM_DROP;
    }
    return NB_OK;
}

static bool named(const nb_attr_value *a, const char *name)
{
    for (int i = 0; a && i < a->n; i++)
        if (!strcmp(a->strs[i], name)) return true;
    return false;
}

nb_status nb_exec_trim_step(const nb_exec_env *env, int block_idx, nb_scope *step, const nb_attr_value *keep1,
                            const nb_attr_value *keep2)
{
    nb_block_cache *c = env->cache;
    nb_prepared *pp = block_idx > 0 && block_idx < c->n ? c->blocks[block_idx] : NULL;
    if (!pp) return NB_OK; /* the block has not run: nothing to trim */
    nb_status st = pp->trim ? NB_OK : plan_trim(pp);
    for (int i = 0; !st && i < pp->n_values; i++) {
        if (pp->trim[i] == TRIM_KEEP) continue;
        const char *name = pp->values[i].name;
        nb_tensor *t = nb_scope_find_local(step, name);
        if (!t || named(keep1, name) || named(keep2, name)) continue;
        if (pp->trim[i] == TRIM_DROP) {
            st = nb_scope_remove(step, name);
            continue;
        }
        nb_tensor *one, *shape_only;
        if ((st = nb_tensor_full(&one, t->dtype, 0, NULL, 0))) break;
        st = nb_tensor_expand(&shape_only, one, t->ndim, t->shape);
        nb_tensor_release(one);
        if (!st) {
            st = nb_scope_set(step, name, shape_only);
            nb_tensor_release(shape_only);
        }
    }
    return st;
}
