/* CPU kernels of the collective ops (src/ops/collective.c): they hand the
 * tensors to the communicator of the op's ring (src/comm).
 *
 * c_allreduce_sum sums a bucket of many small gradients in one all-reduce
 * (the latency of a collective, not its bandwidth, dominates for small
 * ones): through shared memory each input where it lies, into its output;
 * over the ring packed into one buffer, the sums unpacked into the
 * outputs. A single input that is its own output is reduced where it
 * lies. Outputs may be the inputs' tensors (programs) or fresh ones (eager
 * mode). c_allreduce_start does the same but returns with the all-reduce
 * open (nb_comm_open_allreduce), so it works in place only;
 * c_allreduce_wait completes those of its X, and any older ones. */
#include <string.h>
#include "nabla/device.h"
#include "nabla/kernel.h"
#include "../../comm/comm_internal.h"
#include "../params/collective.h"

static nb_status ring_of(const nb_kernel_ctx *ctx, nb_comm **c)
{
    const nb_collective_params *p = ctx->params;
    *c = nb_comm_ring(p->ring);
    return *c ? NB_OK : nb_error_context(NB_ERR_NOT_FOUND, "%s", ctx->label);
}

/* Whether the n inputs can be summed where they lie into the outputs:
 * all contiguous, and each output its input itself or apart from every
 * input (a sum written over an input not yet read would change what is
 * summed). */
static bool summable_where(const nb_kernel_ctx *ctx, int n)
{
    for (int i = 0; i < n; i++) {
        const nb_tensor *x = nb_kin(ctx, 0, i), *y = nb_kout(ctx, 0, i);
        if (!nb_tensor_is_contiguous(x) || !nb_tensor_is_contiguous(y)) return false;
        if (nb_tensor_data(y) == nb_tensor_data(x)) continue;
        for (int j = 0; j < n; j++)
            if (nb_kin(ctx, 0, j)->storage == y->storage) return false;
    }
    return true;
}

