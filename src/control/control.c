/* The control-flow helpers: plain C control flow on an eager builder, ops
 * holding sub-blocks on a record builder (see control_record.c). */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/control.h"
#include "nabla/eager.h"
#include "nabla/ops.h"
#include "control_internal.h"
#include "../builder/builder_internal.h"
#include "../eager/batched.h"

/* Whether any example of a logical (vmap) tensor is nonzero: its physical
 * batch, through nested levels. */
static bool any_example(const nb_tensor *t)
{
    while (!t->storage) t = nb_batched_of(t)->phys;
    for (int64_t i = 0, n = nb_tensor_numel(t); i < n; i++)
        if (nb_tensor_get(t, i) != 0) return true;
    return false;
}

/* The value of a one-element bool predicate, read eagerly. A batched (vmap)
 * predicate holds one value per example, which may differ: *batched is set,
 * and *out says whether any example's is true (the callers then run both
 * paths and select per example, as JAX's batched while and cond do). */
static nb_status eager_pred(nb_builder *b, nb_value pred, const char *who, bool *out, bool *batched)
{
    nb_tensor *t = nb_is_none(pred) ? NULL : nb_eager_tensor(pred);
    if (!t) return nb_builder_fail(b, NB_ERR_ARG, "%s: the predicate is missing", who);
    if (t->dtype != NB_BOOL || nb_tensor_numel(t) != 1) {
        char s[NB_SHAPE_STR_MAX];
        return nb_builder_fail(b, NB_ERR_DTYPE, "%s: the predicate must be bool with one element, not %s %s", who,
                               nb_dtype_name(t->dtype), nb_shape_str(s, sizeof s, t->ndim, t->shape));
    }
    *batched = !t->storage;
    *out = *batched ? any_example(t) : nb_tensor_get(t, 0) != 0;
    return NB_OK;
}

/* Checks that a carried value keeps its dtype and shape. */
nb_status nb_control_check_same(nb_builder *b, const char *who, const char *what, int i, nb_value was, nb_value now)
{
    if (nb_is_none(now)) return nb_builder_fail(b, NB_ERR_ARG, "%s: %s %d was not set by the body", who, what, i);
    nb_var_info a = nb_value_info(b, was), c = nb_value_info(b, now);
    bool same = a.dtype == c.dtype && a.ndim == c.ndim;
    for (int d = 0; same && d < a.ndim; d++) same = a.shape[d] == c.shape[d] || a.shape[d] < 0 || c.shape[d] < 0;
    if (same) return NB_OK;
    char sa[NB_SHAPE_STR_MAX], sc[NB_SHAPE_STR_MAX];
    return nb_builder_fail(b, NB_ERR_SHAPE, "%s: %s %d is %s %s before the body and %s %s after it; it must not change",
                           who, what, i, nb_dtype_name(a.dtype), nb_shape_str(sa, sizeof sa, a.ndim, a.shape),
                           nb_dtype_name(c.dtype), nb_shape_str(sc, sizeof sc, c.ndim, c.shape));
}

static nb_status check_args(nb_builder *b, const char *who, bool ok)
{
    if (!b) return nb_error(NB_ERR_ARG, "%s: NULL builder", who);
    nb_status st = nb_builder_status(b);
    if (st) return st;
    if ((st = nb_control_register_ops())) return nb_builder_fail(b, st, "%s: %s", who, nb_last_error());
    return ok ? NB_OK
              : nb_builder_fail(b, NB_ERR_ARG, "%s: bad arguments (a NULL callback, or counts out of range)", who);
}

/* ---- plain C control flow, on values that are tensors ---------------------- */

