/* Building the gradient part of a static program (seeds 000 and 002).
 *
 * One pass serves nb_append_backward and nb_gradients. The ops already in
 * block 0 are the forward part (earlier gradient ops included, which is how
 * second derivatives arise). We find the vars that depend on the inputs
 * (`reach`) and those the targets depend on (`affects`); an op with an input
 * in the first set and an output in both has its VJP rule emitted, in
 * reverse order. A rule's result for input x is one "contribution" to x's
 * gradient; when x's gradient is first needed (by the rule of the op that
 * produced x, which comes after all of x's readers in reverse order), its
 * contributions become x@GRAD, either by renaming the single one or by
 * renaming each to x@GRAD@RENAME@k and adding them with one `sum` op. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "nabla/autodiff.h"
#include "nabla/ops.h"
#include "backward_internal.h"
#include "recompute.h"
#include "../core/strmap.h"
#include "../program/program_internal.h"

typedef struct contrib {
    nb_var **vars;
    int n, cap;
} contrib;

typedef struct bw {
    nb_program *p;
    nb_block *fwd; /* the block differentiated: its ops [0, fwd_end) */
    nb_block *b;   /* the block the gradient ops go to: fwd itself, or its grad block */
    nb_builder *builder;
    int fwd_end;
    int grad_start;    /* index in b of the first gradient op */
    nb_strmap reach;   /* var -> non-NULL: depends on an input and can carry a gradient */
    nb_strmap affects; /* var -> non-NULL: a target depends on it */
    nb_strmap no_grad;
    nb_strmap contribs; /* var -> contrib* */
    nb_strmap grad_of;  /* var -> nb_var* of its final gradient (NULL: none) */
    nb_strmap seeds;    /* given target gradients: contributions never renamed */
    nb_recompute rc;    /* recomputation segments (block 0 of nb_append_backward only) */
} bw;

static bool in_set(const nb_strmap *m, const char *name) { return nb_strmap_get(m, name, NULL) != NULL; }
static nb_status add_to(nb_strmap *m, const char *name)
{
    return nb_strmap_put(m, name, (void *)1) ? nb_error(NB_ERR_NOMEM, "backward: out of memory") : NB_OK;
}

static nb_var *var_of(const bw *w, const char *name) { return nb_block_find_var_recursive(w->b, name); }

static bool can_carry_grad(const bw *w, const char *name)
{
    nb_var *v = var_of(w, name);
    return v && nb_dtype_is_float(v->dtype) && !in_set(&w->no_grad, name);
}

/* A name for x's gradient not used anywhere in the program. */
static void grad_name(const bw *w, const char *var, const char *suffix, char *buf, size_t size)
{
    snprintf(buf, size, "%s@GRAD%s", var, suffix);
    for (int k = 2; nb_block_find_var_recursive(w->b, buf); k++) snprintf(buf, size, "%s@GRAD@%d%s", var, k, suffix);
}

static void bw_free(bw *w)
{
    for (int i = 0; i < w->contribs.n; i++)
        if (w->contribs.keys[i]) {
            contrib *c = w->contribs.vals[i];
            nb_free(c->vars);
            nb_free(c);
        }
    nb_strmap_free(&w->reach);
    nb_strmap_free(&w->affects);
    nb_strmap_free(&w->no_grad);
    nb_strmap_free(&w->contribs);
    nb_strmap_free(&w->grad_of);
    nb_strmap_free(&w->seeds);
    nb_recompute_free(&w->rc);
    nb_builder_free(w->builder);
}

static nb_status add_contrib(bw *w, const char *var, nb_var *g)
{
    contrib *c = nb_strmap_get(&w->contribs, var, NULL);
    if (!c) {
        if (!(c = nb_calloc(1, sizeof *c)) || nb_strmap_put(&w->contribs, var, c)) {
            nb_free(c);
            return nb_error(NB_ERR_NOMEM, "backward: out of memory");
        }
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        nb_var **v = nb_realloc(c->vars, (size_t)cap * sizeof *v);
        if (!v) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
        c->vars = v;
        c->cap = cap;
    }
    c->vars[c->n++] = g;
    return NB_OK;
}

