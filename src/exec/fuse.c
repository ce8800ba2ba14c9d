/* Fusion: a run of consecutive pointwise steps executed as one pass.
 *
 * An activation's gradient is two or three elementwise ops (relu's is
 * mul(d, sign(out)), tanh's mul(d, scale(square(out)))), an LSTM cell's
 * gates a dozen. One by one, each op reads its inputs from memory and writes
 * its output back, and each pays for a dispatch and a thread split. Here the
 * elements are taken in slices of FUSE_SLICE, and every step of the group
 * runs on a slice before the next slice starts, so a value goes from one
 * step to the next through the first-level cache. A value that only the
 * group uses (value.local) never exists in full: it lives in one slice of
 * scratch on the stack of the thread running that slice, and gets no buffer.
 *
 * A step joins a group when its kernel has a pointwise form
 * (nb_kernel_def.pointwise) and its inputs are declared with its output's
 * shape or hold one element; a group is a run of such steps whose outputs
 * are declared with one shape. Declarations may leave the batch size open,
 * so a group runs step by step on its first run and whenever its inputs'
 * shapes change, and then checks the real shapes (check_shapes); while they
 * hold, it runs as one pass.
 *
 * Running step k of every slice before step k + 1 of the next is the same
 * computation as running the steps one after another: each step reads and
 * writes element i only while working on the slice that holds i, so the
 * buffers the planner shares between values that do not live at once are
 * still read before they are written over. An input of one element (read by
 * every slice) is the exception, and bind_group refuses a pass whose outputs
 * overlap such an input. NABLA_FUSE=0 turns fusion off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuse.h"
#include "../kernels/cpu/broadcast.h"
#include "../kernels/cpu/team.h"
#include "../ops/op_internal.h"
#include "../program/program_internal.h"

#define FUSE_SLICE 1024    /* elements per slice: 4 KiB of float per value */
#define FUSE_MAX_LOCAL 8   /* values kept in scratch per group; more get buffers */
#define FUSE_MAX_OPERANDS 4 /* a step's inputs and its output */

bool nb_fuse_enabled(void)
{
    const char *e = getenv("NABLA_FUSE");
    return !e || strcmp(e, "0") != 0;
}

/* ---- forming groups from declarations --------------------------------------- */

static bool same_decl(const nb_var *a, const nb_var *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]);
}

static bool one_element(const nb_var *v)
{
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] != 1) return false;
    return true;
}

/* The kernel of highest priority for op in dtype dt, whatever its accepts
 * says: a guess at the one a run will pick, which check_shapes confirms. */
static const nb_kernel_def *likely_kernel(const char *op, nb_dtype dt)
{
    for (int i = 0;; i++) {
        const nb_kernel_def *k = nb_kernel_at(op, NB_DEVICE_CPU, i);
        if (!k || (k->dtypes & NB_DT(dt))) return k;
    }
}

/* Whether op, with the parameter struct `params`, may join a group. */
static bool fusable(const nb_block *b, const nb_op *op, const void *params)
{
    int n_in = nb_op_n_inputs(op);
    if ((op->def->flags & (NB_OP_CONTROL | NB_OP_RANDOM | NB_OP_STATEFUL)) || nb_op_n_outputs(op) != 1 || n_in < 1 ||
        n_in + 1 > FUSE_MAX_OPERANDS)
        return false;
    const nb_var *out = nb_block_find_var_recursive(b, op->outputs[0]);
    if (!out) return false;
    for (int k = 0; k < n_in; k++) {
        const nb_var *in = nb_block_find_var_recursive(b, op->inputs[k]);
        if (!in || !(same_decl(in, out) || one_element(in))) return false;
    }
    nb_dtype dt = nb_block_find_var_recursive(b, op->inputs[0])->dtype;
    const nb_kernel_def *k = likely_kernel(op->def->name, dt);
    nb_pointwise f;
    return k && k->pointwise && k->pointwise(params, dt, &f);
}

static const nb_var *out_var(const nb_block *b, const nb_op *op)
{
    return nb_block_find_var_recursive(b, op->outputs[0]);
}

/* group[i] = the group of ops[i] or -1, over runs of fusable ops (ok[i])
 * whose outputs are declared alike; returns the number of groups. */
