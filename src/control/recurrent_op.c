/* `recurrent` (Fluid's RnnOp) and `recurrent_grad`.
 *
 * recurrent(X = [init..., seqs..., captured...])
 *     -> (StepScopes, Out = [final..., ys...])
 *
 * runs its step block once per time step t of the sequences (axis 0, in
 * reverse when `reverse`): the memories are bound to the block's vars
 * mem_in, the slices seqs[j][t] to seq_in[j]; the block writes the next
 * memories mem_out and the step's outputs seq_out, which are stacked into
 * ys along axis 0. recurrent_grad replays the steps in reverse through the
 * grad block: each step's seeds are the gradient of its memories (from the
 * step after it) and its slice of the gradient of ys; it yields the
 * gradient of the step's inputs, slice by slice, and the captured values'
 * X
 * are for exporters: the kernel never reads them. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/ops.h"
#include "control_exec.h"
#include "control_grad.h"
#include "control_ops.h"

enum { R_STEPS, R_OUT };

typedef struct counts {
    int mem, seq, y, x, cap;
} counts;

static counts counts_of(const nb_op_ctx *ctx)
{
    counts c = {.mem = nb_attr_get(ctx, "mem_in")->n,
                .seq = nb_attr_get(ctx, "seq_in")->n,
                .y = nb_attr_get(ctx, "seq_out")->n,
                .x = nb_in_count(ctx, 0)};
    c.cap = c.x - c.mem - c.seq;
    return c;
}

static nb_status recurrent_infer(nb_op_ctx *ctx)
{
    counts c = counts_of(ctx);
    if (nb_attr_get(ctx, "mem_out")->n != c.mem || c.seq < 1 || c.cap < 0 || nb_out_count(ctx, R_OUT) != c.mem + c.y)
        return nb_error(NB_ERR_ARG, "%s: mem_in, mem_out, seq_in, seq_out, inputs and outputs do not agree",
                        ctx->label);
    int64_t T = nb_in_info(ctx, 0, c.mem)->shape[0];
    for (int j = 0; j < c.seq; j++) {
        const nb_var_info *s = nb_in_info(ctx, 0, c.mem + j);
        if (s->ndim < 1) return nb_error(NB_ERR_SHAPE, "%s: sequence %d has no time axis", ctx->label, j);
        if (s->shape[0] >= 0 && T >= 0 && s->shape[0] != T)
            return nb_error(NB_ERR_SHAPE, "%s: sequence %d has %lld steps, sequence 0 has %lld", ctx->label, j,
                            (long long)s->shape[0], (long long)T);
    }
    *nb_out_info(ctx, R_STEPS, 0) = (nb_var_info){.dtype = NB_I64, .ndim = 1, .shape = {1}};
    for (int i = 0; i < c.mem; i++) *nb_out_info(ctx, R_OUT, i) = *nb_in_info(ctx, 0, i);
    return c.y ? nb_ctl_recorded_infos(ctx, c.y, nb_out_info(ctx, R_OUT, c.mem)) : NB_OK;
}

/* Binds the slices seqs[j][t] to the block's seq_in vars. */
static nb_status bind_slices(nb_scope *s, const nb_attr_value *names, nb_tensor *const *seqs, int n, int64_t t)
{
    nb_status st = NB_OK;
    for (int j = 0; j < n && !st; j++) {
        nb_tensor *row = NULL;
        if (!names->strs[j][0]) continue;
        st = nb_ctl_time_slice(&row, seqs[j], t);
        if (!st) st = nb_scope_set(s, names->strs[j], row);
        nb_tensor_release(row);
    }
    return st;
}

/* Writes y into row t of output k, binding the output at the first step. */
static nb_status store_row(const nb_kernel_ctx *ctx, int k, int64_t T, int64_t t, bool first, const nb_tensor *y)
{
    nb_tensor *out = ctx->out[k], *row = NULL;
    if (first) {
        nb_var_info info = {.dtype = y->dtype, .ndim = y->ndim + 1, .shape = {T}};
        if (info.ndim > NB_MAX_DIMS) return nb_error(NB_ERR_SHAPE, "%s: a step output has too many dims", ctx->label);
        memcpy(info.shape + 1, y->shape, (size_t)y->ndim * sizeof *info.shape);
        nb_status st = nb_exec_output(ctx, k, &info, &out);
        if (st) return st;
    }
    nb_status st = nb_ctl_time_slice(&row, out, t);
    if (!st && (row->dtype != y->dtype || !nb_shape_equal(row->ndim, row->shape, y->ndim, y->shape))) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        st = nb_error(NB_ERR_SHAPE, "%s: step %lld made an output of shape %s, earlier steps %s", ctx->label,
                      (long long)t, nb_shape_str(a, sizeof a, y->ndim, y->shape),
                      nb_shape_str(b, sizeof b, row->ndim, row->shape));
    }
    if (!st) st = nb_tensor_copy_into(row, y);
    nb_tensor_release(row);
    return st;
}

