/* scaled_dot_product_attention on the CPU: the forward pass with an online
 * softmax, the fused gradient, and the dropout mask of the composite rules.
 * The typed code is in attention_impl.h; this file works out the geometry
 * (pairs of batch and head, the mask's broadcast strides, the dropout
 * stream) and holds the kernels the registry runs. */

/* The row loops (exp, max, scaling) vectorise only at -O3 and when gcc may
 * treat FP operations as non-trapping (see unary.c); nothing here reads the
 * exception flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-trapping-math")
#endif

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include "../kernels.h"
#include "fastmath.h"
#include "gemm.h"
#include "simd.h"
#include "team.h"
#include "kernels/params/attention.h"
#include "nabla/device.h"
#include "nabla/kernel.h"

/* Queries and keys per block: a block of f32 scores is 16 KiB. */
#define BQ 64
#define BK 64
/* Below this many multiply-adds a call stays on one thread. */
#define ATT_PAR_MIN_WORK 200000.0

/* Pair bh (of batch and head) reads rows of Q, K and V and writes rows of
 * Out with row strides ldq (Q and K) and ldv (V and Out): D and Dv when
 * each pair's rows are a matrix of their own ([..., T, D]), H * D and H * Dv
 * when the heads sit side by side in each row ([..., T, H * D], the heads
 * attribute). */
typedef struct att_geom {
    int64_t bh, Tq, Sk, D, Dv; /* pairs of (batch, head), queries, keys, widths */
    int64_t H, ldq, ldv;       /* heads side by side (1: none), row strides */
    double scale, p;           /* the scores' factor; the dropout probability (0: none) */
    bool causal;
    uint64_t key, counter;   /* the dropout stream: weight x of the [bh, T, S] array is draw counter + x */
    const int64_t *mask_off; /* each pair's offset into the mask */
    int64_t mask_t, mask_s;  /* the mask's strides along queries and keys (0 where it broadcasts) */
    double work;             /* multiply-adds, to decide on threads */
} att_geom;

static inline int64_t att_q_off(const att_geom *g, int64_t bh) { return bh / g->H * g->Tq * g->ldq + bh % g->H * g->D; }
static inline int64_t att_k_off(const att_geom *g, int64_t bh) { return bh / g->H * g->Sk * g->ldq + bh % g->H * g->D; }
static inline int64_t att_v_off(const att_geom *g, int64_t bh)
{
    return bh / g->H * g->Sk * g->ldv + bh % g->H * g->Dv;
}
static inline int64_t att_o_off(const att_geom *g, int64_t bh)
{
    return bh / g->H * g->Tq * g->ldv + bh % g->H * g->Dv;
}

/* The forward's tensors: Q, K, V and the mask (NULL: none), as the
 * geometry lays them out, and the outputs Out and LSE ([bh, T]). */
typedef struct att_fwd_tensors {
    const void *q, *k, *v, *mask;
    void *out, *lse;
} att_fwd_tensors;

/* The backward's: the forward's inputs and its LSE, DOut and Delta (each
 * query row's DOut . Out, [bh, T]), and the gradients DQ, DK and DV. */
typedef struct att_bwd_tensors {
    const void *q, *k, *v, *mask, *lse, *dout, *delta;
    void *dq, *dk, *dv;
} att_bwd_tensors;

/* Queries [i0, i0 + nq) and keys [j0, j0 + nk) of pair bh. */
typedef struct att_block {
    int64_t bh, i0, nq, j0, nk;
} att_block;

#define T float
#define SFX f32
#define EXP nb_fast_expf
#define GEMM(...) nb_gemm_f32(&(nb_gemm_args_f32){__VA_ARGS__})
#include "attention_impl.h"
#undef T
#undef SFX
#undef EXP
#undef GEMM
#define T double
#define SFX f64
#define EXP exp
#define GEMM(...) nb_gemm_f64(&(nb_gemm_args_f64){__VA_ARGS__})
#include "attention_impl.h"
#undef T
#undef SFX
#undef EXP
#undef GEMM

