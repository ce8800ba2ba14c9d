/* The attention family: scaled_dot_product_attention, its fused gradient
 * op, and the two mask ops that the composite rules of both use (src/ops/
 * attention_grad.c).
 *
 * Q [..., T, D], K [..., S, D], V [..., S, Dv]: the leading dims (batch and
 * heads) are the same in all three. The forward op outputs Out [..., T, Dv],
 * LSE [..., T] (the log of each row's softmax denominator, so that backward
 * recovers a weight as exp(score - LSE) without a second pass for the row
 * maximum and sum) and Key (int64 [2]: the random stream the dropout mask
 * was drawn from, zeros without dropout). LSE is differentiable: its
 * derivative is the row of weights, and second derivatives need it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "batch_rules.h"
#include "attention_grad.h"
#include "families.h"
#include "infer_check.h"
#include "kernels/params/attention.h"

static bool dim_match(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

static void set_out(nb_op_ctx *ctx, int slot, nb_dtype dt, int ndim, const int64_t *shape)
{
    if (nb_out_count(ctx, slot) < 1) return;
    nb_var_info *o = nb_out_info(ctx, slot, 0);
    o->dtype = dt;
    o->ndim = ndim;
    if (ndim) memcpy(o->shape, shape, (size_t)ndim * sizeof *shape);
}

static nb_status shape_error(const nb_op_ctx *ctx, const char *why)
{
    char q[NB_SHAPE_STR_MAX], k[NB_SHAPE_STR_MAX], v[NB_SHAPE_STR_MAX];
    return nb_error(NB_ERR_SHAPE, "%s: Q %s, K %s and V %s: %s", ctx->label, nb_info_shape(q, nb_in_info(ctx, 0, 0)),
                    nb_info_shape(k, nb_in_info(ctx, 1, 0)), nb_info_shape(v, nb_in_info(ctx, 2, 0)), why);
}

/* The attributes every op of the family carries. */
static nb_status check_attrs(const nb_op_ctx *ctx)
{
    const double scale = nb_attr_float(ctx, "scale"), p = nb_attr_float(ctx, "dropout_prob");
    if (!isfinite(scale)) return nb_error(NB_ERR_ARG, "%s: scale must be finite, got %g", ctx->label, scale);
    if (!(p >= 0 && p < 1)) return nb_error(NB_ERR_ARG, "%s: dropout_prob must be in [0, 1), got %g", ctx->label, p);
    return NB_OK;
}

/* What inference learns from Q, K and V. */
typedef struct qkv_dims {
    int lead;         /* Q's leading dims (batch, and heads unless `heads`) */
    int64_t heads;    /* > 0: the heads sit side by side in the last dim */
    int64_t T, S, Dv; /* queries, keys, V's (and Out's) last dim */
    int stat_ndim;    /* LSE and Delta: [lead..., heads?, T] */
    int64_t stat[NB_MAX_DIMS];
} qkv_dims;

