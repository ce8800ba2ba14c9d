/* Typed body of the convolution kernels; conv.c includes it once per dtype
 * with T (the element type), SFX (a name suffix), and GEMM(...) and
 * GEMM_PACKED(...) (the GEMM of T, taking the named fields of its arguments)
 * defined. */
#define CONV_CAT_(a, b) a##_##b
#define CONV_CAT(a, b) CONV_CAT_(a, b)
#define FN(name) CONV_CAT(name, SFX)

typedef struct FN(im2col_job) {
    const nb_conv2d_geom *g;
    const T *x;
    T *col;
} FN(im2col_job);

/* Channels [lo, hi) of im2col below. */
NB_SIMD_CLONES static void FN(im2col_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(im2col_job) *j = arg;
    const nb_conv2d_geom *g = j->g;
    const T *x = j->x;
    T *col = j->col;
    const int64_t H = g->h, W = g->w, Ho = g->ho, Wo = g->wo, kh = g->kh, kw = g->kw;
    const int64_t sh = g->stride_h, sw = g->stride_w;
    for (int64_t c = lo; c < hi; c++) {
        const T *xc = x + c * H * W;
        for (int64_t ki = 0; ki < kh; ki++) {
            int64_t offh = ki * g->dil_h - g->pad_top, oh_lo, oh_hi;
            valid_range(offh, sh, H, Ho, &oh_lo, &oh_hi);
            for (int64_t kj = 0; kj < kw; kj++) {
                int64_t offw = kj * g->dil_w - g->pad_left, ow_lo, ow_hi;
                valid_range(offw, sw, W, Wo, &ow_lo, &ow_hi);
                T *row = col + ((c * kh + ki) * kw + kj) * Ho * Wo;
                /* memset only where there is padding: LeNet's 33,600 taps a step
                 * made twice as many calls that cleared nothing, and its second
                 * convolution's forward ran 3% slower (3.90-4.06 ms against
                 * 3.78-3.92, alternated in one process). */
                if (oh_lo) memset(row, 0, (size_t)(oh_lo * Wo) * sizeof(T));
                if (sw == 1 && ow_lo == 0 && ow_hi == Wo) { /* whole rows: no padding at the sides */
                    copy_runs((char *)(row + oh_lo * Wo), (size_t)Wo * sizeof(T),
                              (const char *)(xc + (oh_lo * sh + offh) * W + offw), (size_t)(sh * W) * sizeof(T),
                              oh_hi - oh_lo, (size_t)Wo * sizeof(T));
                    if (oh_hi < Ho) memset(row + oh_hi * Wo, 0, (size_t)((Ho - oh_hi) * Wo) * sizeof(T));
                    continue;
                }
                for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
                    T *dst = row + oh * Wo;
                    const int64_t base = (oh * sh + offh) * W + offw;
                    for (int64_t ow = 0; ow < ow_lo; ow++) dst[ow] = 0;
                    if (sw == 1) {
                        if (ow_hi > ow_lo)
                            copy_runs((char *)(dst + ow_lo), 0, (const char *)(xc + base + ow_lo), 0, 1,
                                      (size_t)(ow_hi - ow_lo) * sizeof(T));
                    } else {
                        for (int64_t ow = ow_lo; ow < ow_hi; ow++) dst[ow] = xc[base + ow * sw];
                    }
                    for (int64_t ow = ow_hi; ow < Wo; ow++) dst[ow] = 0;
                }
                if (oh_hi < Ho) memset(row + oh_hi * Wo, 0, (size_t)((Ho - oh_hi) * Wo) * sizeof(T));
            }
        }
    }
}

/* Unfolds the cg channels of one image-group x ([cg, h, w]) into col
 * ([cg * kh * kw, ho * wo]); padding becomes zeros. */
static void FN(im2col)(const nb_conv2d_geom *g, int64_t cg, const T *x, T *col, bool par)
{
    FN(im2col_job) job = {g, x, col};
    nb_team_for(cg, par, FN(im2col_range), &job);
}

#include "conv_pack_impl.h"

typedef struct FN(col2im_job) {
    const nb_conv2d_geom *g;
    const T *col;
    T *dx;
} FN(col2im_job);