/* The geometry of Q [..., T, D], K [..., S, D], V [..., S, Dv]; inference
 * has checked the shapes. */
static void geometry(const nb_kernel_ctx *k, att_geom *g)
{
    const nb_attention_params *prm = k->params;
    const nb_tensor *q = nb_kin(k, 0, 0), *key = nb_kin(k, 1, 0), *v = nb_kin(k, 2, 0);
    const int nd = q->ndim;
    if (v->ndim != nd) v = NULL; /* attention_dropout_mask: no V */
    memset(g, 0, sizeof *g);
    g->H = prm->heads > 0 ? prm->heads : 1;
    g->bh = g->H;
    for (int i = 0; i < nd - 2; i++) g->bh *= q->shape[i];
    g->Tq = q->shape[nd - 2];
    g->Sk = key->shape[nd - 2];
    g->ldq = q->shape[nd - 1];
    g->ldv = v ? v->shape[nd - 1] : 0;
    g->D = g->ldq / g->H;
    g->Dv = g->ldv / g->H;
    g->scale = prm->scale != 0 ? prm->scale : 1.0 / sqrt((double)(g->D > 0 ? g->D : 1));
    g->p = prm->dropout;
    g->causal = prm->causal;
    g->work = (double)g->bh * (double)g->Tq * (double)g->Sk * (double)(g->D + g->Dv);
}

/* Each pair's offset into a mask that broadcasts to [..., T, S] (aligned
 * at the right; a dim of 1 repeats). NULL and no mask when slot 3 is
 * empty; *failed on allocation failure. */
static const void *mask_layout(const nb_kernel_ctx *k, att_geom *g, int64_t **offs, bool *failed)
{
    *offs = NULL;
    *failed = false;
    if (!nb_khas_in(k, 3)) return NULL;
    /* The scores are [pairs..., T, S] with pairs = Q's leading dims, and
     * the heads after them when they sit side by side. */
    const nb_tensor *q = nb_kin(k, 0, 0), *m = nb_kin(k, 3, 0);
    int64_t dims[NB_MAX_DIMS + 1];
    int lead = q->ndim - 2;
    memcpy(dims, q->shape, (size_t)lead * sizeof *dims);
    if (((const nb_attention_params *)k->params)->heads > 0) dims[lead++] = g->H;
    const int nd = lead + 2, skip = nd - m->ndim;
    dims[lead] = g->Tq;
    dims[lead + 1] = g->Sk;
    int64_t stride[NB_MAX_DIMS + 1], st = 1;
    for (int i = nd - 1; i >= 0; i--) {
        const int64_t size = i >= skip ? m->shape[i - skip] : 1;
        stride[i] = size == 1 ? 0 : st;
        st *= size;
    }
    g->mask_t = stride[nd - 2];
    g->mask_s = stride[nd - 1];
    if (!(*offs = nb_malloc((size_t)(g->bh > 0 ? g->bh : 1) * sizeof **offs))) {
        *failed = true;
        return NULL;
    }
    for (int64_t bh = 0; bh < g->bh; bh++) {
        int64_t rest = bh, off = 0;
        for (int i = lead - 1; i >= 0; i--) {
            off += (rest % dims[i]) * stride[i];
            rest /= dims[i];
        }
        (*offs)[bh] = off;
    }
    g->mask_off = *offs;
    return nb_tensor_data(m);
}

