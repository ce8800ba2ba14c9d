/* The collective family: the ops that make a static program data-parallel
 * (PaddlePaddle's collective mode), run by the communicator of their ring
 * (nabla/comm.h). nb_data_parallel (src/dist) inserts them; kernels are in
 * src/kernels/cpu/collective.c.
 *
 *   c_allreduce_sum  Out[i] = the sum over ranks of X[i]. One op may carry
 *                    many gradients (a bucket): one all-reduce moves them
 *                    all. Linear, so its VJP and JVP are itself.
 *   c_allreduce_start
 *                    the same sum, started: the op returns with the
 *                    all-reduce open, and the ops after it run while the
 *                    ranks exchange (the executor moves it on between ops).
 *                    Out must be X itself, and neither may be touched
 *                    before the c_allreduce_wait of its ring.
 *   c_allreduce_wait completes the all-reduces its ring has open that
 *                    carry its X, and every one started before them, oldest
 *                    first. X and Out are the vars of a start: they keep
 *                    its buffers alive and every reader after the wait. The
 *                    pair is a schedule of c_allreduce_sum that only
 *                    nb_data_parallel places; neither has a rule.
 *   c_broadcast      Out[i] = rank root's X[i]; with a nonzero `check`, it
 *                    first makes sure every rank has the same one (a hash of
 *                    the vars' names and shapes), so that a rank whose model
 *                    differs fails with an error instead of a wrong result.
 *
 * In programs Out names the same vars as X (the op works in place), hence
 * NB_OP_STATEFUL, which also keeps pruning from dropping them. */
#include "batch_rules.h"
#include "families.h"
#include "nabla/grad_rule.h"
#include "kernels/params/collective.h"
#include "nabla/comm.h"

static nb_status infer_collective(nb_op_ctx *ctx, bool need_float)
{
    int n = nb_in_count(ctx, 0);
    if (nb_out_count(ctx, 0) != n)
        return nb_error(NB_ERR_ARG, "%s: %d inputs X but %d outputs Out; they go in pairs", ctx->label, n,
                        nb_out_count(ctx, 0));
    const nb_var_info *first = nb_in_info(ctx, 0, 0);
    for (int i = 0; i < n; i++) {
        const nb_var_info *x = nb_in_info(ctx, 0, i);
        if (need_float && x->dtype != NB_F32 && x->dtype != NB_F64)
            return nb_error(NB_ERR_DTYPE, "%s: X[%d] is %s; all-reduce sums float32 or float64", ctx->label, i,
                            nb_dtype_name(x->dtype));
        if (need_float && x->dtype != first->dtype)
            return nb_error(NB_ERR_DTYPE, "%s: X[%d] is %s but X[0] is %s; one all-reduce carries one dtype",
                            ctx->label, i, nb_dtype_name(x->dtype), nb_dtype_name(first->dtype));
        *nb_out_info(ctx, 0, i) = *x;
    }
    return NB_OK;
}

static nb_status collective_params(const nb_op_ctx *ctx, void *params)
{
    int64_t ring = nb_attr_int(ctx, "ring_id");
    if (ring < 0 || ring >= NB_COMM_MAX_RINGS)
        return nb_error(NB_ERR_ARG, "%s: ring_id %lld is not in [0, %d)", ctx->label, (long long)ring,
                        NB_COMM_MAX_RINGS);
    nb_collective_params *p = params;
    p->ring = (int)ring;
    const nb_attr_value *root = nb_attr_get(ctx, "root"), *check = nb_attr_get(ctx, "check");
    if (root) {
        if (root->i < 0) return nb_error(NB_ERR_ARG, "%s: root %lld is negative", ctx->label, (long long)root->i);
        p->root = (int)root->i;
    }
    if (check) p->check = (uint64_t)check->i;
    return NB_OK;
}

/* ---- c_allreduce_sum ------------------------------------------------------------------- */

static nb_status infer_allreduce(nb_op_ctx *ctx) { return infer_collective(ctx, true); }

/* The all-reduce of the values given by `pick` (dy for the VJP, tx for the
 * JVP), one op for all of them, as the forward op was one. */
