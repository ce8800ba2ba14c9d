/* Loops and branches under vmap on a record builder, batched as JAX batches
 * lax.while_loop, lax.cond and lax.scan: the helper is called again on the
 * builder behind the batching one, with callbacks that run the user's
 * through the batching builder. So the sub-blocks hold batched ops, and the
 * op that runs them (while, cond, recurrent, net) sees physical values and
 * needs no batching rule of its own; its gradient op comes from the
 * backward pass of the batched program.
 *
 * Values carried through a loop and the outputs of a branch are carried
 * batched, at batch dim 0: which of them the body makes batched is not known
 * before it is recorded. A loop runs while any example's condition is true;
 * its per-example conditions are carried with the values, and an example
 * whose condition is false keeps its values (a where in the body). A branch
 * on a batched predicate runs both branches, and each example takes its
 * own's outputs; on a shared predicate it stays one cond op. */
#include <string.h>
#include "nabla/ops.h"
#include "../builder/builder_internal.h"
#include "../control/control_internal.h"
#include "../ops/batch_rules.h"
#include "vmap_internal.h"

/* What the callbacks run, and through which batching builder. */
typedef struct forward {
    nb_builder *vb;
    void *ctx;
    nb_loop_cond_fn cond;
    nb_loop_body_fn body;
    nb_branch_fn fn, else_fn;
    nb_step_fn step;
    const nb_value *in; /* a branch's inputs, as the user gave them */
    int n;              /* carried values (loop, scan), outputs (branch) */
    int n_ys, n_xs;
    bool x_batched[NB_CONTROL_MAX];
} forward;

/* The batching builder's ops go where the builder behind it is (the
 * sub-block being recorded) while a user's callback runs. */
typedef struct saved {
    nb_block *block;
    nb_op_role role;
} saved;

static saved follow(nb_builder *vb)
{
    saved s = {nb_builder_block(vb), nb_builder_role(vb)};
    nb_builder *ib = nb_vmap_inner(vb);
    nb_builder_set_block(vb, nb_builder_block(ib));
    nb_builder_set_role(vb, nb_builder_role(ib));
    return s;
}

static void unfollow(nb_builder *vb, saved s)
{
    nb_builder_set_block(vb, s.block);
    nb_builder_set_role(vb, s.role);
}

/* v as a physical value with its batch at dim 0 (broadcast if shared). */
static nb_value front(nb_builder *vb, nb_value v)
{
    nb_builder *ib = nb_vmap_inner(vb);
    int d = nb_vmap_bdim(vb, v);
    return d >= 0 ? nb_batch_move(ib, v, d, 0) : nb_vmap_broadcast_front(vb, v);
}

/* Marks physical values of the builder behind as batched at dim `bdim`. */
static nb_status lift(nb_builder *vb, int n, const nb_value *v, int bdim)
{
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++)
        if (!nb_is_none(v[i])) st = nb_vmap_set_bdim(vb, v[i], bdim);
    return st ? nb_builder_fail(vb, st, "%s", nb_last_error()) : NB_OK;
}

/* The batching builder's status after a call that returned st, with an
 * error the builder behind recorded moved to it (the user reads that one). */
static nb_status settle(nb_builder *vb, nb_status st)
{
    nb_builder *ib = nb_vmap_inner(vb);
    if (nb_builder_status(ib)) {
        nb_status ist = nb_builder_status(ib);
        if (!nb_builder_status(vb)) nb_builder_fail(vb, ist, "%s", nb_builder_error(ib));
        nb_builder_clear_error(ib);
        return nb_builder_status(vb);
    }
    if (st && !nb_builder_status(vb)) nb_builder_fail(vb, st, "%s", nb_last_error());
    return st ? st : nb_builder_status(vb);
}

/* Whether any example's predicate (batched, at dim 0) holds. */
static nb_value any_example(nb_builder *ib, nb_value active)
{
    nb_value m = nb_reduce_max(ib, nb_cast(ib, active, NB_F32), 0, NULL, false);
    return nb_greater(ib, m, nb_fill_constant(ib, NB_F32, 0, NULL, 0));
}

/* ---- while: carry[n] is the examples' conditions --------------------------------- */

static nb_status loop_cond(nb_builder *ib, const nb_value *carry, nb_value *pred, void *ctx)
{
    forward *f = ctx;
    *pred = any_example(ib, carry[f->n]);
    return nb_builder_status(ib);
}

