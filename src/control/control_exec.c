/* Kernel helpers of the control-flow ops (see control_exec.h). */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "control_exec.h"
#include "../core/tensor_internal.h"
#include "../ops/op_internal.h"

nb_status nb_steps_new(const nb_kernel_ctx *ctx, nb_step_scopes **out)
{
    nb_step_scopes *ss = nb_calloc(1, sizeof *ss);
    nb_status st = ss ? nb_scope_new(&ss->outer, ctx->exec->scope) : NB_ERR_NOMEM;
    if (st) {
        nb_free(ss);
        return nb_error(NB_ERR_NOMEM, "%s: out of memory", ctx->label);
    }
    *out = ss;
    return NB_OK;
}

void nb_steps_free(void *p)
{
    nb_step_scopes *ss = p;
    if (!ss) return;
    while (ss->n) nb_steps_pop(ss);
    nb_free(ss->bind);
    nb_free(ss->step);
    nb_scope_free(ss->outer);
    nb_free(ss);
}

nb_status nb_steps_push(const nb_kernel_ctx *ctx, nb_step_scopes *ss, nb_scope **bind, nb_scope **step)
{
    if (ss->n == ss->cap) {
        int cap = ss->cap ? 2 * ss->cap : 16;
        nb_scope **b = nb_realloc(ss->bind, (size_t)cap * sizeof *b);
        if (b) ss->bind = b;
        nb_scope **s = b ? nb_realloc(ss->step, (size_t)cap * sizeof *s) : NULL;
        if (!s) return nb_error(NB_ERR_NOMEM, "%s: out of memory for step scopes", ctx->label);
        ss->step = s;
        ss->cap = cap;
    }
    nb_status st = nb_scope_new(bind, ss->outer);
    if (st) return st;
    if ((st = nb_scope_new(step, *bind))) {
        nb_scope_free(*bind);
        return st;
    }
    ss->bind[ss->n] = *bind;
    ss->step[ss->n++] = *step;
    return NB_OK;
}

nb_status nb_steps_next(const nb_kernel_ctx *ctx, nb_step_scopes *ss, bool keep, nb_scope **bind, nb_scope **step)
{
    if (keep || ss->n == 0) return nb_steps_push(ctx, ss, bind, step);
    *bind = ss->bind[ss->n - 1];
    *step = ss->step[ss->n - 1];
    return NB_OK;
}

nb_status nb_ctl_take(nb_tensor **cur, nb_tensor *t, bool copy)
{
    if (!copy) {
        nb_tensor_retain(t);
        nb_tensor_release(*cur);
        *cur = t;
        return NB_OK;
    }
    /* The bind scope still holds *cur, but the iteration that read it is over. */
    if (*cur && (*cur)->dtype == t->dtype && nb_shape_equal((*cur)->ndim, (*cur)->shape, t->ndim, t->shape))
        return nb_tensor_copy_into(*cur, t);
    nb_tensor_release(*cur);
    *cur = NULL;
    return nb_tensor_clone(cur, t);
}

void nb_steps_pop(nb_step_scopes *ss)
{
    ss->n--;
    nb_scope_free(ss->step[ss->n]);
    nb_scope_free(ss->bind[ss->n]);
}

nb_status nb_steps_keep(const nb_kernel_ctx *ctx, nb_step_scopes *ss, int slot, bool keep)
{
    if (!keep) {
        nb_steps_free(ss);
        return NB_OK;
    }
    return nb_scope_attach(ctx->exec->scope, nb_ctl_out_name(ctx, ctx->out_begin[slot]), ss, nb_steps_free);
}

nb_status nb_steps_find(const nb_kernel_ctx *ctx, int slot, nb_step_scopes **out)
{
    const char *name = nb_ctl_in_name(ctx, ctx->in_begin[slot]);
    *out = nb_scope_attachment(ctx->exec->scope, name);
    if (*out) return NB_OK;
    return nb_error(NB_ERR_NOT_FOUND,
                    "%s: the forward op kept no step scopes under '%s' (was it run with is_test, in another scope, "
                    "or is its gradient run twice?)",
                    ctx->label, name);
}

/* Whether another op still to run may read var `name`: one after `op` in
 * its block, or one in another block (a second derivative differentiates a
 * loop twice, and the grad blocks of both passes read the step scopes its
 * inner loops left in each iteration). */
static bool read_elsewhere(const nb_program *p, const nb_op *op, const char *name)
{
    for (int b = 0; b < p->n_blocks; b++) {
        const nb_block *blk = p->blocks[b];
        int from = 0;
        for (int i = 0; i < blk->n_ops; i++)
            if (blk->ops[i] == op) from = i + 1;
        for (int j = from; j < blk->n_ops; j++)
            for (int k = 0; blk->ops[j] != op && k < nb_op_n_inputs(blk->ops[j]); k++)
                if (!strcmp(blk->ops[j]->inputs[k], name)) return true;
    }
    return false;
}

/* The last gradient op to read a forward op's step scopes frees them (at
 * the latest, the next run of the forward op replaces them). */
void nb_steps_release(const nb_kernel_ctx *ctx, int slot)
{
    const char *name = nb_ctl_in_name(ctx, ctx->in_begin[slot]);
    if (!read_elsewhere(ctx->exec->program, ctx->exec->op, name)) nb_scope_detach(ctx->exec->scope, name);
}

const char *nb_ctl_in_name(const nb_kernel_ctx *ctx, int k) { return ctx->exec->op->inputs[k]; }
const char *nb_ctl_out_name(const nb_kernel_ctx *ctx, int k) { return ctx->exec->op->outputs[k]; }

