/* The record-builder forms of the control-flow helpers: each builds a
 * sub-block by calling the user's callback with the builder pointed at it,
 * then appends the op that runs it.
 *
 * A sub-block's interface is by name: values bound into it each iteration
 * are vars declared in it and written by no op ("parameters"); its results
 * are vars its ops write; everything else it reads is captured from outer
 * blocks and becomes the op's input, so that the executor keeps it alive and
 * the backward pass sees the dependency. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/ops.h"
#include "control_internal.h"

#define NAME_MAX_LEN 256

/* ---- building blocks ----------------------------------------------------- */

typedef struct sub {
    nb_builder *b;
    nb_block *parent, *block;
    char prefix[NAME_MAX_LEN]; /* "while_0": names the block's vars */
} sub;

static nb_status sub_begin(nb_builder *b, const char *kind, sub *s)
{
    s->b = b;
    s->parent = nb_builder_block(b);
    nb_status st = nb_builder_unique_name(b, kind, s->prefix, sizeof s->prefix);
    if (!st) st = nb_program_add_block(nb_builder_program(b), s->parent->idx, &s->block);
    if (st) return nb_builder_fail(b, st, "%s: %s", kind, nb_last_error());
    return NB_OK;
}

/* A parameter of the block: a var bound by the op each iteration. */
static nb_value sub_param(sub *s, const char *what, int i, nb_var_info info)
{
    char name[NAME_MAX_LEN + 32];
    snprintf(name, sizeof name, "%s.%s_%d", s->prefix, what, i);
    nb_var *v = NULL;
    nb_status st = nb_block_create_var(s->block, name, info.dtype, info.ndim, info.shape, &v);
    if (st) nb_builder_fail(s->b, st, "%s", nb_last_error());
    return nb_value_from_var(v);
}

static bool written_in(const nb_block *blk, const char *name)
{
    for (int i = 0; i < blk->n_ops; i++)
        for (int k = 0; k < nb_op_n_outputs(blk->ops[i]); k++)
            if (!strcmp(blk->ops[i]->outputs[k], name)) return true;
    return false;
}

nb_value nb_ctl_local(nb_builder *b, nb_block *blk, nb_value v)
{
    if (nb_is_none(v) || (nb_block_find_var(blk, nb_value_name(v)) && written_in(blk, nb_value_name(v)))) return v;
    return nb_assign(b, v);
}

static const char *sub_result(sub *s, nb_value *v)
{
    if (nb_is_none(*v)) return NULL;
    *v = nb_ctl_local(s->b, s->block, *v);
    return nb_builder_status(s->b) ? NULL : nb_value_name(*v);
}

int nb_ctl_captured(const nb_block *blk, nb_value *out, int n, int cap)
{
    for (int i = 0; i < blk->n_ops; i++)
        for (int k = 0; k < nb_op_n_inputs(blk->ops[i]); k++) {
            const char *name = blk->ops[i]->inputs[k];
            if (nb_block_find_var(blk, name)) continue;
            bool seen = false;
            for (int j = 0; j < n && !seen; j++) seen = !strcmp(nb_value_name(out[j]), name);
            if (seen) continue;
            if (n == cap) return -1;
            out[n++] = nb_value_from_var(nb_block_find_var_recursive(blk, name));
        }
    return n;
}

/* out_dtypes / out_shapes attrs recording values' dtypes and shapes (with a
 * leading dim `lead` when lead != 0, for stacked step outputs). */
typedef struct recorded {
    int64_t dtypes[NB_CONTROL_MAX];
    int64_t shapes[NB_CONTROL_MAX * (NB_MAX_DIMS + 1)];
    int n_shapes;
} recorded;

static void record_infos(nb_builder *b, int n, const nb_value *v, bool lead, int64_t lead_dim, recorded *r)
{
    r->n_shapes = 0;
    for (int i = 0; i < n; i++) {
        nb_var_info info = nb_value_info(b, v[i]);
        r->dtypes[i] = info.dtype;
        r->shapes[r->n_shapes++] = info.ndim + lead;
        if (lead) r->shapes[r->n_shapes++] = lead_dim;
        for (int d = 0; d < info.ndim; d++) r->shapes[r->n_shapes++] = info.shape[d];
    }
}

