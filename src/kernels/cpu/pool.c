/* 2-D pooling on the CPU. Planes (one channel of one image) are independent,
 * so the batch and channels are split across the thread team (team.h); the
 * typed code lives in pool_impl.h, included once per dtype. */
/* Nothing here reads floating-point exception flags: without this, GCC
 * keeps the comparisons of the max selects as branches, and the loops
 * scalar (as unary.c says). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "pool.h"
#include "simd.h"
#include "team.h"

#define PAR_MIN_WORK 32768.0
/* Pair maxima per block in max2x2_rows, on the stack; wider rows take the
 * general loop. */
#define MAX2X2_BLOCK 2048

/* The window of output index o along one axis, clipped to the image. */
static inline void window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size, int64_t *lo, int64_t *hi)
{
    int64_t s = o * stride - pad, e = s + k;
    *lo = s < 0 ? 0 : s;
    *hi = e > size ? size : e;
}

/* A window clipped to rows [h0, h1) and columns [w0, w1) of the image. */
typedef struct pool_span {
    int64_t h0, h1, w0, w1;
} pool_span;

#define T float
#define SFX f32
#define POOL_INT int32_t /* an integer as wide as T, for lane masks */
#include "pool_impl.h"
#undef T
#undef SFX
#undef POOL_INT

#define T double
#define SFX f64
#define POOL_INT int64_t
#include "pool_impl.h"
#undef T
#undef SFX
#undef POOL_INT

static nb_status pool2d(const char *label, nb_dtype dt, const nb_pool2d_geom *g, const void *x, void *out)
{
    switch (dt) {
    case NB_F32: pool2d_run_f32(g, x, NULL, NULL, out); return NB_OK;
    case NB_F64: pool2d_run_f64(g, x, NULL, NULL, out); return NB_OK;
    default:
        return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label, nb_dtype_name(dt));
    }
}

/* dx from dout. Max pooling sends each window's gradient to the first element
 * of the window equal to its output (the first maximum). */
static nb_status pool2d_grad(const char *label, nb_dtype dt, const nb_pool2d_geom *g, const void *x, const void *out,
                             const void *dout, void *dx)
{
    switch (dt) {
    case NB_F32: pool2d_run_f32(g, x, out, dout, dx); return NB_OK;
    case NB_F64: pool2d_run_f64(g, x, out, dout, dx); return NB_OK;
    default:
        return nb_error(NB_ERR_DTYPE, "%s: no CPU kernel for %s (float32 and float64 only)", label, nb_dtype_name(dt));
    }
}

/* ---- kernels ------------------------------------------------------------------- */

/* The geometry from X [n, c, h, w], the pooled output [n, c, ho, wo] (whose
 * size inference has checked against the parameters) and the parameters. */
static nb_pool2d_geom pool_geom(const nb_pool2d_params *p, const nb_tensor *x, const nb_tensor *out)
{
    nb_pool2d_geom g = {.n = x->shape[0],
                        .c = x->shape[1],
                        .h = x->shape[2],
                        .w = x->shape[3],
                        .ho = out->shape[2],
                        .wo = out->shape[3],
                        .kh = p->ksize[0],
                        .kw = p->ksize[1],
                        .stride_h = p->strides[0],
                        .stride_w = p->strides[1],
                        .pad_top = p->paddings[0],
                        .pad_left = p->paddings[2],
                        .is_max = p->is_max,
                        .exclusive = p->exclusive};
    if (p->global_pooling) {
        /* One window covering the image, whatever ksize, strides and paddings say. */
        g.kh = g.h, g.kw = g.w;
        g.stride_h = g.stride_w = 1;
        g.pad_top = g.pad_left = 0;
    }
    return g;
}

/* pool2d: X 0 -> Out 0. */
nb_status nb_cpu_run_pool2d(const nb_kernel_ctx *k)
{
    const nb_tensor *x = nb_kin(k, 0, 0);
    nb_tensor *out = nb_kout(k, 0, 0);
    const nb_pool2d_geom g = pool_geom(k->params, x, out);
    return pool2d(k->label, x->dtype, &g, nb_tensor_data(x), nb_tensor_data(out));
}

/* pool2d_grad: X 0, Out 1, DOut 2 -> DX 0. */
nb_status nb_cpu_run_pool2d_grad(const nb_kernel_ctx *k)
{
    const nb_tensor *x = nb_kin(k, 0, 0), *out = nb_kin(k, 1, 0);
    const nb_pool2d_geom g = pool_geom(k->params, x, out);
    return pool2d_grad(k->label, x->dtype, &g, nb_tensor_data(x), nb_tensor_data(out), nb_tensor_data(nb_kin(k, 2, 0)),
                       nb_tensor_data(nb_kout(k, 0, 0)));
}