/* Checks Q, K, V (slots 0-2) and the optional additive Mask (slot 3). */
static nb_status check_qkv(const nb_op_ctx *ctx, qkv_dims *d)
{
    const nb_var_info *q = nb_in_info(ctx, 0, 0), *k = nb_in_info(ctx, 1, 0), *v = nb_in_info(ctx, 2, 0);
    nb_status st;
    if ((st = nb_check_float(ctx, "Q", q)) || (st = nb_check_same_dtype(ctx, "K", k, "Q", q)) ||
        (st = nb_check_same_dtype(ctx, "V", v, "Q", q)) || (st = check_attrs(ctx)))
        return st;
    const int nd = q->ndim;
    if (nd < 2 || k->ndim != nd || v->ndim != nd)
        return shape_error(ctx, "they must have the same rank, at least 2 ([..., T, D], [..., S, D], [..., S, Dv])");
    for (int i = 0; i < nd - 2; i++)
        if (!dim_match(q->shape[i], k->shape[i]) || !dim_match(q->shape[i], v->shape[i]))
            return shape_error(ctx, "their leading (batch and head) dims must be equal");
    if (!dim_match(q->shape[nd - 1], k->shape[nd - 1]))
        return shape_error(ctx, "Q and K must have the same last dim D");
    if (!dim_match(k->shape[nd - 2], v->shape[nd - 2]))
        return shape_error(ctx, "K and V must have the same number of keys S");
    d->heads = nb_attr_int(ctx, "heads");
    if (d->heads < 0)
        return nb_error(NB_ERR_ARG, "%s: heads must be 0 or more, got %lld", ctx->label, (long long)d->heads);
    if (d->heads > 0 &&
        ((q->shape[nd - 1] >= 0 && q->shape[nd - 1] % d->heads) ||
         (v->shape[nd - 1] >= 0 && v->shape[nd - 1] % d->heads))) {
        char why[80];
        snprintf(why, sizeof why, "%lld heads must divide the last dims of Q and V", (long long)d->heads);
        return shape_error(ctx, why);
    }
    d->lead = nd - 2;
    d->T = q->shape[nd - 2];
    d->S = k->shape[nd - 2];
    d->Dv = v->shape[nd - 1];
    memcpy(d->stat, q->shape, (size_t)d->lead * sizeof *d->stat);
    d->stat_ndim = d->lead;
    if (d->heads) d->stat[d->stat_ndim++] = d->heads;
    d->stat[d->stat_ndim++] = d->T;
    if (!nb_has_in(ctx, 3)) return NB_OK;
    /* The mask broadcasts to the scores, [lead..., heads?, T, S]: aligned at
     * the right, each dim 1 or the target's. */
    const nb_var_info *m = nb_in_info(ctx, 3, 0);
    if ((st = nb_check_same_dtype(ctx, "Mask", m, "Q", q))) return st;
    int64_t target[NB_MAX_DIMS + 1];
    memcpy(target, d->stat, (size_t)d->stat_ndim * sizeof *target);
    const int td = d->stat_ndim + 1;
    target[td - 1] = d->S;
    bool ok = m->ndim <= td;
    for (int i = 0; ok && i < m->ndim; i++) {
        const int64_t md = m->shape[m->ndim - 1 - i], t = target[td - 1 - i];
        ok = md == 1 || dim_match(md, t);
    }
    if (!ok) {
        char ms[NB_SHAPE_STR_MAX], ts[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: Mask has shape %s, which does not broadcast to the scores' shape %s",
                        ctx->label, nb_info_shape(ms, m), nb_shape_str(ts, sizeof ts, td, target));
    }
    return NB_OK;
}

static nb_status attention_params(const nb_op_ctx *ctx, void *params)
{
    nb_attention_params *p = params;
    nb_status st = check_attrs(ctx);
    if (st) return st;
    p->scale = nb_attr_float(ctx, "scale");
    p->causal = nb_attr_bool(ctx, "causal");
    p->dropout = nb_attr_bool(ctx, "is_test") ? 0 : nb_attr_float(ctx, "dropout_prob");
    p->heads = nb_attr_int(ctx, "heads");
    return NB_OK;
}

#define ATTENTION_ATTRS                                                                                  \
    NB_ADEF_FLOAT("scale", 0), NB_ADEF_BOOL("causal", false), NB_ADEF_FLOAT("dropout_prob", 0),          \
        NB_ADEF_BOOL("is_test", false), NB_ADEF_INT("seed", 0), NB_ADEF_INT("heads", 0)

/* ---- scaled_dot_product_attention -------------------------------------------- */

static nb_status attention_infer(nb_op_ctx *ctx)
{
    qkv_dims d;
    nb_status st = check_qkv(ctx, &d);
    if (st) return st;
    const nb_var_info *q = nb_in_info(ctx, 0, 0);
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, q->shape, (size_t)(d.lead + 1) * sizeof *shape);
    shape[d.lead + 1] = d.Dv;
    set_out(ctx, 0, q->dtype, d.lead + 2, shape);
    set_out(ctx, 1, q->dtype, d.stat_ndim, d.stat);
    set_out(ctx, 2, NB_I64, 1, (int64_t[]){2});
    return NB_OK;
}

