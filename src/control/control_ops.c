/* The control-flow ops' registration, and what they share.
 *
 * These ops run blocks through the executor and differentiate them through
 * the backward pass, so they sit above both and cannot be in the registry's
 * built-in tables (which sit below): they register themselves, once, the
 * first time anything that can meet them runs (nabla/control.h's builders,
 * the program-file loader, the nabla tool). */
#include <pthread.h>
#include <stdatomic.h>
#include "nabla/control.h"
#include "nabla/program.h"
#include "control_ops.h"

static const nb_op_def *const ops[] = {
    &nb_op_while, &nb_op_while_grad, &nb_op_cond,      &nb_op_cond_grad,
    &nb_op_net,   &nb_op_net_grad,   &nb_op_recurrent, &nb_op_recurrent_grad,
};

static const nb_kernel_def *const kernels[] = {
    &nb_kernel_while, &nb_kernel_while_grad, &nb_kernel_cond,      &nb_kernel_cond_grad,
    &nb_kernel_net,   &nb_kernel_net_grad,   &nb_kernel_recurrent, &nb_kernel_recurrent_grad,
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool done;

/* Registers what is not registered yet, so that a call that ran out of
 * memory half way is finished by the next one. */
nb_status nb_control_register_ops(void)
{
    if (atomic_load_explicit(&done, memory_order_acquire)) return NB_OK;
    pthread_mutex_lock(&lock);
    nb_status st = NB_OK;
    for (size_t i = 0; i < sizeof ops / sizeof *ops && !st; i++)
        if (nb_op_find(ops[i]->name) != ops[i]) st = nb_op_register(ops[i]);
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels && !st; i++) {
        const nb_kernel_def *k = kernels[i], *had;
        int at = 0;
        while ((had = nb_kernel_at(k->op, k->device, at)) && had != k) at++;
        if (!had) st = nb_kernel_register(k);
    }
    if (!st) atomic_store_explicit(&done, true, memory_order_release);
    pthread_mutex_unlock(&lock);
    return st;
}

nb_status nb_ctl_needs_executor(const nb_kernel_ctx *ctx)
{
    return nb_error(NB_ERR_UNSUPPORTED,
                    "%s: control-flow ops run inside an executor; eagerly, use nb_while_loop, nb_cond, nb_scan or "
                    "nb_net, which run as C control flow on the tape",
                    ctx->label);
}

nb_status nb_ctl_recorded_infos(const nb_op_ctx *ctx, int n, nb_var_info *out)
{
    const nb_attr_value *dt = nb_attr_get(ctx, "out_dtypes"), *sh = nb_attr_get(ctx, "out_shapes");
    if (dt->n != n) return nb_error(NB_ERR_ARG, "%s: out_dtypes lists %d dtypes for %d outputs", ctx->label, dt->n, n);
    int at = 0;
    for (int i = 0; i < n; i++) {
        if (dt->ints[i] < 0 || dt->ints[i] >= NB_DTYPE_COUNT || at >= sh->n || sh->ints[at] < 0 ||
            sh->ints[at] > NB_MAX_DIMS || at + 1 + sh->ints[at] > sh->n)
            return nb_error(NB_ERR_ARG, "%s: out_dtypes or out_shapes is malformed at output %d", ctx->label, i);
        out[i] = (nb_var_info){.dtype = (nb_dtype)dt->ints[i], .ndim = (int)sh->ints[at]};
        for (int d = 0; d < out[i].ndim; d++) out[i].shape[d] = sh->ints[at + 1 + d];
        at += 1 + out[i].ndim;
    }
    return NB_OK;
}

nb_status nb_ctl_grad_infer(nb_op_ctx *ctx, int n_tail)
{
    const nb_attr_value *pos = nb_attr_get(ctx, "x_grad_pos");
    int n_x = nb_in_count(ctx, 1) - n_tail;
    if (pos->n != nb_out_count(ctx, 0) || n_x < 0)
        return nb_error(NB_ERR_ARG, "%s: x_grad_pos does not match the outputs", ctx->label);
    for (int j = 0; j < pos->n; j++) {
        if (pos->ints[j] < 0 || pos->ints[j] >= n_x)
            return nb_error(NB_ERR_ARG, "%s: x_grad_pos out of range", ctx->label);
        *nb_out_info(ctx, 0, j) = *nb_in_info(ctx, 1, (int)pos->ints[j]);
    }
    return NB_OK;
}