static nb_status allreduce_rule(nb_builder *b, nb_grad_ctx *g, bool vjp)
{
    int n = nb_grad_in_count(g, 0), m = 0;
    nb_value in[64], out[64];
    int where[64];
    if (n > 64)
        return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "c_allreduce_sum: rules take at most 64 values, not %d", n);
    for (int i = 0; i < n; i++) {
        nb_value v = vjp ? nb_grad_dy(g, 0, i) : nb_grad_tx(g, 0, i);
        if (nb_is_none(v) || (vjp && !nb_grad_wants_dx(g, 0, i))) continue;
        where[m] = i;
        in[m++] = v;
    }
    if (m == 0) return nb_builder_status(b);
    const nb_attr_value *ring = nb_grad_attr(g, "ring_id");
    nb_status st = nb_emit(b, "c_allreduce_sum", NB_VALUES_N(m, in), NB_ATTRS(NB_ATTR_INT("ring_id", ring->i)), m, out);
    if (st) return st;
    for (int k = 0; k < m; k++) {
        if (vjp) nb_grad_set_dx(g, 0, where[k], out[k]);
        else nb_grad_set_ty(g, 0, where[k], out[k]);
    }
    return nb_builder_status(b);
}

static nb_status vjp_allreduce(nb_builder *b, nb_grad_ctx *g) { return allreduce_rule(b, g, true); }
static nb_status jvp_allreduce(nb_builder *b, nb_grad_ctx *g) { return allreduce_rule(b, g, false); }

static const nb_op_def op_c_allreduce_sum = {
    .name = "c_allreduce_sum",
    .batch = nb_batch_each,
    .doc = "Out[i] = sum over the ranks of ring ring_id of X[i] (float32/float64, one dtype per op), one all-reduce.",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", NB_SLOT_VARIADIC}},
    .attrs = {NB_ADEF_INT("ring_id", 0)},
    .infer = infer_allreduce,
    .params_size = sizeof(nb_collective_params),
    .params = collective_params,
    .flags = NB_OP_STATEFUL,
    .vjp = vjp_allreduce,
    .jvp = jvp_allreduce,
};

/* ---- c_allreduce_start, c_allreduce_wait ---------------------------------------------- */

/* The fields the pair shares: c_allreduce_sum's, less its rules and vmap batching. */
#define ALLREDUCE_PAIR_FIELDS                                                                                          \
    .inputs = {{"X", NB_SLOT_VARIADIC}}, .outputs = {{"Out", NB_SLOT_VARIADIC}}, .attrs = {NB_ADEF_INT("ring_id", 0)}, \
    .infer = infer_allreduce, .params_size = sizeof(nb_collective_params), .params = collective_params,                \
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE

static const nb_op_def op_c_allreduce_start = {
    .name = "c_allreduce_start",
    .doc = "Starts Out[i] = sum over the ranks of ring ring_id of X[i], in place (Out[i] is X[i]); "
           "c_allreduce_wait completes it.",
    ALLREDUCE_PAIR_FIELDS,
};

static const nb_op_def op_c_allreduce_wait = {
    .name = "c_allreduce_wait",
    .doc = "Completes the open all-reduces (c_allreduce_start) of ring ring_id that carry X, and older ones.",
    ALLREDUCE_PAIR_FIELDS,
};

/* ---- c_broadcast ------------------------------------------------------------------------------ */

static nb_status infer_broadcast(nb_op_ctx *ctx) { return infer_collective(ctx, false); }

static const nb_op_def op_c_broadcast = {
    .name = "c_broadcast",
    .batch = nb_batch_each,
    .doc = "Out[i] = X[i] of rank `root` of ring ring_id; a nonzero `check` hash must first agree on every rank.",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", NB_SLOT_VARIADIC}},
    .attrs = {NB_ADEF_INT("ring_id", 0), NB_ADEF_INT("root", 0), NB_ADEF_INT("check", 0)},
    .infer = infer_broadcast,
    .params_size = sizeof(nb_collective_params),
    .params = collective_params,
    .flags = NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE,
};

const nb_op_def *const nb_ops_collective[] = {&op_c_allreduce_sum, &op_c_allreduce_start, &op_c_allreduce_wait,
                                              &op_c_broadcast, NULL};
