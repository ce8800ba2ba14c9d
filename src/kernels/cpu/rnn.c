/* CPU kernels of the recurrent family: lstm_cell and lstm_cell_grad
 * (src/ops/rnn.c has the math). Rows of H elements, one gate after another
 * in a row of Gates; each row's loops are AVX2 clones (simd.h), with the
 * exp and tanh of fastmath.h for float, as the unary kernels use, and libm's
 * for double; rows split over the team when there are many. Inputs and
 * outputs never share memory (the ops are not NB_OP_INPLACE): restrict
 * lets the loops vectorise, which they did not with seven streams that
 * might alias. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math") /* see unary.c */
#endif

#include <math.h>
#include "../kernels.h"
#include "broadcast.h"
#include "fastmath.h"
#include "simd.h"
#include "team.h"

#define SIGMOID_f32(v) (1.0f / (1.0f + nb_fast_expf(-(v))))
#define TANH_f32(v) nb_fast_tanhf(v)
#define SIGMOID_f64(v) (1.0 / (1.0 + exp(-(v))))
#define TANH_f64(v) tanh(v)

/* Forward: h = o tanh(c'), c' = f c + i g, over one row. */
#define CELL_ROW(T, S)                                                                            \
    NB_SIMD_CLONES static void cell_row_##S(int64_t h, const T *restrict gates, const T *restrict c,   \
                                            T *restrict hout, T *restrict cout)                   \
    {                                                                                             \
        const T *restrict gi = gates, *restrict gf = gates + h, *restrict gg = gates + 2 * h;     \
        const T *restrict go = gates + 3 * h;                                                     \
        for (int64_t j = 0; j < h; j++) {                                                         \
            T i = SIGMOID_##S(gi[j]), f = SIGMOID_##S(gf[j]), g = TANH_##S(gg[j]);                \
            T o = SIGMOID_##S(go[j]);                                                             \
            T c1 = f * c[j] + i * g;                                                              \
            cout[j] = c1;                                                                         \
            hout[j] = o * TANH_##S(c1);                                                           \
        }                                                                                         \
    }

/* Backward, over one row: with t = tanh(c') and s = dc' + dh o (1 - t^2),
 * dgates = [s g i(1-i), s c f(1-f), s i (1-g^2), dh t o(1-o)], dc = s f. */
#define CELL_GRAD_ROW(T, S)                                                                       \
    NB_SIMD_CLONES static void cell_grad_row_##S(int64_t h, const T *restrict gates, const T *restrict c, \
                                                 const T *restrict cout, const T *restrict dh,    \
                                                 const T *restrict dcout, T *restrict dgates,     \
                                                 T *restrict dc)                                  \
    {                                                                                             \
        const T *restrict gi = gates, *restrict gf = gates + h, *restrict gg = gates + 2 * h;     \
        const T *restrict go = gates + 3 * h;                                                     \
        for (int64_t j = 0; j < h; j++) {                                                         \
            T i = SIGMOID_##S(gi[j]), f = SIGMOID_##S(gf[j]), g = TANH_##S(gg[j]);                \
            T o = SIGMOID_##S(go[j]), t = TANH_##S(cout[j]);                                      \
            T s = dcout[j] + dh[j] * o * ((T)1 - t * t);                                          \
            dgates[j] = s * g * (i * ((T)1 - i));                                                 \
            dgates[h + j] = s * c[j] * (f * ((T)1 - f));                                          \
            dgates[2 * h + j] = s * i * ((T)1 - g * g);                                           \
            dgates[3 * h + j] = dh[j] * t * (o * ((T)1 - o));                                     \
            dc[j] = s * f;                                                                        \
        }                                                                                         \
    }

CELL_ROW(float, f32)
CELL_ROW(double, f64)
CELL_GRAD_ROW(float, f32)
CELL_GRAD_ROW(double, f64)

typedef struct cell_job {
    const nb_kernel_ctx *k;
    int64_t h;
} cell_job;