/* What the kernel reads of the attributes, filled once per prepared op (the
 * name lists point into the op's attributes). */
typedef struct recurrent_params {
    int sub_block;
    bool is_test, reverse;
    const nb_attr_value *mem_in, *mem_out, *seq_in, *seq_out;
} recurrent_params;

static nb_status recurrent_params_fill(const nb_op_ctx *ctx, void *params)
{
    *(recurrent_params *)params = (recurrent_params){.sub_block = nb_attr_get(ctx, "sub_block")->block,
                                                     .is_test = nb_attr_bool(ctx, "is_test"),
                                                     .reverse = nb_attr_bool(ctx, "reverse"),
                                                     .mem_in = nb_attr_get(ctx, "mem_in"),
                                                     .mem_out = nb_attr_get(ctx, "mem_out"),
                                                     .seq_in = nb_attr_get(ctx, "seq_in"),
                                                     .seq_out = nb_attr_get(ctx, "seq_out")};
    return NB_OK;
}

static nb_status recurrent_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    const recurrent_params *P = ctx->params;
    const nb_attr_value *mem_in = P->mem_in, *mem_out = P->mem_out, *seq_in = P->seq_in, *seq_out = P->seq_out;
    counts c = {.mem = mem_in->n, .seq = seq_in->n, .y = seq_out->n, .x = nb_kin_count(ctx, 0)};
    c.cap = c.x - c.mem - c.seq;
    int block = P->sub_block;
    bool keep = !P->is_test, reverse = P->reverse;
    nb_tensor *const *x = ctx->in + ctx->in_begin[0];
    int64_t T = x[c.mem]->shape[0];
    for (int j = 1; j < c.seq; j++)
        if (x[c.mem + j]->shape[0] != T)
            return nb_error(NB_ERR_SHAPE, "%s: sequence %d has %lld steps, sequence 0 has %lld", ctx->label, j,
                            (long long)x[c.mem + j]->shape[0], (long long)T);
    if (T < 1) return nb_error(NB_ERR_SHAPE, "%s: the sequences have no time steps", ctx->label);
    nb_tensor **cur = nb_calloc((size_t)c.mem + 1, sizeof *cur);
    nb_step_scopes *ss = NULL;
    nb_status st = cur ? nb_steps_new(ctx, &ss) : nb_error(NB_ERR_NOMEM, "%s: out of memory", ctx->label);
    if (!st) st = nb_ctl_bind_inputs(ctx, ss->outer, ctx->in_begin[0] + c.mem + c.seq, ctx->in_begin[0] + c.x);
    for (int i = 0; i < c.mem && !st; i++) st = nb_tensor_clone(&cur[i], x[i]);
    for (int64_t i = 0; i < T && !st; i++) {
        int64_t t = reverse ? T - 1 - i : i;
        nb_scope *bind, *step;
        if ((st = nb_steps_next(ctx, ss, keep, &bind, &step))) break;
        if ((st = nb_ctl_bind(bind, c.mem, mem_in, cur)) || (st = bind_slices(bind, seq_in, x + c.mem, c.seq, t)))
            break;
        if ((st = nb_exec_run_block(ctx->exec, block, step))) {
            nb_error_context(st, "%s: at time step %lld", ctx->label, (long long)t);
            break;
        }
        for (int m = 0; m < c.mem && !st; m++) {
            nb_tensor *v;
            if ((st = nb_ctl_result(ctx, step, mem_out->strs[m], "memory", &v))) break;
            if ((st = nb_ctl_check_like(ctx, x[m], v, "memory", m))) break;
            st = nb_ctl_take(&cur[m], v, !keep);
        }
        for (int k = 0; k < c.y && !st; k++) {
            nb_tensor *y;
            st = nb_ctl_result(ctx, step, seq_out->strs[k], "step output", &y);
            if (!st) st = store_row(ctx, ctx->out_begin[R_OUT] + c.mem + k, T, t, i == 0, y);
        }
        /* The step scope stays for the gradient: only with what it reads. */
        if (!st && keep) st = nb_exec_trim_step(ctx->exec, block, step, mem_out, seq_out);
    }
    nb_tensor *steps;
    nb_var_info one = {.dtype = NB_I64, .ndim = 1, .shape = {1}};
    if (!st) st = nb_exec_output(ctx, ctx->out_begin[R_STEPS], &one, &steps);
    if (!st) nb_tensor_set(steps, 0, (double)T);
    for (int m = 0; m < c.mem && !st; m++) st = nb_ctl_output_copy(ctx, ctx->out_begin[R_OUT] + m, cur[m]);
    if (!st) st = nb_steps_keep(ctx, ss, R_STEPS, keep);
    else nb_steps_free(ss);
    for (int m = 0; cur && m < c.mem; m++) nb_tensor_release(cur[m]);
    nb_free(cur);
    return st;
}

