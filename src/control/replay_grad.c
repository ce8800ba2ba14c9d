/* Rules for the gradient ops of control flow: higher-order gradients
 * through branches, nested nets, loops and scans.
 *
 * net_grad runs a grad block G in the scope its forward block F left; what
 * it computes, dX = VJP_F(X, dOut), is also what one block C = (the seeds
 * set from dOut, F's ops, G's ops) computes from X and dOut alone. So
 * net_grad's rules are those of a net op running C: the rule emits that
 * net op (which replays F and G), and hands the VJP or JVP rule of net the
 * context of that op, mapping its inputs to net_grad's by name. cond_grad
 * is the same with a cond op over one such block per branch, on the forward
 * cond's condition.
 *
 * A loop's gradient op cannot be replayed that way (its grad block runs once
 * per iteration, in reverse), so while_grad and recurrent_grad go through
 * forward mode instead. The gradient op computes dX = J(X)^T dOut, J the
 * Jacobian of the whole loop. With a cotangent u on dX,
 *     <u, J^T dOut> = <J u, dOut>,
 * so the gradient with respect to dOut is J u, the loop's JVP along u, and
 * the gradient with respect to X is the gradient of <J(X) u, dOut>: the
 * reverse pass (the loop op's own VJP) through the op that the loop's JVP
 * rule emits. Likewise the tangent of dX along (tX, tdOut) is J^T tdOut plus
 * the gradient of <J(X) tX, dOut>, one reverse pass through the JVP op with
 * cotangents tdOut on its primal outputs and dOut on its tangents. So every
 * rule here is made of the first-order rules of cond, net, while and
 * recurrent. */
#include <stdio.h>
#include <string.h>
#include "nabla/device.h"
#include "nabla/grad_rule.h"
#include "nabla/ops.h"
#include "control_internal.h"
#include "control_ops.h"
#include "../program/program_internal.h"

#define CAP (2 * NB_CONTROL_MAX)

/* Copies the vars and ops of block `src` into `dst` (vars it has already
 * are kept). */
static nb_status copy_block(nb_block *dst, const nb_block *src)
{
    nb_status st = NB_OK;
    for (int i = 0; i < src->n_vars && !st; i++) {
        const nb_var *v = src->vars[i];
        nb_var *c;
        if (nb_block_find_var(dst, v->name)) continue;
        if (!(st = nb_block_create_var(dst, v->name, v->dtype, v->ndim, v->shape, &c)))
            c->stop_gradient = v->stop_gradient;
    }
    for (int i = 0; i < src->n_ops && !st; i++) {
        nb_op *op = nb_op_clone(src->ops[i]);
        st = op ? nb_block_push_op(dst, dst->n_ops, op) : NB_ERR_NOMEM;
    }
    return st;
}

static bool written_in(const nb_block *blk, const char *name)
{
    for (int i = 0; i < blk->n_ops; i++)
        for (int k = 0; k < nb_op_n_outputs(blk->ops[i]); k++)
            if (!strcmp(blk->ops[i]->outputs[k], name)) return true;
    return false;
}

/* Block C for grad block `grad_idx`: its seeds[i] assigned from the
 * gradient op's dOut inputs, the forward block's ops, the grad block's ops,
 * and, per wanted position, the var holding that gradient (zeros where the
 * grad block writes none) into results[]. */
static nb_status replay_block(nb_builder *b, nb_grad_ctx *g, int grad_idx, const nb_attr_value *seeds,
                              const nb_attr_value *x_grad, nb_block **out, const char **results)
{
    nb_program *p = nb_builder_program(b);
    nb_block *here = nb_builder_block(b), *gb = nb_program_block(p, grad_idx), *c = NULL;
    nb_block *fb = gb ? nb_program_block(p, gb->forward_block_idx) : NULL;
    if (!fb) return nb_builder_fail(b, NB_ERR_ARG, "%s: block %d is not a grad block", g->def->name, grad_idx);
    const nb_attr_value *pos = nb_grad_attr(g, "x_grad_pos");
    int n_out = (int)nb_grad_attr(g, "n_out")->i, n_x = nb_grad_in_count(g, 1) - n_out;
    nb_status st = nb_program_add_block(p, here->idx, &c);
    if (st) return nb_builder_fail(b, st, "%s: %s", g->def->name, nb_last_error());
    nb_builder_set_block(b, c);
    for (int i = 0; i < n_out && i < seeds->n && !st; i++) {
        if (!*seeds->strs[i]) continue;
        nb_value d = nb_grad_x(g, 1, n_x + i);
        nb_var_info info = nb_value_info(b, d);
        nb_var *v = nb_block_find_var(c, seeds->strs[i]);
        if (!v) st = nb_block_create_var(c, seeds->strs[i], info.dtype, info.ndim, info.shape, &v);
        if (!st)
            st = nb_block_append_op(c, "assign", NB_NAMES(nb_value_name(d)), NB_NAMES(seeds->strs[i]), NB_NO_ATTRS,
                                    NULL);
    }
    if (!st) st = copy_block(c, fb);
    if (!st) st = copy_block(c, gb);
    if (st) nb_builder_fail(b, st, "%s: replaying its blocks: %s", g->def->name, nb_last_error());
    for (int o = 0; o < pos->n && !nb_builder_status(b); o++) {
        int j = (int)pos->ints[o];
        const char *name = j < x_grad->n ? x_grad->strs[j] : "";
        nb_value v = *name && written_in(c, name) ? nb_value_from_var(nb_block_find_var(c, name))
                                                  : nb_fill_zeros_like(b, nb_grad_x(g, 1, j));
        v = nb_ctl_local(b, c, v);
        results[o] = nb_value_name(v);
    }
    nb_builder_set_block(b, here);
    *out = c;
    return nb_builder_status(b);
}

