/* CPU kernels of matmul and fc. Both hand their products to the shared GEMM
 * and never copy an operand: inputs arrive contiguous, so every batch of a
 * batched product is already a matrix with a known row stride. */
#include <math.h>
#include <string.h>
#include "../kernels.h"
#include "gemm.h"
#include "linalg.h"
#include "simd.h"
#include "team.h"

/* Below this many multiply-adds a loop over batches stays on one thread,
 * and batches this big or bigger are left to the GEMM's own threads. */
#define BATCH_PAR_MIN 32768
#define BATCH_GEMM_BIG (128 * 128 * 128)
#define EPI_PAR_MIN 32768

/* ---- dims ------------------------------------------------------------------ */

/* The shapes are formatted only on failure: this runs for every matmul,
 * eager ones included, where formatting them cost more than the check. */
static nb_status dims_error(const char *label, int xnd, const int64_t *xsh, const char *join, int ynd,
                            const int64_t *ysh, const char *what, const char *how)
{
    char xs[NB_SHAPE_STR_MAX], ys[NB_SHAPE_STR_MAX];
    nb_shape_str(xs, sizeof xs, xnd, xsh);
    nb_shape_str(ys, sizeof ys, ynd, ysh);
    return nb_error(NB_ERR_SHAPE, "%s: X has shape %s %s Y has shape %s: %s%s", label, xs, join, ys, what, how);
}

nb_status nb_matmul_dims_shapes(const char *label, int xnd, const int64_t *xsh, int ynd, const int64_t *ysh,
                                bool transpose_x, bool transpose_y, nb_matmul_dims *d)
{
    if (xnd < 1 || ynd < 1) return dims_error(label, xnd, xsh, "and", ynd, ysh, "both must have at least 1 dim", "");
    memset(d, 0, sizeof *d);
    d->x_vec = xnd == 1;
    d->y_vec = ynd == 1;
    d->tx = transpose_x && !d->x_vec;
    d->ty = transpose_y && !d->y_vec;
    int64_t kx, ky;
    if (d->x_vec) {
        d->M = 1;
        kx = xsh[0];
    } else {
        int64_t r = xsh[xnd - 2], c = xsh[xnd - 1];
        d->M = d->tx ? c : r;
        kx = d->tx ? r : c;
    }
    if (d->y_vec) {
        d->N = 1;
        ky = ysh[0];
    } else {
        int64_t r = ysh[ynd - 2], c = ysh[ynd - 1];
        ky = d->ty ? c : r;
        d->N = d->ty ? r : c;
    }
    if (kx != ky && kx != -1 && ky != -1) {
        const char *how = d->tx && d->ty ? " (both transposed)"
            : d->tx                      ? " (X transposed)"
            : d->ty                      ? " (Y transposed)"
                                         : "";
        return dims_error(label, xnd, xsh, "but", ynd, ysh, "inner dimensions differ", how);
    }
    d->K = kx != -1 ? kx : ky;
    int xb = xnd > 2 ? xnd - 2 : 0, yb = ynd > 2 ? ynd - 2 : 0;
    if (nb_broadcast_shapes(xb, xsh, yb, ysh, &d->batch_ndim, d->batch))
        return dims_error(label, xnd, xsh, "but", ynd, ysh, "batch dimensions do not broadcast", "");
    return NB_OK;
}

void nb_matmul_out_shape(const nb_matmul_dims *d, int *ndim, int64_t *shape)
{
    int n = d->batch_ndim;
    memcpy(shape, d->batch, (size_t)n * sizeof *shape);
    if (!d->x_vec) shape[n++] = d->M;
    if (!d->y_vec) shape[n++] = d->N;
    *ndim = n;
}

/* Copies a result computed aside (because Out shares storage with an
 * operand) into Out. */
static nb_status finish_aside(nb_tensor *out, nb_tensor *dst)
{
    if (dst == out) return NB_OK;
    memcpy(nb_tensor_data(out), nb_tensor_data(dst), (size_t)nb_tensor_numel(out) * nb_dtype_size(out->dtype));
    nb_tensor_release(dst);
    return NB_OK;
}

/* ---- matmul ------------------------------------------------------------------- */

/* Element offsets of each batch's matrix in X, Y and Out: batch dims of an
 * operand line up with the last ones of the broadcast batch, and a dim it
 * broadcasts along (size 1, or missing) has stride 0. */
typedef struct batch_walk {
    int nd;
    int64_t shape[NB_MAX_DIMS], xs[NB_MAX_DIMS], ys[NB_MAX_DIMS];
} batch_walk;

