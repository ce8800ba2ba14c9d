/* `while` and `while_grad`.
 *
 * while(Condition, X = [init..., captured...]) -> (StepScopes, Out = final)
 * runs its block while a bool is true: the carried values are bound to the
 * block's vars carry_in, the block computes carry_out and cond_out, and
 * those become the next iteration's values. StepScopes holds the trip count
 * and names where the iterations' scopes are kept for while_grad, which
 * replays them in reverse: the gradient of carry_out seeds each iteration's
 * grad block, whose carry_in gradient seeds the iteration before; the
 * gradients of captured values are summed over all iterations. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/ops.h"
#include "control_exec.h"
#include "control_grad.h"
#include "control_ops.h"

enum { W_COND, W_X };
enum { W_STEPS, W_OUT };

static nb_status while_infer(nb_op_ctx *ctx)
{
    const nb_attr_value *cin = nb_attr_get(ctx, "carry_in"), *cout = nb_attr_get(ctx, "carry_out");
    int n_carry = cin->n, n_x = nb_in_count(ctx, W_X);
    const nb_var_info *c = nb_in_info(ctx, W_COND, 0);
    if (c->dtype != NB_BOOL || nb_shape_numel(c->ndim, c->shape) > 1)
        return nb_error(NB_ERR_DTYPE, "%s: Condition must be bool with one element", ctx->label);
    if (cout->n != n_carry || n_carry > n_x || nb_out_count(ctx, W_OUT) != n_carry)
        return nb_error(NB_ERR_ARG, "%s: %d carry_in names, %d carry_out names, %d outputs and %d inputs do not agree",
                        ctx->label, n_carry, cout->n, nb_out_count(ctx, W_OUT), n_x);
    *nb_out_info(ctx, W_STEPS, 0) = (nb_var_info){.dtype = NB_I64, .ndim = 1, .shape = {1}};
    for (int i = 0; i < n_carry; i++) *nb_out_info(ctx, W_OUT, i) = *nb_in_info(ctx, W_X, i);
    return NB_OK;
}

/* What the kernels read of the attributes, filled once per prepared op (the
 * lists point into the op's attributes). */
typedef struct while_params {
    int sub_block;
    bool is_test;
    const nb_attr_value *carry_in, *carry_out;
    const char *cond_out;
} while_params;

static nb_status while_params_fill(const nb_op_ctx *ctx, void *params)
{
    *(while_params *)params = (while_params){.sub_block = nb_attr_get(ctx, "sub_block")->block,
                                             .is_test = nb_attr_bool(ctx, "is_test"),
                                             .carry_in = nb_attr_get(ctx, "carry_in"),
                                             .carry_out = nb_attr_get(ctx, "carry_out"),
                                             .cond_out = nb_attr_string(ctx, "cond_out")};
    return NB_OK;
}