/* recurrent_grad(StepScopes, X = [forward X..., dFinal..., dYs...]) -> XGrad
 * (the wanted ones, at forward positions x_grad_pos). `seeds` names the grad
 * block's vars for the gradients of [mem_out..., seq_out...]; `in_grad` its
 * vars holding those of [mem_in..., seq_in..., captured...] ("" for none). */
enum { RG_STEPS, RG_X };

static nb_status recurrent_grad_infer(nb_op_ctx *ctx)
{
    return nb_ctl_grad_infer(ctx, (int)(nb_attr_int(ctx, "n_mem") + nb_attr_int(ctx, "n_y")));
}

typedef struct recurrent_grad_params {
    int sub_block, n_mem, n_seq, n_y;
    bool reverse;
    const nb_attr_value *seeds, *in_grad, *x_grad_pos;
} recurrent_grad_params;

static nb_status recurrent_grad_params_fill(const nb_op_ctx *ctx, void *params)
{
    *(recurrent_grad_params *)params = (recurrent_grad_params){.sub_block = nb_attr_get(ctx, "sub_block")->block,
                                                               .n_mem = (int)nb_attr_int(ctx, "n_mem"),
                                                               .n_seq = (int)nb_attr_int(ctx, "n_seq"),
                                                               .n_y = (int)nb_attr_int(ctx, "n_y"),
                                                               .reverse = nb_attr_bool(ctx, "reverse"),
                                                               .seeds = nb_attr_get(ctx, "seeds"),
                                                               .in_grad = nb_attr_get(ctx, "in_grad"),
                                                               .x_grad_pos = nb_attr_get(ctx, "x_grad_pos")};
    return NB_OK;
}

static nb_status recurrent_grad_kernel(const nb_kernel_ctx *ctx)
{
    if (!ctx->exec) return nb_ctl_needs_executor(ctx);
    const recurrent_grad_params *P = ctx->params;
    int n_mem = P->n_mem, n_seq = P->n_seq, n_y = P->n_y;
    int n_x = nb_kin_count(ctx, RG_X) - n_mem - n_y, n_cap = n_x - n_mem - n_seq;
    const nb_attr_value *seed_names = P->seeds, *in_grad = P->in_grad, *pos = P->x_grad_pos;
    int block = P->sub_block;
    bool reverse = P->reverse;
    nb_tensor *const *x = ctx->in + ctx->in_begin[RG_X];
    nb_tensor *const *d_final = x + n_x, *const *d_ys = x + n_x + n_mem;
    int64_t T = x[n_mem]->shape[0];
    nb_step_scopes *ss;
    nb_status st = nb_steps_find(ctx, RG_STEPS, &ss);
    if (st) return st;
    if (ss->n != T)
        return nb_error(NB_ERR_STATE, "%s: %d step scopes kept for %lld steps", ctx->label, ss->n, (long long)T);
    /* grads: the memories' (carried), then the sequences' and the captured
     * values' (accumulated), in forward input order. */
    nb_tensor **grads = nb_calloc((size_t)n_x + 1, sizeof *grads),
              **seeds = nb_calloc((size_t)(n_mem + n_y) + 1, sizeof *seeds);
    if (!grads || !seeds) st = nb_error(NB_ERR_NOMEM, "%s: out of memory", ctx->label);
    for (int m = 0; m < n_mem && !st; m++) grads[m] = nb_tensor_retain(d_final[m]);
    for (int j = 0; j < n_seq && !st; j++)
        if (in_grad->strs[n_mem + j][0]) st = nb_ctl_zeros_like(&grads[n_mem + j], x[n_mem + j]);
    for (int64_t i = T - 1; i >= 0 && !st; i--) {
        int64_t t = reverse ? T - 1 - i : i;
        for (int m = 0; m < n_mem; m++) seeds[m] = grads[m];
        for (int k = 0; k < n_y && !st; k++) st = nb_ctl_time_slice(&seeds[n_mem + k], d_ys[k], t);
        nb_scope *gs = NULL;
        if (!st) st = nb_ctl_run_grad(ctx, block, ss->step[i], n_mem + n_y, seed_names, seeds, &gs);
        for (int k = 0; k < n_y; k++) {
            nb_tensor_release(seeds[n_mem + k]);
            seeds[n_mem + k] = NULL;
        }
        if (st) {
            nb_error_context(st, "%s: replaying time step %lld", ctx->label, (long long)t);
            break;
        }
        for (int m = 0; m < n_mem && !st; m++) st = nb_ctl_carry_grad(gs, in_grad->strs[m], &grads[m]);
        for (int j = 0; j < n_seq && !st; j++) {
            nb_tensor *g = nb_ctl_grad_of(gs, in_grad->strs[n_mem + j]), *row = NULL;
            if (!g || !grads[n_mem + j]) continue;
            st = nb_ctl_time_slice(&row, grads[n_mem + j], t);
            if (!st) st = nb_tensor_copy_into(row, g);
            nb_tensor_release(row);
        }
        for (int j = 0; j < n_cap && !st; j++) {
            nb_tensor *g = nb_ctl_grad_of(gs, in_grad->strs[n_mem + n_seq + j]);
            if (g) st = nb_ctl_accumulate(&grads[n_mem + n_seq + j], g);
        }
        nb_ctl_grad_done(gs);
    }
    for (int o = 0; o < pos->n && !st; o++) {
        int p = (int)pos->ints[o];
        nb_tensor *z;
        st = grads[p] ? nb_ctl_output_copy(ctx, ctx->out_begin[0] + o, grads[p])
                      : nb_ctl_output_zeros(ctx, ctx->out_begin[0] + o, x[p], &z);
    }
    for (int k = 0; grads && k < n_x; k++) nb_tensor_release(grads[k]);
    nb_free(grads);
    nb_free(seeds);
    if (!st) nb_steps_release(ctx, RG_STEPS);
    return st;
}