static nb_status too_many(nb_builder *b, const char *who)
{
    return nb_builder_fail(b, NB_ERR_ARG, "%s: the body reads more than %d outer values", who, NB_CONTROL_MAX);
}

/* ---- while --------------------------------------------------------------- */

nb_status nb_control_record_while(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, int n_carry,
                                  const nb_value *init, nb_value *final)
{
    nb_value pred0 = NB_NONE, params[NB_CONTROL_MAX], next[NB_CONTROL_MAX] = {{0}}, pred = NB_NONE;
    nb_value x[2 * NB_CONTROL_MAX], out[NB_CONTROL_MAX + 1];
    const char *cin[NB_CONTROL_MAX], *cout[NB_CONTROL_MAX];
    nb_status st = cond(b, init, &pred0, ctx);
    if (!st) st = nb_builder_status(b);
    if (st) return st;
    sub s;
    if ((st = sub_begin(b, "while", &s))) return st;
    for (int i = 0; i < n_carry; i++) {
        params[i] = sub_param(&s, "carry", i, nb_value_info(b, init[i]));
        cin[i] = nb_value_name(params[i]);
    }
    nb_builder_set_block(b, s.block);
    if (!(st = nb_builder_status(b)) && !(st = body(b, params, next, ctx)) && !(st = nb_builder_status(b)))
        st = cond(b, next, &pred, ctx);
    for (int i = 0; i < n_carry && !st; i++)
        if (!(st = nb_control_check_same(b, "while_loop", "carried value", i, init[i], next[i])))
            cout[i] = sub_result(&s, &next[i]);
    const char *cond_out = st ? NULL : sub_result(&s, &pred);
    nb_builder_set_block(b, s.parent);
    if (st || (st = nb_builder_status(b))) return st;
    if (!cond_out) return nb_builder_fail(b, NB_ERR_ARG, "while_loop: the condition callback set no predicate");
    memcpy(x, init, (size_t)n_carry * sizeof *x);
    int n_x = nb_ctl_captured(s.block, x, n_carry, 2 * NB_CONTROL_MAX);
    if (n_x < 0) return too_many(b, "while_loop");
    nb_value in[1 + 2 * NB_CONTROL_MAX];
    in[0] = pred0;
    memcpy(in + 1, x, (size_t)n_x * sizeof *x);
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", s.block->idx), NB_ATTR_STRINGS_N("carry_in", n_carry, cin),
                       NB_ATTR_STRINGS_N("carry_out", n_carry, cout), NB_ATTR_STRING("cond_out", cond_out)};
    if ((st = nb_emit(b, "while", NB_VALUES_N(1 + n_x, in), NB_ATTRS_N(4, attrs), 1 + n_carry, out))) return st;
    memcpy(final, out + 1, (size_t)n_carry * sizeof *final);
    return NB_OK;
}

/* ---- cond and net -------------------------------------------------------- */

/* Builds one branch block by calling fn; its results' names go to names[]. */
static nb_status build_branch(nb_builder *b, sub *s, nb_branch_fn fn, void *ctx, nb_values in, int n_out, nb_value *out,
                              const char **names)
{
    for (int i = 0; i < n_out; i++) out[i] = NB_NONE;
    nb_builder_set_block(b, s->block);
    nb_status st = fn(b, in.v, out, ctx);
    if (!st) st = nb_builder_status(b);
    for (int i = 0; i < n_out && !st; i++) {
        if (nb_is_none(out[i])) st = nb_builder_fail(b, NB_ERR_ARG, "%s: output %d was not set", s->prefix, i);
        else names[i] = sub_result(s, &out[i]);
    }
    nb_builder_set_block(b, s->parent);
    return st ? st : nb_builder_status(b);
}

