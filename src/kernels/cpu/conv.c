/* 2-D convolution on the CPU: im2col + GEMM per image and group, and the
 * family's kernel table (pooling's kernels are in pool.c).
 *
 * The typed code lives in conv_impl.h, included once per dtype. The thread
 * team's threads (team.h) take the batch's images in turn, each with its own
 * column buffer; the GEMMs inside a share then run on its thread alone, while
 * a single image leaves the GEMM free to use every thread. */
#include <stdatomic.h>
#include <stdbool.h>
#include "../kernels.h"
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "conv.h"
#include "gemm.h"
#include "pool.h"
#include "simd.h"
#include "team.h"

/* Below this many multiply-adds a call stays on one thread. */
#define PAR_MIN_WORK 32768.0
/* Output rows at least this wide have the GEMM pack the column matrix from
 * the image (conv_pack_impl.h, pack_cols). */
#define PACK_MIN_WO 32
/* pack_cols_t: positions per call of the stream packing (the length of its
 * row of zeros), and the widest strip (the GEMM's AVX-512 one). */
#define COL_RUN 256
#define COL_MAX_NR 32
/* Per-thread column buffers together stay under this; beyond it fewer
 * threads share the batch. */
#define COL_BUDGET_BYTES ((size_t)256 << 20)

/* Output positions o in [lo, hi) whose input index o * stride + off lies in
 * [0, size): the part of a row of the column matrix that is not padding. */