static nb_status recurrent_vjp(nb_builder *b, nb_grad_ctx *g)
{
    const nb_attr_value *mem_in = nb_grad_attr(g, "mem_in"), *mem_out = nb_grad_attr(g, "mem_out");
    const nb_attr_value *seq_in = nb_grad_attr(g, "seq_in"), *seq_out = nb_grad_attr(g, "seq_out");
    int n_mem = mem_in->n, n_seq = seq_in->n, n_y = seq_out->n, n_x = nb_grad_in_count(g, 0);
    int n_t = 0, n_in = 0, n_pos = 0;
    nb_ctl_scratch sc = {0};
    const char **targets = nb_ctl_scratch_take(&sc, n_mem + n_y, sizeof *targets);
    const char **inputs = nb_ctl_scratch_take(&sc, n_x, sizeof *inputs);
    const char **seeds = nb_ctl_scratch_take(&sc, n_mem + n_y, sizeof *seeds);
    const char **in_grad = nb_ctl_scratch_take(&sc, n_x, sizeof *in_grad);
    bool *t_on = nb_ctl_scratch_take(&sc, n_mem + n_y, sizeof *t_on),
         *i_on = nb_ctl_scratch_take(&sc, n_x, sizeof *i_on);
    int64_t *pos = nb_ctl_scratch_take(&sc, n_x, sizeof *pos);
    nb_value *in = nb_ctl_scratch_take(&sc, 1 + n_x + n_mem + n_y, sizeof *in);
    nb_value *out = nb_ctl_scratch_take(&sc, n_x, sizeof *out);
    nb_sub_grad sg = {0};
    nb_status st = NB_OK;
    if (sc.failed) {
        st = nb_builder_fail(b, NB_ERR_NOMEM, "recurrent: out of memory");
        goto done;
    }
    /* Floating-point memories always take part (gradients flow from step to
     * step); sequences and captured values when they want a gradient. */
    for (int i = 0; i < n_mem + n_y; i++)
        if ((t_on[i] = nb_dtype_is_float(nb_value_info(b, nb_grad_y(g, R_OUT, i)).dtype)))
            targets[n_t++] = i < n_mem ? mem_out->strs[i] : seq_out->strs[i - n_mem];
    for (int k = 0; k < n_x; k++) {
        bool is_float = nb_dtype_is_float(nb_value_info(b, nb_grad_x(g, 0, k)).dtype);
        i_on[k] = k < n_mem ? is_float : nb_grad_wants_dx(g, 0, k);
        if (!i_on[k]) continue;
        inputs[n_in++] = k < n_mem ? mem_in->strs[k]
            : k < n_mem + n_seq    ? seq_in->strs[k - n_mem]
                                   : nb_ctl_name(nb_grad_x(g, 0, k));
    }
    if ((st =
             nb_ctl_sub_backward(b, "recurrent", nb_grad_attr(g, "sub_block")->block, n_t, targets, n_in, inputs, &sg)))
        goto done;
    for (int i = 0, u = 0; i < n_mem + n_y; i++) seeds[i] = t_on[i] ? sg.seeds[u++] : "";
    for (int k = 0, u = 0; k < n_x; k++) in_grad[k] = i_on[k] ? sg.grads[u++] : "";
    for (int k = 0; k < n_x; k++)
        if (nb_grad_wants_dx(g, 0, k)) pos[n_pos++] = k;
    in[0] = nb_grad_y(g, R_STEPS, 0);
    for (int k = 0; k < n_x; k++) in[1 + k] = nb_grad_x(g, 0, k);
    for (int i = 0; i < n_mem + n_y; i++) in[1 + n_x + i] = nb_grad_dy_or_zeros(b, g, R_OUT, i);
    nb_attr attrs[] = {NB_ATTR_BLOCK("sub_block", sg.block),
                       NB_ATTR_INT("n_mem", n_mem),
                       NB_ATTR_INT("n_seq", n_seq),
                       NB_ATTR_INT("n_y", n_y),
                       NB_ATTR_STRINGS_N("seeds", n_mem + n_y, seeds),
                       NB_ATTR_STRINGS_N("in_grad", n_x, in_grad),
                       NB_ATTR_INTS_N("x_grad_pos", n_pos, pos),
                       NB_ATTR_BOOL("reverse", nb_grad_attr(g, "reverse")->b)};
    st = nb_emit(b, "recurrent_grad", NB_VALUES_N(1 + n_x + n_mem + n_y, in), NB_ATTRS_N(8, attrs), n_pos, out);
    for (int o = 0; !st && o < n_pos; o++) nb_grad_set_dx(g, 0, (int)pos[o], out[o]);
done:
    nb_ctl_scratch_free(&sc);
    nb_sub_grad_free(&sg);
    return st;
}

