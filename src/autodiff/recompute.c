/* Recomputation in the backward pass (PaddlePaddle's RecomputeOptimizer,
 * JAX's checkpoint): the forward ops between two checkpoints form a
 * segment; when the reverse sweep reaches a segment's checkpoint, the
 * segment's ops are emitted again, reading the checkpoints and writing
 * fresh vars, and the gradient rules of the segment read those instead of
 * the forward values. Nothing reads the forward values after the forward
 * pass then, so the executor frees them there, and the backward pass holds
 * one segment's values at a time. Ops after the last checkpoint are not
 * recomputed (with checkpoints chosen by nb_backward_opts.recompute_segments
 * the last one is the last op on the gradient path, so every segment is).
 *
 * A recomputed random op is given the seed its original drew with, so that
 * it draws the same numbers (dropout masks agree, and gradients equal those
 * without recomputation bit for bit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/device.h"
#include "recompute.h"
#include "../program/program_internal.h"

void nb_recompute_init(nb_recompute *rc)
{
    memset(rc, 0, sizeof *rc);
    nb_strmap_init(&rc->remap);
}

void nb_recompute_free(nb_recompute *rc)
{
    nb_free(rc->boundary);
    nb_strmap_free(&rc->remap);
    memset(rc, 0, sizeof *rc);
}

static int last_writer(const nb_block *b, int end, const char *var)
{
    for (int i = end - 1; i >= 0; i--)
        for (int k = 0; k < nb_op_n_outputs(b->ops[i]); k++)
            if (!strcmp(b->ops[i]->outputs[k], var)) return i;
    return -1;
}

static int by_value(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

nb_status nb_recompute_plan(nb_recompute *rc, const nb_block *fwd, int fwd_end, const bool *on_path,
                            nb_names checkpoints, int segments)
{
    if (segments < 0 && segments != NB_RECOMPUTE_SQRT)
        return nb_error(NB_ERR_ARG, "recompute: %d segments; give a count >= 1 or NB_RECOMPUTE_SQRT", segments);
    int m = 0;
    for (int i = 0; i < fwd_end; i++) m += on_path[i];
    int cap = checkpoints.n + (segments > 0 ? segments : (int)ceil(sqrt((double)m))) + 1;
    if (!(rc->boundary = nb_calloc((size_t)cap, sizeof *rc->boundary)))
        return nb_error(NB_ERR_NOMEM, "recompute: out of memory");
    for (int j = 0; j < checkpoints.n; j++) {
        int at = last_writer(fwd, fwd_end, checkpoints.v[j]);
        if (at < 0)
            return nb_error(NB_ERR_NOT_FOUND, "recompute: checkpoint '%s' is not written by any op of the forward part",
                            checkpoints.v[j]);
        rc->boundary[rc->n++] = at;
    }
    /* k segments over the m ops on the gradient path: a boundary after
     * every m/k of them, the last after the last op, so that every segment
     * is recomputed and only the checkpoints outlive the forward pass. */
    int k = segments == NB_RECOMPUTE_SQRT ? (int)ceil(sqrt((double)m)) : segments;
    if (k > m) k = m;
    for (int j = 1, seen = 0, i = 0; j <= k && i < fwd_end; i++) {
        if (!on_path[i]) continue;
        if (++seen == (int)((int64_t)m * j / k)) {
            rc->boundary[rc->n++] = i;
            j++;
        }
    }
    qsort(rc->boundary, (size_t)rc->n, sizeof *rc->boundary, by_value);
    int u = 0;
    for (int j = 0; j < rc->n; j++)
        if (u == 0 || rc->boundary[u - 1] != rc->boundary[j]) rc->boundary[u++] = rc->boundary[j];
    rc->n = u;
    return NB_OK;
}

const char *nb_recompute_name(const nb_recompute *rc, const char *var)
{
    const nb_var *v = rc->n ? nb_strmap_get(&rc->remap, var, NULL) : NULL;
    return v ? v->name : var;
}