static void valid_range(int64_t off, int64_t stride, int64_t size, int64_t n_out, int64_t *lo, int64_t *hi)
{
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = size - 1 - off < 0 ? 0 : (size - 1 - off) / stride + 1;
    if (h > n_out) h = n_out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* How many threads share the batch: one when the work is small, when we are
 * already running a share of the team, or when there is a single image. */
static int batch_threads(int64_t n, double work, size_t col_bytes)
{
    if (n < 2 || work < PAR_MIN_WORK || nb_team_busy()) return 1;
    int64_t nt = nb_team_size();
    if (nt > n) nt = n;
    if (col_bytes) {
        int64_t cap = (int64_t)(COL_BUDGET_BYTES / col_bytes);
        if (cap < 1) cap = 1;
        if (nt > cap) nt = cap;
    }
    return nt < 1 ? 1 : (int)nt;
}

/* How many chunks of images conv2d_grad's nt threads take in turn, each
 * with a copy of the filter gradient of wbytes: CHUNKS_PER_THREAD a thread,
 * so that one the host slows hands work to the other and the last chunk
 * leaves the others little to wait for (at two a thread, the main thread
 * waited in nb_team_run for 4% of LeNet's step at two threads), but no more
 * than one an image nor copies past GRAD_COPIES_BYTES. */
#define CHUNKS_PER_THREAD 8
#define GRAD_COPIES_BYTES ((size_t)16 << 20)
static int64_t grad_chunks(int64_t n, int nt, size_t wbytes)
{
    if (nt < 2) return 1;
    int64_t chunks = (int64_t)nt * CHUNKS_PER_THREAD, cap = (int64_t)(GRAD_COPIES_BYTES / (wbytes ? wbytes : 1));
    if (chunks > cap) chunks = cap > 2 * nt ? cap : 2 * nt;
    return chunks < n ? chunks : n;
}

/* The tap whose row of the column matrix is the input plane itself: unit
 * stride, an output as large as the input, and an offset of 0 both ways
 * (the centre of a 3x3 window with padding 1). col2im copies that row in
 * place of adding it, so dx needs no clearing first (the clear was 1.5% of
 * the conv net's step). -1 when there is none. */
static int64_t covering_tap(const nb_conv2d_geom *g)
{
    if (g->stride_h != 1 || g->stride_w != 1 || g->ho != g->h || g->wo != g->w) return -1;
    for (int64_t ki = 0; ki < g->kh; ki++)
        for (int64_t kj = 0; kj < g->kw; kj++)
            if (ki * g->dil_h == g->pad_top && kj * g->dil_w == g->pad_left) return ki * g->kw + kj;
    return -1;
}

/* A 1x1 kernel with unit stride and no padding reads the image as its own
 * column matrix. */
static bool is_pointwise(const nb_conv2d_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->stride_h == 1 && g->stride_w == 1 && g->pad_top == 0 && g->pad_left == 0 &&
        g->ho == g->h && g->wo == g->w;
}

/* Copies `rows` runs of n bytes (a multiple of 4), the run r from s + r * ss
 * to d + r * ds. im2col's runs are short (24 and 8 floats in LeNet), and a
 * call to memcpy per run cost more than the copy: up to 128 bytes a run is
 * two fixed-size moves that may overlap, which the compiler inlines, and the
 * choice of size is made once for all the runs. */
#define COPY_RUNS(size)                                                                            \
    for (int64_t r = 0; r < rows; r++, d += ds, s += ss)                                       \
    __builtin_memcpy(d, s, size), __builtin_memcpy(d + n - (size), s + n - (size), size)
static inline void copy_runs(char *restrict d, size_t ds, const char *restrict s, size_t ss, int64_t rows, size_t n)
{
    if (n > 128)
        for (int64_t r = 0; r < rows; r++, d += ds, s += ss) memcpy(d, s, n);
    else if (n >= 64) COPY_RUNS(64);
    else if (n >= 32) COPY_RUNS(32);
    else if (n >= 16) COPY_RUNS(16);
    else if (n >= 8) COPY_RUNS(8);
    else if (n >= 4) COPY_RUNS(4);
}
#undef COPY_RUNS

static void *alloc_buf(size_t count, size_t elem) { return nb_malloc(count ? count * elem : 1); }

/* conv2d_grad's tensors: Input, Filter and DOutput, and the gradients,
 * each of which may be NULL (not wanted). */
typedef struct conv2d_grad_tensors {
    const void *x, *w, *dy;
    void *dx, *dw, *db;
} conv2d_grad_tensors;

#define T float
#define SFX f32
#define GEMM(...) nb_gemm_f32(&(nb_gemm_args_f32){__VA_ARGS__})
#define GEMM_PACKED(...) nb_gemm_f32_packed(&(nb_gemm_args_f32){__VA_ARGS__})
#define GEMM_PACK_STREAMS nb_gemm_pack_streams_f32
#include "conv_impl.h"
#undef T
#undef SFX
#undef GEMM
#undef GEMM_PACKED
#undef GEMM_PACK_STREAMS

#define T double
#define SFX f64
#define GEMM(...) nb_gemm_f64(&(nb_gemm_args_f64){__VA_ARGS__})
#define GEMM_PACKED(...) nb_gemm_f64_packed(&(nb_gemm_args_f64){__VA_ARGS__})
#define GEMM_PACK_STREAMS nb_gemm_pack_streams_f64
#include "conv_impl.h"
#undef T
#undef SFX
#undef GEMM
#undef GEMM_PACKED
#undef GEMM_PACK_STREAMS

/* y = conv(x, w) (+ bias per output channel when bias is not NULL). */
static nb_status conv2d(const char *label, nb_dtype dt, const nb_conv2d_geom *g, const void *x, const void *w,
                        const void *bias, void *y)
{
    switch (dt) {
    case NB_F32: return conv2d_f32(label, g, x, w, bias, y);
    case NB_F64: return conv2d_f64(label, g, x, w, bias, y);
    default:
        return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label, nb_dtype_name(dt));
    }
}

/* Gradients of conv2d given dy; db is the sum of dy over the batch and both
 * spatial dimensions. */