/* d[r * ds + i] += s[r * ss + i] for i < n, r < rows: col2im's rows, which
 * are short (8 in LeNet). Widths of 8, 16 and 32 are loops of known length,
 * a vector add or two each; a loop of unknown length spent more on its
 * set-up and its tail than on the adds. */
#define ADD_RUNS(width)                                                                                \
    for (int64_t r = 0; r < rows; r++, d += ds, s += ss)                                               \
        for (int i = 0; i < (width); i++) d[i] += s[i]
static inline void FN(add_runs)(T *restrict d, int64_t ds, const T *restrict s, int64_t ss, int64_t rows, int64_t n)
{
    if (n == 8) ADD_RUNS(8);
    else if (n == 16) ADD_RUNS(16);
    else if (n == 32) ADD_RUNS(32);
    else ADD_RUNS(n);
}
#undef ADD_RUNS

/* Channels [lo, hi) of col2im below. */
NB_SIMD_CLONES static void FN(col2im_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(col2im_job) *j = arg;
    const nb_conv2d_geom *g = j->g;
    const T *col = j->col;
    T *dx = j->dx;
    const int64_t H = g->h, W = g->w, Ho = g->ho, Wo = g->wo, kh = g->kh, kw = g->kw;
    const int64_t sh = g->stride_h, sw = g->stride_w, first = covering_tap(g);
    for (int64_t c = lo; c < hi; c++) {
        T *xc = dx + c * H * W;
        if (first >= 0) memcpy(xc, col + (c * kh * kw + first) * Ho * Wo, (size_t)(H * W) * sizeof(T));
        for (int64_t ki = 0; ki < kh; ki++) {
            int64_t offh = ki * g->dil_h - g->pad_top, oh_lo, oh_hi;
            valid_range(offh, sh, H, Ho, &oh_lo, &oh_hi);
            for (int64_t kj = 0; kj < kw; kj++) {
                if (ki * kw + kj == first) continue;
                int64_t offw = kj * g->dil_w - g->pad_left, ow_lo, ow_hi;
                valid_range(offw, sw, W, Wo, &ow_lo, &ow_hi);
                const T *row = col + ((c * kh + ki) * kw + kj) * Ho * Wo;
                if (sw == 1 && oh_hi > oh_lo) {
                    FN(add_runs)(xc + (oh_lo * sh + offh) * W + offw + ow_lo, sh * W, row + oh_lo * Wo + ow_lo, Wo,
                                 oh_hi - oh_lo, ow_hi - ow_lo);
                    continue;
                }
                for (int64_t oh = oh_lo; oh < oh_hi; oh++) {
                    const T *src = row + oh * Wo;
                    const int64_t base = (oh * sh + offh) * W + offw;
                    for (int64_t ow = ow_lo; ow < ow_hi; ow++) xc[base + ow * sw] += src[ow];
                }
            }
        }
    }
}

/* The adjoint of im2col: adds each column entry back onto the input pixel it
 * came from (dx must be zeroed first, unless a tap covers the plane:
 * covering_tap). Channels are independent, so they can run in parallel. */
static void FN(col2im)(const nb_conv2d_geom *g, int64_t cg, const T *col, T *dx, bool par)
{
    FN(col2im_job) job = {g, col, dx};
    nb_team_for(cg, par, FN(col2im_range), &job);
}

/* y[o * P + p] += bias[o]. */
NB_SIMD_CLONES static void FN(add_bias_rows)(T *y, const T *bias, int64_t rows, int64_t P)
{
    for (int64_t o = 0; o < rows; o++) {
        const T b = bias[o];
        T *yr = y + o * P;
        for (int64_t p = 0; p < P; p++) yr[p] += b;
    }
}

typedef struct FN(conv2d_job) {
    const nb_conv2d_geom *g;
    const T *x, *w, *bias;
    T *y;
    T *cols; /* one column buffer per share; NULL when direct */
    size_t col_elems;
    bool direct, inner_par;
    _Atomic int64_t next; /* the next image to take */
} FN(conv2d_job);

/* Share t of nt: images taken one at a time from a shared counter, so that
 * a thread the host slows down takes fewer (a fixed split left the other
 * waiting at its end: 2.7% of the convbn step at two threads), in its own
 * column buffer. */
