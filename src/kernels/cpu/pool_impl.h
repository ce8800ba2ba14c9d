/* Typed body of the pooling kernels; pool.c includes it once per dtype with
 * T (the element type) and SFX (a name suffix) defined. */
#define POOL_CAT_(a, b) a##_##b
#define POOL_CAT(a, b) POOL_CAT_(a, b)
#define FN(name) POOL_CAT(name, SFX)

/* Index (in the plane) of the window's first maximum; NaN wins, as it does in
 * the forward pass. -1 for a window with no image element. */
static inline int64_t FN(window_argmax)(const T *xp, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1)
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

static void FN(pool2d)(const nb_pool2d_geom *g, const T *x, T *out)
{
    const int64_t planes = g->n * g->c, HW = g->h * g->w, P = g->ho * g->wo;
    const T full = (T)(g->kh * g->kw);
    OMP_FOR_IF((double)planes * (double)P * (double)(g->kh * g->kw) >= PAR_MIN_WORK)
    for (int64_t pl = 0; pl < planes; pl++) {
        const T *xp = x + pl * HW;
        T *op = out + pl * P;
        for (int64_t oh = 0; oh < g->ho; oh++) {
            int64_t h0, h1;
            window(oh, g->stride_h, g->pad_top, g->kh, g->h, &h0, &h1);
            for (int64_t ow = 0; ow < g->wo; ow++) {
                int64_t w0, w1;
                window(ow, g->stride_w, g->pad_left, g->kw, g->w, &w0, &w1);
                T r = 0;
                if (g->is_max) {
                    int64_t i = FN(window_argmax)(xp, g->w, h0, h1, w0, w1);
                    if (i >= 0) r = xp[i];
                } else if (h1 > h0 && w1 > w0) {
                    T acc = 0;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) acc += xp[ih * g->w + iw];
                    r = acc / (g->exclusive ? (T)((h1 - h0) * (w1 - w0)) : full);
                }
                op[oh * g->wo + ow] = r;
            }
        }
    }
}

static void FN(pool2d_grad)(const nb_pool2d_geom *g, const T *x, const T *out, const T *dout, T *dx)
{
    const int64_t planes = g->n * g->c, HW = g->h * g->w, P = g->ho * g->wo;
    const T full = (T)(g->kh * g->kw);
    OMP_FOR_IF((double)planes * (double)P * (double)(g->kh * g->kw) >= PAR_MIN_WORK)
    for (int64_t pl = 0; pl < planes; pl++) {
        const T *xp = x + pl * HW, *op = out + pl * P, *dop = dout + pl * P;
        T *dxp = dx + pl * HW;
        memset(dxp, 0, (size_t)HW * sizeof(T));
        for (int64_t oh = 0; oh < g->ho; oh++) {
            int64_t h0, h1;
            window(oh, g->stride_h, g->pad_top, g->kh, g->h, &h0, &h1);
            for (int64_t ow = 0; ow < g->wo; ow++) {
                int64_t w0, w1;
                window(ow, g->stride_w, g->pad_left, g->kw, g->w, &w0, &w1);
                if (h1 <= h0 || w1 <= w0) continue;
                const T d = dop[oh * g->wo + ow];
                if (g->is_max) {
                    /* The first element equal to the output took it; should
                     * none match (Out not from this X, or NaN), fall back to
                     * the window's own first maximum. */
                    const T o = op[oh * g->wo + ow];
                    int64_t hit = -1;
                    for (int64_t ih = h0; ih < h1 && hit < 0; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            if (xp[ih * g->w + iw] == o) {
                                hit = ih * g->w + iw;
                                break;
                            }
                    if (hit < 0) hit = FN(window_argmax)(xp, g->w, h0, h1, w0, w1);
                    dxp[hit] += d;
                } else {
                    const T share = d / (g->exclusive ? (T)((h1 - h0) * (w1 - w0)) : full);
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) dxp[ih * g->w + iw] += share;
                }
            }
        }
    }
}

#undef FN
#undef POOL_CAT
#undef POOL_CAT_