nb_status nb_control_record_cond(nb_builder *b, nb_value pred, const nb_branches *br, nb_values ins, int n_out,
                                 nb_value *out)
{
    nb_value t_out[NB_CONTROL_MAX], e_out[NB_CONTROL_MAX], x[2 * NB_CONTROL_MAX], res[NB_CONTROL_MAX + 1];
    const char *t_names[NB_CONTROL_MAX], *e_names[NB_CONTROL_MAX];
    if (nb_is_none(pred)) return nb_builder_fail(b, NB_ERR_ARG, "cond: the predicate is missing");
    sub ts, es;
    nb_status st = sub_begin(b, "cond", &ts);
    if (!st) st = build_branch(b, &ts, br->then_fn, br->ctx, ins, n_out, t_out, t_names);
    if (!st) st = sub_begin(b, "cond", &es);
    if (!st) st = build_branch(b, &es, br->else_fn, br->ctx, ins, n_out, e_out, e_names);
    for (int i = 0; i < n_out && !st; i++)
        st = nb_control_check_same(b, "cond", "branch output", i, t_out[i], e_out[i]);
    if (st) return st;
    int n_x = nb_ctl_captured(ts.block, x, 0, 2 * NB_CONTROL_MAX);
    if (n_x >= 0) n_x = nb_ctl_captured(es.block, x, n_x, 2 * NB_CONTROL_MAX);
    if (n_x < 0) return too_many(b, "cond");
    nb_value args[1 + 2 * NB_CONTROL_MAX];
    args[0] = pred;
    memcpy(args + 1, x, (size_t)n_x * sizeof *x);
    recorded r;
    record_infos(b, n_out, t_out, false, 0, &r);
    nb_attr attrs[] = {
        NB_ATTR_BLOCK("then_block", ts.block->idx),    NB_ATTR_BLOCK("else_block", es.block->idx),
        NB_ATTR_STRINGS_N("then_out", n_out, t_names), NB_ATTR_STRINGS_N("else_out", n_out, e_names),
        NB_ATTR_INTS_N("out_dtypes", n_out, r.dtypes), NB_ATTR_INTS_N("out_shapes", r.n_shapes, r.shapes)};
    if ((st = nb_emit(b, "cond", NB_VALUES_N(1 + n_x, args), NB_ATTRS_N(6, attrs), 1 + n_out, res))) return st;
    memcpy(out, res + 1, (size_t)n_out * sizeof *out);
    return NB_OK;
}

nb_status nb_control_record_net(nb_builder *b, nb_branch_fn fn, void *ctx, int n_in, const nb_value *in, int n_out,
                                nb_value *out)
{
    nb_value o[NB_CONTROL_MAX], x[2 * NB_CONTROL_MAX], res[NB_CONTROL_MAX + 1];
    const char *names[NB_CONTROL_MAX];
    sub s;
    nb_status st = sub_begin(b, "net", &s);
    if (!st) st = build_branch(b, &s, fn, ctx, NB_VALUES_N(n_in, in), n_out, o, names);
    if (st) return st;
    int n_x = nb_ctl_captured(s.block, x, 0, 2 * NB_CONTROL_MAX);
    if (n_x < 0) return too_many(b, "net");
    recorded r;
    record_infos(b, n_out, o, false, 0, &r);
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", s.block->idx), NB_ATTR_STRINGS_N("block_out", n_out, names),
                       NB_ATTR_INTS_N("out_dtypes", n_out, r.dtypes),
                       NB_ATTR_INTS_N("out_shapes", r.n_shapes, r.shapes)};
    if ((st = nb_emit(b, "net", NB_VALUES_N(n_x, x), NB_ATTRS_N(4, attrs), 1 + n_out, res))) return st;
    memcpy(out, res + 1, (size_t)n_out * sizeof *out);
    return NB_OK;
}

/* ---- scan -------------------------------------------------------------------- */

/* The names of the form's weights ("" for NB_NONE), each of which must be
 * among the op's inputs x[0..n_x) (an exporter reads it there). */
static nb_status form_names(nb_builder *b, const nb_scan_form *form, const nb_value *x, int n_x, const char **names)
{
    for (int i = 0; form && i < form->weights.n; i++) {
        nb_value v = form->weights.v[i];
        names[i] = nb_is_none(v) ? "" : nb_value_name(v);
        bool found = !*names[i];
        for (int j = 0; j < n_x && !found; j++) found = !strcmp(nb_value_name(x[j]), names[i]);
        if (!found)
            return nb_builder_fail(b, NB_ERR_ARG,
                                   "scan (a %s cell): weight %d '%s' is not a value the step reads "
                                   "from outside",
                                   form->cell, i, names[i]);
    }
    return NB_OK;
}