static void FN(conv2d_share)(void *arg, int t, int nt)
{
    FN(conv2d_job) *j = arg;
    const nb_conv2d_geom *g = j->g;
    const T *x = j->x, *w = j->w, *bias = j->bias;
    T *y = j->y;
    const int64_t G = g->groups, cg = g->c / G, mg = g->m / G;
    const int64_t K = cg * g->kh * g->kw, P = g->ho * g->wo, HW = g->h * g->w;
    (void)nt;
    T *col = j->cols ? j->cols + (size_t)t * j->col_elems : NULL;
    for (int64_t n; (n = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < g->n;) {
        for (int64_t gi = 0; gi < G; gi++) {
            const T *xg = x + (n * g->c + gi * cg) * HW;
            const T *wg = w + gi * mg * K;
            T *yg = y + (n * g->m + gi * mg) * P;
            FN(col_packer) cp = {g, xg};
            if (j->direct) {
                GEMM(.M = mg, .N = P, .K = K, .alpha = 1, .A = wg, .lda = K, .B = xg, .ldb = P, .C = yg, .ldc = P);
            } else if (g->wo < PACK_MIN_WO || mg <= NB_GEMM_B_IN_PLACE_ROWS ||
                       !GEMM_PACKED(.M = mg, .N = P, .K = K, .alpha = 1, .A = wg, .lda = K, .C = yg, .ldc = P,
                                    .pack = FN(pack_cols), .pack_ctx = &cp)) {
                FN(im2col)(g, cg, xg, col, j->inner_par);
                GEMM(.M = mg, .N = P, .K = K, .alpha = 1, .A = wg, .lda = K, .B = col, .ldb = P, .C = yg, .ldc = P);
            }
            /* The bias goes on after the product, while the image's output is in
             * cache: filled in first (for the product to add onto), the output's
             * lines came from memory once more, and the fill was 2% of the conv
             * net's step. */
            if (bias) FN(add_bias_rows)(yg, bias + gi * mg, mg, P);
        }
    }
}

static nb_status FN(conv2d)(const char *label, const nb_conv2d_geom *g, const T *x, const T *w, const T *bias, T *y)
{
    const int64_t G = g->groups, cg = g->c / G;
    const int64_t K = cg * g->kh * g->kw, P = g->ho * g->wo;
    const bool direct = is_pointwise(g);
    const size_t col_elems = direct ? 0 : (size_t)(K * P);
    const double work = (double)g->n * (double)g->m * (double)P * (double)K;
    const int nt = batch_threads(g->n, work, col_elems * sizeof(T));
    T *cols = NULL;
    if (!direct && !(cols = alloc_buf((size_t)nt * col_elems, sizeof(T))))
        return nb_error(NB_ERR_NOMEM, "%s: out of memory for a %lld x %lld column buffer", label, (long long)K,
                        (long long)P);
    /* A lone image leaves the threads to im2col and the GEMM. */
    const bool inner_par = nt == 1 && work >= PAR_MIN_WORK;
    FN(conv2d_job) job = {g, x, w, bias, y, cols, col_elems, direct, inner_par, 0};
    nb_team_run(nt, FN(conv2d_share), &job);
    nb_free(cols);
    return NB_OK;
}

#include "row_sum_impl.h"

/* A plane of dy, summed (for AVX2 too: simd.h). */
NB_SIMD_CLONES static double FN(dy_plane_sum)(const T *d, int64_t P) { return FN(row_sum)(d, P); }

typedef struct FN(conv2d_grad_job) {
    const nb_conv2d_geom *g;
    const T *x, *w, *dy;
    T *dx, *dw;
    T *cols;    /* one column buffer per share; NULL when direct */
    T *dw_part; /* one filter gradient per chunk, or NULL: all add onto dw */
    size_t col_elems;
    double *db_part; /* one bias gradient per chunk, or NULL: not wanted */
    int64_t wsize, n_chunks;
    bool direct, inner_par;
    _Atomic int64_t next; /* the next chunk to take */
} FN(conv2d_grad_job);

/* Image n: its share of the filter gradient onto dw_acc, of the bias
 * gradient onto db_acc, and its dx. */
static void FN(conv2d_grad_image)(const FN(conv2d_grad_job) *j, int64_t n, T *col, T *dw_acc, double *db_acc)
{
    const nb_conv2d_geom *g = j->g;
    const T *x = j->x, *w = j->w, *dy = j->dy;
    T *dx = j->dx;
    const bool direct = j->direct;
    const int64_t G = g->groups, cg = g->c / G, mg = g->m / G;
    const int64_t K = cg * g->kh * g->kw, P = g->ho * g->wo, HW = g->h * g->w;
    if (dx && !direct && covering_tap(g) < 0) memset(dx + n * g->c * HW, 0, (size_t)(g->c * HW) * sizeof(T));
    for (int64_t gi = 0; gi < G; gi++) {
        const T *xg = x + (n * g->c + gi * cg) * HW;
        const T *wg = w + gi * mg * K;
        const T *dyg = dy + (n * g->m + gi * mg) * P;
        /* dW_g += dY_g [mg, P] * col^T [P, K], col^T packed from the image
         * (pack_cols_t) where the stride across is 1. Doubles, whose stream
         * packing has no vector path, only on rows of PACK_MIN_WO or more:
         * on LeNet's rows of 8 they ran 5% slower than through im2col. */
        FN(col_packer) cp = {g, xg};
        const bool pack_t = g->stride_w == 1 && (sizeof(T) == 4 || g->wo >= PACK_MIN_WO);
        if (dw_acc && direct) {
            GEMM(.tb = true, .M = mg, .N = K, .K = P, .alpha = 1, .A = dyg, .lda = P, .B = xg, .ldb = P, .beta = 1,
                 .C = dw_acc + gi * mg * K, .ldc = K);
        } else if (dw_acc &&
                   (!pack_t ||
                    !GEMM_PACKED(.M = mg, .N = K, .K = P, .alpha = 1, .A = dyg, .lda = P, .beta = 1,
                                 .C = dw_acc + gi * mg * K, .ldc = K, .pack = FN(pack_cols_t), .pack_ctx = &cp))) {
            FN(im2col)(g, cg, xg, col, j->inner_par);
            GEMM(.tb = true, .M = mg, .N = K, .K = P, .alpha = 1, .A = dyg, .lda = P, .B = col, .ldb = P, .beta = 1,
                 .C = dw_acc + gi * mg * K, .ldc = K);
        }
        if (dx) {
            T *dxg = dx + (n * g->c + gi * cg) * HW;
            /* dcol [K, P] = W_g^T [K, mg] * dY_g [mg, P] */
            if (direct) {
                GEMM(.ta = true, .M = K, .N = P, .K = mg, .alpha = 1, .A = wg, .lda = K, .B = dyg, .ldb = P, .C = dxg,
                     .ldc = P);
            } else {
                GEMM(.ta = true, .M = K, .N = P, .K = mg, .alpha = 1, .A = wg, .lda = K, .B = dyg, .ldb = P, .C = col,
                     .ldc = P);
                FN(col2im)(g, cg, col, dxg, j->inner_par);
            }
        }
    }
    /* The bias gradient from the image's dy, which the products above have
     * just brought into cache; in a pass of its own it came from memory (2%
     * of the conv net's step). */
    for (int64_t m = 0; db_acc && m < g->m; m++) db_acc[m] += FN(dy_plane_sum)(dy + (n * g->m + m) * P, P);
}

/* Share t of nt: chunks of images taken in turn from a shared counter (a
 * fixed split left a thread waiting on one the host slowed: 4.5% of the
 * convbn step at two threads), in the share's own column buffer. Each chunk
 * adds onto its own copy of the filter gradient, and the copies are added
 * in chunk order, so the result does not depend on which thread took which
 * chunk. */
static void FN(conv2d_grad_share)(void *arg, int t, int nt)
{
    FN(conv2d_grad_job) *j = arg;
    const int64_t n = j->g->n, chunks = j->n_chunks;
    T *col = j->cols ? j->cols + (size_t)t * j->col_elems : NULL;
    (void)nt;
    for (int64_t c; (c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < chunks;) {
        T *dw_acc = !j->dw ? NULL : j->dw_part ? j->dw_part + (size_t)c * (size_t)j->wsize : j->dw;
        double *db_acc = j->db_part ? j->db_part + c * j->g->m : NULL;
        for (int64_t i = n * c / chunks; i < n * (c + 1) / chunks; i++)
            FN(conv2d_grad_image)(j, i, col, dw_acc, db_acc);
    }
}

typedef struct FN(dw_sum_job) {
    const T *dw_part;
    T *dw;
    int64_t wsize;
    int64_t n_chunks;
} FN(dw_sum_job);

/* Filter gradient entries [lo, hi): the chunks' copies added in order. */
static void FN(dw_sum_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(dw_sum_job) *j = arg;
    for (int64_t i = lo; i < hi; i++) {
        T acc = 0;
        for (int64_t c = 0; c < j->n_chunks; c++) acc += j->dw_part[(size_t)c * (size_t)j->wsize + (size_t)i];
        j->dw[i] = acc;
    }
}

static nb_status FN(conv2d_grad)(const char *label, const nb_conv2d_geom *g, const conv2d_grad_tensors *t)
{
    const T *x = t->x, *w = t->w, *dy = t->dy;
    T *dx = t->dx, *dw = t->dw, *db = t->db;
    const int64_t G = g->groups, cg = g->c / G;
    const int64_t K = cg * g->kh * g->kw, P = g->ho * g->wo;
    const int64_t wsize = g->m * K;

    if (!dx && !dw && !db) return NB_OK;

    /* Without dx and dw there is no product, and no column buffer. */
    const bool direct = is_pointwise(g) || (!dx && !dw);
    const size_t col_elems = direct ? 0 : (size_t)(K * P);
    const double work = (double)g->n * (double)g->m * (double)P * ((double)K * ((dx ? 1 : 0) + (dw ? 1 : 0)) + 1);
    const int nt = batch_threads(g->n, work, col_elems * sizeof(T));
    const int64_t n_chunks = grad_chunks(g->n, nt, (size_t)wsize * sizeof(T));
    T *cols = NULL, *dw_part = NULL;
    double *db_part = NULL; /* each chunk's bias gradient, added in chunk order */
    if (!direct && !(cols = alloc_buf((size_t)nt * col_elems, sizeof(T))))
        return nb_error(NB_ERR_NOMEM, "%s: out of memory for a %lld x %lld column buffer", label, (long long)K,
                        (long long)P);
    if (db && !(db_part = nb_calloc((size_t)(n_chunks * g->m), sizeof *db_part))) {
        nb_free(cols);
        return nb_error(NB_ERR_NOMEM, "%s: out of memory for bias gradient buffers", label);
    }
    if (dw) {
        /* Images add onto the same filter gradient, so with several chunks
         * each sums into its own copy, and the copies are added at the end. */
        if (n_chunks > 1) {
            if (!(dw_part = nb_calloc((size_t)n_chunks * (size_t)wsize, sizeof(T)))) {
                nb_free(cols);
                nb_free(db_part);
                return nb_error(NB_ERR_NOMEM, "%s: out of memory for filter gradient buffers", label);
            }
        } else {
            memset(dw, 0, (size_t)wsize * sizeof(T));
        }
    }
    const bool inner_par = nt == 1 && work >= PAR_MIN_WORK;
    FN(conv2d_grad_job) job = {.g = g,
                               .x = x,
                               .w = w,
                               .dy = dy,
                               .dx = dx,
                               .dw = dw,
                               .cols = cols,
                               .dw_part = dw_part,
                               .col_elems = col_elems,
                               .db_part = db_part,
                               .wsize = wsize,
                               .n_chunks = n_chunks,
                               .direct = direct,
                               .inner_par = inner_par};
    nb_team_run(nt, FN(conv2d_grad_share), &job);
    for (int64_t m = 0; db && m < g->m; m++) {
        double acc = 0;
        for (int64_t c = 0; c < n_chunks; c++) acc += db_part[c * g->m + m];
        db[m] = (T)acc;
    }
    if (dw_part) {
        FN(dw_sum_job) sum_job = {dw_part, dw, wsize, n_chunks};
        nb_team_for(wsize, wsize * n_chunks >= 32768, FN(dw_sum_range), &sum_job);
    }
    nb_free(dw_part);
    nb_free(db_part);
    nb_free(cols);
    return NB_OK;
}

#undef FN
#undef CONV_CAT
#undef CONV_CAT_
