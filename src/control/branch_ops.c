/* Ops that run a block once: `cond` (one of two blocks, chosen by a bool)
 * and `net` (Fluid's NetOp: a block used as one op), with their
 * gradients, which run the grad block of the block that ran.
 *
 * cond(Condition, X = captured...) -> (StepScopes, Out...)
 * net(X = captured...) -> (StepScopes, Out...)
 *
 * The block reads captured values by name and writes the vars named by
 * then_out / else_out / block_out, which become Out. StepScopes holds 1
 * when the then-block ran (and for net), 0 for the else-block. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/ops.h"
#include "control_exec.h"
#include "control_grad.h"
#include "control_ops.h"

enum { B_STEPS, B_OUT };

static nb_status branch_infer(nb_op_ctx *ctx, int n_out)
{
    if (nb_out_count(ctx, B_OUT) != n_out)
        return nb_error(NB_ERR_ARG, "%s: %d outputs but the block names %d", ctx->label, nb_out_count(ctx, B_OUT),
                        n_out);
    *nb_out_info(ctx, B_STEPS, 0) = (nb_var_info){.dtype = NB_I64, .ndim = 1, .shape = {1}};
    return n_out ? nb_ctl_recorded_infos(ctx, n_out, nb_out_info(ctx, B_OUT, 0)) : NB_OK;
}

static nb_status cond_infer(nb_op_ctx *ctx)
{
    const nb_var_info *c = nb_in_info(ctx, 0, 0);
    if (c->dtype != NB_BOOL || nb_shape_numel(c->ndim, c->shape) > 1)
        return nb_error(NB_ERR_DTYPE, "%s: Condition must be bool with one element", ctx->label);
    if (nb_attr_get(ctx, "else_out")->n != nb_attr_get(ctx, "then_out")->n)
        return nb_error(NB_ERR_ARG, "%s: the two branches name different numbers of outputs", ctx->label);
    return branch_infer(ctx, nb_attr_get(ctx, "then_out")->n);
}

static nb_status net_infer(nb_op_ctx *ctx) { return branch_infer(ctx, nb_attr_get(ctx, "block_out")->n); }

/* What the kernels read of the attributes, filled once per prepared op:
 * per branch (1: then, or a net's one block; 0: else) its block and the
 * names of its outputs (pointing into the op's attributes). */
typedef struct branch_params {
    int block[2];
    const nb_attr_value *out[2];
    bool is_test;
} branch_params;

static nb_status cond_params(const nb_op_ctx *ctx, void *params)
{
    *(branch_params *)params =
        (branch_params){.block = {nb_attr_get(ctx, "else_block")->block, nb_attr_get(ctx, "then_block")->block},
                        .out = {nb_attr_get(ctx, "else_out"), nb_attr_get(ctx, "then_out")},
                        .is_test = nb_attr_bool(ctx, "is_test")};
    return NB_OK;
}

static nb_status net_params(const nb_op_ctx *ctx, void *params)
{
    *(branch_params *)params = (branch_params){.block = {0, nb_attr_get(ctx, "sub_block")->block},
                                               .out = {NULL, nb_attr_get(ctx, "block_out")},
                                               .is_test = nb_attr_bool(ctx, "is_test")};
    return NB_OK;
}

/* Runs `block` once with the captured inputs (input slot x_slot), copies
 * its `outs` to Out, and keeps the scopes for the gradient. */
static nb_status run_once(const nb_kernel_ctx *ctx, int x_slot, int branch)
{
    const branch_params *P = ctx->params;
    int block = P->block[branch];
    const nb_attr_value *outs = P->out[branch];
    bool keep = !P->is_test;
    nb_step_scopes *ss;
    nb_scope *bind, *step;
    nb_status st = nb_steps_new(ctx, &ss);
    if (st) return st;
    ss->branch = branch;
    st = nb_ctl_bind_inputs(ctx, ss->outer, ctx->in_begin[x_slot], ctx->in_begin[x_slot + 1]);
    if (!st) st = nb_steps_push(ctx, ss, &bind, &step);
    if (!st) st = nb_exec_run_block(ctx->exec, block, step);
    for (int i = 0; i < outs->n && !st; i++) {
        nb_tensor *t;
        st = nb_ctl_result(ctx, step, outs->strs[i], "output", &t);
        if (!st) st = nb_ctl_output_copy(ctx, ctx->out_begin[B_OUT] + i, t);
    }
    nb_tensor *flag;
    nb_var_info one = {.dtype = NB_I64, .ndim = 1, .shape = {1}};
    if (!st) st = nb_exec_output(ctx, ctx->out_begin[B_STEPS], &one, &flag);
    if (!st) nb_tensor_set(flag, 0, branch);
    if (st) {
        nb_steps_free(ss);
        return st;
    }
    return nb_steps_keep(ctx, ss, B_STEPS, keep);
}