static void batch_strides(const nb_tensor *t, int64_t mat, const batch_walk *w, int64_t *strides)
{
    int tb = t->ndim > 2 ? t->ndim - 2 : 0;
    int64_t s = mat;
    for (int d = w->nd - 1; d >= 0; d--) {
        int j = d - (w->nd - tb);
        if (j < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = t->shape[j] == 1 ? 0 : s;
        s *= t->shape[j];
    }
}

static void batch_offsets(const batch_walk *w, int64_t b, int64_t *xo, int64_t *yo)
{
    int64_t x = 0, y = 0;
    for (int d = w->nd - 1; d >= 0; d--) {
        int64_t i = b % w->shape[d];
        b /= w->shape[d];
        x += i * w->xs[d];
        y += i * w->ys[d];
    }
    *xo = x;
    *yo = y;
}

/* A matmul's operands as stored: X and Y with their row strides, and Out. */
typedef struct matmul_operands {
    const void *x;
    int64_t lda;
    const void *y;
    int64_t ldb;
    void *out;
} matmul_operands;

#define DEF_MATMUL(NAME, T, GEMM, ARGS)                                                                  \
    typedef struct NAME##_job {                                                                    \
        const nb_matmul_dims *d;                                                                   \
        const batch_walk *w;                                                                       \
        const matmul_operands *t;                                                                  \
        T alpha;                                                                                   \
    } NAME##_job;                                                                                  \
    static void NAME##_batches(void *arg, int64_t lo, int64_t hi)                                  \
    {                                                                                              \
        const NAME##_job *job = arg;                                                               \
        const nb_matmul_dims *d = job->d;                                                          \
        const T *X = job->t->x, *Y = job->t->y, alpha = job->alpha;                                \
        T *Out = job->t->out;                                                                      \
        const int64_t lda = job->t->lda, ldb = job->t->ldb;                                        \
        int64_t M = d->M, N = d->N, K = d->K;                                                      \
        for (int64_t b = lo; b < hi; b++) {                                                        \
            int64_t xo, yo;                                                                        \
            batch_offsets(job->w, b, &xo, &yo);                                                    \
            GEMM(&(ARGS){.ta = d->tx, .tb = d->ty, .M = M, .N = N, .K = K, .alpha = alpha, .A = X + xo, .lda = lda,    \
                         .B = Y + yo, .ldb = ldb, .C = Out + b * M * N, .ldc = N});                                    \
        }                                                                                          \
    }                                                                                              \
    static void NAME(const nb_matmul_dims *d, const batch_walk *w, int64_t nbatch,                 \
                     const matmul_operands *t, T alpha)                                            \
    {                                                                                              \
        double work = (double)d->M * (double)d->N * (double)d->K;                                  \
        bool par = nbatch > 1 && work < BATCH_GEMM_BIG && work * (double)nbatch >= BATCH_PAR_MIN;  \
        NAME##_job job = {d, w, t, alpha};                                                         \
        nb_team_for(nbatch, par, NAME##_batches, &job);                                            \
    }

DEF_MATMUL(matmul_f32, float, nb_gemm_f32, nb_gemm_args_f32)
DEF_MATMUL(matmul_f64, double, nb_gemm_f64, nb_gemm_args_f64)

static nb_status run_matmul(const nb_kernel_ctx *k)
{
    const nb_matmul_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *y = nb_kin(k, 1, 0), *out = nb_kout(k, 0, 0);
    nb_matmul_dims d;
    nb_status st = nb_matmul_dims_of(k->label, x, y, p->transpose_x, p->transpose_y, &d);
    if (st) return st;
    if (x->dtype != y->dtype || out->dtype != x->dtype || (x->dtype != NB_F32 && x->dtype != NB_F64))
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for X of dtype %s and Y of dtype %s", k->label,
                        nb_dtype_name(x->dtype), nb_dtype_name(y->dtype));
    int64_t nbatch = nb_shape_numel(d.batch_ndim, d.batch);
    if (nbatch == 0 || d.M == 0 || d.N == 0) return NB_OK;
    /* Written over one of its own operands: compute aside, then copy. */
    nb_tensor *dst = out;
    if (out->storage == x->storage || out->storage == y->storage)
        if ((st = nb_tensor_new(&dst, out->dtype, out->ndim, out->shape))) return st;

    /* Row strides as stored: a 1-D X is one row of K, a 1-D Y one column. */
    int64_t lda = d.x_vec ? d.K : x->shape[x->ndim - 1];
    int64_t ldb = d.y_vec ? 1 : y->shape[y->ndim - 1];
    batch_walk w = {.nd = d.batch_ndim};
    memcpy(w.shape, d.batch, sizeof w.shape);
    batch_strides(x, d.M * d.K, &w, w.xs);
    batch_strides(y, d.K * d.N, &w, w.ys);

    /* [B..., M, K] x [K, N]: the batches of X are consecutive rows of one
     * tall matrix, and one big GEMM beats many small ones. */
    nb_matmul_dims dd = d;
    if (y->ndim <= 2 && !d.tx && !d.x_vec && nbatch > 1) {
        dd.M = d.M * nbatch;
        w.nd = 0;
        nbatch = 1;
    }
    const matmul_operands t = {nb_tensor_data(x), lda, nb_tensor_data(y), ldb, nb_tensor_data(dst)};
    if (x->dtype == NB_F32) matmul_f32(&dd, &w, nbatch, &t, (float)p->alpha);
    else matmul_f64(&dd, &w, nbatch, &t, p->alpha);
    return finish_aside(out, dst);
}

