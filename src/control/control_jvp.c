/* JVP rules of the control-flow ops: forward mode through loops, branches
 * and nested nets in static programs.
 *
 * The JVP of an op that runs a block is the same kind of op running the
 * block's JVP: a copy of the block followed by its ops' JVP rules, with the
 * tangents as extra carried values, sequences and outputs (as JAX's jvp of
 * while_loop). The new op recomputes the primal values beside the tangents,
 * since it runs a block of its own; tangents known to be zero are skipped
 * where they enter and made zeros only where the op must hand one out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/ops.h"
#include "control_internal.h"
#include "control_ops.h"
#include "../autodiff/forward_internal.h"
#include "../program/program_internal.h"

#define CAP (3 * NB_CONTROL_MAX)

/* What derive() needs and gives: the block's bound parameters (those with
 * on[i] get a tangent parameter, named in tpar[i]), the captured outer
 * values and their tangents, and the block's results whose tangents the
 * new op hands out (tout[k], zeros where none reaches them). */
typedef struct derivation {
    int n_par;
    const char *const *par;
    const bool *par_on;
    const char *tpar[CAP];
    int n_out;
    const char *const *outs;
    const bool *out_on;
    const char *tout[CAP];
    nb_block *block;
} derivation;

static nb_status derive(nb_builder *b, const nb_grad_ctx *g, int x_slot, int src_idx, derivation *d)
{
    nb_program *p = nb_builder_program(b);
    if (!p) return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "control flow: its JVP rule needs a static program");
    nb_block *src = nb_program_block(p, src_idx), *dst = NULL;
    nb_status st = nb_program_add_block(p, src->parent_idx, &dst);
    if (st) return nb_builder_fail(b, st, "control flow: cannot add a block");
    d->block = dst;
    for (int i = 0; i < src->n_vars && !st; i++) {
        const nb_var *v = src->vars[i];
        nb_var *c;
        if (!(st = nb_block_create_var(dst, v->name, v->dtype, v->ndim, v->shape, &c)))
            c->stop_gradient = v->stop_gradient;
    }
    for (int i = 0; i < src->n_ops && !st; i++) {
        nb_op *op = nb_op_clone(src->ops[i]);
        st = op ? nb_block_push_op(dst, dst->n_ops, op) : NB_ERR_NOMEM;
    }
    nb_strmap tan;
    nb_strmap_init(&tan);
    for (int i = 0; i < d->n_par && !st; i++) {
        if (!d->par_on[i]) continue;
        const nb_var *v = nb_block_find_var(dst, d->par[i]);
        /* A fresh name: the block of a JVP op derived again (forward over
         * forward) has "x@TANGENT" already, and sharing it would make the
         * two tangents one. */
        char name[512];
        snprintf(name, sizeof name, "%s@TANGENT", d->par[i]);
        for (int k = 2; nb_block_find_var(dst, name); k++) snprintf(name, sizeof name, "%s@TANGENT@%d", d->par[i], k);
        nb_var *t = NULL;
        if (!(st = nb_block_create_var(dst, name, v->dtype, v->ndim, v->shape, &t))) {
            d->tpar[i] = t->name;
            if (nb_strmap_put(&tan, d->par[i], t)) st = NB_ERR_NOMEM;
        }
    }
    /* Captured values: their tangents are outer vars, read by name. */
    for (int k = 0; k < nb_grad_in_count(g, x_slot) && !st; k++) {
        nb_value t = nb_grad_tx(g, x_slot, k);
        if (!nb_is_none(t) && nb_strmap_put(&tan, nb_value_name(nb_grad_x(g, x_slot, k)), nb_value_var(t)))
            st = NB_ERR_NOMEM;
    }
    if (!st) st = nb_jvp_block(p, dst, src->n_ops, NULL, &tan);
    nb_block *was = nb_builder_block(b);
    nb_builder_set_block(b, dst);
    for (int k = 0; k < d->n_out && !st; k++) {
        if (!d->out_on[k]) continue;
        nb_var *t = nb_strmap_get(&tan, d->outs[k], NULL);
        nb_value v = t ? nb_value_from_var(t)
                       : nb_emit1(b, "fill_zeros_like",
                                  NB_VALUES(nb_value_from_var(nb_block_find_var(dst, d->outs[k]))), NB_NO_ATTRS);
        v = nb_ctl_local(b, dst, v);
        if (!(st = nb_builder_status(b))) d->tout[k] = nb_value_name(v);
    }
    nb_builder_set_block(b, was);
    nb_strmap_free(&tan);
    if (st && !nb_builder_status(b))
        nb_builder_fail(b, st, "control flow: deriving block %d: %s", src_idx, nb_last_error());
    return st ? nb_builder_status(b) : NB_OK;
}