const nb_op_def nb_op_recurrent = {
    .name = "recurrent",
    .doc = "Runs a step block over time (axis 0) with memories carried from step to step; stacks the step outputs.",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    NB_CTL_OUTPUTS(NB_SLOT_OPTIONAL),
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK), NB_ADEF_STRINGS_EMPTY("mem_in"),
              NB_ADEF_STRINGS_EMPTY("mem_out"), NB_ADEF_STRINGS_EMPTY("seq_in"), NB_ADEF_STRINGS_EMPTY("seq_out"),
              NB_ADEF_INTS_EMPTY("out_dtypes"), NB_ADEF_INTS_EMPTY("out_shapes"), NB_ADEF_BOOL("reverse", false),
              NB_ADEF_BOOL("is_test", false), NB_ADEF_STRING("form", ""), NB_ADEF_STRINGS_EMPTY("form_values")},
    .infer = recurrent_infer,
    .params_size = sizeof(recurrent_params),
    .params = recurrent_params_fill,
    .flags = NB_OP_CONTROL,
    .grad_uses_inputs = 1u << 0,
    .grad_uses_outputs = 1u << R_STEPS,
    .vjp = recurrent_vjp,
    .jvp = nb_ctl_recurrent_jvp,
};

const nb_op_def nb_op_recurrent_grad = {
    .name = "recurrent_grad",
    .doc = "Replays a recurrent op's steps in reverse through its grad block.",
    NB_CTL_GRAD_SLOTS,
    .attrs = {NB_ADEF_REQUIRED("sub_block", NB_ATTR_BLOCK), NB_ADEF_INT("n_mem", 0), NB_ADEF_INT("n_seq", 0),
              NB_ADEF_INT("n_y", 0), NB_ADEF_STRINGS_EMPTY("seeds"), NB_ADEF_STRINGS_EMPTY("in_grad"),
              NB_ADEF_INTS_EMPTY("x_grad_pos"), NB_ADEF_BOOL("reverse", false)},
    .infer = recurrent_grad_infer,
    .params_size = sizeof(recurrent_grad_params),
    .params = recurrent_grad_params_fill,
    NB_CTL_LOOP_GRAD_RULES,
};

const nb_kernel_def nb_kernel_recurrent = {
    .op = "recurrent", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = recurrent_kernel};
const nb_kernel_def nb_kernel_recurrent_grad = {.op = "recurrent_grad",
                                                .device = NB_DEVICE_CPU,
                                                .dtypes = NB_DT_ALL,
                                                .provider = "nabla",
                                                .run = recurrent_grad_kernel};