static nb_status while_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    const while_params *P = ctx->params;
    const nb_attr_value *cin = P->carry_in, *cout = P->carry_out;
    const char *cond_out = P->cond_out;
    int block = P->sub_block, n_carry = cin->n, n_x = nb_kin_count(ctx, W_X);
    bool keep = !P->is_test;
    nb_tensor **cur = nb_calloc((size_t)n_carry + 1, sizeof *cur);
    nb_step_scopes *ss = NULL;
    nb_status st = cur ? nb_steps_new(ctx, &ss) : nb_error(NB_ERR_NOMEM, "%s: out of memory", ctx->label);
    if (!st) st = nb_ctl_bind_inputs(ctx, ss->outer, ctx->in_begin[W_X] + n_carry, ctx->in_begin[W_X] + n_x);
    /* The initial values are copied: an output may share the init's buffer. */
    for (int i = 0; i < n_carry && !st; i++) st = nb_tensor_clone(&cur[i], nb_kin(ctx, W_X, i));
    bool go = false;
    if (!st) st = nb_ctl_pred(ctx, nb_kin(ctx, W_COND, 0), "Condition", &go);
    int64_t iters = 0;
    while (!st && go) {
        nb_scope *bind, *step;
        if ((st = nb_steps_next(ctx, ss, keep, &bind, &step))) break;
        if ((st = nb_ctl_bind(bind, n_carry, cin, cur))) break;
        if ((st = nb_exec_run_block(ctx->exec, block, step))) {
            nb_error_context(st, "%s: in iteration %lld", ctx->label, (long long)iters);
            break;
        }
        for (int i = 0; i < n_carry && !st; i++) {
            nb_tensor *t;
            if ((st = nb_ctl_result(ctx, step, cout->strs[i], "carried value", &t))) break;
            if ((st = nb_ctl_check_like(ctx, nb_kin(ctx, W_X, i), t, "carried value", i))) break;
            st = nb_ctl_take(&cur[i], t, !keep);
        }
        nb_tensor *c;
        if (!st) st = nb_ctl_result(ctx, step, cond_out, "condition", &c);
        if (!st) st = nb_ctl_pred(ctx, c, "the condition", &go);
        /* The iteration scope stays for the gradient: only with what it reads. */
        if (!st && keep) st = nb_exec_trim_step(ctx->exec, block, step, cout, NULL);
        iters++;
    }
    nb_tensor *steps;
    nb_var_info one = {.dtype = NB_I64, .ndim = 1, .shape = {1}};
    if (!st) st = nb_exec_output(ctx, ctx->out_begin[W_STEPS], &one, &steps);
    if (!st) nb_tensor_set(steps, 0, (double)iters);
    for (int i = 0; i < n_carry && !st; i++) st = nb_ctl_output_copy(ctx, ctx->out_begin[W_OUT] + i, cur[i]);
    if (!st) st = nb_steps_keep(ctx, ss, W_STEPS, keep);
    else nb_steps_free(ss);
    for (int i = 0; i < n_carry && cur; i++) nb_tensor_release(cur[i]);
    nb_free(cur);
    return st;
}

/* while_grad(StepScopes, X = [forward X..., dOut...]) -> XGrad (the wanted
 * ones, at forward positions x_grad_pos). */
enum { WG_STEPS, WG_X };

static nb_status while_grad_infer(nb_op_ctx *ctx) { return nb_ctl_grad_infer(ctx, (int)nb_attr_int(ctx, "n_carry")); }

typedef struct while_grad_params {
    int sub_block, n_carry;
    const nb_attr_value *carry_out_grad, *carry_in_grad, *x_grad, *x_grad_pos;
} while_grad_params;

static nb_status while_grad_params_fill(const nb_op_ctx *ctx, void *params)
{
    *(while_grad_params *)params = (while_grad_params){.sub_block = nb_attr_get(ctx, "sub_block")->block,
                                                       .n_carry = (int)nb_attr_int(ctx, "n_carry"),
                                                       .carry_out_grad = nb_attr_get(ctx, "carry_out_grad"),
                                                       .carry_in_grad = nb_attr_get(ctx, "carry_in_grad"),
                                                       .x_grad = nb_attr_get(ctx, "x_grad"),
                                                       .x_grad_pos = nb_attr_get(ctx, "x_grad_pos")};
    return NB_OK;
}