static nb_status cond_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    bool taken;
    nb_status st = nb_ctl_pred(ctx, nb_kin(ctx, 0, 0), "Condition", &taken);
    if (st) return st;
    const char *which = taken ? "then" : "else";
    st = run_once(ctx, 1, taken);
    return st ? nb_error_context(st, "%s: in its %s branch", ctx->label, which) : NB_OK;
}

static nb_status net_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    return run_once(ctx, 0, 1);
}

/* ---- gradients --------------------------------------------------------------
 *
 * cond_grad / net_grad(StepScopes, X = [captured..., dOut...]) -> XGrad
 * (the wanted ones, at positions x_grad_pos of the captured values). */

static nb_status branch_grad_infer(nb_op_ctx *ctx) { return nb_ctl_grad_infer(ctx, (int)nb_attr_int(ctx, "n_out")); }

/* Per branch (as above) its grad block and the names of its seeds and of
 * the captured values' gradients. */
typedef struct branch_grad_params {
    int grad_block[2];
    const nb_attr_value *seeds[2], *x_grad[2], *x_grad_pos;
    int n_out;
} branch_grad_params;

static nb_status cond_grad_params(const nb_op_ctx *ctx, void *params)
{
    *(branch_grad_params *)params = (branch_grad_params){
        .grad_block = {nb_attr_get(ctx, "else_grad_block")->block, nb_attr_get(ctx, "then_grad_block")->block},
        .seeds = {nb_attr_get(ctx, "else_seeds"), nb_attr_get(ctx, "then_seeds")},
        .x_grad = {nb_attr_get(ctx, "else_x_grad"), nb_attr_get(ctx, "then_x_grad")},
        .x_grad_pos = nb_attr_get(ctx, "x_grad_pos"),
        .n_out = (int)nb_attr_int(ctx, "n_out")};
    return NB_OK;
}

static nb_status net_grad_params(const nb_op_ctx *ctx, void *params)
{
    const nb_attr_value *seeds = nb_attr_get(ctx, "seeds"), *x_grad = nb_attr_get(ctx, "x_grad");
    *(branch_grad_params *)params = (branch_grad_params){.grad_block = {0, nb_attr_get(ctx, "sub_block")->block},
                                                         .seeds = {seeds, seeds},
                                                         .x_grad = {x_grad, x_grad},
                                                         .x_grad_pos = nb_attr_get(ctx, "x_grad_pos"),
                                                         .n_out = (int)nb_attr_int(ctx, "n_out")};
    return NB_OK;
}

/* Runs the grad block of the block that ran (prefix "then_"/"else_", or ""
 * for net) and hands out the captured values' gradients. */
static nb_status branch_grad_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    const branch_grad_params *P = ctx->params;
    nb_step_scopes *ss;
    nb_status st = nb_steps_find(ctx, 0, &ss);
    if (st) return st;
    int br = ss->branch; /* a net's one block ran as branch 1 */
    const nb_attr_value *seeds = P->seeds[br], *xg = P->x_grad[br];
    const nb_attr_value *pos = P->x_grad_pos;
    int n_out = P->n_out, n_x = nb_kin_count(ctx, 1) - n_out;
    nb_scope *gs = NULL;
    st = nb_ctl_run_grad(ctx, P->grad_block[br], ss->step[0], n_out, seeds, ctx->in + ctx->in_begin[1] + n_x, &gs);
    for (int o = 0; o < pos->n && !st; o++) {
        int p = (int)pos->ints[o];
        nb_tensor *t = nb_ctl_grad_of(gs, xg->strs[p]), *z;
        st = t ? nb_ctl_output_copy(ctx, ctx->out_begin[0] + o, t)
               : nb_ctl_output_zeros(ctx, ctx->out_begin[0] + o, nb_kin(ctx, 1, p), &z);
    }
    nb_ctl_grad_done(gs);
    if (!st) nb_steps_release(ctx, 0);
    return st;
}

/* Where block_backward puts a block's gradient: the sub-block made, and
 * the names of its seeds and of the captured values' gradients, padded
 * with "" to n_out and n_x entries. */
typedef struct branch_grad {
    nb_sub_grad *sg;
    const char **seeds, **x_grad;
} branch_grad;

/* Differentiates one block: its float outputs `outs` towards the wanted
 * captured values. */