/* Turns var's contributions into its gradient var (see the top comment). */
static nb_status finalize(bw *w, const char *var, nb_var **out)
{
    int found;
    *out = nb_strmap_get(&w->grad_of, var, &found);
    if (found) return NB_OK;
    contrib *c = nb_strmap_get(&w->contribs, var, NULL);
    nb_status st = NB_OK;
    if (c && c->n > 0) {
        char name[512];
        grad_name(w, var, "", name, sizeof name);
        if (c->n == 1) {
            /* A seed keeps its name: the caller fills it in by that name. */
            if (!in_set(&w->seeds, c->vars[0]->name)) st = nb_block_rename_var(w->b, c->vars[0]->name, name);
            *out = c->vars[0];
        } else {
            nb_value *vals = nb_calloc((size_t)c->n, sizeof *vals);
            if (!vals) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
            for (int k = 0; k < c->n && !st; k++) {
                char rn[600];
                snprintf(rn, sizeof rn, "%s@RENAME@%d", name, k);
                if (!in_set(&w->seeds, c->vars[k]->name)) st = nb_block_rename_var(w->b, c->vars[k]->name, rn);
                vals[k] = nb_value_from_var(c->vars[k]);
            }
            nb_value s = st ? NB_NONE : nb_sum(w->builder, c->n, vals);
            nb_free(vals);
            if (!st) st = nb_builder_status(w->builder);
            if (!st) {
                st = nb_block_rename_var(w->b, nb_value_name(s), name);
                *out = nb_value_var(s);
            }
        }
    }
    if (st) return st;
    return nb_strmap_put(&w->grad_of, var, *out) ? nb_error(NB_ERR_NOMEM, "backward: out of memory") : NB_OK;
}

/* Forward reachability from the inputs, and backward from the targets. */
static nb_status mark_paths(bw *w, int n_in, const char *const *inputs, int n_targets, const char *const *targets)
{
    nb_status st = NB_OK;
    for (int i = 0; i < n_in && !st; i++)
        if (can_carry_grad(w, inputs[i])) st = add_to(&w->reach, inputs[i]);
    for (int i = 0; i < w->fwd_end && !st; i++) {
        const nb_op *op = w->fwd->ops[i];
        if (op->def->flags & NB_OP_NOT_DIFFERENTIABLE) continue;
        bool reached = false;
        for (int s = 0; s < NB_MAX_SLOTS && op->def->inputs[s].name && !reached; s++) {
            if (op->def->inputs[s].flags & NB_SLOT_NO_GRAD) continue;
            for (int k = 0; k < nb_op_in_count(op, s) && !reached; k++)
                reached = in_set(&w->reach, nb_op_in_name(op, s, k));
        }
        if (!reached) continue;
        for (int k = 0; k < nb_op_n_outputs(op) && !st; k++) {
            const char *o = op->outputs[k];
            bool in_place = false;
            for (int j = 0; j < nb_op_n_inputs(op); j++) in_place |= !strcmp(op->inputs[j], o);
            if (!in_place && can_carry_grad(w, o)) st = add_to(&w->reach, o);
        }
    }
    for (int i = 0; i < n_targets && !st; i++) st = add_to(&w->affects, targets[i]);
    for (int i = w->fwd_end - 1; i >= 0 && !st; i--) {
        const nb_op *op = w->fwd->ops[i];
        bool hit = false;
        for (int k = 0; k < nb_op_n_outputs(op) && !hit; k++) hit = in_set(&w->affects, op->outputs[k]);
        for (int k = 0; hit && k < nb_op_n_inputs(op) && !st; k++) st = add_to(&w->affects, op->inputs[k]);
    }
    return st;
}

