/* nb_prepared_memory: where a prepared block's memory goes (nabla/executor.h),
 * from the liveness its buffer plan is built on and the sizes of the last
 * run. */
#include <string.h>
#include "nabla/device.h"
#include "nabla/scope.h"
#include "executor_internal.h"
#include "fuse.h"

/* The bytes a temporary written at step `born` takes during a run: none for
 * one that lives in a fused group's scratch (fuse.c). */
static size_t held_bytes(const nb_prepared *pp, const value *v, int born)
{
    int g = pp->steps[born].group;
    return v->local >= 0 && g >= 0 && pp->groups[g].ready ? 0 : v->bytes;
}

nb_status nb_prepared_memory(const nb_prepared *pp, nb_scope *scope, nb_memory_report *r)
{
    if (!pp || !r) return nb_error(NB_ERR_ARG, "memory report: needs a prepared program and a report");
    memset(r, 0, sizeof *r);
    int *born = nb_malloc(((size_t)pp->n_values + 1) * sizeof *born);
    if (!born) return nb_error(NB_ERR_NOMEM, "memory report: out of memory");
    for (int i = 0; i < pp->n_values; i++) born[i] = -1;
    for (int s = 0; s < pp->n_steps; s++)
        for (int k = 0; k < pp->steps[s].n_out; k++) {
            int v = pp->steps[s].out[k];
            if (born[v] < 0) born[v] = s;
        }
    for (int i = 0; i < pp->n_values; i++) {
        const value *v = &pp->values[i];
        if (v->kind == V_SCOPE) {
            const nb_tensor *t = scope ? nb_scope_find(scope, v->name) : NULL;
            if (t) r->scope_bytes += (size_t)nb_tensor_numel(t) * nb_dtype_size(t->dtype);
            continue;
        }
        if (v->kind != V_TEMP || born[i] < 0) continue;
        r->n_temporaries++;
        r->unplanned_bytes += v->bytes;
        if (v->fetched) r->fetched_bytes += v->bytes;
        nb_op_role role = pp->steps[born[i]].op->role;
        if ((unsigned)role < 5) r->role_bytes[role] += v->bytes;
    }
    for (int b = 0; b < pp->n_buffers; b++) r->planned_bytes += pp->buffers[b].cap;
    int first_bw = -1;
    for (int s = 0; s < pp->n_steps && first_bw < 0; s++)
        if (pp->steps[s].op->role == NB_ROLE_BACKWARD) first_bw = s;
    for (int i = 0; first_bw >= 0 && i < pp->n_values; i++) {
        const value *v = &pp->values[i];
        if (v->kind == V_TEMP && born[i] >= 0 && born[i] < first_bw && (v->fetched || v->last_use >= first_bw))
            r->activation_bytes += v->bytes;
    }
    r->n_buffers = pp->n_buffers;
    /* Live bytes at each op: a temporary from the op that writes it through
     * the last that touches it (a fetched one to the end). */
    r->peak_op = -1;
    for (int s = 0; s < pp->n_steps; s++) {
        size_t live = 0;
        for (int i = 0; i < pp->n_values; i++) {
            const value *v = &pp->values[i];
            if (v->kind == V_TEMP && born[i] >= 0 && born[i] <= s && (v->fetched || v->last_use >= s))
                live += held_bytes(pp, v, born[i]);
            /* Written in place over an input that dies here: one buffer. */
            if (v->kind == V_TEMP && born[i] == s && v->inplace_of >= 0) live -= pp->values[v->inplace_of].bytes;
        }
        if (live > r->peak_bytes || r->peak_op < 0) r->peak_bytes = live, r->peak_op = s;
    }
    /* The largest temporaries live at the peak. */
    for (int i = 0; r->peak_op >= 0 && i < pp->n_values; i++) {
        const value *v = &pp->values[i];
        int s = r->peak_op;
        if (v->kind != V_TEMP || born[i] < 0 || born[i] > s || (!v->fetched && v->last_use < s) ||
            !held_bytes(pp, v, born[i]))
            continue;
        int at = r->n_peak_vars < 8 ? r->n_peak_vars++ : 8;
        while (at > 0 && r->peak_var_bytes[at - 1] < v->bytes) {
            if (at < 8) r->peak_vars[at] = r->peak_vars[at - 1], r->peak_var_bytes[at] = r->peak_var_bytes[at - 1];
            at--;
        }
        if (at < 8) r->peak_vars[at] = v->name, r->peak_var_bytes[at] = v->bytes;
    }
    /* The step's op, by its position in the block (steps skip pruned ops; a
     * folded update's op is the block's sgd by id). */
    const nb_block *blk = pp->program->blocks[pp->block_idx];
    int pos = -1;
    for (int i = 0; r->peak_op >= 0 && i < blk->n_ops && pos < 0; i++)
        if (blk->ops[i]->id == pp->steps[r->peak_op].op->id) pos = i;
    r->peak_op = pos;
    nb_free(born);
    return NB_OK;
}