/* The op the gradient op is equivalent to: net over C (cond over C_then and
 * C_else on `pred`), emitted into b's block; returns it. */
static nb_op *emit_replay(nb_builder *b, nb_grad_ctx *g, nb_value pred, nb_block *c_then, nb_block *c_else,
                          const char **then_out, const char **else_out)
{
    int n = nb_grad_out_count(g, 0);
    int64_t dt[NB_CONTROL_MAX], sh[NB_CONTROL_MAX * (NB_MAX_DIMS + 1)];
    int nsh = 0;
    for (int o = 0; o < n; o++) {
        nb_var_info info = nb_value_info(b, nb_grad_y(g, 0, o));
        dt[o] = info.dtype;
        sh[nsh++] = info.ndim;
        for (int d = 0; d < info.ndim; d++) sh[nsh++] = info.shape[d];
    }
    nb_value in[1 + CAP], res[1 + NB_CONTROL_MAX];
    int k = 0;
    if (c_else) in[k++] = pred;
    int n_in = nb_ctl_captured(c_then, in + k, 0, CAP);
    if (n_in >= 0 && c_else) n_in = nb_ctl_captured(c_else, in + k, n_in, CAP);
    if (n_in < 0 || n > NB_CONTROL_MAX) {
        nb_builder_fail(b, NB_ERR_ARG, "%s: too many values to replay", g->def->name);
        return NULL;
    }
    nb_status st;
    if (c_else) {
        nb_attr attrs[] = {NB_ATTR_BLOCK("then_block", c_then->idx),   NB_ATTR_BLOCK("else_block", c_else->idx),
                           NB_ATTR_STRINGS_N("then_out", n, then_out), NB_ATTR_STRINGS_N("else_out", n, else_out),
                           NB_ATTR_INTS_N("out_dtypes", n, dt),        NB_ATTR_INTS_N("out_shapes", nsh, sh)};
        st = nb_emit(b, "cond", NB_VALUES_N(k + n_in, in), NB_ATTRS_N(6, attrs), 1 + n, res);
    } else {
        nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", c_then->idx), NB_ATTR_STRINGS_N("block_out", n, then_out),
                           NB_ATTR_INTS_N("out_dtypes", n, dt), NB_ATTR_INTS_N("out_shapes", nsh, sh)};
        st = nb_emit(b, "net", NB_VALUES_N(n_in, in), NB_ATTRS_N(4, attrs), 1 + n, res);
    }
    if (st) return NULL;
    nb_block *blk = nb_builder_block(b);
    return blk->ops[blk->n_ops - 1];
}

/* Position in the gradient op's X slot of the var named `name`, or -1. */
static int x_index(const nb_grad_ctx *g, const char *name)
{
    for (int j = 0; j < nb_grad_in_count(g, 1); j++)
        if (!strcmp(nb_value_name(nb_grad_x(g, 1, j)), name)) return j;
    return -1;
}

/* Runs the VJP (forward false) or JVP rule of the replay op `op` in the
 * gradient op's stead, moving cotangents and tangents between the two. */
