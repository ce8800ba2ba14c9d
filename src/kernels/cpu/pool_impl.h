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

/* The larger of a and b for max pooling, b when it is greater or NaN: of
 * equal values the first stays, and a NaN wins. Written as a select so that
 * the loops below vectorise (with no-trapping-math, pool.c). */
#define POOL_MAX(a, b) ((b) > (a) || (b) != (b) ? (b) : (a))

/* The usual window, 2 x 2 at stride 2 tiling the image exactly: `rows`
 * output rows, row r from input rows 2r and 2r + 1 (planes are 2 * ho rows
 * of w, so this holds across plane boundaries too). The max of the top pair,
 * then of the bottom pair, then of the two: the first maximum in the order
 * top left, top right, bottom left, bottom right, as window_argmax finds it.
 * The pairs of a block of rows are maximised in one pass over contiguous
 * memory into pair_max (LeNet's rows are 24 and 8 wide: a loop per row
 * would be all loop tail), then the rows of pairs in a second. */
NB_SIMD_CLONES static void FN(max2x2_rows)(const T *x, int64_t w, int64_t wo, int64_t rows, T *out)
{
    T pair_max[MAX2X2_BLOCK];
    const int64_t block_rows = MAX2X2_BLOCK / w; /* is_max2x2 makes it at least 1 */
    for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
        const int64_t n = rows - r0 < block_rows ? rows - r0 : block_rows;
        const T *xb = x + 2 * r0 * w;
        for (int64_t i = 0; i < n * w; i++) pair_max[i] = POOL_MAX(xb[2 * i], xb[2 * i + 1]);
        for (int64_t r = 0; r < n; r++) {
            const T *top = pair_max + 2 * r * wo, *bottom = top + wo;
            T *o = out + (r0 + r) * wo;
            for (int64_t j = 0; j < wo; j++) o[j] = POOL_MAX(top[j], bottom[j]);
        }
    }
}

/* The gradient of window j of a row pair (top: its first row, of w; dtop:
 * the same place in dx): all of dout g to the window's first element equal
 * to its output v, or, where none is (a NaN output, or Out not from this
 * X), to its first maximum. */
static inline void FN(max2x2_grad_window)(const T *top, int64_t w, int64_t j, T v, T g, T *dtop)
{
    const int64_t c = 2 * j;
    int64_t hit = top[c] == v           ? c
                  : top[c + 1] == v     ? c + 1
                  : top[w + c] == v     ? w + c
                  : top[w + c + 1] == v ? w + c + 1
                                        : FN(window_argmax)(top, w, 0, 2, c, c + 2);
    dtop[c] = hit == c ? g : 0;
    dtop[c + 1] = hit == c + 1 ? g : 0;
    dtop[w + c] = hit == w + c ? g : 0;
    dtop[w + c + 1] = hit == w + c + 1 ? g : 0;
}

/* The rows of max2x2's gradient, eight input columns (four windows) at a
 * time: the top and bottom rows are read as they lie, each output and dout
 * stretched over its window's two columns, and the winner picked with lane
 * masks, a lane's pair partner got by swapping neighbours. A vector with a
 * window that matches nowhere is done again by max2x2_grad_window; the
 * columns past a multiple of eight are done by it too. (Over the windows,
 * the loop has LeNet's 12 and 4 iterations per row, and GCC left it all in
 * scalar loop tails.) */
typedef T FN(v8) __attribute__((vector_size(8 * sizeof(T)), aligned(sizeof(T)), may_alias));
typedef T FN(v4) __attribute__((vector_size(4 * sizeof(T)), aligned(sizeof(T)), may_alias));
typedef POOL_INT FN(m8) __attribute__((vector_size(8 * sizeof(T))));
NB_SIMD_CLONES static void FN(max2x2_grad_rows)(const T *x, const T *out, const T *d, int64_t w, int64_t wo,
                                                int64_t rows, T *dx)
{
    const FN(m8) odd = {0, -1, 0, -1, 0, -1, 0, -1};
    const int64_t w8 = w / 8 * 8;
    for (int64_t r = 0; r < rows; r++) {
        const T *top = x + 2 * r * w, *bottom = top + w, *o = out + r * wo, *dr = d + r * wo;
        T *dtop = dx + 2 * r * w, *dbottom = dtop + w;
        for (int64_t c = 0; c < w8; c += 8) {
            FN(v4) o4 = *(const FN(v4) *)(o + c / 2), g4 = *(const FN(v4) *)(dr + c / 2);
            FN(v8) v = __builtin_shufflevector(o4, o4, 0, 0, 1, 1, 2, 2, 3, 3);
            FN(v8) g = __builtin_shufflevector(g4, g4, 0, 0, 1, 1, 2, 2, 3, 3);
            FN(v8) t = *(const FN(v8) *)(top + c), b = *(const FN(v8) *)(bottom + c);
            FN(m8) et = t == v, eb = b == v;
            FN(m8) et_p = __builtin_shufflevector(et, et, 1, 0, 3, 2, 5, 4, 7, 6);
            FN(m8) eb_p = __builtin_shufflevector(eb, eb, 1, 0, 3, 2, 5, 4, 7, 6);
            FN(m8) any_top = et | et_p;
            FN(m8) win_top = et & ~(odd & et_p);
            FN(m8) win_bottom = eb & ~any_top & ~(odd & eb_p);
            FN(m8) missed = ~(any_top | eb | eb_p);
            bool some_missed = false;
            for (int k = 0; k < 8; k++) some_missed |= missed[k] != 0;
            if (some_missed) {
                for (int64_t j = c / 2; j < c / 2 + 4; j++) FN(max2x2_grad_window)(top, w, j, o[j], dr[j], dtop);
                continue;
            }
            FN(m8) gb;
            __builtin_memcpy(&gb, &g, sizeof gb);
            FN(m8) rt = gb & win_top, rb = gb & win_bottom;
            __builtin_memcpy(dtop + c, &rt, sizeof rt);
            __builtin_memcpy(dbottom + c, &rb, sizeof rb);
        }
        for (int64_t j = w8 / 2; j < wo; j++) FN(max2x2_grad_window)(top, w, j, o[j], dr[j], dtop);
    }
}

static bool FN(is_max2x2)(const nb_pool2d_geom *g)
{
    return g->is_max && g->kh == 2 && g->kw == 2 && g->stride_h == 2 && g->stride_w == 2 && g->pad_top == 0 &&
           g->pad_left == 0 && g->h == 2 * g->ho && g->w == 2 * g->wo && g->w <= MAX2X2_BLOCK;
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