/* The examples' conditions on logical values: physical, of shape [batch]. */
static nb_value conditions(forward *f, const nb_value *carry)
{
    nb_builder *vb = f->vb;
    nb_value p = NB_NONE;
    nb_status st = f->cond(vb, carry, &p, f->ctx);
    if (st || (st = nb_builder_status(vb))) return NB_NONE;
    if (nb_is_none(p)) {
        nb_builder_fail(vb, NB_ERR_ARG, "while_loop: the condition callback set no predicate");
        return NB_NONE;
    }
    nb_var_info i = nb_value_info(vb, p);
    if (i.dtype != NB_BOOL || nb_shape_numel(i.ndim, i.shape) != 1) {
        char s[NB_SHAPE_STR_MAX];
        nb_builder_fail(vb, NB_ERR_DTYPE, "while_loop: the predicate must be bool with one element, not %s %s",
                        nb_dtype_name(i.dtype), nb_shape_str(s, sizeof s, i.ndim, i.shape));
        return NB_NONE;
    }
    return nb_reshape(nb_vmap_inner(vb), front(vb, p), 1, (const int64_t[]){-1});
}

static nb_status loop_body(nb_builder *ib, const nb_value *carry, nb_value *next, void *ctx)
{
    forward *f = ctx;
    nb_builder *vb = f->vb;
    saved sv = follow(vb);
    nb_value out[NB_CONTROL_MAX];
    nb_status st = lift(vb, f->n + 1, carry, 0);
    for (int i = 0; i < f->n; i++) out[i] = NB_NONE;
    if (!st) st = f->body(vb, carry, out, f->ctx);
    if (!st) st = nb_builder_status(vb);
    for (int i = 0; i < f->n && !st; i++)
        st = nb_control_check_same(vb, "while_loop", "carried value", i, carry[i], out[i]);
    for (int i = 0; i < f->n && !st; i++) next[i] = front(vb, nb_where(vb, carry[f->n], out[i], carry[i]));
    if (!st && !(st = nb_builder_status(vb))) next[f->n] = conditions(f, next);
    unfollow(vb, sv);
    return st ? st : nb_builder_status(vb);
}

static nb_status vmap_while(nb_builder *vb, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, int n_carry,
                            const nb_value *init, nb_value *final)
{
    if (n_carry + 1 > NB_CONTROL_MAX)
        return nb_builder_fail(vb, NB_ERR_ARG, "while_loop: under vmap at most %d carried values", NB_CONTROL_MAX - 1);
    forward f = {.vb = vb, .ctx = ctx, .cond = cond, .body = body, .n = n_carry};
    nb_value phys[NB_CONTROL_MAX], fin[NB_CONTROL_MAX];
    for (int i = 0; i < n_carry; i++) phys[i] = front(vb, init[i]);
    phys[n_carry] = conditions(&f, init);
    nb_status st = nb_builder_status(vb);
    if (!st) st = nb_while_loop(nb_vmap_inner(vb), loop_cond, loop_body, &f, NB_VALUES_N(n_carry + 1, phys), fin);
    if ((st = settle(vb, st))) return st;
    memcpy(final, fin, (size_t)n_carry * sizeof *final);
    return lift(vb, n_carry, final, 0);
}

/* ---- cond and net: outputs at batch dim 0 ------------------------------------------ */

static nb_status branch(nb_builder *ib, nb_branch_fn fn, forward *f, nb_value *out)
{
    (void)ib;
    nb_builder *vb = f->vb;
    saved sv = follow(vb);
    nb_value o[NB_CONTROL_MAX];
    for (int i = 0; i < f->n; i++) o[i] = NB_NONE;
    nb_status st = fn(vb, f->in, o, f->ctx);
    if (!st) st = nb_builder_status(vb);
    for (int i = 0; i < f->n && !st; i++) {
        if (nb_is_none(o[i])) st = nb_builder_fail(vb, NB_ERR_ARG, "output %d of a branch or net was not set", i);
        else out[i] = front(vb, o[i]);
    }
    unfollow(vb, sv);
    return st ? st : nb_builder_status(vb);
}

static nb_status then_branch(nb_builder *ib, const nb_value *in, nb_value *out, void *ctx)
{
    (void)in;
    forward *f = ctx;
    return branch(ib, f->fn, f, out);
}

static nb_status else_branch(nb_builder *ib, const nb_value *in, nb_value *out, void *ctx)
{
    (void)in;
    forward *f = ctx;
    return branch(ib, f->else_fn, f, out);
}