nb_status nb_ctl_bind(nb_scope *s, int n, const nb_attr_value *names, nb_tensor *const *ts)
{
    nb_status st = NB_OK;
    for (int i = 0; i < n && !st; i++)
        if (names->strs[i][0]) st = nb_scope_set(s, names->strs[i], ts[i]);
    return st;
}

nb_status nb_ctl_bind_inputs(const nb_kernel_ctx *ctx, nb_scope *s, int from, int to)
{
    nb_status st = NB_OK;
    for (int k = from; k < to && !st; k++) st = nb_scope_set(s, nb_ctl_in_name(ctx, k), ctx->in[k]);
    return st;
}

nb_status nb_ctl_result(const nb_kernel_ctx *ctx, nb_scope *s, const char *name, const char *what, nb_tensor **out)
{
    *out = nb_scope_find_local(s, name);
    if (*out) return NB_OK;
    return nb_error(NB_ERR_NOT_FOUND, "%s: the block did not write %s '%s'", ctx->label, what, name);
}

nb_status nb_ctl_pred(const nb_kernel_ctx *ctx, const nb_tensor *t, const char *what, bool *out)
{
    if (t->dtype != NB_BOOL || nb_tensor_numel(t) != 1) {
        char s[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_DTYPE, "%s: %s must be bool with one element, not %s %s", ctx->label, what,
                        nb_dtype_name(t->dtype), nb_shape_str(s, sizeof s, t->ndim, t->shape));
    }
    *out = nb_tensor_get(t, 0) != 0;
    return NB_OK;
}

nb_status nb_ctl_output_copy(const nb_kernel_ctx *ctx, int k, const nb_tensor *t)
{
    nb_var_info info = nb_tensor_info(t);
    nb_tensor *o;
    nb_status st = nb_exec_output(ctx, k, &info, &o);
    return st ? st : nb_tensor_copy_into(o, t);
}

nb_status nb_ctl_output_zeros(const nb_kernel_ctx *ctx, int k, const nb_tensor *like, nb_tensor **out)
{
    nb_var_info info = nb_tensor_info(like);
    return nb_exec_output(ctx, k, &info, out);
}

nb_status nb_ctl_check_like(const nb_kernel_ctx *ctx, const nb_tensor *was, const nb_tensor *now, const char *what,
                            int i)
{
    if (was->dtype == now->dtype && nb_shape_equal(was->ndim, was->shape, now->ndim, now->shape)) return NB_OK;
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    return nb_error(NB_ERR_SHAPE, "%s: %s %d was %s %s and the block made it %s %s; it must keep its dtype and shape",
                    ctx->label, what, i, nb_dtype_name(was->dtype), nb_shape_str(a, sizeof a, was->ndim, was->shape),
                    nb_dtype_name(now->dtype), nb_shape_str(b, sizeof b, now->ndim, now->shape));
}

nb_status nb_ctl_zeros_like(nb_tensor **out, const nb_tensor *t)
{
    return nb_tensor_new(out, t->dtype, t->ndim, t->shape);
}

nb_status nb_ctl_accumulate(nb_tensor **acc, const nb_tensor *t)
{
    if (!*acc) return nb_tensor_clone(acc, t);
    /* The add kernel, in place: it checks the shapes and dtypes. */
    nb_tensor *in[2] = {*acc, (nb_tensor *)t};
    return nb_op_run("add", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, acc);
}

nb_status nb_ctl_time_slice(nb_tensor **out, nb_tensor *x, int64_t t)
{
    nb_tensor *row = NULL;
    nb_status st = nb_tensor_slice(&row, x, 0, t, t + 1, 1);
    if (!st) st = nb_tensor_reshape(out, row, x->ndim - 1, x->shape + 1);
    nb_tensor_release(row);
    return st;
}

nb_status nb_ctl_run_grad(const nb_kernel_ctx *ctx, int grad_block, nb_scope *step, int n_seed,
                          const nb_attr_value *seed_names, nb_tensor *const *seeds, nb_scope **grad)
{
    nb_scope *seed_scope = NULL;
    *grad = NULL;
    nb_status st = nb_scope_new(&seed_scope, step);
    if (!st) st = nb_ctl_bind(seed_scope, n_seed, seed_names, seeds);
    if (!st) st = nb_scope_new(grad, seed_scope);
    if (!st) st = nb_exec_run_block(ctx->exec, grad_block, *grad);
    if (st) {
        nb_scope_free(*grad);
        nb_scope_free(seed_scope);
        *grad = NULL;
        nb_error_context(st, "%s: in its grad block %d", ctx->label, grad_block);
    }
    return st;
}

void nb_ctl_grad_done(nb_scope *grad)
{
    if (!grad) return;
    nb_scope *seeds = nb_scope_parent(grad);
    nb_scope_free(grad);
    nb_scope_free(seeds);
}

nb_tensor *nb_ctl_grad_of(nb_scope *grad, const char *name)
{
    if (!name || !name[0]) return NULL;
    nb_tensor *t = nb_scope_find_local(grad, name);
    /* A gradient that is a seed itself was bound one scope up. */
    return t ? t : nb_scope_find_local(nb_scope_parent(grad), name);
}

nb_status nb_ctl_carry_grad(nb_scope *grad, const char *name, nb_tensor **g)
{
    nb_tensor *t = nb_ctl_grad_of(grad, name), *z = NULL;
    if (!t) {
        nb_status st = nb_ctl_zeros_like(&z, *g);
        if (st) return st;
    }
    nb_tensor_release(*g);
    *g = t ? nb_tensor_retain(t) : z;
    return NB_OK;
}