static int form_groups(const nb_block *b, const nb_op *const *ops, const bool *ok, int n, int *group)
{
    int n_groups = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (ok[i] && j + 1 < n && ok[j + 1] && j + 1 - i < FUSE_MAX_STEPS &&
               same_decl(out_var(b, ops[j + 1]), out_var(b, ops[i])))
            j++;
        for (int k = i; k <= j; k++) group[k] = j > i ? n_groups : -1;
        n_groups += j > i;
        i = j + 1;
    }
    return n_groups;
}

nb_status nb_fuse_plan(nb_prepared *pp, const nb_block *b)
{
    int n = pp->n_steps;
    if (!nb_fuse_enabled() || n < 2) return NB_OK;
    const nb_op **ops = nb_malloc((size_t)n * sizeof *ops);
    bool *ok = nb_calloc((size_t)n, sizeof *ok);
    int *group = nb_malloc((size_t)n * sizeof *group), *writers = nb_calloc((size_t)pp->n_values + 1, sizeof *writers);
    nb_status st = NB_OK;
    if (!ops || !ok || !group || !writers) {
        st = nb_error(NB_ERR_NOMEM, "prepare: out of memory");
        goto done;
    }
    for (int s = 0; s < n; s++) {
        const step *sp = &pp->steps[s];
        ops[s] = sp->op;
        ok[s] = !sp->run_once && !sp->folded && fusable(b, sp->op, sp->params);
        for (int k = 0; k < sp->n_out; k++) writers[sp->out[k]]++;
    }
    int n_groups = form_groups(b, ops, ok, n, group);
    if (!n_groups) goto done;
    if (!(pp->groups = nb_calloc((size_t)n_groups, sizeof *pp->groups))) {
        st = nb_error(NB_ERR_NOMEM, "prepare: out of memory");
        goto done;
    }
    pp->n_groups = n_groups;
    for (int s = 0; s < n; s++) {
        pp->steps[s].group = group[s];
        if (group[s] < 0) continue;
        struct fuse_group *g = &pp->groups[group[s]];
        if (!g->n) g->first = s;
        g->n++;
    }
    /* A temporary written once, by a step of the group, and touched by no
     * step after it, lives in scratch. An input of one element is read by
     * every slice, so it lives to the group's end: no output of the group
     * may take its buffer over. */
    for (int gi = 0; gi < n_groups; gi++) {
        const struct fuse_group *g = &pp->groups[gi];
        int end = g->first + g->n - 1;
        for (int s = g->first; s <= end; s++)
            for (int k = 0; k < pp->steps[s].n_in; k++) {
                value *v = &pp->values[pp->steps[s].in[k]];
                if (v->var && one_element(v->var) && v->last_use < end) v->last_use = end;
            }
        /* Slots are handed out by liveness, as buffers are: a value's slot
         * is free again after the step that reads it last. */
        int free_slot[FUSE_MAX_LOCAL], n_free = 0;
        for (int i = FUSE_MAX_LOCAL - 1; i >= 0; i--) free_slot[n_free++] = i;
        for (int s = g->first; s <= end; s++) {
            const step *sp = &pp->steps[s];
            for (int k = 0; k < sp->n_in; k++) {
                const value *v = &pp->values[sp->in[k]];
                bool first_read = true;
                for (int j = 0; j < k; j++) first_read &= sp->in[j] != sp->in[k];
                if (v->local >= 0 && v->last_use == s && first_read) free_slot[n_free++] = v->local;
            }
            value *o = &pp->values[sp->out[0]];
            if (o->kind != V_TEMP || o->fetched || writers[sp->out[0]] != 1 || o->last_use > end || !n_free) continue;
            o->local = free_slot[--n_free];
            if (o->last_use == s) free_slot[n_free++] = o->local; /* never read */
        }
    }
done:
    nb_free(ops);
    nb_free(ok);
    nb_free(group);
    nb_free(writers);
    return st;
}

void nb_fuse_free(nb_prepared *pp)
{
    nb_free(pp->groups);
    pp->groups = NULL;
    pp->n_groups = 0;
}

/* ---- checking a run's shapes -------------------------------------------------- */

static int64_t info_numel(const nb_var_info *i) { return nb_shape_numel(i->ndim, i->shape); }

/* After a run step by step: whether the shapes it saw allow one pass, and
 * the loops of the kernels it picked. */