static nb_status unrolled_while(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, int n_carry,
                                const nb_value *init, nb_value *final)
{
    nb_status st = NB_OK;
    nb_value cur[NB_CONTROL_MAX], next[NB_CONTROL_MAX];
    memcpy(cur, init, (size_t)n_carry * sizeof *cur);
    for (;;) {
        nb_value pred = NB_NONE;
        bool go = false, batched = false;
        if ((st = cond(b, cur, &pred, ctx)) || (st = nb_builder_status(b))) return st;
        if ((st = eager_pred(b, pred, "while_loop", &go, &batched)) || !go) break;
        for (int i = 0; i < n_carry; i++) next[i] = NB_NONE;
        if ((st = body(b, cur, next, ctx)) || (st = nb_builder_status(b))) return st;
        for (int i = 0; i < n_carry && !st; i++)
            st = nb_control_check_same(b, "while_loop", "carried value", i, cur[i], next[i]);
        if (st) return st;
        /* Under vmap the loop runs until the last example's predicate turns
         * false; an example whose predicate already has keeps its values. */
        for (int i = 0; i < n_carry && batched; i++) next[i] = nb_where(b, pred, next[i], cur[i]);
        if (batched && (st = nb_builder_status(b))) return st;
        memcpy(cur, next, (size_t)n_carry * sizeof *cur);
    }
    if (!st) memcpy(final, cur, (size_t)n_carry * sizeof *cur);
    return st;
}

static nb_status run_branch(nb_builder *b, nb_branch_fn fn, void *ctx, const nb_value *in, int n_out, nb_value *out)
{
    for (int i = 0; i < n_out; i++) out[i] = NB_NONE;
    nb_status st = fn(b, in, out, ctx);
    if (st || (st = nb_builder_status(b))) return st;
    for (int i = 0; i < n_out; i++)
        if (nb_is_none(out[i])) return nb_builder_fail(b, NB_ERR_ARG, "cond: output %d was not set by the branch", i);
    return NB_OK;
}

nb_status nb_control_both(nb_builder *b, nb_value pred, const nb_branches *br, const nb_value *in, int n_out,
                          nb_value *out)
{
    nb_value other[NB_CONTROL_MAX];
    nb_status st = run_branch(b, br->then_fn, br->ctx, in, n_out, out);
    if (!st) st = run_branch(b, br->else_fn, br->ctx, in, n_out, other);
    for (int i = 0; i < n_out && !st; i++) {
        nb_var_info t = nb_value_info(b, out[i]), e = nb_value_info(b, other[i]);
        if (t.dtype != e.dtype || !nb_shape_equal(t.ndim, t.shape, e.ndim, e.shape)) {
            char st_[NB_SHAPE_STR_MAX], se[NB_SHAPE_STR_MAX];
            return nb_builder_fail(b, NB_ERR_SHAPE,
                                   "cond: under vmap both branches run, and output %d is %s %s from "
                                   "one and %s %s from the other",
                                   i, nb_dtype_name(t.dtype), nb_shape_str(st_, sizeof st_, t.ndim, t.shape),
                                   nb_dtype_name(e.dtype), nb_shape_str(se, sizeof se, e.ndim, e.shape));
        }
        out[i] = nb_where(b, pred, out[i], other[i]);
    }
    return st ? st : nb_builder_status(b);
}

static nb_status unrolled_cond(nb_builder *b, nb_value pred, const nb_branches *br, nb_values in, int n_out,
                               nb_value *out)
{
    nb_status st;
    bool taken = false, batched = false;
    if ((st = eager_pred(b, pred, "cond", &taken, &batched))) return st;
    if (batched) return nb_control_both(b, pred, br, in.v, n_out, out);
    return run_branch(b, taken ? br->then_fn : br->else_fn, br->ctx, in.v, n_out, out);
}

/* The T steps of x along axis 0, each a value of one dimension less. One
 * split rather than T slices: a slice's gradient is the size of the whole
 * sequence, which would make the backward pass O(T^2). */
static nb_status time_steps(nb_builder *b, nb_value x, int64_t T, nb_value *steps)
{
    int64_t axis = 0;
    nb_status st = nb_split(b, x, 0, (int)T, steps);
    for (int64_t t = 0; t < T && !st; t++) steps[t] = nb_squeeze(b, steps[t], 1, &axis);
    return st ? st : nb_builder_status(b);
}