static const nb_op_def op_attention = {
    .name = "scaled_dot_product_attention",
    .batch = nb_batch_attention,
    .doc = "softmax(scale * Q K^T + Mask) V, blockwise (online softmax); LSE: each row's log-sum-exp; Key: the "
           "dropout stream",
    .inputs = {{"Q", 0}, {"K", 0}, {"V", 0}, {"Mask", NB_SLOT_OPTIONAL | NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}, {"LSE", 0}, {"Key", NB_SLOT_NO_GRAD}},
    .attrs = {ATTENTION_ATTRS},
    .infer = attention_infer,
    .params_size = sizeof(nb_attention_params),
    .params = attention_params,
    .flags = NB_OP_RANDOM | NB_OP_WRITES_ALL,
    .grad_uses_inputs = 0xf,
    .grad_uses_outputs = 0x7,
    .vjp = nb_attention_vjp,
    .jvp = nb_attention_jvp,
};

/* ---- scaled_dot_product_attention_grad ------------------------------------------
 *
 * (Q, K, V, Mask?, LSE, Key, DOut, Delta) -> DQ, DK, DV, the weights
 * recomputed blockwise as exp(score - LSE). Delta [..., T] is each row's
 * sum of DOut * Out less LSE's cotangent: the gradient of a score is then
 * weight * (DOut V^T - Delta). A function of its inputs as given (nothing is
 * recomputed from Q, K, V), so its own rules are exact. */

static nb_status attention_grad_infer(nb_op_ctx *ctx)
{
    qkv_dims dd;
    nb_status st = check_qkv(ctx, &dd);
    if (st) return st;
    const nb_var_info *q = nb_in_info(ctx, 0, 0), *lse = nb_in_info(ctx, 4, 0), *key = nb_in_info(ctx, 5, 0),
                      *d = nb_in_info(ctx, 6, 0), *delta = nb_in_info(ctx, 7, 0);
    int64_t oshape[NB_MAX_DIMS];
    memcpy(oshape, q->shape, (size_t)(dd.lead + 1) * sizeof *oshape);
    oshape[dd.lead + 1] = dd.Dv;
    bool ok = d->ndim == dd.lead + 2 && lse->ndim == dd.stat_ndim && delta->ndim == dd.stat_ndim;
    for (int i = 0; ok && i < dd.lead + 2; i++) ok = dim_match(d->shape[i], oshape[i]);
    for (int i = 0; ok && i < dd.stat_ndim; i++)
        ok = dim_match(lse->shape[i], dd.stat[i]) && dim_match(delta->shape[i], dd.stat[i]);
    if (!ok) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX], e[NB_SHAPE_STR_MAX], f[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: DOut %s must be %s, and LSE %s and Delta %s must be %s", ctx->label,
                        nb_info_shape(a, d), nb_shape_str(c, sizeof c, dd.lead + 2, oshape), nb_info_shape(b, lse),
                        nb_info_shape(e, delta), nb_shape_str(f, sizeof f, dd.stat_ndim, dd.stat));
    }
    if ((st = nb_check_same_dtype(ctx, "LSE", lse, "Q", q)) || (st = nb_check_same_dtype(ctx, "DOut", d, "Q", q)) ||
        (st = nb_check_same_dtype(ctx, "Delta", delta, "Q", q)))
        return st;
    if (key->dtype != NB_I64 || key->ndim != 1 || !dim_match(key->shape[0], 2)) {
        char a[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: Key must be int64 [2], got %s %s", ctx->label, nb_dtype_name(key->dtype),
                        nb_info_shape(a, key));
    }
    for (int s = 0; s < 3; s++) set_out(ctx, s, q->dtype, nb_in_info(ctx, s, 0)->ndim, nb_in_info(ctx, s, 0)->shape);
    return NB_OK;
}

static const nb_op_def op_attention_grad = {
    .name = "scaled_dot_product_attention_grad",
    .batch = nb_batch_attention,
    .doc = "DQ, DK, DV of scaled_dot_product_attention, its weights recomputed blockwise from LSE",
    .inputs = {{"Q", 0},
               {"K", 0},
               {"V", 0},
               {"Mask", NB_SLOT_OPTIONAL | NB_SLOT_NO_GRAD},
               {"LSE", 0},
               {"Key", NB_SLOT_NO_GRAD},
               {"DOut", 0},
               {"Delta", 0}},
    .outputs = {{"DQ", 0}, {"DK", 0}, {"DV", 0}},
    .attrs = {ATTENTION_ATTRS},
    .infer = attention_grad_infer,
    .params_size = sizeof(nb_attention_params),
    .params = attention_params,
    .grad_uses_inputs = 0xff,
    .vjp = nb_attention_grad_vjp,
    .jvp = nb_attention_grad_jvp,
    .flags = NB_OP_WRITES_ALL,
};

