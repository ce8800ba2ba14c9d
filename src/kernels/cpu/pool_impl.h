/* Typed body of the pooling kernels; pool.c includes it once per dtype with
 * T (the element type) and SFX (a name suffix) defined. */
#define POOL_CAT_(a, b) a##_##b
#define POOL_CAT(a, b) POOL_CAT_(a, b)
#define FN(name) POOL_CAT(name, SFX)

/* Index (in the plane) of the window's first maximum; NaN wins, as it does in
 * the forward pass. -1 for a window with no image element. Compiled with
 * trapping math, unlike the rest (pool.c): its branches predict well, and
 * as selects a global max pooling took 15% longer. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("trapping-math")))
#endif
static int64_t FN(window_argmax)(const T *xp, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1)
{
    int64_t best_i = -1;
    T best = (T)-INFINITY;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) {
            T v = xp[ih * W + iw];
            if (best_i < 0 || v > best || (isnan(v) && !isnan(best))) {
                best = v;
                best_i = ih * W + iw;
            }
        }
    return best_i;
}

/* The larger of a and b for max pooling, b when it is greater or NaN: of
 * equal values the first stays, and a NaN wins. Written as a select so that
 * the loops below vectorise (with no-trapping-math, pool.c). */
#define POOL_MAX(a, b) ((b) > (a) || (b) != (b) ? (b) : (a))

#include "pool_2x2_impl.h"

/* ---- any window ---------------------------------------------------------------
 * Row by row: an output row's windows that lie inside the image across (all
 * but a padded edge) are done together, POOL_ROW at a time, each loop over
 * the output columns of one window offset, which vectorises; the edges go
 * window by window. Results are bitwise those of taking each window in turn
 * (max: its first maximum; avg: its sum in row-major order, divided; the
 * gradients' sums in the same order). Window by window, 3 x 3 max pooling
 * at stride 2 took 11 ns per input element, branching at every compare. */
#define POOL_ROW 256
#define POOL_INLINE static inline __attribute__((always_inline)) /* into each SIMD clone */
/* Fewer windows inside a row than this go one by one: with 2, pooling 5 x 5
 * at stride 3 over 13 x 13 (3 windows inside) took 1.3-1.9 times as long. */
#define POOL_ROW_MIN 4

/* One output of window sp of plane xp (0 for a window with no image
 * element). */
POOL_INLINE T FN(pool_window)(const nb_pool2d_geom *g, const T *xp, const pool_span *sp)
{
    const int64_t h0 = sp->h0, h1 = sp->h1, w0 = sp->w0, w1 = sp->w1;
    if (h1 <= h0 || w1 <= w0) return 0;
    const T count = g->exclusive ? (T)((h1 - h0) * (w1 - w0)) : (T)(g->kh * g->kw);
    if (g->is_max) return xp[FN(window_argmax)(xp, g->w, h0, h1, w0, w1)];
    T acc = 0;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) acc += xp[ih * g->w + iw];
    return acc / count;
}

/* Its gradient, added into plane dxp: dout d to the first element equal to
 * the output o (should none be, Out not from this X or NaN, to the first
 * maximum), or shared evenly. */
POOL_INLINE void FN(pool_grad_window)(const nb_pool2d_geom *g, const T *xp, const pool_span *sp, T o, T d, T *dxp)
{
    const int64_t h0 = sp->h0, h1 = sp->h1, w0 = sp->w0, w1 = sp->w1;
    if (h1 <= h0 || w1 <= w0) return;
    const T count = g->exclusive ? (T)((h1 - h0) * (w1 - w0)) : (T)(g->kh * g->kw);
    if (g->is_max) {
        int64_t hit = -1;
        for (int64_t ih = h0; ih < h1 && hit < 0; ih++)
            for (int64_t iw = w0; iw < w1; iw++)
                if (xp[ih * g->w + iw] == o) {
                    hit = ih * g->w + iw;
                    break;
                }
        if (hit < 0) hit = FN(window_argmax)(xp, g->w, h0, h1, w0, w1);
        dxp[hit] += d;
        return;
    }
    const T share = d / count;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++) dxp[ih * g->w + iw] += share;
}

/* The output columns [lo, hi) whose windows lie inside the image across. */
static void FN(inner_cols)(const nb_pool2d_geom *g, int64_t *lo, int64_t *hi)
{
    int64_t last_start = g->w + g->pad_left - g->kw; /* the last window start that fits, plus pad_left */
    int64_t b = last_start < 0 ? 0 : last_start / g->stride_w + 1;
    int64_t a = (g->pad_left + g->stride_w - 1) / g->stride_w;
    *hi = b < g->wo ? b : g->wo;
    *lo = a < *hi ? a : *hi;
}

/* A run of m windows along an output row, inside the image across: each
 * `rows` image rows tall and g->kw wide, the next g->stride_w further; div
 * divides an average's sum. */
typedef struct FN(pool_run) {
    int64_t rows, m;
    T div;
} FN(pool_run);