static nb_status unrolled_scan(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io,
                               const nb_scan_form *form)
{
    (void)form; /* for exporters of programs: this runs the step */
    int n_carry = io->init.n, n_xs = io->xs.n, n_ys = io->n_ys;
    const nb_value *init = io->init.v, *xs = io->xs.v;
    nb_value *final = io->final, *ys = io->ys;
    bool reverse = io->reverse;
    nb_status st = NB_OK;
    int64_t T = nb_value_info(b, xs[0]).shape[0];
    if (T < 1) return nb_builder_fail(b, NB_ERR_SHAPE, "scan: the sequences have no time steps");
    nb_value cur[NB_CONTROL_MAX], next[NB_CONTROL_MAX], x_t[NB_CONTROL_MAX], y_t[NB_CONTROL_MAX];
    nb_value *outs = nb_calloc((size_t)(T * (n_ys ? n_ys : 1)), sizeof *outs);
    nb_value *steps = nb_calloc((size_t)(T * n_xs), sizeof *steps);
    if (!outs || !steps) {
        nb_free(outs);
        nb_free(steps);
        return nb_builder_fail(b, NB_ERR_NOMEM, "scan: out of memory");
    }
    for (int j = 0; j < n_xs && !st; j++) st = time_steps(b, xs[j], T, steps + j * T);
    if (n_carry) memcpy(cur, init, (size_t)n_carry * sizeof *cur);
    for (int64_t i = 0; i < T && !st; i++) {
        int64_t t = reverse ? T - 1 - i : i;
        for (int j = 0; j < n_xs; j++) x_t[j] = steps[j * T + t];
        for (int k = 0; k < NB_CONTROL_MAX; k++) next[k] = y_t[k] = NB_NONE;
        if ((st = nb_builder_status(b)) || (st = step(b, cur, x_t, next, y_t, ctx)) || (st = nb_builder_status(b)))
            break;
        for (int k = 0; k < n_carry && !st; k++)
            st = nb_control_check_same(b, "scan", "carried value", k, cur[k], next[k]);
        for (int k = 0; k < n_ys && !st; k++)
            if (nb_is_none(y_t[k])) st = nb_builder_fail(b, NB_ERR_ARG, "scan: output %d was not set by the step", k);
        if (st) break;
        if (n_carry) memcpy(cur, next, (size_t)n_carry * sizeof *cur);
        for (int k = 0; k < n_ys; k++) outs[k * T + t] = y_t[k];
    }
    for (int k = 0; k < n_ys && !st; k++) ys[k] = nb_stack(b, (int)T, outs + k * T, 0);
    nb_free(outs);
    nb_free(steps);
    if (!st) st = nb_builder_status(b);
    if (!st && n_carry) memcpy(final, cur, (size_t)n_carry * sizeof *cur);
    return st;
}

static nb_status unrolled_net(nb_builder *b, nb_branch_fn fn, void *ctx, int n_in, const nb_value *in, int n_out,
                              nb_value *out)
{
    (void)n_in;
    nb_status st;
    for (int i = 0; i < n_out; i++) out[i] = NB_NONE;
    if ((st = fn(b, in, out, ctx)) || (st = nb_builder_status(b))) return st;
    for (int i = 0; i < n_out; i++)
        if (nb_is_none(out[i])) return nb_builder_fail(b, NB_ERR_ARG, "net: output %d was not set", i);
    return NB_OK;
}

/* ---- the helpers: checks, then the form for the builder's values ----------- */

static const struct nb_control_forms unrolled_forms = {unrolled_while, unrolled_cond, unrolled_scan, unrolled_net};
static const struct nb_control_forms record_forms = {nb_control_record_while, nb_control_record_cond,
                                                     nb_control_record_scan, nb_control_record_net};

