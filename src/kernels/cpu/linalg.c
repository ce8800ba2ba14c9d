/* CPU kernels of matmul and fc. Both hand their products to the shared GEMM
 * and never copy an operand: inputs arrive contiguous, so every batch of a
 * batched product is already a matrix with a known row stride. */
#include <math.h>
#include <string.h>
#include "../kernels.h"
#include "gemm.h"
#include "linalg.h"

/* Below this many multiply-adds a loop over batches stays on one thread,
 * and batches this big or bigger are left to the GEMM's own threads. */
#define BATCH_PAR_MIN 32768
#define BATCH_GEMM_BIG (128 * 128 * 128)
#define EPI_PAR_MIN 32768

/* ---- dims ------------------------------------------------------------------ */

/* The shapes are formatted only on failure: this runs for every matmul,
 * eager ones included, where formatting them cost more than the check. */
static nb_status dims_error(const char *label, const nb_var_info *x, const char *join, const nb_var_info *y,
                            const char *what, const char *how)
{
    char xs[NB_SHAPE_STR_MAX], ys[NB_SHAPE_STR_MAX];
    nb_shape_str(xs, sizeof xs, x->ndim, x->shape);
    nb_shape_str(ys, sizeof ys, y->ndim, y->shape);
    return nb_error(NB_ERR_SHAPE, "%s: X has shape %s %s Y has shape %s: %s%s", label, xs, join, ys, what, how);
}