/* Emits the VJP rule of forward op i if gradient flows through it. */
static nb_status emit_rule(bw *w, int i)
{
    const nb_op *op = w->fwd->ops[i];
    int n_in = nb_op_n_inputs(op), n_out = nb_op_n_outputs(op);
    nb_status st = NB_OK;
    bool any_dy = false, any_want = false;
    nb_value *x = nb_calloc((size_t)n_in + 1, sizeof *x), *y = nb_calloc((size_t)n_out + 1, sizeof *y);
    nb_value *dy = nb_calloc((size_t)n_out + 1, sizeof *dy), *dx = nb_calloc((size_t)n_in + 1, sizeof *dx);
    bool *want = nb_calloc((size_t)n_in + 1, sizeof *want);
    if (!x || !y || !dy || !dx || !want) {
        st = nb_error(NB_ERR_NOMEM, "backward: out of memory");
        goto done;
    }
    /* A control-flow op's rule reads its forward values, recomputed or not:
     * its step scopes hold views of the very tensors it read, which must
     * stay alive until its gradient op has run. */
    bool remap = !(op->def->flags & NB_OP_CONTROL);
    for (int k = 0; k < n_out && !st; k++) {
        const char *o = op->outputs[k];
        y[k] = nb_value_from_var(var_of(w, remap ? nb_recompute_name(&w->rc, o) : o));
        if (in_set(&w->reach, o) && in_set(&w->affects, o)) {
            nb_var *g;
            if ((st = finalize(w, o, &g))) goto done;
            dy[k] = nb_value_from_var(g);
            any_dy |= g != NULL;
        }
    }
    for (int s = 0; s < NB_MAX_SLOTS && op->def->inputs[s].name; s++)
        for (int k = op->in_begin[s]; k < op->in_begin[s + 1]; k++) {
            x[k] = nb_value_from_var(var_of(w, remap ? nb_recompute_name(&w->rc, op->inputs[k]) : op->inputs[k]));
            want[k] = !(op->def->inputs[s].flags & NB_SLOT_NO_GRAD) && in_set(&w->reach, op->inputs[k]);
            any_want |= want[k];
        }
    if (!any_dy || !any_want) goto done; /* no gradient flows through: emit nothing */
    char label[256];
    nb_op_label(op, label, sizeof label);
    if (!op->def->vjp) {
        st =
            nb_error(NB_ERR_UNSUPPORTED, "backward: op %s lies on the path to the gradient but %s has no gradient rule",
                     label, op->def->name);
        goto done;
    }
    nb_grad_ctx g = {.def = op->def, .attrs = op->attrs, .x = x, .y = y, .dy = dy, .dx = dx, .want_dx = want};
    memcpy(g.in_begin, op->in_begin, sizeof g.in_begin);
    memcpy(g.out_begin, op->out_begin, sizeof g.out_begin);
    int vars_before = w->b->n_vars;
    st = op->def->vjp(w->builder, &g);
    if (!st) st = nb_builder_status(w->builder);
    if (st) {
        nb_error_context(st, "backward: in the gradient rule of %s", label);
        goto done;
    }
    for (int k = 0; k < n_in && !st; k++) {
        if (!want[k] || nb_is_none(dx[k])) continue;
        nb_var *gv = nb_value_var(dx[k]);
        /* A contribution must be a var of its own, so that it can be renamed. */
        bool fresh = false;
        for (int j = vars_before; j < w->b->n_vars; j++) fresh |= w->b->vars[j] == gv;
        for (int j = 0; j < k; j++) fresh &= !(want[j] && dx[j].p == dx[k].p);
        if (!fresh) {
            nb_value c = nb_assign(w->builder, dx[k]);
            if ((st = nb_builder_status(w->builder))) goto done;
            gv = nb_value_var(c);
        }
        st = add_contrib(w, op->inputs[k], gv);
    }
done:
    nb_free(x);
    nb_free(y);
    nb_free(dy);
    nb_free(dx);
    nb_free(want);
    return st;
}