static nb_status while_grad_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    const while_grad_params *P = ctx->params;
    const nb_attr_value *seeds = P->carry_out_grad, *cin_g = P->carry_in_grad;
    const nb_attr_value *x_g = P->x_grad, *pos = P->x_grad_pos;
    int block = P->sub_block, n_carry = P->n_carry;
    int n_x = nb_kin_count(ctx, WG_X) - n_carry, n_cap = n_x - n_carry;
    nb_step_scopes *ss;
    nb_status st = nb_steps_find(ctx, WG_STEPS, &ss);
    if (st) return st;
    nb_tensor **g = nb_calloc((size_t)n_carry + 1, sizeof *g), **acc = nb_calloc((size_t)n_cap + 1, sizeof *acc);
    if (!g || !acc) st = nb_error(NB_ERR_NOMEM, "%s: out of memory", ctx->label);
    for (int i = 0; i < n_carry && !st; i++) g[i] = nb_tensor_retain(nb_kin(ctx, WG_X, n_x + i));
    for (int k = ss->n - 1; k >= 0 && !st; k--) {
        nb_scope *gs;
        if ((st = nb_ctl_run_grad(ctx, block, ss->step[k], n_carry, seeds, g, &gs))) {
            nb_error_context(st, "%s: replaying iteration %d", ctx->label, k);
            break;
        }
        for (int i = 0; i < n_carry && !st; i++) st = nb_ctl_carry_grad(gs, cin_g->strs[i], &g[i]);
        for (int j = 0; j < n_cap && !st; j++) {
            nb_tensor *t = nb_ctl_grad_of(gs, x_g->strs[j]);
            if (t) st = nb_ctl_accumulate(&acc[j], t);
        }
        nb_ctl_grad_done(gs);
    }
    for (int o = 0; o < pos->n && !st; o++) {
        int p = (int)pos->ints[o];
        nb_tensor *src = p < n_carry ? g[p] : acc[p - n_carry], *z;
        st = src ? nb_ctl_output_copy(ctx, ctx->out_begin[0] + o, src)
                 : nb_ctl_output_zeros(ctx, ctx->out_begin[0] + o, nb_kin(ctx, WG_X, p), &z);
    }
    for (int i = 0; g && i < n_carry; i++) nb_tensor_release(g[i]);
    for (int j = 0; acc && j < n_cap; j++) nb_tensor_release(acc[j]);
    nb_free(g);
    nb_free(acc);
    /* The iterations' values are no longer needed. */
    if (!st) nb_steps_release(ctx, WG_STEPS);
    return st;
}

static nb_status while_vjp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_attr_value *cin = nb_grad_attr(g, "carry_in"), *cout = nb_grad_attr(g, "carry_out");
    int n_carry = cin->n, n_x = nb_grad_in_count(g, W_X), n_cap = n_x - n_carry;
    /* Every floating-point carried value takes part (gradients flow around
     * the loop), and every captured value that wants a gradient. */
    nb_ctl_scratch sc = {0};
    const char **targets = nb_ctl_scratch_take(&sc, n_carry, sizeof *targets);
    const char **inputs = nb_ctl_scratch_take(&sc, n_x, sizeof *inputs);
    const char **seeds = nb_ctl_scratch_take(&sc, n_carry, sizeof *seeds);
    const char **cin_grad = nb_ctl_scratch_take(&sc, n_carry, sizeof *cin_grad);
    const char **x_grad = nb_ctl_scratch_take(&sc, n_cap, sizeof *x_grad);
    int64_t *pos = nb_ctl_scratch_take(&sc, n_x, sizeof *pos);
    nb_value *in = nb_ctl_scratch_take(&sc, 1 + n_x + n_carry, sizeof *in);
    nb_value *out = nb_ctl_scratch_take(&sc, n_x, sizeof *out);
    bool *flows = nb_ctl_scratch_take(&sc, n_carry, sizeof *flows);
    nb_sub_grad sg = {0};
    nb_status st = NB_OK;
    if (sc.failed) {
        st = nb_builder_fail(b, NB_ERR_NOMEM, "while: out of memory");
        goto done;
    }
    int n_t = 0, n_in = 0;
    for (int i = 0; i < n_carry; i++)
        if ((flows[i] = nb_dtype_is_float(nb_value_info(b, nb_grad_x(g, W_X, i)).dtype))) {
            targets[n_t++] = cout->strs[i];
            inputs[n_in++] = cin->strs[i];
        }
    for (int j = 0; j < n_cap; j++)
        if (nb_grad_wants_dx(g, W_X, n_carry + j)) inputs[n_in++] = nb_ctl_name(nb_grad_x(g, W_X, n_carry + j));
    if ((st = nb_ctl_sub_backward(b, "while", nb_grad_attr(g, "sub_block")->block, n_t, targets, n_in, inputs, &sg)))
        goto done;
    int used = 0;
    for (int i = 0; i < n_carry; i++) {
        seeds[i] = flows[i] ? sg.seeds[used] : "";
        cin_grad[i] = flows[i] ? sg.grads[used++] : "";
    }
    for (int j = 0; j < n_cap; j++) x_grad[j] = nb_grad_wants_dx(g, W_X, n_carry + j) ? sg.grads[used++] : "";
    int n_out = 0;
    for (int k = 0; k < n_x; k++)
        if (nb_grad_wants_dx(g, W_X, k)) pos[n_out++] = k;
    in[0] = nb_grad_y(g, W_STEPS, 0);
    for (int k = 0; k < n_x; k++) in[1 + k] = nb_grad_x(g, W_X, k);
    for (int i = 0; i < n_carry; i++) in[1 + n_x + i] = nb_grad_dy_or_zeros(b, g, W_OUT, i);
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", sg.block),
                       NB_ATTR_INT("n_carry", n_carry),
                       NB_ATTR_STRINGS_N("carry_out_grad", n_carry, seeds),
                       NB_ATTR_STRINGS_N("carry_in_grad", n_carry, cin_grad),
                       NB_ATTR_STRINGS_N("x_grad", n_cap, x_grad),
                       NB_ATTR_INTS_N("x_grad_pos", n_out, pos)};
    st = nb_emit(b, "while_grad", NB_VALUES_N(1 + n_x + n_carry, in), NB_ATTRS_N(6, attrs), n_out, out);
    for (int o = 0; !st && o < n_out; o++) nb_grad_set_dx(g, W_X, (int)pos[o], out[o]);