/* Run r's windows, the first at xr in a plane g->w wide: their maxima, or
 * their sums divided by div, into out. S is the stride across when a
 * constant (the compiler then vectorises the strided loads), or 0. */
POOL_INLINE void FN(pool_row_s)(const nb_pool2d_geom *g, const FN(pool_run) *r, const int64_t S, const T *restrict xr,
                                T *restrict out)
{
    const int64_t w = g->w, s = S ? S : g->stride_w, kw = g->kw, rows = r->rows, m = r->m;
    const bool is_max = g->is_max;
    const T div = r->div;
    T acc[POOL_ROW];
    for (int64_t j = 0; j < m; j++) acc[j] = is_max ? xr[j * s] : 0;
    for (int64_t y = 0; y < rows; y++)
        for (int64_t kx = 0; kx < kw; kx++) {
            const T *src = xr + y * w + kx;
            if (!is_max) {
                for (int64_t j = 0; j < m; j++) acc[j] += src[j * s];
            } else if (y || kx) {
                for (int64_t j = 0; j < m; j++) acc[j] = POOL_MAX(acc[j], src[j * s]);
            }
        }
    for (int64_t j = 0; j < m; j++) out[j] = is_max ? acc[j] : acc[j] / div;
}

NB_SIMD_CLONES static void FN(pool_row)(const nb_pool2d_geom *g, const FN(pool_run) *r, const T *xr, T *out)
{
    if (g->stride_w == 1) FN(pool_row_s)(g, r, 1, xr, out);
    else if (g->stride_w == 2) FN(pool_row_s)(g, r, 2, xr, out);
    else FN(pool_row_s)(g, r, 0, xr, out);
}

/* The gradient of pool_row's windows, added into dxr (xr's place in dx).
 * Max: each window's first element equal to its output o, found for all
 * windows at once, then d added in window order; avg: the shares added at
 * each offset, the offsets across in reverse so that an element shared by
 * two windows gets the left one's first, as window by window. */
POOL_INLINE void FN(pool_grad_row_s)(const nb_pool2d_geom *g, const FN(pool_run) *r, const int64_t S,
                                     const T *restrict xr, T *restrict dxr, const T *restrict o, const T *restrict d)
{
    const int64_t w = g->w, s = S ? S : g->stride_w, kw = g->kw, rows = r->rows, m = r->m;
    const bool is_max = g->is_max;
    const T div = r->div;
    if (!is_max) {
        T share[POOL_ROW];
        for (int64_t j = 0; j < m; j++) share[j] = d[j] / div;
        for (int64_t y = 0; y < rows; y++)
            for (int64_t kx = kw - 1; kx >= 0; kx--) {
                T *dst = dxr + y * w + kx;
                for (int64_t j = 0; j < m; j++) dst[j * s] += share[j];
            }
        return;
    }
    POOL_INT hit[POOL_ROW]; /* from the window's start, the first equal element; -1: none */
    for (int64_t j = 0; j < m; j++) hit[j] = -1;
    for (int64_t y = 0; y < rows; y++)
        for (int64_t kx = 0; kx < kw; kx++) {
            const T *src = xr + y * w + kx;
            const POOL_INT at = (POOL_INT)(y * w + kx);
            for (int64_t j = 0; j < m; j++) hit[j] = ((hit[j] < 0) & (src[j * s] == o[j])) ? at : hit[j];
        }
    for (int64_t j = 0; j < m; j++) {
        const int64_t h = hit[j] >= 0 ? hit[j] : FN(window_argmax)(xr + j * s, w, 0, rows, 0, kw);
        dxr[j * s + h] += d[j];
    }
}

NB_SIMD_CLONES static void FN(pool_grad_row)(const nb_pool2d_geom *g, const FN(pool_run) *r, const T *xr, T *dxr,
                                             const T *o, const T *d)
{
    if (g->stride_w == 1) FN(pool_grad_row_s)(g, r, 1, xr, dxr, o, d);
    else if (g->stride_w == 2) FN(pool_grad_row_s)(g, r, 2, xr, dxr, o, d);
    else FN(pool_grad_row_s)(g, r, 0, xr, dxr, o, d);
}

typedef struct FN(pool_job) {
    const nb_pool2d_geom *g;
    const T *x, *out, *dout; /* out and dout: the gradient's */
    T *y;                    /* the output: Out, or DX */
} FN(pool_job);

/* Output row oh of a plane: the plane's X (xp) and its output (yp: Out,
 * or DX), the image rows [h0, h1) the row's windows cover, and at, the
 * index of the row's first output among all. */
typedef struct FN(pool_out_row) {
    const T *xp;
    T *yp;
    int64_t oh, h0, h1, at;
} FN(pool_out_row);