/* Removes gradient ops (from index `from`) that nothing needs. */
static nb_status remove_dead_ops(bw *w, int from, int n_keep, nb_var *const *keep)
{
    nb_strmap live;
    nb_strmap_init(&live);
    nb_status st = NB_OK;
    for (int i = 0; i < n_keep && !st; i++)
        if (keep[i]) st = add_to(&live, keep[i]->name);
    for (int i = w->b->n_ops - 1; i >= from && !st; i--) {
        const nb_op *op = w->b->ops[i];
        bool needed = false;
        for (int k = 0; k < nb_op_n_outputs(op) && !needed; k++) needed = in_set(&live, op->outputs[k]);
        if (!needed) {
            st = nb_block_remove_op(w->b, i);
            continue;
        }
        for (int k = 0; k < nb_op_n_inputs(op) && !st; k++) st = add_to(&live, op->inputs[k]);
    }
    nb_strmap_free(&live);
    return st;
}

static nb_status fill_result(bw *w, int n_in, const char *const *inputs, nb_var *const *grads, bool pairs,
                             nb_backward_result *r)
{
    memset(r, 0, sizeof *r);
    r->grads = nb_calloc((size_t)n_in + 1, sizeof *r->grads);
    r->pairs = nb_calloc((size_t)n_in + 1, sizeof *r->pairs);
    r->info = nb_calloc((size_t)nb_strmap_size(&w->grad_of) + 1, sizeof *r->info);
    if (!r->grads || !r->pairs || !r->info) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
    r->n_grads = n_in;
    bool ok = true;
    for (int i = 0; i < n_in; i++) {
        if (!grads[i]) continue;
        ok &= (r->grads[i] = nb_strdup(grads[i]->name)) != NULL;
        if (pairs) {
            ok &= (r->pairs[r->n_pairs].param = nb_strdup(inputs[i])) != NULL;
            ok &= (r->pairs[r->n_pairs++].grad = nb_strdup(grads[i]->name)) != NULL;
        }
    }
    for (int i = 0; i < w->grad_of.n; i++) {
        nb_var *g = w->grad_of.keys[i] ? w->grad_of.vals[i] : NULL;
        /* Only gradients that survived dead-op removal. */
        if (!g || !nb_block_find_var(w->b, g->name)) continue;
        bool written = false;
        for (int j = w->grad_start; j < w->b->n_ops && !written; j++)
            for (int k = 0; k < nb_op_n_outputs(w->b->ops[j]); k++)
                written |= !strcmp(w->b->ops[j]->outputs[k], g->name);
        if (!written) continue;
        nb_grad_info *info = &r->info[r->n_info++];
        *info = (nb_grad_info){nb_strdup(w->grad_of.keys[i]), nb_strdup(g->name), w->b->idx};
        ok &= info->var && info->grad;
    }
    /* The caller frees the half-filled result. */
    return ok ? NB_OK : nb_error(NB_ERR_NOMEM, "backward: out of memory");
}

/* The shared body of nb_gradients, nb_append_backward and the recursion
 * into sub-blocks: differentiates block `fwd`, writing the gradient ops at
 * the end of block `target` (fwd itself, or a grad block whose parent is
 * fwd). */
/* The ops of the forward part that gradient flows through: an output that
 * depends on the inputs and that a target depends on. */
static nb_status plan_recompute(bw *w, const nb_backward_opts *ro)
{
    bool *on_path = nb_calloc((size_t)w->fwd_end + 1, sizeof *on_path);
    if (!on_path) return nb_error(NB_ERR_NOMEM, "backward: out of memory");
    for (int i = 0; i < w->fwd_end; i++) {
        const nb_op *op = w->fwd->ops[i];
        for (int k = 0; k < nb_op_n_outputs(op) && !on_path[i]; k++)
            on_path[i] = in_set(&w->reach, op->outputs[k]) && in_set(&w->affects, op->outputs[k]);
    }
    nb_status st = nb_recompute_plan(&w->rc, w->fwd, w->fwd_end, on_path, ro->checkpoints, ro->recompute_segments);
    nb_free(on_path);
    return st;
}

/* What build_backward is asked: the targets and their seeds (target_grads,
 * parallel to targets; NULL: ones), the inputs, the vars no gradient flows
 * through, and the caller's choices. */