static nb_status vmap_cond(nb_builder *vb, nb_value pred, const nb_branches *given, nb_values in, int n_out,
                           nb_value *out)
{
    if (nb_vmap_bdim(vb, pred) >= 0) return nb_control_both(vb, pred, given, in.v, n_out, out);
    forward f = {.vb = vb, .ctx = given->ctx, .fn = given->then_fn, .else_fn = given->else_fn, .in = in.v, .n = n_out};
    nb_branches br = {then_branch, else_branch, &f};
    nb_status st = nb_cond(nb_vmap_inner(vb), pred, &br, in, n_out, out);
    if ((st = settle(vb, st))) return st;
    return lift(vb, n_out, out, 0);
}

static nb_status vmap_net(nb_builder *vb, nb_branch_fn fn, void *ctx, int n_in, const nb_value *in, int n_out,
                          nb_value *out)
{
    forward f = {.vb = vb, .ctx = ctx, .fn = fn, .in = in, .n = n_out};
    nb_status st = nb_net(nb_vmap_inner(vb), then_branch, &f, NB_VALUES_N(n_in, in), n_out, out);
    if ((st = settle(vb, st))) return st;
    return lift(vb, n_out, out, 0);
}

/* ---- scan: carried values at batch dim 0, batched sequences [T, B, ...] ------------ */

static nb_status scan_step(nb_builder *ib, const nb_value *carry, const nb_value *x_t, nb_value *next, nb_value *y_t,
                           void *ctx)
{
    (void)ib;
    forward *f = ctx;
    nb_builder *vb = f->vb;
    saved sv = follow(vb);
    nb_value nl[NB_CONTROL_MAX], yl[NB_CONTROL_MAX];
    for (int k = 0; k < NB_CONTROL_MAX; k++) nl[k] = yl[k] = NB_NONE;
    nb_status st = lift(vb, f->n, carry, 0);
    for (int j = 0; j < f->n_xs && !st; j++)
        if (f->x_batched[j]) st = lift(vb, 1, &x_t[j], 0);
    if (!st) st = f->step(vb, carry, x_t, nl, yl, f->ctx);
    if (!st) st = nb_builder_status(vb);
    for (int i = 0; i < f->n && !st; i++)
        if (!(st = nb_control_check_same(vb, "scan", "carried value", i, carry[i], nl[i]))) next[i] = front(vb, nl[i]);
    for (int k = 0; k < f->n_ys && !st; k++) {
        if (nb_is_none(yl[k])) st = nb_builder_fail(vb, NB_ERR_ARG, "scan: output %d was not set by the step", k);
        else y_t[k] = front(vb, yl[k]);
    }
    unfollow(vb, sv);
    return st ? st : nb_builder_status(vb);
}

static nb_status vmap_scan(nb_builder *vb, nb_step_fn step, void *ctx, const nb_scan_io *given,
                           const nb_scan_form *form)
{
    (void)form; /* the batched step is no longer the cell it names */
    int n_carry = given->init.n, n_xs = given->xs.n, n_ys = given->n_ys;
    const nb_value *init = given->init.v, *xs = given->xs.v;
    nb_value *final = given->final, *ys = given->ys;
    nb_builder *ib = nb_vmap_inner(vb);
    forward f = {.vb = vb, .ctx = ctx, .step = step, .n = n_carry, .n_ys = n_ys, .n_xs = n_xs};
    nb_value phys[NB_CONTROL_MAX], seqs[NB_CONTROL_MAX];
    for (int i = 0; i < n_carry; i++) phys[i] = front(vb, init[i]);
    for (int j = 0; j < n_xs; j++) { /* time stays at 0, the batch goes to 1 */
        int d = nb_vmap_bdim(vb, xs[j]);
        f.x_batched[j] = d >= 0;
        seqs[j] = d >= 0 ? nb_batch_move(ib, xs[j], d, 1) : xs[j];
    }
    nb_status st = nb_builder_status(vb);
    nb_scan_io io = {NB_VALUES_N(n_carry, phys), NB_VALUES_N(n_xs, seqs), n_ys, final, ys, given->reverse};
    if (!st) st = nb_scan(ib, scan_step, &f, &io);
    if ((st = settle(vb, st))) return st;
    if ((st = lift(vb, n_carry, final, 0))) return st;
    return lift(vb, n_ys, ys, 1);
}

const struct nb_control_forms nb_vmap_control_forms = {vmap_while, vmap_cond, vmap_scan, vmap_net};