static bool check_shapes(const nb_prepared *pp, struct fuse_group *g)
{
    g->numel = -1;
    g->math = false;
    for (int i = 0; i < g->n; i++) {
        const step *st = &pp->steps[g->first + i];
        const nb_kernel_def *k = st->kernel;
        if (!k || !k->pointwise || st->n_out != 1 || !k->pointwise(st->params, st->in_info[0].dtype, &g->pw[i]))
            return false;
        int64_t n = info_numel(&st->out_info[0]);
        if (g->numel < 0) g->numel = n;
        if (n != g->numel) return false;
        for (int j = 0; j < st->n_in; j++) {
            int64_t m = info_numel(&st->in_info[j]);
            if (m != n && m != 1) return false;
        }
        g->math |= g->pw[i].math;
    }
    return g->numel > 0;
}

/* ---- one pass ----------------------------------------------------------------- */

/* Where each step of a pass finds its operands: a slot of scratch, or a
 * tensor's elements (stride 1) or its one element (stride 0). */
typedef struct fuse_pass {
    const struct fuse_group *g;
    int n_ops[FUSE_MAX_STEPS];
    int slot[FUSE_MAX_STEPS][FUSE_MAX_OPERANDS];
    char *base[FUSE_MAX_STEPS][FUSE_MAX_OPERANDS];
    int64_t elsize[FUSE_MAX_STEPS][FUSE_MAX_OPERANDS];
    int64_t stride[FUSE_MAX_STEPS][FUSE_MAX_OPERANDS];
} fuse_pass;

static void run_slices(void *ctx, int64_t lo, int64_t hi)
{
    const fuse_pass *p = ctx;
    const struct fuse_group *g = p->g;
    _Alignas(64) char scratch[FUSE_MAX_LOCAL][FUSE_SLICE * 8];
    for (int64_t c = lo; c < hi; c++) {
        int64_t e0 = c * FUSE_SLICE, n = g->numel - e0 < FUSE_SLICE ? g->numel - e0 : FUSE_SLICE;
        for (int i = 0; i < g->n; i++) {
            char *ptr[FUSE_MAX_OPERANDS];
            for (int k = 0; k < p->n_ops[i]; k++)
                ptr[k] = p->slot[i][k] >= 0 ? scratch[p->slot[i][k]]
                                            : p->base[i][k] + p->stride[i][k] * e0 * p->elsize[i][k];
            g->pw[i].loop(n, ptr, p->stride[i], g->pw[i].aux);
        }
    }
}

static void operand(fuse_pass *p, int i, int k, const value *v)
{
    p->slot[i][k] = v->local;
    p->stride[i][k] = 1;
    if (v->local >= 0) return;
    p->base[i][k] = nb_tensor_data(v->t);
    p->elsize[i][k] = (int64_t)nb_dtype_size(v->t->dtype);
    p->stride[i][k] = nb_tensor_numel(v->t) == p->g->numel ? 1 : 0;
}

static bool overlap(const char *a, int64_t na, const char *b, int64_t nb) { return a < b + nb && b < a + na; }

/* Binds the group's outputs and fills the pass, or returns false (binding
 * nothing that matters) where the inputs no longer have the shapes of the
 * last check, or an output would overwrite an input of one element that
 * later slices still read. *err is set if binding fails. */
static bool bind_group(nb_prepared *pp, nb_scope *scope, const struct fuse_group *g, fuse_pass *p, nb_status *err)
{
    *err = NB_OK;
    p->g = g;
    for (int i = 0; i < g->n; i++) {
        step *st = &pp->steps[g->first + i];
        for (int k = 0; k < st->n_in; k++) {
            const value *v = &pp->values[st->in[k]];
            const nb_var_info *inf = &st->in_info[k];
            const nb_tensor *t = v->t;
            if (v->local < 0 &&
                (!t || t->dtype != inf->dtype || !nb_shape_equal(t->ndim, t->shape, inf->ndim, inf->shape) ||
                 !nb_tensor_is_contiguous(t)))
                return false;
            operand(p, i, k, v);
        }
        const value *o = &pp->values[st->out[0]];
        if (o->local < 0 && (*err = nb_exec_step_bind(pp, scope, st, 0))) return true;
        operand(p, i, st->n_in, o);
        p->n_ops[i] = st->n_in + 1;
    }
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k + 1 < p->n_ops[i]; k++) {
            if (p->slot[i][k] >= 0 || p->stride[i][k]) continue;
            for (int j = 0; j < g->n; j++) {
                int o = p->n_ops[j] - 1;
                if (p->slot[j][o] < 0 &&
                    overlap(p->base[i][k], p->elsize[i][k], p->base[j][o], g->numel * p->elsize[j][o]))
                    return false;
            }
        }
    return true;
}

