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

/* The usual window, 2 x 2 at stride 2 tiling the image exactly: `rows`
 * output rows, row r from input rows 2r and 2r + 1 (planes are 2 * ho rows
 * of w, so this holds across plane boundaries too). Its own function so that
 * it is compiled for AVX2 too (simd.h), called once per range of rows rather
 * than per row: LeNet's rows are 12 and 4 outputs. A NaN in a window wins,
 * as in window_argmax. */
NB_SIMD_CLONES static void FN(max2x2_rows)(const T *x, int64_t w, int64_t wo, int64_t rows, T *out)
{
    for (int64_t r = 0; r < rows; r++) {
        const T *r0 = x + 2 * r * w, *r1 = r0 + w;
        T *o = out + r * wo;
        for (int64_t j = 0; j < wo; j++) {
            T m = r0[2 * j], v = r0[2 * j + 1];
            m = v > m || v != v ? v : m;
            v = r1[2 * j];
            m = v > m || v != v ? v : m;
            v = r1[2 * j + 1];
            o[j] = v > m || v != v ? v : m;
        }
    }
}

/* Its gradient: each window's dout goes to its first element equal to the
 * output (the others get 0; the windows tile, so nothing accumulates), or
 * to the window's own first maximum when none is. */
NB_SIMD_CLONES static void FN(max2x2_grad_rows)(const T *x, const T *out, const T *d, int64_t w, int64_t wo,
                                                int64_t rows, T *dx)
{
    for (int64_t r = 0; r < rows; r++) {
        const T *r0 = x + 2 * r * w, *r1 = r0 + w, *o = out + r * wo, *dr = d + r * wo;
        T *dx0 = dx + 2 * r * w, *dx1 = dx0 + w;
        for (int64_t j = 0; j < wo; j++) {
            const T v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
            int hit = v[0] == o[j] ? 0 : v[1] == o[j] ? 1 : v[2] == o[j] ? 2 : v[3] == o[j] ? 3 : -1;
            if (hit < 0) {
                hit = 0;
                for (int k = 1; k < 4; k++)
                    if (v[k] > v[hit] || (isnan(v[k]) && !isnan(v[hit]))) hit = k;
            }
            dx0[2 * j] = hit == 0 ? dr[j] : 0;
            dx0[2 * j + 1] = hit == 1 ? dr[j] : 0;
            dx1[2 * j] = hit == 2 ? dr[j] : 0;
            dx1[2 * j + 1] = hit == 3 ? dr[j] : 0;
        }
    }
}

static bool FN(is_max2x2)(const nb_pool2d_geom *g)
{
    return g->is_max && g->kh == 2 && g->kw == 2 && g->stride_h == 2 && g->stride_w == 2 && g->pad_top == 0 &&
           g->pad_left == 0 && g->h == 2 * g->ho && g->w == 2 * g->wo;
}

typedef struct FN(pool_job) {
    const nb_pool2d_geom *g;
    const T *x;
    T *out;
} FN(pool_job);

/* Output rows [lo, hi) of all planes together, for the 2 x 2 window. */
static void FN(max2x2_rows_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(pool_job) *j = arg;
    const nb_pool2d_geom *g = j->g;
    const T *x = j->x;
    T *out = j->out;
    FN(max2x2_rows)(x + 2 * lo * g->w, g->w, g->wo, hi - lo, out + lo * g->wo);
}

/* Planes [lo, hi), any window. */
static void FN(pool_planes_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(pool_job) *j = arg;
    const nb_pool2d_geom *g = j->g;
    const T *x = j->x;
    T *out = j->out;
    const int64_t HW = g->h * g->w, P = g->ho * g->wo;
    const T full = (T)(g->kh * g->kw);
    for (int64_t pl = lo; pl < hi; pl++) {
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

static void FN(pool2d)(const nb_pool2d_geom *g, const T *x, T *out)
{
    const int64_t planes = g->n * g->c, P = g->ho * g->wo;
    FN(pool_job) job = {g, x, out};
    if (FN(is_max2x2)(g)) {
        nb_team_for(planes * g->ho, (double)planes * (double)P * 4 >= PAR_MIN_WORK, FN(max2x2_rows_range), &job);
        return;
    }
    nb_team_for(planes, (double)planes * (double)P * (double)(g->kh * g->kw) >= PAR_MIN_WORK,
                FN(pool_planes_range), &job);
}

typedef struct FN(pool_grad_job) {
    const nb_pool2d_geom *g;
    const T *x, *out, *dout;
    T *dx;
} FN(pool_grad_job);

/* Output rows [lo, hi) of all planes together, for the 2 x 2 window. */
static void FN(max2x2_grad_rows_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(pool_grad_job) *j = arg;
    const nb_pool2d_geom *g = j->g;
    const T *x = j->x, *out = j->out, *dout = j->dout;
    T *dx = j->dx;
    FN(max2x2_grad_rows)(x + 2 * lo * g->w, out + lo * g->wo, dout + lo * g->wo, g->w, g->wo, hi - lo,
                         dx + 2 * lo * g->w);
}

/* Planes [lo, hi), any window. */
static void FN(pool_grad_planes_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(pool_grad_job) *j = arg;
    const nb_pool2d_geom *g = j->g;
    const T *x = j->x, *out = j->out, *dout = j->dout;
    T *dx = j->dx;
    const int64_t HW = g->h * g->w, P = g->ho * g->wo;
    const T full = (T)(g->kh * g->kw);
    for (int64_t pl = lo; pl < hi; pl++) {
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

static void FN(pool2d_grad)(const nb_pool2d_geom *g, const T *x, const T *out, const T *dout, T *dx)
{
    const int64_t planes = g->n * g->c, P = g->ho * g->wo;
    FN(pool_grad_job) job = {g, x, out, dout, dx};
    if (FN(is_max2x2)(g)) {
        nb_team_for(planes * g->ho, (double)planes * (double)P * 4 >= PAR_MIN_WORK, FN(max2x2_grad_rows_range),
                    &job);
        return;
    }
    nb_team_for(planes, (double)planes * (double)P * (double)(g->kh * g->kw) >= PAR_MIN_WORK,
                FN(pool_grad_planes_range), &job);
}

#undef FN
#undef POOL_CAT
#undef POOL_CAT_