/* Values known only when a program runs (vars) need the loop or branch as
 * an op holding its body as a sub-block; values computed already (tensors)
 * take plain C control flow, as JAX traces jit but runs eager code as it
 * stands. A builder that records control flow its own way says so. */
static const struct nb_control_forms *forms_of(const nb_builder *b)
{
    static const struct nb_control_forms *const by_kind[] = {
        [NB_VALUE_VAR] = &record_forms, [NB_VALUE_TENSOR] = &unrolled_forms};
    return b->control ? b->control : by_kind[b->backend->kind];
}

nb_status nb_while_loop(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, nb_values inits,
                        nb_value *final)
{
    int n_carry = inits.n;
    const nb_value *init = inits.v;
    nb_status st =
        check_args(b, "while_loop", cond && body && n_carry >= 1 && n_carry <= NB_CONTROL_MAX && init && final);
    return st ? st : forms_of(b)->while_loop(b, cond, body, ctx, n_carry, init, final);
}

nb_status nb_cond(nb_builder *b, nb_value pred, const nb_branches *br, nb_values ins, int n_out, nb_value *out)
{
    if (!br) return check_args(b, "cond", false);
    int n_in = ins.n;
    const nb_value *in = ins.v;
    nb_status st = check_args(b, "cond",
                              br->then_fn && br->else_fn && n_in >= 0 && n_in <= NB_CONTROL_MAX && (in || !n_in) &&
                                  n_out >= 1 && n_out <= NB_CONTROL_MAX && out);
    return st ? st : forms_of(b)->cond(b, pred, br, ins, n_out, out);
}

nb_status nb_scan(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io)
{
    return nb_scan_cell(b, step, ctx, io, NULL);
}

nb_status nb_scan_cell(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io, const nb_scan_form *form)
{
    if (!io) return check_args(b, "scan", false);
    int n_carry = io->init.n, n_xs = io->xs.n, n_ys = io->n_ys;
    const nb_value *init = io->init.v, *xs = io->xs.v;
    nb_status st = check_args(b, "scan",
                              step && n_carry >= 0 && n_carry <= NB_CONTROL_MAX && (init || !n_carry) && n_xs >= 1 &&
                                  n_xs <= NB_CONTROL_MAX && xs && n_ys >= 0 && n_ys <= NB_CONTROL_MAX &&
                                  (io->final || !n_carry) && (io->ys || !n_ys) &&
                                  (!form ||
                                   (form->cell && form->weights.n >= 0 && form->weights.n <= NB_CONTROL_FORM_MAX &&
                                    (form->weights.v || !form->weights.n))));
    if (st) return st;
    int64_t T = -1;
    for (int j = 0; j < n_xs; j++) {
        nb_var_info info = nb_value_info(b, xs[j]);
        if (info.ndim < 1)
            return nb_builder_fail(b, NB_ERR_SHAPE, "scan: sequence %d has no time axis (it is a scalar)", j);
        if (j > 0 && info.shape[0] >= 0 && T >= 0 && info.shape[0] != T)
            return nb_builder_fail(b, NB_ERR_SHAPE, "scan: sequence %d has %lld steps but sequence 0 has %lld", j,
                                   (long long)info.shape[0], (long long)T);
        if (j == 0 || T < 0) T = info.shape[0];
    }
    return forms_of(b)->scan(b, step, ctx, io, form);
}

nb_status nb_net(nb_builder *b, nb_branch_fn fn, void *ctx, nb_values ins, int n_out, nb_value *out)
{
    int n_in = ins.n;
    const nb_value *in = ins.v;
    nb_status st = check_args(b, "net",
                              fn && n_in >= 0 && n_in <= NB_CONTROL_MAX && (in || !n_in) && n_out >= 1 &&
                                  n_out <= NB_CONTROL_MAX && out);
    return st ? st : forms_of(b)->net(b, fn, ctx, n_in, in, n_out, out);
}