#define ROW(t, r, h, w) ((char *)nb_tensor_data(t) + (size_t)((r) * (w) * (h)) * nb_dtype_size((t)->dtype))

static void cell_rows(void *arg, int64_t lo, int64_t hi)
{
    const cell_job *j = arg;
    const nb_kernel_ctx *k = j->k;
    nb_tensor *g = nb_kin(k, 0, 0), *c = nb_kin(k, 1, 0), *ho = nb_kout(k, 0, 0), *co = nb_kout(k, 1, 0);
    for (int64_t r = lo; r < hi; r++) {
        if (g->dtype == NB_F32)
            cell_row_f32(j->h, (const float *)ROW(g, r, j->h, 4), (const float *)ROW(c, r, j->h, 1),
                         (float *)ROW(ho, r, j->h, 1), (float *)ROW(co, r, j->h, 1));
        else
            cell_row_f64(j->h, (const double *)ROW(g, r, j->h, 4), (const double *)ROW(c, r, j->h, 1),
                         (double *)ROW(ho, r, j->h, 1), (double *)ROW(co, r, j->h, 1));
    }
}

static void cell_grad_rows(void *arg, int64_t lo, int64_t hi)
{
    const cell_job *j = arg;
    const nb_kernel_ctx *k = j->k;
    nb_tensor *g = nb_kin(k, 0, 0), *c = nb_kin(k, 1, 0), *co = nb_kin(k, 2, 0), *dh = nb_kin(k, 3, 0),
              *dco = nb_kin(k, 4, 0), *dg = nb_kout(k, 0, 0), *dc = nb_kout(k, 1, 0);
    const int64_t h = j->h;
    for (int64_t r = lo; r < hi; r++) {
        if (g->dtype == NB_F32)
            cell_grad_row_f32(h, (const float *)ROW(g, r, h, 4), (const float *)ROW(c, r, h, 1),
                              (const float *)ROW(co, r, h, 1), (const float *)ROW(dh, r, h, 1),
                              (const float *)ROW(dco, r, h, 1), (float *)ROW(dg, r, h, 4), (float *)ROW(dc, r, h, 1));
        else
            cell_grad_row_f64(h, (const double *)ROW(g, r, h, 4), (const double *)ROW(c, r, h, 1),
                              (const double *)ROW(co, r, h, 1), (const double *)ROW(dh, r, h, 1),
                              (const double *)ROW(dco, r, h, 1), (double *)ROW(dg, r, h, 4),
                              (double *)ROW(dc, r, h, 1));
    }
}

/* Rows and their width H from C; the op's inference checked the shapes. */
static nb_status run_cell(const nb_kernel_ctx *k, nb_range_fn rows_fn)
{
    const nb_tensor *c = nb_kin(k, 1, 0);
    int64_t h = c->ndim ? c->shape[c->ndim - 1] : 1, n = nb_tensor_numel(c);
    if (h <= 0 || n == 0) return NB_OK;
    cell_job j = {k, h};
    nb_team_for(n / h, n >= 2 * NB_BCAST_GRAIN_MATH, rows_fn, &j);
    return NB_OK;
}

static nb_status run_lstm_cell(const nb_kernel_ctx *k) { return run_cell(k, cell_rows); }
static nb_status run_lstm_cell_grad(const nb_kernel_ctx *k) { return run_cell(k, cell_grad_rows); }

static const nb_kernel_def kernel_lstm_cell = {
    .op = "lstm_cell", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_lstm_cell};
static const nb_kernel_def kernel_lstm_cell_grad = {.op = "lstm_cell_grad",
                                                    .device = NB_DEVICE_CPU,
                                                    .dtypes = NB_DT_FLOAT,
                                                    .provider = "nabla",
                                                    .run = run_lstm_cell_grad};

const nb_kernel_def *const nb_cpu_kernels_rnn[] = {&kernel_lstm_cell, &kernel_lstm_cell_grad, NULL};