done:
    nb_ctl_scratch_free(&sc);
    nb_sub_grad_free(&sg);
    return st;
}

const nb_op_def nb_op_while = {
    .name = "while",
    .doc = "Runs sub_block while a bool is true, carrying values from one iteration to the next.",
    .inputs = {{"Condition", NB_SLOT_NO_GRAD}, {"X", NB_SLOT_VARIADIC}},
    NB_CTL_OUTPUTS(NB_SLOT_OPTIONAL),
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK), NB_ADEF_STRINGS_EMPTY("carry_in"),
              NB_ADEF_STRINGS_EMPTY("carry_out"), NB_ADEF_REQUIRED("cond_out", NB_ATTR_STRING),
              NB_ADEF_BOOL("is_test", false)},
    .infer = while_infer,
    .params_size = sizeof(while_params),
    .params = while_params_fill,
    .flags = NB_OP_CONTROL,
    .grad_uses_inputs = 1u << W_X,
    .grad_uses_outputs = 1u << W_STEPS,
    .vjp = while_vjp,
    .jvp = nb_ctl_while_jvp,
};

const nb_op_def nb_op_while_grad = {
    .name = "while_grad",
    .doc = "Replays a while op's iterations in reverse through its grad block.",
    NB_CTL_GRAD_SLOTS,
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK), NB_ADEF_INT("n_carry", 0),
              NB_ADEF_STRINGS_EMPTY("carry_out_grad"), NB_ADEF_STRINGS_EMPTY("carry_in_grad"),
              NB_ADEF_STRINGS_EMPTY("x_grad"), NB_ADEF_INTS_EMPTY("x_grad_pos")},
    .infer = while_grad_infer,
    .params_size = sizeof(while_grad_params),
    .params = while_grad_params_fill,
    NB_CTL_LOOP_GRAD_RULES,
};

const nb_kernel_def nb_kernel_while = {"while", NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, while_kernel, NULL, NULL};
const nb_kernel_def nb_kernel_while_grad = {
    .op = "while_grad", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = while_grad_kernel};