/* ---- fc ------------------------------------------------------------------------------ */

/* Out = act(Out + Bias) row by row, after the GEMM wrote Input x W into Out:
 * one more pass over Out while it is still warm in cache. */
#define DEF_FC_EPILOGUE(NAME, T, EXP, TANH)                                                        \
    typedef struct NAME##_job {                                                                    \
        T *out;                                                                                    \
        const T *bias;                                                                             \
        int64_t N;                                                                                 \
        nb_fc_act act;                                                                             \
    } NAME##_job;                                                                                  \
    NB_SIMD_CLONES static void NAME##_rows(void *arg, int64_t lo, int64_t hi)                      \
    {                                                                                              \
        const NAME##_job *job = arg;                                                               \
        T *out = job->out;                                                                         \
        const T *bias = job->bias;                                                                 \
        const int64_t N = job->N;                                                                  \
        const nb_fc_act act = job->act;                                                            \
        for (int64_t r = lo; r < hi; r++) {                                                        \
            T *o = out + r * N;                                                                    \
            if (bias)                                                                              \
                for (int64_t j = 0; j < N; j++) o[j] += bias[j];                                   \
            switch (act) {                                                                         \
            case NB_FC_RELU:                                                                       \
                for (int64_t j = 0; j < N; j++) o[j] = o[j] < 0 ? 0 : o[j];                        \
                break;                                                                             \
            case NB_FC_SIGMOID:                                                                    \
                for (int64_t j = 0; j < N; j++) o[j] = 1 / (1 + EXP(-o[j]));                       \
                break;                                                                             \
            case NB_FC_TANH:                                                                       \
                for (int64_t j = 0; j < N; j++) o[j] = TANH(o[j]);                                 \
                break;                                                                             \
            default: break;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void NAME(T *out, const T *bias, int64_t rows, int64_t N, nb_fc_act act)                \
    {                                                                                              \
        NAME##_job job = {out, bias, N, act};                                                      \
        nb_team_for(rows, rows > 1 && rows * N >= EPI_PAR_MIN, NAME##_rows, &job);                 \
    }

DEF_FC_EPILOGUE(fc_epilogue_f32, float, expf, tanhf)
DEF_FC_EPILOGUE(fc_epilogue_f64, double, exp, tanh)

static nb_status run_fc(const nb_kernel_ctx *k)
{
    const nb_fc_params *p = k->params;
    nb_tensor *in = nb_kin(k, 0, 0), *w = nb_kin(k, 1, 0), *out = nb_kout(k, 0, 0);
    nb_tensor *bias = nb_khas_in(k, 2) ? nb_kin(k, 2, 0) : NULL;
    int64_t ncd = p->in_num_col_dims;
    nb_fc_act act = p->act;
    if (ncd < 1 || ncd >= in->ndim || w->ndim != 2) return nb_error(NB_ERR_SHAPE, "%s: bad Input or W rank", k->label);
    int64_t rows = nb_shape_numel((int)ncd, in->shape);
    int64_t K = nb_shape_numel(in->ndim - (int)ncd, in->shape + ncd), N = w->shape[1];
    if (K != w->shape[0] || nb_tensor_numel(out) != rows * N || (bias && nb_tensor_numel(bias) != N))
        return nb_error(NB_ERR_SHAPE, "%s: Input, W, Bias and Out do not fit together", k->label);
    if (rows == 0 || N == 0) return NB_OK;
    nb_tensor *dst = out;
    if (out->storage == in->storage || out->storage == w->storage || (bias && out->storage == bias->storage)) {
        nb_status st = nb_tensor_new(&dst, out->dtype, out->ndim, out->shape);
        if (st) return st;
    }
    if (in->dtype == NB_F32 && w->dtype == NB_F32 && out->dtype == NB_F32 && (!bias || bias->dtype == NB_F32)) {
        nb_gemm_f32(&(nb_gemm_args_f32){.M = rows,
                                        .N = N,
                                        .K = K,
                                        .alpha = 1.0f,
                                        .A = nb_tensor_data(in),
                                        .lda = K,
                                        .B = nb_tensor_data(w),
                                        .ldb = N,
                                        .C = nb_tensor_data(dst),
                                        .ldc = N});
        fc_epilogue_f32(nb_tensor_data(dst), bias ? nb_tensor_data(bias) : NULL, rows, N, act);
    } else if (in->dtype == NB_F64 && w->dtype == NB_F64 && out->dtype == NB_F64 && (!bias || bias->dtype == NB_F64)) {
        nb_gemm_f64(&(nb_gemm_args_f64){.M = rows,
                                        .N = N,
                                        .K = K,
                                        .alpha = 1.0,
                                        .A = nb_tensor_data(in),
                                        .lda = K,
                                        .B = nb_tensor_data(w),
                                        .ldb = N,
                                        .C = nb_tensor_data(dst),
                                        .ldc = N});
        fc_epilogue_f64(nb_tensor_data(dst), bias ? nb_tensor_data(bias) : NULL, rows, N, act);
    } else {
        if (dst != out) nb_tensor_release(dst);
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for Input of dtype %s and W of dtype %s", k->label,
                        nb_dtype_name(in->dtype), nb_dtype_name(w->dtype));
    }
    return finish_aside(out, dst);
}

/* ---- matmul_sgd ----------------------------------------------------------------------- */

/* Param += (-LearningRate * alpha) * op(X) @ op(Y): the GEMM's beta = 1. */
static nb_status run_matmul_sgd(const nb_kernel_ctx *k)
{
    const nb_matmul_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *y = nb_kin(k, 1, 0), *param = nb_kin(k, 2, 0), *lr = nb_kin(k, 3, 0);
    nb_tensor *out = nb_kout(k, 0, 0);
    nb_matmul_dims d;
    nb_status st = nb_matmul_dims_of(k->label, x, y, p->transpose_x, p->transpose_y, &d);
    if (st) return st;
    if (x->ndim != 2 || y->ndim != 2 || x->dtype != y->dtype || param->dtype != x->dtype ||
        (x->dtype != NB_F32 && x->dtype != NB_F64) || out->storage != param->storage || out->dtype != param->dtype ||
        param->ndim != 2 || param->shape[0] != d.M || param->shape[1] != d.N)
        return nb_error(NB_ERR_ARG, "%s: needs float matrices X, Y and Param of the product's shape, updated in place",
                        k->label);
    if (param->storage == x->storage || param->storage == y->storage)
        return nb_error(NB_ERR_ARG, "%s: Param is also a factor of the product", k->label);
    if (nb_tensor_numel(lr) != 1)
        return nb_error(NB_ERR_SHAPE, "%s: LearningRate must hold one element, it holds %lld", k->label,
                        (long long)nb_tensor_numel(lr));
    const double step = -nb_tensor_get(lr, 0) * p->alpha;
    int64_t lda = x->shape[1], ldb = y->shape[1];
    if (x->dtype == NB_F32)
        nb_gemm_f32(&(nb_gemm_args_f32){.ta = d.tx,
                                        .tb = d.ty,
                                        .M = d.M,
                                        .N = d.N,
                                        .K = d.K,
                                        .alpha = (float)step,
                                        .A = nb_tensor_data(x),
                                        .lda = lda,
                                        .B = nb_tensor_data(y),
                                        .ldb = ldb,
                                        .beta = 1.0f,
                                        .C = nb_tensor_data(out),
                                        .ldc = d.N});
    else
        nb_gemm_f64(&(nb_gemm_args_f64){.ta = d.tx,
                                        .tb = d.ty,
                                        .M = d.M,
                                        .N = d.N,
                                        .K = d.K,
                                        .alpha = step,
                                        .A = nb_tensor_data(x),
                                        .lda = lda,
                                        .B = nb_tensor_data(y),
                                        .ldb = ldb,
                                        .beta = 1.0,
                                        .C = nb_tensor_data(out),
                                        .ldc = d.N});
    return NB_OK;
}

/* ---- the table ------------------------------------------------------------------------ */

static const nb_kernel_def k_matmul = {
    .op = "matmul", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_matmul};
static const nb_kernel_def k_fc = {
    .op = "fc", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_fc};

static const nb_kernel_def k_matmul_sgd = {
    .op = "matmul_sgd", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_matmul_sgd};

const nb_kernel_def *const nb_cpu_kernels_linalg[] = {&k_matmul, &k_matmul_sgd, &k_fc, NULL};