static nb_status rule_of_replay(nb_builder *b, nb_grad_ctx *g, const nb_op *op, bool forward)
{
    int n_in = nb_op_n_inputs(op), n_out = nb_op_n_outputs(op), out0 = op->out_begin[1];
    nb_value x[1 + CAP], y[1 + NB_CONTROL_MAX], dy[1 + NB_CONTROL_MAX] = {{0}}, dx[1 + CAP] = {{0}};
    nb_value tx[1 + CAP] = {{0}}, ty[1 + NB_CONTROL_MAX] = {{0}};
    bool want[1 + CAP] = {0};
    int map[1 + CAP];
    for (int k = 0; k < n_in; k++) {
        x[k] = nb_value_from_var(nb_block_find_var_recursive(nb_builder_block(b), op->inputs[k]));
        map[k] = x_index(g, op->inputs[k]);
        if (map[k] < 0) continue;
        want[k] = !forward && nb_grad_wants_dx(g, 1, map[k]);
        if (forward) tx[k] = nb_grad_tx(g, 1, map[k]);
    }
    for (int k = 0; k < n_out; k++)
        y[k] = nb_value_from_var(nb_block_find_var_recursive(nb_builder_block(b), op->outputs[k]));
    for (int o = 0; !forward && o < n_out - out0; o++) dy[out0 + o] = nb_grad_dy(g, 0, o);
    nb_grad_ctx r = {
        .def = op->def, .attrs = op->attrs, .x = x, .y = y, .dy = dy, .dx = dx, .want_dx = want, .tx = tx, .ty = ty};
    memcpy(r.in_begin, op->in_begin, sizeof r.in_begin);
    memcpy(r.out_begin, op->out_begin, sizeof r.out_begin);
    nb_status st = forward ? op->def->jvp(b, &r) : op->def->vjp(b, &r);
    if (!st) st = nb_builder_status(b);
    if (st) return st;
    if (forward) {
        for (int o = 0; o < n_out - out0; o++) nb_grad_set_ty(g, 0, o, ty[out0 + o]);
        return NB_OK;
    }
    for (int k = 0; k < n_in; k++)
        if (want[k] && !nb_is_none(dx[k])) nb_grad_set_dx(g, 1, map[k], dx[k]);
    return NB_OK;
}

static nb_status net_grad_rule(nb_builder *b, nb_grad_ctx *g, bool forward)
{
    const char *results[NB_CONTROL_MAX];
    nb_block *c;
    if (nb_grad_out_count(g, 0) > NB_CONTROL_MAX) return nb_builder_fail(b, NB_ERR_ARG, "net_grad: too many outputs");
    nb_status st = replay_block(b, g, nb_grad_attr(g, "sub_block")->block, nb_grad_attr(g, "seeds"),
                                nb_grad_attr(g, "x_grad"), &c, results);
    if (st) return st;
    const nb_op *op = emit_replay(b, g, NB_NONE, c, NULL, results, NULL);
    return op ? rule_of_replay(b, g, op, forward) : nb_builder_status(b);
}

/* The forward op whose StepScopes the gradient op reads, and its block. */
static const nb_op *forward_op(nb_builder *b, nb_grad_ctx *g, const nb_block **where)
{
    const char *steps = nb_value_name(nb_grad_x(g, 0, 0));
    nb_program *p = nb_builder_program(b);
    for (int k = 0; k < p->n_blocks; k++)
        for (int i = 0; i < p->blocks[k]->n_ops; i++) {
            const nb_op *op = p->blocks[k]->ops[i];
            if ((op->def->flags & NB_OP_CONTROL) && nb_op_n_outputs(op) > 0 &&
                !strcmp(nb_op_out_name(op, 0, 0), steps)) {
                *where = p->blocks[k];
                return op;
            }
        }
    nb_builder_fail(b, NB_ERR_ARG, "%s: no op writes its StepScopes '%s'", g->def->name, steps);
    return NULL;
}

/* The forward cond's condition. */
static nb_value condition_of(nb_builder *b, nb_grad_ctx *g)
{
    const nb_block *blk;
    const nb_op *op = forward_op(b, g, &blk);
    return op ? nb_value_from_var(nb_block_find_var_recursive(blk, nb_op_in_name(op, 0, 0))) : NB_NONE;
}

static nb_status cond_grad_rule(nb_builder *b, nb_grad_ctx *g, bool forward)
{
    const char *t_res[NB_CONTROL_MAX], *e_res[NB_CONTROL_MAX];
    nb_block *ct, *ce;
    if (nb_grad_out_count(g, 0) > NB_CONTROL_MAX) return nb_builder_fail(b, NB_ERR_ARG, "cond_grad: too many outputs");
    nb_value pred = condition_of(b, g);
    nb_status st = nb_is_none(pred) ? nb_builder_status(b) : NB_OK;
    if (!st)
        st = replay_block(b, g, nb_grad_attr(g, "then_grad_block")->block, nb_grad_attr(g, "then_seeds"),
                          nb_grad_attr(g, "then_x_grad"), &ct, t_res);
    if (!st)
        st = replay_block(b, g, nb_grad_attr(g, "else_grad_block")->block, nb_grad_attr(g, "else_seeds"),
                          nb_grad_attr(g, "else_x_grad"), &ce, e_res);
    if (st) return st;
    const nb_op *op = emit_replay(b, g, pred, ct, ce, t_res, e_res);
    return op ? rule_of_replay(b, g, op, forward) : nb_builder_status(b);
}