static bool is_float(nb_builder *b, nb_value v) { return nb_dtype_is_float(nb_value_info(b, v).dtype); }

/* The tangent of x, or zeros shaped like it. */
static nb_value tangent_or_zeros(nb_builder *b, nb_value x, nb_value t)
{
    return nb_is_none(t) ? nb_emit1(b, "fill_zeros_like", NB_VALUES(x), NB_NO_ATTRS) : t;
}

/* ---- while ----------------------------------------------------------------- */

nb_status nb_ctl_while_jvp(nb_builder *b, nb_grad_ctx *g)
{
    enum { COND, X };
    const nb_attr_value *cin = nb_grad_attr(g, "carry_in"), *cout = nb_grad_attr(g, "carry_out");
    int n_carry = cin->n;
    bool on[NB_CONTROL_MAX];
    for (int i = 0; i < n_carry; i++) on[i] = is_float(b, nb_grad_x(g, X, i));
    derivation d = {
        .n_par = n_carry, .par = cin->strs, .par_on = on, .n_out = n_carry, .outs = cout->strs, .out_on = on};
    nb_status st = derive(b, g, X, nb_grad_attr(g, "sub_block")->block, &d);
    if (st) return st;
    nb_value in[1 + 2 * CAP], res[1 + 2 * NB_CONTROL_MAX];
    const char *c_in[2 * NB_CONTROL_MAX], *c_out[2 * NB_CONTROL_MAX];
    int n = 0, m = n_carry;
    in[n++] = nb_grad_x(g, COND, 0);
    for (int i = 0; i < n_carry; i++) {
        in[n++] = nb_grad_x(g, X, i);
        c_in[i] = cin->strs[i];
        c_out[i] = cout->strs[i];
    }
    for (int i = 0; i < n_carry; i++)
        if (on[i]) {
            in[n++] = tangent_or_zeros(b, nb_grad_x(g, X, i), nb_grad_tx(g, X, i));
            c_in[m] = d.tpar[i];
            c_out[m++] = d.tout[i];
        }
    int n_x = nb_ctl_captured(d.block, in + 1, n - 1, 2 * CAP);
    if (n_x < 0) return nb_builder_fail(b, NB_ERR_ARG, "while: too many values for its JVP");
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", d.block->idx), NB_ATTR_STRINGS_N("carry_in", m, c_in),
                       NB_ATTR_STRINGS_N("carry_out", m, c_out),
                       NB_ATTR_STRING("cond_out", nb_grad_attr(g, "cond_out")->s),
                       NB_ATTR_BOOL("is_test", nb_grad_attr(g, "is_test")->b)};
    if ((st = nb_emit(b, "while", NB_VALUES_N(1 + n_x, in), NB_ATTRS_N(5, attrs), 1 + m, res))) return st;
    for (int i = 0, u = n_carry; i < n_carry; i++)
        if (on[i]) nb_grad_set_ty(g, 1, i, res[1 + u++]);
    return NB_OK;
}

/* ---- recurrent ------------------------------------------------------------- */