static nb_status run_attention(const nb_kernel_ctx *k)
{
    att_geom g;
    geometry(k, &g);
    nb_tensor *out = nb_kout(k, 0, 0), *lse = nb_kout(k, 1, 0), *key = nb_kout(k, 2, 0);
    if (g.p > 0) {
        if (!k->rng) return nb_error(NB_ERR_STATE, "%s: no random generator was given", k->label);
        g.key = k->rng->key;
        g.counter = k->rng->counter;
        k->rng->counter += (uint64_t)(g.bh * g.Tq * g.Sk);
    }
    int64_t *keys = nb_tensor_data(key);
    keys[0] = (int64_t)g.key;
    keys[1] = (int64_t)g.counter;
    int64_t *offs;
    bool failed;
    const void *mask = mask_layout(k, &g, &offs, &failed);
    if (!failed) {
        const nb_tensor *q = nb_kin(k, 0, 0);
        const att_fwd_tensors t = {nb_tensor_data(q),
                                   nb_tensor_data(nb_kin(k, 1, 0)),
                                   nb_tensor_data(nb_kin(k, 2, 0)),
                                   mask,
                                   nb_tensor_data(out),
                                   nb_tensor_data(lse)};
        failed = q->dtype == NB_F32 ? !attention_forward_f32(&g, &t) : !attention_forward_f64(&g, &t);
    }
    nb_free(offs);
    return failed ? nb_error(NB_ERR_NOMEM, "%s: out of memory", k->label) : NB_OK;
}

/* The stream a forward run drew its dropout mask from (its Key output). */
static void stream_of(const nb_tensor *key, att_geom *g)
{
    const int64_t *kd = nb_tensor_data(key);
    g->key = (uint64_t)kd[0];
    g->counter = (uint64_t)kd[1];
}

/* Inputs: Q, K, V, Mask?, LSE, Key, DOut, Delta; outputs DQ, DK, DV. */
static nb_status run_attention_grad(const nb_kernel_ctx *k)
{
    att_geom g;
    geometry(k, &g);
    stream_of(nb_kin(k, 5, 0), &g);
    int64_t *offs;
    bool failed;
    const void *mask = mask_layout(k, &g, &offs, &failed);
    if (!failed) {
        void *in[8], *out[3];
        for (int s = 0; s < 8; s++) in[s] = s == 3 ? NULL : nb_tensor_data(nb_kin(k, s, 0));
        for (int s = 0; s < 3; s++) out[s] = nb_tensor_data(nb_kout(k, s, 0));
        const att_bwd_tensors t = {in[0], in[1], in[2], mask, in[4], in[6], in[7], out[0], out[1], out[2]};
        failed = nb_kin(k, 0, 0)->dtype == NB_F32 ? !attention_backward_f32(&g, &t) : !attention_backward_f64(&g, &t);
    }
    nb_free(offs);
    return failed ? nb_error(NB_ERR_NOMEM, "%s: out of memory", k->label) : NB_OK;
}

static nb_status run_dropout_mask(const nb_kernel_ctx *k)
{
    att_geom g;
    geometry(k, &g);
    stream_of(nb_kin(k, 2, 0), &g);
    nb_tensor *out = nb_kout(k, 0, 0);
    if (out->dtype == NB_F32) dropout_mask_f32(&g, nb_tensor_data(out));
    else dropout_mask_f64(&g, nb_tensor_data(out));
    return NB_OK;
}

static nb_status run_causal_bias(const nb_kernel_ctx *k)
{
    nb_tensor *out = nb_kout(k, 0, 0);
    const int64_t T = out->shape[0], S = out->shape[1];
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < S; j++) {
            const double v = j <= i ? 0 : -INFINITY;
            if (out->dtype == NB_F32) ((float *)nb_tensor_data(out))[i * S + j] = (float)v;
            else ((double *)nb_tensor_data(out))[i * S + j] = v;
        }
    return NB_OK;
}

#define KDEF(name, op_, fn) \
    static const nb_kernel_def name = {.op = op_, .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = fn}
KDEF(k_attention, "scaled_dot_product_attention", run_attention);
KDEF(k_attention_grad, "scaled_dot_product_attention_grad", run_attention_grad);
KDEF(k_dropout_mask, "attention_dropout_mask", run_dropout_mask);
KDEF(k_causal_bias, "attention_causal_bias", run_causal_bias);

const nb_kernel_def *const nb_cpu_kernels_attention[] = {&k_attention, &k_attention_grad, &k_dropout_mask,
                                                         &k_causal_bias, NULL};