typedef struct bw_request {
    nb_names targets;
    const char *const *target_grads;
    nb_names inputs, no_grad;
    bool allow_unused, is_append;
    const nb_backward_opts *recompute; /* NULL: nothing recomputed */
} bw_request;

static nb_status build_backward(nb_program *p, nb_block *fwd, nb_block *target, const bw_request *rq,
                                nb_backward_result *out)
{
    const int n_targets = rq->targets.n, n_in = rq->inputs.n, n_no_grad = rq->no_grad.n;
    const char *const *targets = rq->targets.v, *const *inputs = rq->inputs.v, *const *no_grad = rq->no_grad.v;
    const char *const *target_grads = rq->target_grads;
    const bool allow_unused = rq->allow_unused, is_append = rq->is_append;
    const nb_backward_opts *recompute = rq->recompute;
    memset(out, 0, sizeof *out);
    bw w = {.p = p, .fwd = fwd, .b = target};
    nb_recompute_init(&w.rc);
    nb_strmap_init(&w.reach);
    nb_strmap_init(&w.affects);
    nb_strmap_init(&w.no_grad);
    nb_strmap_init(&w.contribs);
    nb_strmap_init(&w.grad_of);
    nb_strmap_init(&w.seeds);
    nb_var **grads = nb_calloc((size_t)n_in + 1, sizeof *grads);
    nb_status st =
        grads ? nb_builder_new_record(&w.builder, p, NULL) : nb_error(NB_ERR_NOMEM, "backward: out of memory");
    if (st) goto done;
    nb_builder_set_block(w.builder, w.b);
    nb_builder_set_role(w.builder, NB_ROLE_BACKWARD);
    w.fwd_end = w.fwd->n_ops;
    w.grad_start = w.b->n_ops;

    /* The no-grad set: the caller's, plus stop_gradient vars that are not
     * among the inputs asked for. */
    for (int i = 0; i < n_no_grad && !st; i++) st = add_to(&w.no_grad, no_grad[i]);
    for (int i = 0; i < w.fwd->n_vars && !st; i++) {
        const nb_var *v = w.fwd->vars[i];
        bool asked = false;
        for (int j = 0; j < n_in; j++) asked |= !strcmp(inputs[j], v->name);
        if (v->stop_gradient && !asked) st = add_to(&w.no_grad, v->name);
    }
    for (int i = 0; i < n_in && !st; i++) {
        const nb_var *v = var_of(&w, inputs[i]);
        if (!v) st = nb_error(NB_ERR_NOT_FOUND, "backward: no var named '%s'", inputs[i]);
        else if (!nb_dtype_is_float(v->dtype))
            st = nb_error(NB_ERR_DTYPE, "backward: '%s' is %s; only floating-point vars have gradients", inputs[i],
                          nb_dtype_name(v->dtype));
    }
    for (int i = 0; i < n_targets && !st; i++) {
        const nb_var *v = var_of(&w, targets[i]);
        if (!v) st = nb_error(NB_ERR_NOT_FOUND, "backward: no target var named '%s'", targets[i]);
        else if (!nb_dtype_is_float(v->dtype))
            st = nb_error(NB_ERR_DTYPE, "backward: target '%s' is %s, not floating point", targets[i],
                          nb_dtype_name(v->dtype));
    }
    if (st || (st = mark_paths(&w, n_in, inputs, n_targets, targets))) goto done;
    if (recompute && (recompute->checkpoints.n > 0 || recompute->recompute_segments != 0) &&
        (st = plan_recompute(&w, recompute)))
        goto done;

    /* Seed each target's gradient: ones, or the caller's var. */
    nb_builder_set_role(w.builder, NB_ROLE_LOSS);
    for (int i = 0; i < n_targets && !st; i++) {
        if (target_grads && target_grads[i]) {
            nb_var *g = var_of(&w, target_grads[i]);
            if (!g)
                st = nb_error(NB_ERR_NOT_FOUND, "backward: no gradient var named '%s' for target '%s'", target_grads[i],
                              targets[i]);
            else if (!(st = add_to(&w.seeds, g->name))) st = add_contrib(&w, targets[i], g);
            continue;
        }
        nb_value ones = nb_ones_like(w.builder, nb_value_from_var(var_of(&w, targets[i])));
        if (!(st = nb_builder_status(w.builder))) st = add_contrib(&w, targets[i], nb_value_var(ones));
    }
    nb_builder_set_role(w.builder, NB_ROLE_BACKWARD);
    for (int i = w.fwd_end - 1; i >= 0 && !st; i--) {
        st = nb_recompute_before(&w.rc, w.b, w.fwd, i);
        if (!st) st = emit_rule(&w, i);
    }
    for (int i = 0; i < n_in && !st; i++) {
        if ((st = finalize(&w, inputs[i], &grads[i]))) break;
        if (!grads[i] && !allow_unused)
            st = nb_error(NB_ERR_ARG, "backward: '%s' does not affect the targets, so it has no gradient", inputs[i]);
    }
    if (st || (st = remove_dead_ops(&w, w.grad_start, n_in, grads))) goto done;
    /* Mark the op that makes each parameter's gradient (Fluid's op_role_var). */
    for (int i = 0; i < n_in && is_append && !st; i++) {
        if (!grads[i]) continue;
        for (int j = w.b->n_ops - 1; j >= w.grad_start; j--) {
            nb_op *op = w.b->ops[j];
            bool writes = false;
            for (int k = 0; k < nb_op_n_outputs(op); k++) writes |= !strcmp(op->outputs[k], grads[i]->name);
            if (!writes) continue;
            nb_free(op->role_var[0]);
            nb_free(op->role_var[1]);
            op->role_var[0] = nb_strdup(inputs[i]);
            op->role_var[1] = nb_strdup(grads[i]->name);
            if (!op->role_var[0] || !op->role_var[1])
                st = nb_error(NB_ERR_NOMEM, "backward: out of memory marking the gradient of '%s'", inputs[i]);
            break;
        }
    }
    if (!st) st = fill_result(&w, n_in, inputs, grads, is_append, out);
done:
    if (st) {
        /* Leave the program as it was. */
        while (w.b && w.b->n_ops > w.grad_start) nb_block_remove_op(w.b, w.b->n_ops - 1);
        nb_backward_result_free(out);
    }
    nb_free(grads);
    bw_free(&w);
    return st;
}