nb_status nb_ctl_recurrent_jvp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_attr_value *mem_in = nb_grad_attr(g, "mem_in"), *mem_out = nb_grad_attr(g, "mem_out");
    const nb_attr_value *seq_in = nb_grad_attr(g, "seq_in"), *seq_out = nb_grad_attr(g, "seq_out");
    const nb_attr_value *dts = nb_grad_attr(g, "out_dtypes"), *shs = nb_grad_attr(g, "out_shapes");
    int n_mem = mem_in->n, n_seq = seq_in->n, n_y = seq_out->n;
    /* Parameters: memories then sequence slices; results: memories then step outputs. */
    const char *par[2 * NB_CONTROL_MAX], *outs[2 * NB_CONTROL_MAX];
    bool par_on[2 * NB_CONTROL_MAX], out_on[2 * NB_CONTROL_MAX];
    for (int i = 0; i < n_mem; i++) {
        par[i] = mem_in->strs[i];
        outs[i] = mem_out->strs[i];
        par_on[i] = out_on[i] = is_float(b, nb_grad_x(g, 0, i));
    }
    for (int j = 0; j < n_seq; j++) {
        par[n_mem + j] = seq_in->strs[j];
        par_on[n_mem + j] = !nb_is_none(nb_grad_tx(g, 0, n_mem + j));
    }
    for (int k = 0; k < n_y; k++) {
        outs[n_mem + k] = seq_out->strs[k];
        out_on[n_mem + k] = nb_dtype_is_float((nb_dtype)dts->ints[k]);
    }
    derivation d = {
        .n_par = n_mem + n_seq, .par = par, .par_on = par_on, .n_out = n_mem + n_y, .outs = outs, .out_on = out_on};
    nb_status st = derive(b, g, 0, nb_grad_attr(g, "sub_block")->block, &d);
    if (st) return st;
    nb_value in[2 * CAP], res[1 + 4 * NB_CONTROL_MAX];
    const char *mi[2 * NB_CONTROL_MAX], *mo[2 * NB_CONTROL_MAX], *si[2 * NB_CONTROL_MAX], *so[2 * NB_CONTROL_MAX];
    int64_t dt[2 * NB_CONTROL_MAX], sh[2 * NB_CONTROL_MAX * (NB_MAX_DIMS + 2)];
    int n = 0, nm = 0, ns = 0, ny = 0, nsh = 0;
    for (int i = 0; i < n_mem; i++, nm++)
        in[n++] = nb_grad_x(g, 0, i), mi[nm] = mem_in->strs[i], mo[nm] = mem_out->strs[i];
    for (int i = 0; i < n_mem; i++)
        if (par_on[i])
            in[n++] = tangent_or_zeros(b, nb_grad_x(g, 0, i), nb_grad_tx(g, 0, i)), mi[nm] = d.tpar[i],
            mo[nm++] = d.tout[i];
    for (int j = 0; j < n_seq; j++, ns++) in[n++] = nb_grad_x(g, 0, n_mem + j), si[ns] = seq_in->strs[j];
    for (int j = 0; j < n_seq; j++)
        if (par_on[n_mem + j]) in[n++] = nb_grad_tx(g, 0, n_mem + j), si[ns++] = d.tpar[n_mem + j];
    /* Step outputs and their tangents, with the dtypes and shapes recorded. */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0, at = 0; k < n_y; k++) {
            int len = 1 + (int)shs->ints[at];
            if (pass == 0 || out_on[n_mem + k]) {
                so[ny] = pass ? d.tout[n_mem + k] : seq_out->strs[k];
                dt[ny++] = dts->ints[k];
                memcpy(sh + nsh, shs->ints + at, (size_t)len * sizeof *sh);
                nsh += len;
            }
            at += len;
        }
    int n_x = nb_ctl_captured(d.block, in, n, 2 * CAP);
    if (n_x < 0) return nb_builder_fail(b, NB_ERR_ARG, "recurrent: too many values for its JVP");
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", d.block->idx),
                       NB_ATTR_STRINGS_N("mem_in", nm, mi),
                       NB_ATTR_STRINGS_N("mem_out", nm, mo),
                       NB_ATTR_STRINGS_N("seq_in", ns, si),
                       NB_ATTR_STRINGS_N("seq_out", ny, so),
                       NB_ATTR_INTS_N("out_dtypes", ny, dt),
                       NB_ATTR_INTS_N("out_shapes", nsh, sh),
                       NB_ATTR_BOOL("reverse", nb_grad_attr(g, "reverse")->b),
                       NB_ATTR_BOOL("is_test", nb_grad_attr(g, "is_test")->b)};
    if ((st = nb_emit(b, "recurrent", NB_VALUES_N(n_x, in), NB_ATTRS_N(9, attrs), 1 + nm + ny, res))) return st;
    for (int i = 0, u = n_mem; i < n_mem; i++)
        if (par_on[i]) nb_grad_set_ty(g, 1, i, res[1 + u++]);
    for (int k = 0, u = n_y; k < n_y; k++)
        if (out_on[n_mem + k]) nb_grad_set_ty(g, 1, n_mem + k, res[1 + nm + u++]);
    return NB_OK;
}

/* ---- cond and net ------------------------------------------------------------- */

/* A derived branch: its block, and the names of its results (the block's
 * outputs followed by their tangents), in names[0 .. n). */
typedef struct derived_branch {
    nb_block *block;
    const char **names;
    int n;
} derived_branch;