nb_status nb_matmul_dims_of(const char *label, const nb_var_info *x, const nb_var_info *y, bool transpose_x,
                            bool transpose_y, nb_matmul_dims *d)
{
    if (x->ndim < 1 || y->ndim < 1) return dims_error(label, x, "and", y, "both must have at least 1 dim", "");
    memset(d, 0, sizeof *d);
    d->x_vec = x->ndim == 1;
    d->y_vec = y->ndim == 1;
    d->tx = transpose_x && !d->x_vec;
    d->ty = transpose_y && !d->y_vec;
    int64_t kx, ky;
    if (d->x_vec) {
        d->M = 1;
        kx = x->shape[0];
    } else {
        int64_t r = x->shape[x->ndim - 2], c = x->shape[x->ndim - 1];
        d->M = d->tx ? c : r;
        kx = d->tx ? r : c;
    }
    if (d->y_vec) {
        d->N = 1;
        ky = y->shape[0];
    } else {
        int64_t r = y->shape[y->ndim - 2], c = y->shape[y->ndim - 1];
        ky = d->ty ? c : r;
        d->N = d->ty ? r : c;
    }
    if (kx != ky && kx != -1 && ky != -1) {
        const char *how = d->tx && d->ty ? " (both transposed)" : d->tx ? " (X transposed)"
                          : d->ty        ? " (Y transposed)"
                                         : "";
        return dims_error(label, x, "but", y, "inner dimensions differ", how);
    }
    d->K = kx != -1 ? kx : ky;
    int xb = x->ndim > 2 ? x->ndim - 2 : 0, yb = y->ndim > 2 ? y->ndim - 2 : 0;
    if (nb_broadcast_shapes(xb, x->shape, yb, y->shape, &d->batch_ndim, d->batch))
        return dims_error(label, x, "but", y, "batch dimensions do not broadcast", "");
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

static nb_var_info info_of(const nb_tensor *t)
{
    nb_var_info v = {.dtype = t->dtype, .ndim = t->ndim};
    memcpy(v.shape, t->shape, sizeof v.shape);
    return v;
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

#ifdef NABLA_HAVE_OPENMP
#define LA_PARALLEL_FOR _Pragma("omp parallel for schedule(static) if (par_)")
#else
#define LA_PARALLEL_FOR
#endif

#define DEF_MATMUL(NAME, T, GEMM)                                                                  \
    static void NAME(const nb_matmul_dims *d, const batch_walk *w, int64_t nbatch, const T *X,     \
                     int64_t lda, const T *Y, int64_t ldb, T *Out, T alpha)                        \
    {                                                                                              \
        int64_t M = d->M, N = d->N, K = d->K;                                                      \
        double work = (double)M * (double)N * (double)K;                                           \
        bool par_ = nbatch > 1 && work < BATCH_GEMM_BIG && work * (double)nbatch >= BATCH_PAR_MIN;  \
        (void)par_;                                                                                \
        LA_PARALLEL_FOR                                                                            \
        for (int64_t b = 0; b < nbatch; b++) {                                                     \
            int64_t xo, yo;                                                                        \
            batch_offsets(w, b, &xo, &yo);                                                         \
            GEMM(d->tx, d->ty, M, N, K, alpha, X + xo, lda, Y + yo, ldb, 0, Out + b * M * N, N);   \
        }                                                                                          \
    }

DEF_MATMUL(matmul_f32, float, nb_gemm_f32)
DEF_MATMUL(matmul_f64, double, nb_gemm_f64)

nb_status nb_cpu_matmul(nb_op_ctx *ctx)
{
    nb_tensor *x = nb_in(ctx, 0, 0), *y = nb_in(ctx, 1, 0), *out = nb_out(ctx, 0, 0);
    nb_var_info xi = info_of(x), yi = info_of(y);
    nb_matmul_dims d;
    nb_status st = nb_matmul_dims_of(ctx->label, &xi, &yi, nb_attr_bool(ctx, "transpose_x"),
                                     nb_attr_bool(ctx, "transpose_y"), &d);
    if (st) return st;
    if (x->dtype != y->dtype || out->dtype != x->dtype || (x->dtype != NB_F32 && x->dtype != NB_F64))
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for X of dtype %s and Y of dtype %s", ctx->label,
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
    if (x->dtype == NB_F32)
        matmul_f32(&dd, &w, nbatch, nb_tensor_data(x), lda, nb_tensor_data(y), ldb, nb_tensor_data(dst),
                   (float)nb_attr_float(ctx, "alpha"));
    else
        matmul_f64(&dd, &w, nbatch, nb_tensor_data(x), lda, nb_tensor_data(y), ldb, nb_tensor_data(dst),
                   nb_attr_float(ctx, "alpha"));
    return finish_aside(out, dst);
}

/* ---- fc ------------------------------------------------------------------------------ */

bool nb_fc_act_parse(const char *name, nb_fc_act *act)
{
    static const char *const names[] = {"", "relu", "sigmoid", "tanh"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) {
            *act = (nb_fc_act)i;
            return true;
        }
    return false;
}

/* Out = act(Out + Bias) row by row, after the GEMM wrote Input x W into Out:
 * one more pass over Out while it is still warm in cache. */
#define DEF_FC_EPILOGUE(NAME, T, EXP, TANH)                                                        \
    static void NAME(T *out, const T *bias, int64_t rows, int64_t N, nb_fc_act act)                \
    {                                                                                              \
        bool par_ = rows > 1 && rows * N >= EPI_PAR_MIN;                                           \
        (void)par_;                                                                                \
        LA_PARALLEL_FOR                                                                            \
        for (int64_t r = 0; r < rows; r++) {                                                       \
            T *o = out + r * N;                                                                    \
            if (bias)                                                                              \
                for (int64_t j = 0; j < N; j++) o[j] += bias[j];                                   \
            switch (act) {                                                                         \
            case NB_FC_RELU:                                                                       \
                for (int64_t j = 0; j < N; j++) o[j] = o[j] > 0 ? o[j] : 0;                        \
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
    }

DEF_FC_EPILOGUE(fc_epilogue_f32, float, expf, tanhf)
DEF_FC_EPILOGUE(fc_epilogue_f64, double, exp, tanh)

nb_status nb_cpu_fc(nb_op_ctx *ctx)
{
    nb_tensor *in = nb_in(ctx, 0, 0), *w = nb_in(ctx, 1, 0), *out = nb_out(ctx, 0, 0);
    nb_tensor *bias = nb_has_in(ctx, 2) ? nb_in(ctx, 2, 0) : NULL;
    int64_t ncd = nb_attr_int(ctx, "in_num_col_dims");
    nb_fc_act act;
    if (!nb_fc_act_parse(nb_attr_string(ctx, "activation"), &act))
        return nb_error(NB_ERR_ARG, "%s: unknown activation \"%s\"", ctx->label, nb_attr_string(ctx, "activation"));
    if (ncd < 1 || ncd >= in->ndim || w->ndim != 2)
        return nb_error(NB_ERR_SHAPE, "%s: bad Input or W rank", ctx->label);
    int64_t rows = nb_shape_numel((int)ncd, in->shape);
    int64_t K = nb_shape_numel(in->ndim - (int)ncd, in->shape + ncd), N = w->shape[1];
    if (K != w->shape[0] || nb_tensor_numel(out) != rows * N || (bias && nb_tensor_numel(bias) != N))
        return nb_error(NB_ERR_SHAPE, "%s: Input, W, Bias and Out do not fit together", ctx->label);
    if (rows == 0 || N == 0) return NB_OK;
    nb_tensor *dst = out;
    if (out->storage == in->storage || out->storage == w->storage || (bias && out->storage == bias->storage)) {
        nb_status st = nb_tensor_new(&dst, out->dtype, out->ndim, out->shape);
        if (st) return st;
    }
    if (in->dtype == NB_F32 && w->dtype == NB_F32 && out->dtype == NB_F32 && (!bias || bias->dtype == NB_F32)) {
        nb_gemm_f32(false, false, rows, N, K, 1.0f, nb_tensor_data(in), K, nb_tensor_data(w), N, 0.0f,
                    nb_tensor_data(dst), N);
        fc_epilogue_f32(nb_tensor_data(dst), bias ? nb_tensor_data(bias) : NULL, rows, N, act);
    } else if (in->dtype == NB_F64 && w->dtype == NB_F64 && out->dtype == NB_F64 &&
               (!bias || bias->dtype == NB_F64)) {
        nb_gemm_f64(false, false, rows, N, K, 1.0, nb_tensor_data(in), K, nb_tensor_data(w), N, 0.0,
                    nb_tensor_data(dst), N);
        fc_epilogue_f64(nb_tensor_data(dst), bias ? nb_tensor_data(bias) : NULL, rows, N, act);
    } else {
        if (dst != out) nb_tensor_release(dst);
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for Input of dtype %s and W of dtype %s", ctx->label,
                        nb_dtype_name(in->dtype), nb_dtype_name(w->dtype));
    }
    return finish_aside(out, dst);
}

/* TRANSITION: filled as the family's kernels move to the registry. */
const nb_kernel_def *const nb_cpu_kernels_linalg[] = {NULL};