static nb_status conv2d_grad(const char *label, nb_dtype dt, const nb_conv2d_geom *g, const conv2d_grad_tensors *t)
{
    switch (dt) {
    case NB_F32: return conv2d_grad_f32(label, g, t);
    case NB_F64: return conv2d_grad_f64(label, g, t);
    default:
        return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label, nb_dtype_name(dt));
    }
}

/* ---- kernels ------------------------------------------------------------------- */

/* The geometry from the tensors: Input [n, c, h, w], Filter [m, c / groups,
 * kh, kw] and the output or its gradient [n, m, ho, wo], all of which
 * inference has checked against the parameters. */
static nb_conv2d_geom conv_geom(const nb_conv2d_params *p, const nb_tensor *x, const nb_tensor *f, const nb_tensor *y)
{
    return (nb_conv2d_geom){.n = x->shape[0],
                            .c = x->shape[1],
                            .h = x->shape[2],
                            .w = x->shape[3],
                            .m = f->shape[0],
                            .kh = f->shape[2],
                            .kw = f->shape[3],
                            .ho = y->shape[2],
                            .wo = y->shape[3],
                            .stride_h = p->strides[0],
                            .stride_w = p->strides[1],
                            .pad_top = p->paddings[0],
                            .pad_left = p->paddings[2],
                            .dil_h = p->dilations[0],
                            .dil_w = p->dilations[1],
                            .groups = p->groups};
}

/* conv2d: Input 0, Filter 1, Bias 2 (optional) -> Output 0. */
static nb_status run_conv2d(const nb_kernel_ctx *k)
{
    const nb_tensor *x = nb_kin(k, 0, 0), *f = nb_kin(k, 1, 0);
    nb_tensor *y = nb_kout(k, 0, 0);
    const nb_conv2d_geom g = conv_geom(k->params, x, f, y);
    return conv2d(k->label, x->dtype, &g, nb_tensor_data(x), nb_tensor_data(f),
                  nb_khas_in(k, 2) ? nb_tensor_data(nb_kin(k, 2, 0)) : NULL, nb_tensor_data(y));
}

/* An optional output's data, NULL when it is not wanted. */
static void *out_data(const nb_kernel_ctx *k, int slot)
{
    return nb_kout_count(k, slot) ? nb_tensor_data(nb_kout(k, slot, 0)) : NULL;
}

/* conv2d_grad: Input 0, Filter 1, DOutput 2 -> DInput 0, DFilter 1, DBias 2 (each optional). */
static nb_status run_conv2d_grad(const nb_kernel_ctx *k)
{
    const nb_tensor *x = nb_kin(k, 0, 0), *f = nb_kin(k, 1, 0), *dy = nb_kin(k, 2, 0);
    const nb_conv2d_geom g = conv_geom(k->params, x, f, dy);
    const conv2d_grad_tensors t = {nb_tensor_data(x), nb_tensor_data(f), nb_tensor_data(dy),
                                   out_data(k, 0),    out_data(k, 1),    out_data(k, 2)};
    return conv2d_grad(k->label, x->dtype, &g, &t);
}

/* Inference takes float32 and float64 only. */
static const nb_kernel_def k_conv2d = {
    .op = "conv2d", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_conv2d};
static const nb_kernel_def k_conv2d_grad = {
    .op = "conv2d_grad", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = run_conv2d_grad};
static const nb_kernel_def k_pool2d = {
    .op = "pool2d", .device = NB_DEVICE_CPU, .dtypes = NB_DT_FLOAT, .provider = "nabla", .run = nb_cpu_run_pool2d};
static const nb_kernel_def k_pool2d_grad = {.op = "pool2d_grad",
                                            .device = NB_DEVICE_CPU,
                                            .dtypes = NB_DT_FLOAT,
                                            .provider = "nabla",
                                            .run = nb_cpu_run_pool2d_grad};

const nb_kernel_def *const nb_cpu_kernels_conv[] = {&k_conv2d, &k_conv2d_grad, &k_pool2d, &k_pool2d_grad, NULL};