nb_status nb_control_record_scan(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io,
                                 const nb_scan_form *form)
{
    int n_carry = io->init.n, n_xs = io->xs.n, n_ys = io->n_ys;
    const nb_value *init = io->init.v, *xs = io->xs.v;
    nb_value *final = io->final, *ys = io->ys;
    nb_value mem[NB_CONTROL_MAX], x_t[NB_CONTROL_MAX], next[NB_CONTROL_MAX] = {{0}}, y_t[NB_CONTROL_MAX] = {{0}};
    nb_value x[3 * NB_CONTROL_MAX], res[2 * NB_CONTROL_MAX + 1];
    const char *mem_in[NB_CONTROL_MAX], *mem_out[NB_CONTROL_MAX], *seq_in[NB_CONTROL_MAX], *seq_out[NB_CONTROL_MAX];
    sub s;
    nb_status st = sub_begin(b, "recurrent", &s);
    if (st) return st;
    for (int i = 0; i < n_carry; i++) {
        mem[i] = sub_param(&s, "mem", i, nb_value_info(b, init[i]));
        mem_in[i] = nb_value_name(mem[i]);
    }
    int64_t T = -1;
    for (int j = 0; j < n_xs; j++) {
        nb_var_info info = nb_value_info(b, xs[j]), row = {.dtype = info.dtype, .ndim = info.ndim - 1};
        memcpy(row.shape, info.shape + 1, (size_t)row.ndim * sizeof *row.shape);
        if (j == 0) T = info.shape[0];
        x_t[j] = sub_param(&s, "x", j, row);
        seq_in[j] = nb_value_name(x_t[j]);
    }
    nb_builder_set_block(b, s.block);
    if (!(st = nb_builder_status(b))) st = step(b, mem, x_t, next, y_t, ctx);
    if (!st) st = nb_builder_status(b);
    for (int i = 0; i < n_carry && !st; i++)
        if (!(st = nb_control_check_same(b, "scan", "carried value", i, init[i], next[i])))
            mem_out[i] = sub_result(&s, &next[i]);
    for (int k = 0; k < n_ys && !st; k++) {
        if (nb_is_none(y_t[k])) st = nb_builder_fail(b, NB_ERR_ARG, "scan: output %d was not set by the step", k);
        else seq_out[k] = sub_result(&s, &y_t[k]);
    }
    nb_builder_set_block(b, s.parent);
    if (st || (st = nb_builder_status(b))) return st;
    memcpy(x, init, (size_t)n_carry * sizeof *x);
    memcpy(x + n_carry, xs, (size_t)n_xs * sizeof *x);
    int n_x = nb_ctl_captured(s.block, x, n_carry + n_xs, 3 * NB_CONTROL_MAX);
    if (n_x < 0) return too_many(b, "scan");
    const char *form_values[NB_CONTROL_FORM_MAX];
    if ((st = form_names(b, form, x, n_x, form_values))) return st;
    recorded r;
    record_infos(b, n_ys, y_t, true, T, &r);
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", s.block->idx),
                       NB_ATTR_STRINGS_N("mem_in", n_carry, mem_in),
                       NB_ATTR_STRINGS_N("mem_out", n_carry, mem_out),
                       NB_ATTR_STRINGS_N("seq_in", n_xs, seq_in),
                       NB_ATTR_STRINGS_N("seq_out", n_ys, seq_out),
                       NB_ATTR_INTS_N("out_dtypes", n_ys, r.dtypes),
                       NB_ATTR_INTS_N("out_shapes", r.n_shapes, r.shapes),
                       NB_ATTR_BOOL("reverse", io->reverse),
                       NB_ATTR_STRING("form", form ? form->cell : ""),
                       NB_ATTR_STRINGS_N("form_values", form ? form->weights.n : 0, form_values)};
    if ((st = nb_emit(b, "recurrent", NB_VALUES_N(n_x, x), NB_ATTRS_N(10, attrs), 1 + n_carry + n_ys, res))) return st;
    if (n_carry) memcpy(final, res + 1, (size_t)n_carry * sizeof *final);
    if (n_ys) memcpy(ys, res + 1 + n_carry, (size_t)n_ys * sizeof *ys); /* ys may be NULL then */
    return NB_OK;
}