/* ---- loops: through forward mode ------------------------------------------------ */

/* The values of an op's inputs and outputs. */
static void values_of(nb_builder *b, const nb_op *op, nb_value *x, nb_value *y)
{
    const nb_block *blk = nb_builder_block(b);
    for (int k = 0; k < nb_op_n_inputs(op); k++)
        x[k] = nb_value_from_var(nb_block_find_var_recursive(blk, op->inputs[k]));
    for (int k = 0; k < nb_op_n_outputs(op); k++)
        y[k] = nb_value_from_var(nb_block_find_var_recursive(blk, op->outputs[k]));
}

/* The last op of b's block that writes var `name`. */
static const nb_op *writer_of(nb_builder *b, const char *name)
{
    const nb_block *blk = nb_builder_block(b);
    for (int i = blk->n_ops - 1; i >= 0; i--)
        for (int k = 0; k < nb_op_n_outputs(blk->ops[i]); k++)
            if (!strcmp(blk->ops[i]->outputs[k], name)) return blk->ops[i];
    return NULL;
}

/* The first position in the gradient op's forward inputs X[0..n_fx) of the
 * var named `name` whose gradient is wanted (forward: any), or -1. */
static int wanted_index(const nb_grad_ctx *g, int n_fx, const char *name, bool any)
{
    for (int j = 0; j < n_fx; j++)
        if (!strcmp(nb_value_name(nb_grad_x(g, 1, j)), name) && (any || nb_grad_wants_dx(g, 1, j))) return j;
    return -1;
}

static nb_value add_to(nb_builder *b, nb_value sum, nb_value v)
{
    return nb_is_none(sum) ? v : nb_is_none(v) ? sum : nb_add(b, sum, v);
}