/* ---- the masks of the composite rules ------------------------------------------ */

/* attention_causal_bias(Q, K) -> [T, S]: 0 where key j <= query i, -inf
 * elsewhere. attention_dropout_mask(Q, K, Key) -> [..., T, S]: 1/(1-p) for
 * the weights the kernels keep, 0 for those they drop. Constants: neither
 * has a gradient. */
static nb_status causal_bias_infer(nb_op_ctx *ctx)
{
    const nb_var_info *q = nb_in_info(ctx, 0, 0), *k = nb_in_info(ctx, 1, 0);
    nb_status st;
    if ((st = nb_check_float(ctx, "Q", q)) || (st = nb_check_same_dtype(ctx, "K", k, "Q", q))) return st;
    if (q->ndim < 2 || k->ndim != q->ndim)
        return nb_error(NB_ERR_SHAPE, "%s: Q and K must have the same rank, at least 2", ctx->label);
    set_out(ctx, 0, q->dtype, 2, (int64_t[]){q->shape[q->ndim - 2], k->shape[k->ndim - 2]});
    return NB_OK;
}

static nb_status dropout_mask_infer(nb_op_ctx *ctx)
{
    nb_status st = causal_bias_infer(ctx);
    if (st) return st;
    const nb_var_info *q = nb_in_info(ctx, 0, 0), *k = nb_in_info(ctx, 1, 0), *key = nb_in_info(ctx, 2, 0);
    if (key->dtype != NB_I64) return nb_error(NB_ERR_DTYPE, "%s: Key must be int64", ctx->label);
    const int64_t heads = nb_attr_int(ctx, "heads");
    int64_t shape[NB_MAX_DIMS + 1];
    int nd = q->ndim - 2;
    memcpy(shape, q->shape, (size_t)nd * sizeof *shape);
    if (heads > 0) shape[nd++] = heads;
    shape[nd++] = q->shape[q->ndim - 2];
    shape[nd++] = k->shape[k->ndim - 2];
    if (nd > NB_MAX_DIMS)
        return nb_error(NB_ERR_SHAPE, "%s: the weights would have more than %d dims", ctx->label, NB_MAX_DIMS);
    set_out(ctx, 0, q->dtype, nd, shape);
    return check_attrs(ctx);
}

static const nb_op_def op_causal_bias = {
    .name = "attention_causal_bias",
    .batch = nb_batch_attention,
    .doc = "[T, S] of Q's dtype: 0 where key j <= query i, -inf elsewhere (the causal mask as a bias)",
    .inputs = {{"Q", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}, {"K", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY}},
    .outputs = {{"Out", 0}},
    .infer = causal_bias_infer,
    .flags = NB_OP_NOT_DIFFERENTIABLE | NB_OP_WRITES_ALL,
};

static const nb_op_def op_dropout_mask = {
    .name = "attention_dropout_mask",
    .batch = nb_batch_attention,
    .doc = "[..., T, S]: 1/(1-p) where scaled_dot_product_attention with this Key keeps a weight, 0 where it drops it",
    .inputs = {{"Q", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY},
               {"K", NB_SLOT_NO_GRAD | NB_SLOT_SHAPE_ONLY},
               {"Key", NB_SLOT_NO_GRAD}},
    .outputs = {{"Out", 0}},
    .attrs = {ATTENTION_ATTRS},
    .infer = dropout_mask_infer,
    .params_size = sizeof(nb_attention_params),
    .params = attention_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE | NB_OP_WRITES_ALL,
};

const nb_op_def *const nb_ops_attention[] = {&op_attention, &op_attention_grad, &op_causal_bias, &op_dropout_mask,
                                             NULL};