/* Derives one block of a cond or net op with no parameters. */
static nb_status derive_branch(nb_builder *b, nb_grad_ctx *g, int x_slot, const char *block_attr, const char *out_attr,
                               const bool *on, derived_branch *res)
{
    const nb_attr_value *outs = nb_grad_attr(g, out_attr);
    derivation d = {.n_out = outs->n, .outs = outs->strs, .out_on = on};
    nb_status st = derive(b, g, x_slot, nb_grad_attr(g, block_attr)->block, &d);
    if (st) return st;
    res->n = 0;
    for (int k = 0; k < outs->n; k++) res->names[res->n++] = outs->strs[k];
    for (int k = 0; k < outs->n; k++)
        if (on[k]) res->names[res->n++] = d.tout[k];
    res->block = d.block;
    return NB_OK;
}

static nb_status branch_jvp(nb_builder *b, nb_grad_ctx *g, bool is_cond)
{
    int x_slot = is_cond ? 1 : 0;
    const nb_attr_value *dts = nb_grad_attr(g, "out_dtypes"), *shs = nb_grad_attr(g, "out_shapes");
    int n_out = dts->n;
    bool on[NB_CONTROL_MAX];
    for (int k = 0; k < n_out; k++) on[k] = nb_dtype_is_float((nb_dtype)dts->ints[k]);
    const char *t_names[2 * NB_CONTROL_MAX], *e_names[2 * NB_CONTROL_MAX];
    derived_branch then_d = {.names = t_names}, else_d = {.names = e_names};
    nb_status st = derive_branch(b, g, x_slot, is_cond ? "then_block" : "sub_block", is_cond ? "then_out" : "block_out",
                                 on, &then_d);
    if (!st && is_cond) st = derive_branch(b, g, x_slot, "else_block", "else_out", on, &else_d);
    if (st) return st;
    nb_block *tb = then_d.block, *eb = else_d.block;
    int64_t dt[2 * NB_CONTROL_MAX], sh[2 * NB_CONTROL_MAX * (NB_MAX_DIMS + 1)];
    int ny = 0, nsh = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0, at = 0; k < n_out; k++) {
            int len = 1 + (int)shs->ints[at];
            if (pass == 0 || on[k]) {
                dt[ny++] = dts->ints[k];
                memcpy(sh + nsh, shs->ints + at, (size_t)len * sizeof *sh);
                nsh += len;
            }
            at += len;
        }
    nb_value in[1 + 2 * CAP], res[1 + 2 * NB_CONTROL_MAX];
    int n = 0;
    if (is_cond) in[n++] = nb_grad_x(g, 0, 0);
    int n_x = nb_ctl_captured(tb, in + n, 0, 2 * CAP);
    if (n_x >= 0 && eb) n_x = nb_ctl_captured(eb, in + n, n_x, 2 * CAP);
    if (n_x < 0) return nb_builder_fail(b, NB_ERR_ARG, "%s: too many values for its JVP", is_cond ? "cond" : "net");
    nb_attr cond_attrs[] = {NB_ATTR_BLOCK("then_block", tb->idx),
                            NB_ATTR_BLOCK("else_block", eb ? eb->idx : 0),
                            NB_ATTR_STRINGS_N("then_out", ny, t_names),
                            NB_ATTR_STRINGS_N("else_out", ny, e_names),
                            NB_ATTR_INTS_N("out_dtypes", ny, dt),
                            NB_ATTR_INTS_N("out_shapes", nsh, sh),
                            NB_ATTR_BOOL("is_test", nb_grad_attr(g, "is_test")->b)};
    nb_attr net_attrs[] = {NB_ATTR_BLOCK("sub_block", tb->idx), NB_ATTR_STRINGS_N("block_out", ny, t_names),
                           NB_ATTR_INTS_N("out_dtypes", ny, dt), NB_ATTR_INTS_N("out_shapes", nsh, sh),
                           NB_ATTR_BOOL("is_test", nb_grad_attr(g, "is_test")->b)};
    st = is_cond ? nb_emit(b, "cond", NB_VALUES_N(n + n_x, in), NB_ATTRS_N(7, cond_attrs), 1 + ny, res)
                 : nb_emit(b, "net", NB_VALUES_N(n_x, in), NB_ATTRS_N(5, net_attrs), 1 + ny, res);
    if (st) return st;
    for (int k = 0, u = n_out; k < n_out; k++)
        if (on[k]) nb_grad_set_ty(g, 1, k, res[1 + u++]);
    return NB_OK;
}

nb_status nb_ctl_cond_jvp(nb_builder *b, nb_grad_ctx *g) { return branch_jvp(b, g, true); }
nb_status nb_ctl_net_jvp(nb_builder *b, nb_grad_ctx *g) { return branch_jvp(b, g, false); }