static nb_status loop_grad_rule(nb_builder *b, nb_grad_ctx *g, bool forward)
{
    const nb_block *fblk;
    const nb_op *f = forward_op(b, g, &fblk);
    if (!f) return nb_builder_status(b);
    int xs = f->def->inputs[0].flags & NB_SLOT_NO_GRAD ? 1 : 0; /* while has its Condition first */
    int n_fo = nb_op_out_count(f, 1), n_fx = nb_grad_in_count(g, 1) - n_fo;
    const nb_attr_value *pos = nb_grad_attr(g, "x_grad_pos");
    if (n_fx != nb_op_in_count(f, xs) || nb_op_n_inputs(f) > 1 + CAP || nb_op_n_outputs(f) > 1 + NB_CONTROL_MAX)
        return nb_builder_fail(b, NB_ERR_ARG, "%s: its inputs do not match its forward op's", g->def->name);

    /* The forward op's JVP along u (reverse) or tX (forward). */
    nb_value fx[1 + CAP], fy[1 + NB_CONTROL_MAX], ftx[1 + CAP] = {{0}}, fty[1 + NB_CONTROL_MAX] = {{0}};
    values_of(b, f, fx, fy);
    if (forward)
        for (int j = 0; j < n_fx; j++) ftx[f->in_begin[xs] + j] = nb_grad_tx(g, 1, j);
    else
        for (int o = 0; o < pos->n; o++) ftx[f->in_begin[xs] + pos->ints[o]] = nb_grad_dy(g, 0, o);
    nb_grad_ctx jf = {.def = f->def, .attrs = f->attrs, .x = fx, .y = fy, .tx = ftx, .ty = fty};
    memcpy(jf.in_begin, f->in_begin, sizeof jf.in_begin);
    memcpy(jf.out_begin, f->out_begin, sizeof jf.out_begin);
    nb_status st = f->def->jvp(b, &jf);
    if (st || (st = nb_builder_status(b))) return st;
    const nb_op *d = NULL;
    for (int i = 0; i < n_fo && !d; i++)
        if (!nb_is_none(fty[f->out_begin[1] + i])) d = writer_of(b, nb_value_name(fty[f->out_begin[1] + i]));
    /* J u is the gradient with respect to dOut. */
    for (int i = 0; !forward && i < n_fo; i++)
        if (nb_grad_wants_dx(g, 1, n_fx + i)) nb_grad_set_dx(g, 1, n_fx + i, fty[f->out_begin[1] + i]);
    if (!d) return NB_OK; /* no tangent reaches the loop's outputs: the rest is zero */
    if (nb_op_n_inputs(d) > 1 + 2 * CAP || nb_op_n_outputs(d) > 1 + 2 * NB_CONTROL_MAX)
        return nb_builder_fail(b, NB_ERR_ARG, "%s: too many values for its rule", g->def->name);

    /* One reverse pass through the JVP op: cotangent dOut on each tangent
     * output, and (forward) tdOut on each primal one. */
    nb_value dx[1 + 2 * CAP] = {{0}}, dy[1 + 2 * NB_CONTROL_MAX] = {{0}}, x[1 + 2 * CAP], y[1 + 2 * NB_CONTROL_MAX];
    bool want[1 + 2 * CAP] = {0};
    values_of(b, d, x, y);
    bool is_tangent[1 + 2 * NB_CONTROL_MAX] = {0};
    for (int i = 0; i < n_fo; i++) {
        nb_value t = fty[f->out_begin[1] + i];
        for (int k = 0; !nb_is_none(t) && k < nb_op_n_outputs(d); k++)
            if (!strcmp(d->outputs[k], nb_value_name(t))) dy[k] = nb_grad_x(g, 1, n_fx + i), is_tangent[k] = true;
    }
    /* The JVP op's outputs are the loop's, in order, with tangents among them. */
    for (int k = d->out_begin[1], i = 0; forward && k < nb_op_n_outputs(d) && i < n_fo; k++)
        if (!is_tangent[k]) dy[k] = nb_grad_tx(g, 1, n_fx + i++);
    for (int k = 0; k < nb_op_n_inputs(d); k++) {
        int j = wanted_index(g, n_fx, d->inputs[k], forward);
        if (forward) {
            bool at_pos = false;
            for (int o = 0; j >= 0 && o < pos->n; o++) at_pos |= pos->ints[o] == j;
            j = at_pos ? j : -1;
        }
        want[k] = j >= 0 && !(d->def->inputs[0].flags & NB_SLOT_NO_GRAD && k < d->in_begin[1]);
    }
    nb_grad_ctx r = {.def = d->def, .attrs = d->attrs, .x = x, .y = y, .dy = dy, .dx = dx, .want_dx = want};
    memcpy(r.in_begin, d->in_begin, sizeof r.in_begin);
    memcpy(r.out_begin, d->out_begin, sizeof r.out_begin);
    if ((st = d->def->vjp(b, &r)) || (st = nb_builder_status(b))) return st;
    if (forward) {
        /* t(dX) at each output position: the reverse pass's gradient of the
         * forward input there (its name, summed over the JVP op's inputs). */
        for (int o = 0; o < pos->n; o++) {
            const char *name = nb_value_name(nb_grad_x(g, 1, (int)pos->ints[o]));
            nb_value t = NB_NONE;
            for (int k = 0; k < nb_op_n_inputs(d); k++)
                if (want[k] && !strcmp(d->inputs[k], name)) t = add_to(b, t, dx[k]);
            nb_grad_set_ty(g, 0, o, t);
        }
        return nb_builder_status(b);
    }
    nb_value sum[1 + CAP] = {{0}};
    for (int k = 0; k < nb_op_n_inputs(d); k++) {
        int j = want[k] ? wanted_index(g, n_fx, d->inputs[k], false) : -1;
        if (j >= 0) sum[j] = add_to(b, sum[j], dx[k]);
    }
    for (int j = 0; j < n_fx; j++)
        if (!nb_is_none(sum[j])) nb_grad_set_dx(g, 1, j, sum[j]);
    return nb_builder_status(b);
}

nb_status nb_ctl_loop_grad_vjp(nb_builder *b, nb_grad_ctx *g) { return loop_grad_rule(b, g, false); }
nb_status nb_ctl_loop_grad_jvp(nb_builder *b, nb_grad_ctx *g) { return loop_grad_rule(b, g, true); }

nb_status nb_ctl_net_grad_vjp(nb_builder *b, nb_grad_ctx *g) { return net_grad_rule(b, g, false); }
nb_status nb_ctl_net_grad_jvp(nb_builder *b, nb_grad_ctx *g) { return net_grad_rule(b, g, true); }
nb_status nb_ctl_cond_grad_vjp(nb_builder *b, nb_grad_ctx *g) { return cond_grad_rule(b, g, false); }
nb_status nb_ctl_cond_grad_jvp(nb_builder *b, nb_grad_ctx *g) { return cond_grad_rule(b, g, true); }