nb_status nb_fuse_run(nb_prepared *pp, nb_scope *scope, struct fuse_group *g)
{
    if (g->ready) {
        fuse_pass p;
        nb_status err;
        if (bind_group(pp, scope, g, &p, &err)) {
            if (err) return err;
            int64_t slices = (g->numel + FUSE_SLICE - 1) / FUSE_SLICE;
            int64_t grain = g->math ? NB_BCAST_GRAIN_MATH : NB_BCAST_GRAIN_CHEAP / g->n;
            if (grain < NB_BCAST_GRAIN_MATH) grain = NB_BCAST_GRAIN_MATH;
            nb_team_for(slices, g->numel >= 2 * grain, run_slices, &p);
            pp->fused_steps += g->n;
            return NB_OK;
        }
    }
    for (int i = 0; i < g->n; i++) {
        nb_status st = nb_exec_step_run(pp, scope, &pp->steps[g->first + i]);
        if (st) return st;
    }
    g->ready = check_shapes(pp, g);
    /* From now on the group's own values live in scratch. */
    for (int i = 0; g->ready && i < g->n; i++) {
        value *v = &pp->values[pp->steps[g->first + i].out[0]];
        if (v->local >= 0) nb_exec_value_drop_storage(v);
    }
    return NB_OK;
}

/* ---- what nabla dot draws ------------------------------------------------------ */

int nb_fusion_groups(const nb_program *p, int block_idx, int *group)
{
    const nb_block *b = nb_program_block((nb_program *)p, block_idx);
    if (!b || !group) {
        nb_error(NB_ERR_ARG, "fusion_groups: no block %d, or no array for the groups", block_idx);
        return -1;
    }
    int n = b->n_ops;
    for (int i = 0; i < n; i++) group[i] = -1;
    if (!nb_fuse_enabled() || n < 2) return 0;
    bool *ok = nb_calloc((size_t)n, sizeof *ok);
    if (!ok) {
        nb_error(NB_ERR_NOMEM, "fusion_groups: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const nb_op *op = b->ops[i];
        if (op->role == NB_ROLE_STARTUP || nb_op_n_outputs(op) != 1 || nb_op_n_inputs(op) + 1 > FUSE_MAX_OPERANDS)
            continue;
        /* The parameter struct, filled as prepare_step fills it. */
        nb_var_info in_info[FUSE_MAX_OPERANDS] = {{0}}, out_info[1] = {{0}};
        for (int k = 0; k < nb_op_n_inputs(op); k++) {
            const nb_var *v = nb_block_find_var_recursive(b, op->inputs[k]);
            if (!v) continue;
            in_info[k] = (nb_var_info){.dtype = v->dtype, .ndim = v->ndim};
            memcpy(in_info[k].shape, v->shape, sizeof v->shape);
        }
        nb_op_ctx ctx = {
            .def = op->def, .label = op->def->name, .attrs = op->attrs, .in_info = in_info, .out_info = out_info};
        memcpy(ctx.in_begin, op->in_begin, sizeof ctx.in_begin);
        memcpy(ctx.out_begin, op->out_begin, sizeof ctx.out_begin);
        void *params = op->def->params_size ? nb_calloc(1, op->def->params_size) : NULL;
        ok[i] = (!op->def->params_size || (params && !op->def->params(&ctx, params))) && fusable(b, op, params);
        nb_free(params);
    }
    int n_groups = form_groups(b, (const nb_op *const *)b->ops, ok, n, group);
    nb_free(ok);
    return n_groups;
}

nb_status nb_program_to_dot_fused(const nb_program *p, FILE *f)
{
    const nb_block *b = p ? nb_program_block((nb_program *)p, 0) : NULL;
    if (!b || !f) return nb_error(NB_ERR_ARG, "to_dot: NULL program or file");
    int *group = nb_malloc(((size_t)b->n_ops + 1) * sizeof *group);
    /* With the block there, nb_fusion_groups fails only for memory. */
    nb_status st = !group || nb_fusion_groups(p, 0, group) < 0 ? nb_error(NB_ERR_NOMEM, "to_dot: out of memory")
                                                               : nb_program_dot_write(p, f, group);
    nb_free(group);
    return st;
}