nb_status nb_gradients(nb_program *p, nb_names target_list, nb_names input_list, const nb_gradients_opts *opts,
                       nb_backward_result *out)
{
    static const nb_gradients_opts defaults;
    if (!opts) opts = &defaults;
    int n_targets = target_list.n, n_inputs = input_list.n, n_no_grad = opts->no_grad.n;
    const char *const *targets = target_list.v, *const *inputs = input_list.v, *const *no_grad = opts->no_grad.v;
    bool allow_unused = opts->flags & NB_ALLOW_UNUSED;
    if (out) memset(out, 0, sizeof *out);
    if (!p || !out || n_targets < 1 || !targets || n_inputs < 1 || !inputs || n_no_grad < 0 || (n_no_grad && !no_grad))
        return nb_error(NB_ERR_ARG, "gradients: need a program, at least one target and one input");
    nb_block *b = nb_program_global_block(p);
    const bw_request rq = {target_list, opts->target_grads, input_list, opts->no_grad, allow_unused, false, NULL};
    return build_backward(p, b, b, &rq, out);
}

nb_status nb_append_backward(nb_program *p, const char *loss, const nb_backward_opts *opts, nb_backward_result *out)
{
    static const nb_backward_opts defaults;
    if (!opts) opts = &defaults;
    int n_params = opts->params.n;
    const char *const *params = opts->params.v;
    if (out) memset(out, 0, sizeof *out);
    if (!p || !loss || !out || n_params < 0 || (n_params && !params))
        return nb_error(NB_ERR_ARG, "append_backward: need a program, a loss and a result");
    nb_block *b = nb_program_global_block(p);
    const nb_var *lv = nb_block_find_var(b, loss);
    char shp[NB_SHAPE_STR_MAX];
    if (!lv) return nb_error(NB_ERR_NOT_FOUND, "append_backward: no loss var named '%s' in block 0", loss);
    if (nb_shape_numel(lv->ndim, lv->shape) != 1)
        return nb_error(NB_ERR_SHAPE,
                        "append_backward: loss '%s' has shape %s; it must be a scalar (reduce it with reduce_mean or "
                        "reduce_sum first)",
                        loss, nb_shape_str(shp, sizeof shp, lv->ndim, lv->shape));
    const char **all = NULL;
    if (n_params == 0) {
        all = nb_calloc((size_t)b->n_vars + 1, sizeof *all);
        if (!all) return nb_error(NB_ERR_NOMEM, "append_backward: out of memory");
        for (int i = 0; i < b->n_vars; i++)
            if (b->vars[i]->is_parameter && b->vars[i]->trainable) all[n_params++] = b->vars[i]->name;
        params = all;
        if (n_params == 0) {
            nb_free(all);
            return nb_error(NB_ERR_ARG, "append_backward: the program has no trainable parameters");
        }
    }
    /* The op computing the loss takes the loss role. */
    for (int i = b->n_ops - 1; i >= 0; i--) {
        bool writes = false;
        for (int k = 0; k < nb_op_n_outputs(b->ops[i]); k++) writes |= !strcmp(b->ops[i]->outputs[k], loss);
        if (writes) {
            b->ops[i]->role = NB_ROLE_LOSS;
            break;
        }
    }
    const bw_request rq = {NB_NAMES_N(1, &loss), NULL, NB_NAMES_N(n_params, params), opts->no_grad, true, true, opts};
    nb_status st = build_backward(p, b, b, &rq, out);
    nb_free(all);
    return st;
}