/* Whether op can be emitted again: not one that updates state in place (a
 * counter, an optimiser), not a random op whose draws cannot be fixed by a
 * seed attribute, and not a control-flow op: their step scopes bind the
 * values they capture by the names the sub-block reads, which a copy
 * reading recomputed vars would not match. They keep their forward values
 * (and step scopes); the ops around them are recomputed. */
static bool can_recompute(const nb_op *op)
{
    if (op->def->flags & (NB_OP_STATEFUL | NB_OP_CONTROL) || nb_op_n_outputs(op) == 0) return false;
    return !(op->def->flags & NB_OP_RANDOM) || nb_op_attr(op, "seed");
}

/* A copy of op reading the recomputed values where there are some and
 * writing fresh vars "<out>@RECOMPUTE...", appended to b. */
static nb_status emit_copy(nb_recompute *rc, nb_block *b, const nb_op *op)
{
    nb_program *p = b->program;
    nb_op *c = nb_op_clone(op);
    if (!c) return nb_error(NB_ERR_NOMEM, "recompute: out of memory");
    nb_status st = NB_OK;
    for (int k = 0; k < nb_op_n_inputs(c) && !st; k++) {
        const char *in = nb_recompute_name(rc, op->inputs[k]);
        if (in == op->inputs[k]) continue;
        char *s = nb_strdup(in);
        if (!s) st = nb_error(NB_ERR_NOMEM, "recompute: out of memory");
        else {
            nb_free(c->inputs[k]);
            c->inputs[k] = s;
        }
    }
    for (int k = 0; k < nb_op_n_outputs(c) && !st; k++) {
        const nb_var *o = nb_block_find_var_recursive(b, op->outputs[k]);
        char name[600];
        snprintf(name, sizeof name, "%s@RECOMPUTE", op->outputs[k]);
        for (int n = 2; nb_block_find_var_recursive(b, name); n++)
            snprintf(name, sizeof name, "%s@RECOMPUTE@%d", op->outputs[k], n);
        nb_var *v;
        char *s = nb_strdup(name);
        if (!s || !o)
            st = s ? nb_error(NB_ERR_NOT_FOUND, "recompute: no var '%s'", op->outputs[k])
                   : nb_error(NB_ERR_NOMEM, "recompute: out of memory");
        if (!st) st = nb_block_create_var(b, name, o->dtype, o->ndim, o->shape, &v);
        if (!st && nb_strmap_put(&rc->remap, op->outputs[k], v))
            st = nb_error(NB_ERR_NOMEM, "recompute: out of memory");
        if (st) {
            nb_free(s);
            break;
        }
        nb_free(c->outputs[k]);
        c->outputs[k] = s;
    }
    if (!st && op->def->flags & NB_OP_RANDOM) {
        int a = nb_op_attr_index(op->def, "seed");
        c->attrs[a] = (nb_attr_value){.type = NB_ATTR_INT, .i = (int64_t)nb_op_seed(p, op)};
    }
    if (!st) {
        c->id = p->next_op_id++;
        c->role = NB_ROLE_BACKWARD;
        nb_free(c->role_var[0]);
        nb_free(c->role_var[1]);
        c->role_var[0] = c->role_var[1] = NULL;
        if (nb_block_push_op(b, b->n_ops, c)) st = nb_error(NB_ERR_NOMEM, "recompute: out of memory");
        else return NB_OK;
    }
    nb_op_free(c);
    return st;
}

nb_status nb_recompute_before(nb_recompute *rc, nb_block *b, const nb_block *fwd, int i)
{
    int j = 0;
    while (j < rc->n && rc->boundary[j] != i) j++;
    if (j == rc->n) return NB_OK;
    nb_status st = NB_OK;
    for (int t = j > 0 ? rc->boundary[j - 1] + 1 : 0; t < i && !st; t++)
        if (can_recompute(fwd->ops[t])) st = emit_copy(rc, b, fwd->ops[t]);
    return st;
}