static nb_status block_backward(nb_builder *b, nb_grad_ctx *g, const char *who, int x_slot, int block,
                                const nb_attr_value *outs, const branch_grad *res)
{
    nb_sub_grad *sg = res->sg;
    const char **seeds = res->seeds, **x_grad = res->x_grad;
    int n_x = nb_grad_in_count(g, x_slot), n_t = 0, n_in = 0;
    const char **targets = nb_calloc((size_t)outs->n + 1, sizeof *targets),
               **inputs = nb_calloc((size_t)n_x + 1, sizeof *inputs);
    if (!targets || !inputs) {
        nb_free(targets);
        nb_free(inputs);
        return nb_builder_fail(b, NB_ERR_NOMEM, "%s: out of memory", who);
    }
    for (int i = 0; i < outs->n; i++)
        if (nb_dtype_is_float(nb_value_info(b, nb_grad_y(g, B_OUT, i)).dtype)) targets[n_t++] = outs->strs[i];
    for (int j = 0; j < n_x; j++)
        if (nb_grad_wants_dx(g, x_slot, j)) inputs[n_in++] = nb_ctl_name(nb_grad_x(g, x_slot, j));
    nb_status st = nb_ctl_sub_backward(b, who, block, n_t, targets, n_in, inputs, sg);
    nb_free(targets);
    nb_free(inputs);
    if (st) return st;
    for (int i = 0, u = 0; i < outs->n; i++)
        seeds[i] = nb_dtype_is_float(nb_value_info(b, nb_grad_y(g, B_OUT, i)).dtype) ? sg->seeds[u++] : "";
    for (int j = 0, u = 0; j < n_x; j++) x_grad[j] = nb_grad_wants_dx(g, x_slot, j) ? sg->grads[u++] : "";
    return NB_OK;
}

static nb_status branch_vjp(nb_builder *b, nb_grad_ctx *g, bool is_cond)
{
    const char *who = is_cond ? "cond" : "net";
    int x_slot = is_cond ? 1 : 0, n_x = nb_grad_in_count(g, x_slot), n_out = nb_grad_out_count(g, B_OUT);
    int n_br = is_cond ? 2 : 1;
    nb_sub_grad sg[2] = {{0}};
    nb_ctl_scratch sc = {0};
    const char **names = nb_ctl_scratch_take(&sc, 2 * (n_out + n_x), sizeof *names);
    int64_t *pos = nb_ctl_scratch_take(&sc, n_x, sizeof *pos);
    nb_value *in = nb_ctl_scratch_take(&sc, 1 + n_x + n_out, sizeof *in),
             *out = nb_ctl_scratch_take(&sc, n_x, sizeof *out);
    nb_status st = sc.failed ? nb_builder_fail(b, NB_ERR_NOMEM, "%s: out of memory", who) : NB_OK;
    const char **seeds[2] = {names, names + n_out}, **xg[2] = {names + 2 * n_out, names + 2 * n_out + n_x};
    for (int r = 0; r < n_br && !st; r++) {
        const char *blk = !is_cond ? "sub_block" : r == 0 ? "then_block" : "else_block";
        const char *outs = !is_cond ? "block_out" : r == 0 ? "then_out" : "else_out";
        st = block_backward(b, g, who, x_slot, nb_grad_attr(g, blk)->block, nb_grad_attr(g, outs),
                            &(branch_grad){&sg[r], seeds[r], xg[r]});
    }
    int n_pos = 0;
    for (int j = 0; !st && j < n_x; j++)
        if (nb_grad_wants_dx(g, x_slot, j)) pos[n_pos++] = j;
    if (!st) {
        in[0] = nb_grad_y(g, B_STEPS, 0);
        for (int j = 0; j < n_x; j++) in[1 + j] = nb_grad_x(g, x_slot, j);
        for (int i = 0; i < n_out; i++) in[1 + n_x + i] = nb_grad_dy_or_zeros(b, g, B_OUT, i);
        nb_attr cond_attrs[] = {
            NB_ATTR_BLOCK("then_grad_block", sg[0].block),    NB_ATTR_BLOCK("else_grad_block", sg[1].block),
            NB_ATTR_STRINGS_N("then_seeds", n_out, seeds[0]), NB_ATTR_STRINGS_N("else_seeds", n_out, seeds[1]),
            NB_ATTR_STRINGS_N("then_x_grad", n_x, xg[0]),     NB_ATTR_STRINGS_N("else_x_grad", n_x, xg[1]),
            NB_ATTR_INTS_N("x_grad_pos", n_pos, pos),         NB_ATTR_INT("n_out", n_out)};
        nb_attr net_attrs[] = {NB_ATTR_BLOCK("sub_block", sg[0].block), NB_ATTR_STRINGS_N("seeds", n_out, seeds[0]),
                               NB_ATTR_STRINGS_N("x_grad", n_x, xg[0]), NB_ATTR_INTS_N("x_grad_pos", n_pos, pos),
                               NB_ATTR_INT("n_out", n_out)};
        st = is_cond ? nb_emit(b, "cond_grad", NB_VALUES_N(1 + n_x + n_out, in), NB_ATTRS_N(8, cond_attrs), n_pos, out)
                     : nb_emit(b, "net_grad", NB_VALUES_N(1 + n_x + n_out, in), NB_ATTRS_N(5, net_attrs), n_pos, out);
    }
    for (int o = 0; !st && o < n_pos; o++) nb_grad_set_dx(g, x_slot, (int)pos[o], out[o]);
    nb_sub_grad_free(&sg[0]);
    nb_sub_grad_free(&sg[1]);
    nb_ctl_scratch_free(&sc);
    return st;
}