nb_status nb_backward_sub_block(nb_program *p, int fwd_idx, nb_names target_list, const char *const *seeds,
                                nb_names input_list, int *grad_idx, nb_backward_result *out)
{
    int n_targets = target_list.n;
    const char *const *targets = target_list.v;
    memset(out, 0, sizeof *out);
    nb_block *fwd = nb_program_block(p, fwd_idx), *g = NULL;
    if (!fwd || fwd_idx == 0) return nb_error(NB_ERR_ARG, "backward: %d is not a sub-block", fwd_idx);
    nb_status st = nb_program_add_block(p, fwd_idx, &g);
    if (st) return st;
    g->forward_block_idx = fwd_idx;
    *grad_idx = g->idx;
    /* The seeds are vars of the grad block that the gradient op fills in. */
    for (int i = 0; i < n_targets && !st; i++) {
        const nb_var *t = nb_block_find_var_recursive(fwd, targets[i]);
        if (!t) st = nb_error(NB_ERR_NOT_FOUND, "backward: sub-block %d has no var '%s'", fwd_idx, targets[i]);
        else st = nb_block_create_var(g, seeds[i], t->dtype, t->ndim, t->shape, NULL);
    }
    const bw_request rq = {target_list, seeds, input_list, NB_NO_NAMES, true, false, NULL};
    if (!st) st = build_backward(p, fwd, g, &rq, out);
    return st;
}

void nb_backward_result_free(nb_backward_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_pairs; i++) {
        nb_free((char *)r->pairs[i].param);
        nb_free((char *)r->pairs[i].grad);
    }
    for (int i = 0; i < r->n_info; i++) {
        nb_free((char *)r->info[i].var);
        nb_free((char *)r->info[i].grad);
    }
    for (int i = 0; i < r->n_grads; i++) nb_free((char *)r->grads[i]);
    nb_free(r->pairs);
    nb_free(r->info);
    nb_free(r->grads);
    memset(r, 0, sizeof *r);
}

const char *nb_backward_grad_of(const nb_backward_result *r, const char *var)
{
    for (int i = 0; i < r->n_info; i++)
        if (!strcmp(r->info[i].var, var)) return r->info[i].grad;
    return NULL;
}