/* Windows [from, to) of output row r one by one. */
POOL_INLINE void FN(pool_windows)(const FN(pool_job) *j, bool grad, const FN(pool_out_row) *r, int64_t from, int64_t to)
{
    const nb_pool2d_geom *g = j->g;
    const T *xp = r->xp;
    T *yp = r->yp;
    const int64_t at = r->at;
    pool_span sp = {r->h0, r->h1, 0, 0};
    for (int64_t ow = from; ow < to; ow++) {
        window(ow, g->stride_w, g->pad_left, g->kw, g->w, &sp.w0, &sp.w1);
        if (grad) FN(pool_grad_window)(g, xp, &sp, j->out[at + ow], j->dout[at + ow], yp);
        else yp[r->oh * g->wo + ow] = FN(pool_window)(g, xp, &sp);
    }
}

/* Planes [lo, hi), any window: the forward (y is Out) or, with dout set,
 * the gradient (y is DX). Each row in window order: left edge, inside,
 * right edge. */
POOL_INLINE void FN(pool_planes)(const FN(pool_job) *j, const bool grad, int64_t lo, int64_t hi)
{
    const nb_pool2d_geom *g = j->g;
    const int64_t W = g->w, HW = g->h * W, P = g->ho * g->wo, s = g->stride_w;
    int64_t in_lo, in_hi;
    FN(inner_cols)(g, &in_lo, &in_hi);
    /* (and a window's offsets fit pool_grad_row's POOL_INT) */
    const bool wide = in_hi - in_lo >= POOL_ROW_MIN && (double)g->kh * (double)W < 2147483647.0;
    for (int64_t pl = lo; pl < hi; pl++) {
        const T *xp = j->x + pl * HW;
        T *yp = j->y + (grad ? pl * HW : pl * P);
        if (grad) memset(yp, 0, (size_t)HW * sizeof(T));
        if (P == 1) { /* a global pooling's one window (among others) */
            pool_span sp;
            window(0, g->stride_h, g->pad_top, g->kh, g->h, &sp.h0, &sp.h1);
            window(0, g->stride_w, g->pad_left, g->kw, W, &sp.w0, &sp.w1);
            if (grad) FN(pool_grad_window)(g, xp, &sp, j->out[pl], j->dout[pl], yp);
            else *yp = FN(pool_window)(g, xp, &sp);
            continue;
        }
        for (int64_t oh = 0; oh < g->ho; oh++) {
            FN(pool_out_row) r = {xp, yp, oh, 0, 0, pl * P + oh * g->wo};
            window(oh, g->stride_h, g->pad_top, g->kh, g->h, &r.h0, &r.h1);
            const int64_t h0 = r.h0, h1 = r.h1, at = r.at;
            if (!wide || h1 <= h0) {
                FN(pool_windows)(j, grad, &r, 0, g->wo);
                continue;
            }
            const int64_t a = in_lo, b = in_hi;
            FN(pool_windows)(j, grad, &r, 0, a);
            FN(pool_run) run = {h1 - h0, 0, g->exclusive ? (T)((h1 - h0) * g->kw) : (T)(g->kh * g->kw)};
            for (int64_t ow = a; ow < b; ow += POOL_ROW) {
                const int64_t start = h0 * W + ow * s - g->pad_left;
                run.m = b - ow < POOL_ROW ? b - ow : POOL_ROW;
                if (grad) FN(pool_grad_row)(g, &run, xp + start, yp + start, j->out + at + ow, j->dout + at + ow);
                else FN(pool_row)(g, &run, xp + start, yp + oh * g->wo + ow);
            }
            FN(pool_windows)(j, grad, &r, b, g->wo);
        }
    }
}

static void FN(pool_planes_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(pool_job) *j = arg;
    if (j->dout) FN(pool_planes)(j, true, lo, hi);
    else FN(pool_planes)(j, false, lo, hi);
}

/* Output rows [lo, hi) of all planes together, for the 2 x 2 window. */
static void FN(max2x2_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(pool_job) *j = arg;
    const nb_pool2d_geom *g = j->g;
    if (j->dout)
        FN(max2x2_grad_rows)(j->x + 2 * lo * g->w, j->out + lo * g->wo, j->dout + lo * g->wo, g->w, g->wo, hi - lo,
                             j->y + 2 * lo * g->w);
    else FN(max2x2_rows)(j->x + 2 * lo * g->w, g->w, g->wo, hi - lo, j->y + lo * g->wo);
}

/* The forward (out and dout NULL, y Out) or the gradient (y DX). */
static void FN(pool2d_run)(const nb_pool2d_geom *g, const T *x, const T *out, const T *dout, T *y)
{
    const int64_t planes = g->n * g->c, P = g->ho * g->wo;
    FN(pool_job) job = {g, x, out, dout, y};
    if (FN(is_max2x2)(g)) {
        nb_team_for(planes * g->ho, (double)planes * (double)P * 4 >= PAR_MIN_WORK, FN(max2x2_range), &job);
        return;
    }
    nb_team_for(planes, (double)planes * (double)P * (double)(g->kh * g->kw) >= PAR_MIN_WORK, FN(pool_planes_range),
                &job);
}

#undef FN
#undef POOL_CAT
#undef POOL_CAT_
#undef POOL_MAX
#undef POOL_ROW
#undef POOL_ROW_MIN
#undef POOL_INLINE