static nb_status cond_vjp(nb_builder *b, nb_grad_ctx *g) { return branch_vjp(b, g, true); }
static nb_status net_vjp(nb_builder *b, nb_grad_ctx *g) { return branch_vjp(b, g, false); }

#define OUT_INFO_ATTRS NB_ADEF_INTS_EMPTY("out_dtypes"), NB_ADEF_INTS_EMPTY("out_shapes"), NB_ADEF_BOOL("is_test", false)

const nb_op_def nb_op_cond = {
    .name = "cond",
    .doc = "Runs then_block if Condition holds, else else_block; Out is what the block ran wrote.",
    .inputs = {{"Condition", NB_SLOT_NO_GRAD}, {"X", NB_SLOT_VARIADIC | NB_SLOT_OPTIONAL}},
    NB_CTL_OUTPUTS(0),
    .attrs = {NB_ADEF_REQUIRED("then_block", NB_ATTR_BLOCK), NB_ADEF_REQUIRED("else_block", NB_ATTR_BLOCK),
              NB_ADEF_STRINGS_EMPTY("then_out"), NB_ADEF_STRINGS_EMPTY("else_out"), OUT_INFO_ATTRS},
    .infer = cond_infer,
    .params_size = sizeof(branch_params),
    .params = cond_params,
    .flags = NB_OP_CONTROL,
    .grad_uses_inputs = 1u << 1,
    .grad_uses_outputs = 1u << B_STEPS,
    .vjp = cond_vjp,
    .jvp = nb_ctl_cond_jvp,
};

const nb_op_def nb_op_cond_grad = {
    .name = "cond_grad",
    .doc = "Runs the grad block of the branch its cond op took.",
    NB_CTL_GRAD_SLOTS,
    .attrs = {NB_ADEF_REQUIRED("then_grad_block", NB_ATTR_BLOCK), NB_ADEF_REQUIRED("else_grad_block", NB_ATTR_BLOCK),
              NB_ADEF_STRINGS_EMPTY("then_seeds"), NB_ADEF_STRINGS_EMPTY("else_seeds"),
              NB_ADEF_STRINGS_EMPTY("then_x_grad"), NB_ADEF_STRINGS_EMPTY("else_x_grad"),
              NB_ADEF_INTS_EMPTY("x_grad_pos"), NB_ADEF_INT("n_out", 0)},
    .infer = branch_grad_infer,
    .params_size = sizeof(branch_grad_params),
    .params = cond_grad_params,
    .vjp = nb_ctl_cond_grad_vjp,
    .jvp = nb_ctl_cond_grad_jvp,
};

const nb_op_def nb_op_net = {
    .name = "net",
    .doc = "Runs sub_block as one op (a nested net); Out is what the block wrote.",
    .inputs = {{"X", NB_SLOT_VARIADIC | NB_SLOT_OPTIONAL}},
    NB_CTL_OUTPUTS(0),
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK), NB_ADEF_STRINGS_EMPTY("block_out"), OUT_INFO_ATTRS},
    .infer = net_infer,
    .params_size = sizeof(branch_params),
    .params = net_params,
    .flags = NB_OP_CONTROL,
    .grad_uses_inputs = 1u << 0,
    .grad_uses_outputs = 1u << B_STEPS,
    .vjp = net_vjp,
    .jvp = nb_ctl_net_jvp,
};

const nb_op_def nb_op_net_grad = {
    .name = "net_grad",
    .doc = "Runs the grad block of a net op.",
    NB_CTL_GRAD_SLOTS,
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK), NB_ADEF_STRINGS_EMPTY("seeds"),
              NB_ADEF_STRINGS_EMPTY("x_grad"), NB_ADEF_INTS_EMPTY("x_grad_pos"), NB_ADEF_INT("n_out", 0)},
    .infer = branch_grad_infer,
    .params_size = sizeof(branch_grad_params),
    .params = net_grad_params,
    .vjp = nb_ctl_net_grad_vjp,
    .jvp = nb_ctl_net_grad_jvp,
};

const nb_kernel_def nb_kernel_cond = {"cond", NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, cond_kernel, NULL, NULL};
const nb_kernel_def nb_kernel_cond_grad = {
    .op = "cond_grad", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = branch_grad_kernel};
const nb_kernel_def nb_kernel_net = {"net", NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, net_kernel, NULL, NULL};
const nb_kernel_def nb_kernel_net_grad = {
    .op = "net_grad", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = branch_grad_kernel};