static nb_status run_allreduce(const nb_kernel_ctx *ctx)
{
    nb_comm *c;
    nb_status st = ring_of(ctx, &c);
    if (st) return st;
    int n = nb_kin_count(ctx, 0);
    nb_dtype dt = nb_kin(ctx, 0, 0)->dtype;
    size_t esize = nb_dtype_size(dt);
    nb_tensor *x0 = nb_kin(ctx, 0, 0), *y0 = nb_kout(ctx, 0, 0);
    nb_comm_request *req = NULL;
    double t0 = nb_comm_clock(), bytes = 0;
    for (int i = 0; i < n; i++) bytes += (double)nb_tensor_numel(nb_kin(ctx, 0, i)) * (double)esize;
    if (n == 1) {
        if (nb_tensor_data(y0) != nb_tensor_data(x0)) st = nb_tensor_copy_into(y0, x0);
        if (!st) st = nb_comm_allreduce_buffer(c, nb_tensor_data(y0), nb_tensor_numel(y0), dt, &req);
        if (!st) st = nb_comm_finish(req);
        if (!st) nb_comm_note_sync(c, bytes, nb_comm_clock() - t0);
        return st ? nb_error_context(st, "%s", ctx->label) : NB_OK;
    }
    if (c->reads_parts && summable_where(ctx, n)) {
        st = nb_comm_allreduce_tensors(c, n, ctx->in + ctx->in_begin[0], ctx->out + ctx->out_begin[0], &req);
        if (!st) st = nb_comm_finish(req);
        if (!st) nb_comm_note_sync(c, bytes, nb_comm_clock() - t0);
        return st ? nb_error_context(st, "%s", ctx->label) : NB_OK;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += nb_tensor_numel(nb_kin(ctx, 0, i));
    char *buf = nb_comm_staging(c, (size_t)(total > 0 ? total : 1) * esize);
    if (!buf) return nb_error_context(NB_ERR_NOMEM, "%s: a bucket of %lld values", ctx->label, (long long)total);
    int64_t at = 0;
    for (int i = 0; i < n && !st; i++) {
        nb_tensor *x = nb_kin(ctx, 0, i);
        st = nb_comm_pack(x, buf + at * (int64_t)esize);
        at += nb_tensor_numel(x);
    }
    if (!st) st = nb_comm_allreduce_buffer(c, buf, total, dt, &req);
    if (!st) st = nb_comm_finish(req);
    at = 0;
    for (int i = 0; i < n && !st; i++) {
        nb_tensor *y = nb_kout(ctx, 0, i);
        memcpy(nb_tensor_data(y), buf + at * (int64_t)esize, (size_t)nb_tensor_numel(y) * esize);
        at += nb_tensor_numel(y);
    }
    if (!st) nb_comm_note_sync(c, bytes, nb_comm_clock() - t0);
    return st ? nb_error_context(st, "%s", ctx->label) : NB_OK;
}

static nb_status run_allreduce_start(const nb_kernel_ctx *ctx)
{
    nb_comm *c;
    nb_status st = ring_of(ctx, &c);
    if (st) return st;
    int n = nb_kin_count(ctx, 0);
    for (int i = 0; i < n; i++) {
        nb_tensor *x = nb_kin(ctx, 0, i), *y = nb_kout(ctx, 0, i);
        if (nb_tensor_data(y) != nb_tensor_data(x) || !nb_tensor_is_contiguous(x))
            return nb_error(NB_ERR_ARG,
                            "%s: Out[%d] must be X[%d] itself, contiguous: the all-reduce goes on in "
                            "place after the op returns (c_allreduce_sum works on fresh outputs)",
                            ctx->label, i, i);
    }
    st = n > 0 ? nb_comm_open_allreduce(c, ctx->in + ctx->in_begin[0], n) : NB_OK;
    return st ? nb_error_context(st, "%s", ctx->label) : NB_OK;
}

static nb_status run_allreduce_wait(const nb_kernel_ctx *ctx)
{
    nb_comm *c;
    nb_status st = ring_of(ctx, &c);
    if (!st) st = nb_comm_wait_open(c, ctx->in + ctx->in_begin[0], nb_kin_count(ctx, 0));
    return st ? nb_error_context(st, "%s", ctx->label) : NB_OK;
}

static nb_status run_broadcast(const nb_kernel_ctx *ctx)
{
    const nb_collective_params *p = ctx->params;
    nb_comm *c;
    nb_status st = ring_of(ctx, &c);
    if (st) return st;
    if (p->root >= nb_comm_size(c))
        return nb_error(NB_ERR_ARG, "%s: root %d, but ring %d has ranks 0..%d", ctx->label, p->root, p->ring,
                        nb_comm_size(c) - 1);
    if (p->check && (st = nb_comm_check_same(c, "the parameters (names and shapes)", p->check)))
        return nb_error_context(st, "%s", ctx->label);
    int n = nb_kin_count(ctx, 0);
    for (int i = 0; i < n && !st; i++) {
        nb_tensor *x = nb_kin(ctx, 0, i), *y = nb_kout(ctx, 0, i);
        nb_comm_request *req = NULL;
        if (nb_tensor_data(y) != nb_tensor_data(x)) st = nb_tensor_copy_into(y, x);
        if (!st) st = nb_comm_broadcast_buffer(c, nb_tensor_data(y), nb_tensor_numel(y), y->dtype, p->root, &req);
        if (!st) st = nb_comm_finish(req);
    }
    return st ? nb_error_context(st, "%s", ctx->label) : NB_OK;
}

static const nb_kernel_def kernel_allreduce = {
    .op = "c_allreduce_sum", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_allreduce};
static const nb_kernel_def kernel_allreduce_start = {.op = "c_allreduce_start",
                                                     .device = NB_DEVICE_CPU,
                                                     .dtypes = NB_DT_FLOAT,
                                                     .provider = "nabla",
                                                     .run = run_allreduce_start};
static const nb_kernel_def kernel_allreduce_wait = {.op = "c_allreduce_wait",
                                                    .device = NB_DEVICE_CPU,
                                                    .dtypes = NB_DT_FLOAT,
                                                    .provider = "nabla",
                                                    .run = run_allreduce_wait};
static const nb_kernel_def kernel_broadcast = {
    .op = "c_broadcast", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = run_broadcast};

const nb_kernel_def *const nb_cpu_kernels_collective[] = {&kernel_allreduce, &kernel_allreduce_start,
                                                          &kernel_allreduce_wait, &kernel_broadcast, NULL};
