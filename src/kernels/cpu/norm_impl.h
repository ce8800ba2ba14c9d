/* Typed body of the normalisation kernels; norm.c includes it once per dtype
 * with T (the element type) and SFX (a name suffix) defined. */
#define NORM_CAT_(a, b) a##_##b
#define NORM_CAT(a, b) NORM_CAT_(a, b)
#define FN(name) NORM_CAT(name, SFX)

#include "row_sum_impl.h"

/* More sums over a row in lanes, as row_sum: sqdev: of (x - m)^2; dot2: of
 * g and of g * (x - m) * iv with g = dy * scale (scale may be NULL). */

static inline double FN(row_sqdev)(const T *x, int64_t n, double m)
{
    double a[ROW_LANES] = {0};
    int64_t j = 0;
    for (; j + ROW_LANES <= n; j += ROW_LANES)
        for (int u = 0; u < ROW_LANES; u++) a[u] += (x[j + u] - m) * (x[j + u] - m);
    for (; j < n; j++) a[0] += (x[j] - m) * (x[j] - m);
    return FN(lanes_total)(a);
}

/* The sum of g * (x - m), g = dy (* scale). */
static inline double FN(row_dot)(const T *dy, const T *scale, const T *x, int64_t n, double m)
{
    double a[ROW_LANES] = {0};
    int64_t j = 0;
    if (scale)
        for (; j + ROW_LANES <= n; j += ROW_LANES)
            for (int u = 0; u < ROW_LANES; u++) a[u] += (double)dy[j + u] * scale[j + u] * (x[j + u] - m);
    else
        for (; j + ROW_LANES <= n; j += ROW_LANES)
            for (int u = 0; u < ROW_LANES; u++) a[u] += (double)dy[j + u] * (x[j + u] - m);
    for (; j < n; j++) a[0] += (scale ? (double)dy[j] * scale[j] : dy[j]) * (x[j] - m);
    return FN(lanes_total)(a);
}

/* The sum of dy * scale. */
static inline double FN(row_dot_scale)(const T *dy, const T *scale, int64_t n)
{
    double a[ROW_LANES] = {0};
    int64_t j = 0;
    for (; j + ROW_LANES <= n; j += ROW_LANES)
        for (int u = 0; u < ROW_LANES; u++) a[u] += (double)dy[j + u] * scale[j + u];
    for (; j < n; j++) a[0] += (double)dy[j] * scale[j];
    return FN(lanes_total)(a);
}

/* Two passes, each with one sum: GCC vectorised neither sum when one loop
 * kept both, and the second pass reads a row from L1. */
static inline void FN(row_dot2)(const T *dy, const T *scale, const T *x, int64_t n, double m, double iv, double *s1,
                                double *s2)
{
    *s1 = scale ? FN(row_dot_scale)(dy, scale, n) : FN(row_sum)(dy, n);
    *s2 = FN(row_dot)(dy, scale, x, n, m) * iv;
}

/* Batch norm's loops over one plane (a channel of an image, contiguous),
 * each its own function so that it is compiled for AVX2 too (simd.h). */
NB_SIMD_CLONES static double FN(plane_sum)(const T *x, int64_t n) { return FN(row_sum)(x, n); }

NB_SIMD_CLONES static double FN(plane_sqdev)(const T *x, int64_t n, double m) { return FN(row_sqdev)(x, n, m); }

/* sum of dy, and of dy * (x - m) */
NB_SIMD_CLONES static void FN(plane_dot2)(const T *dy, const T *x, int64_t n, double m, double *s1, double *s2)
{
    FN(row_dot2)(dy, NULL, x, n, m, 1.0, s1, s2);
}

/* Asks for plane p + 1 of a (s elements a plane) to come into cache while
 * plane p is summed: each plane is read from memory in one pass and then
 * again from L1, and in the later passes the memory would sit idle. Ahead
 * of the gradient's sums this took batch_norm_grad on [64, 64, 32, 32] from
 * 7.6 to 6.9 ms at one thread (the forward's statistics, one pass from
 * memory and one from L1, gained nothing measurable from it). */
static inline void FN(prefetch_plane)(const T *a, int64_t p, int64_t hi, int64_t s)
{
    if (p + 1 < hi)
        for (int64_t i = 0; i < s; i += 64 / (int64_t)sizeof(T)) __builtin_prefetch(a + (p + 1) * s + i);
}

/* One plane's sums for a training gradient, whose statistics come from x:
 * of x, of (x - pm)^2, of dy and of dy * (x - pm), pm the plane's mean. x
 * and dy come from memory once; the later passes find them in L1. */
NB_SIMD_CLONES static void FN(plane_grad_sums)(const T *x, const T *dy, int64_t n, double *sx, double *sq, double *sdy,
                                               double *sdyx)
{
    *sx = FN(row_sum)(x, n);
    const double pm = n ? *sx / (double)n : 0;
    *sq = FN(row_sqdev)(x, n, pm);
    FN(row_dot2)(dy, NULL, x, n, pm, 1.0, sdy, sdyx);
}

/* y = (x - m) * a + b */
NB_SIMD_CLONES static void FN(plane_affine)(const T *x, int64_t n, T m, T a, T b, T *y)
{
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) * a + b;
}

/* dx = k * (dy - c0 - (x - m) * c1) */
NB_SIMD_CLONES static void FN(plane_dx)(const T *dy, const T *x, int64_t n, T k, T m, T c0, T c1, T *dx)
{
    for (int64_t j = 0; j < n; j++) dx[j] = k * (dy[j] - c0 - (x[j] - m) * c1);
}

typedef struct FN(batch_norm_job) {
    const T *x;
    int64_t c, s, planes;
    const double *mu, *inv; /* per channel */
    const T *scale, *bias;
    T *y;
    double *ps; /* per plane: sums, then sums of squares about the plane's mean */
} FN(batch_norm_job);

/* Each plane's sum, and its sum of squares about its own mean: the second
 * pass reads the plane from L1 (a 32 x 32 plane is 4 KiB), not memory. */
static void FN(plane_stats_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(batch_norm_job) *j = arg;
    const int64_t s = j->s, planes = j->planes;
    for (int64_t p = lo; p < hi; p++) {
        const T *xp = j->x + p * s;
        j->ps[p] = FN(plane_sum)(xp, s);
        j->ps[planes + p] = s ? FN(plane_sqdev)(xp, s, j->ps[p] / (double)s) : 0;
    }
}

static void FN(batch_norm_planes_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(batch_norm_job) *j = arg;
    const double *inv = j->inv;
    const T *scale = j->scale, *bias = j->bias;
    const int64_t c = j->c, s = j->s;
    for (int64_t p = lo; p < hi; p++) {
        const int64_t ch = p % c;
        const T a = (T)(inv[ch] * (scale ? (double)scale[ch] : 1.0)), b = bias ? bias[ch] : (T)0;
        FN(plane_affine)(j->x + p * s, s, (T)j->mu[ch], a, b, j->y + p * s);
    }
}

static nb_status FN(batch_norm)(const char *label, const nb_batch_norm_params *p, const bn_tensors *t)
{
    const int64_t n = t->n, c = t->c, s = t->s;
    const T *x = t->x, *scale = t->scale, *bias = t->bias, *mean = t->mean, *var = t->var;
    T *y = t->y, *mean_out = t->mean_out, *var_out = t->var_out, *saved_mean = t->saved_mean,
      *saved_invstd = t->saved_invstd;
    const bool global = p->global_stats;
    const double momentum = p->momentum, eps = p->epsilon;
    const int64_t planes = n * c, m = n * s;
    const bool par = (double)planes * (double)s >= PAR_MIN_WORK;
    double *mu = dalloc(3 * c), *ps = NULL;
    if (!mu) return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
    double *inv = mu + c, *bvar = mu + 2 * c;
    FN(batch_norm_job) job = {x, c, s, planes, mu, inv, scale, bias, y, NULL};
    if (global) {
        for (int64_t ch = 0; ch < c; ch++) {
            mu[ch] = mean[ch];
            bvar[ch] = var[ch];
            inv[ch] = 1.0 / sqrt(bvar[ch] + eps);
        }
    } else {
        if (!(ps = dalloc(2 * planes))) {
            nb_free(mu);
            return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
        }
        job.ps = ps;
        /* Centred sums of squares, which do not cancel as sums of x^2 would,
         * with memory read once: per plane about its own mean, then pooled
         * per channel (Chan, Golub and LeVeque's update): the channel's sum
         * is each plane's plus s * (plane mean - channel mean)^2. */
        nb_team_for(planes, par, FN(plane_stats_range), &job);
        sum_planes(ps, n, c, mu);
        sum_planes(ps + planes, n, c, bvar);
        for (int64_t ch = 0; ch < c; ch++) mu[ch] /= (double)m;
        for (int64_t p = 0; s && p < planes; p++) {
            const double d = ps[p] / (double)s - mu[p % c];
            bvar[p % c] += (double)s * d * d;
        }
        for (int64_t ch = 0; ch < c; ch++) {
            bvar[ch] /= (double)m;
            inv[ch] = 1.0 / sqrt(bvar[ch] + eps);
        }
    }
    /* The running statistics may be updated in place: each channel's old
     * value is read before its new one is written. */
    const double unbias = m > 1 ? (double)m / (double)(m - 1) : 1.0;
    for (int64_t ch = 0; ch < c; ch++) {
        double new_mean = mu[ch], new_var = bvar[ch];
        if (!global) {
            new_mean = momentum * (double)mean[ch] + (1 - momentum) * mu[ch];
            new_var = momentum * (double)var[ch] + (1 - momentum) * bvar[ch] * unbias;
        }
        if (mean_out) mean_out[ch] = (T)new_mean;
        if (var_out) var_out[ch] = (T)new_var;
        if (saved_mean) saved_mean[ch] = (T)mu[ch];
        if (saved_invstd) saved_invstd[ch] = (T)inv[ch];
    }
    if (y) nb_team_for(planes, par, FN(batch_norm_planes_range), &job);
    nb_free(ps);
    nb_free(mu);
    return NB_OK;
}

typedef struct FN(batch_norm_grad_job) {
    const T *x, *dy, *scale;
    int64_t c, s, planes, m;
    const double *mu, *inv, *sdy, *sdyx; /* per channel */
    bool global;
    T *dx;
    double *ps; /* per plane: the sums plane_dot2 or plane_grad_sums make */
} FN(batch_norm_grad_job);

static void FN(plane_dots_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(batch_norm_grad_job) *j = arg;
    const int64_t s = j->s;
    for (int64_t p = lo; p < hi; p++)
        FN(plane_dot2)(j->dy + p * s, j->x + p * s, s, j->mu[p % j->c], &j->ps[p], &j->ps[j->planes + p]);
}

static void FN(plane_grad_sums_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(batch_norm_grad_job) *j = arg;
    const int64_t s = j->s, P = j->planes;
    double *ps = j->ps;
    for (int64_t p = lo; p < hi; p++) {
        FN(prefetch_plane)(j->x, p, hi, s);
        FN(prefetch_plane)(j->dy, p, hi, s);
        FN(plane_grad_sums)(j->x + p * s, j->dy + p * s, s, &ps[p], &ps[P + p], &ps[2 * P + p], &ps[3 * P + p]);
    }
}

static void FN(batch_norm_dx_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(batch_norm_grad_job) *j = arg;
    const double *inv = j->inv, *sdy = j->sdy, *sdyx = j->sdyx, *mu = j->mu;
    const T *scale = j->scale;
    const int64_t c = j->c, s = j->s, m = j->m;
    for (int64_t p = lo; p < hi; p++) {
        const int64_t ch = p % c;
        const T *xp = j->x + p * s, *dp = j->dy + p * s;
        T *dxp = j->dx + p * s;
        const T k = (T)(inv[ch] * (scale ? (double)scale[ch] : 1.0));
        if (j->global) {
            FN(plane_affine)(dp, s, 0, k, 0, dxp); /* k * dy */
        } else {
            const T c0 = (T)(sdy[ch] / (double)m), c1 = (T)(inv[ch] * inv[ch] * sdyx[ch] / (double)m);
            FN(plane_dx)(dp, xp, s, k, (T)mu[ch], c0, c1, dxp);
        }
    }
}

/* The gradient of batch_norm. Training with the statistics from x (mean
 * NULL): one pass over the planes sums x, dy and their products about each
 * plane's mean, and the channel's statistics and sums follow from those
 * (Chan, Golub and LeVeque's update, as in the forward): recomputing the
 * statistics first read x twice more. Otherwise mean and stat are given. */
static nb_status FN(batch_norm_grad)(const char *label, const nb_batch_norm_params *p, const bn_grad_tensors *t)
{
    const int64_t n = t->n, c = t->c, s = t->s;
    const T *x = t->x, *scale = t->scale, *mean = t->mean, *stat = t->stat, *dy = t->dy;
    T *dx = t->dx, *dscale = t->dscale, *dbias = t->dbias;
    const bool stat_is_var = t->stat_is_var, global = p->global_stats;
    const double eps = p->epsilon;
    const int64_t planes = n * c, m = n * s;
    const bool par = (double)planes * (double)s >= PAR_MIN_WORK, from_x = !global && !mean;
    double *inv = dalloc(4 * c), *ps = NULL;
    if (!inv) return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
    double *sdy = inv + c, *sdyx = inv + 2 * c, *mu = inv + 3 * c;
    FN(batch_norm_grad_job) job = {x, dy, scale, c, s, planes, m, mu, inv, sdy, sdyx, global, dx, NULL};
    for (int64_t ch = 0; !from_x && ch < c; ch++) {
        mu[ch] = mean[ch];
        inv[ch] = stat_is_var ? 1.0 / sqrt((double)stat[ch] + eps) : stat[ch];
    }
    if (from_x || dscale || dbias || (dx && !global)) {
        if (!(ps = dalloc((from_x ? 4 : 2) * planes))) {
            nb_free(inv);
            return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
        }
        job.ps = ps;
        if (from_x) {
            nb_team_for(planes, par, FN(plane_grad_sums_range), &job);
            sum_planes(ps, n, c, mu);
            double *var = inv; /* sums of squares about the mean, then 1 / sqrt(var + eps) */
            sum_planes(ps + planes, n, c, var);
            sum_planes(ps + 2 * planes, n, c, sdy);
            sum_planes(ps + 3 * planes, n, c, sdyx);
            for (int64_t ch = 0; ch < c; ch++) mu[ch] = m ? mu[ch] / (double)m : 0;
            /* Each plane's sums are about its own mean pm: about the channel's,
             * sum (x - mu)^2 gains s (pm - mu)^2, and sum dy (x - mu) gains
             * (pm - mu) sum dy. */
            for (int64_t p = 0; s && p < planes; p++) {
                const double d = ps[p] / (double)s - mu[p % c];
                var[p % c] += (double)s * d * d;
                sdyx[p % c] += d * ps[2 * planes + p];
            }
            for (int64_t ch = 0; ch < c; ch++) inv[ch] = 1.0 / sqrt((m ? var[ch] / (double)m : 0) + eps);
        } else {
            nb_team_for(planes, par, FN(plane_dots_range), &job);
            sum_planes(ps, n, c, sdy);
            sum_planes(ps + planes, n, c, sdyx);
        }
        for (int64_t ch = 0; ch < c; ch++) {
            if (dbias) dbias[ch] = (T)sdy[ch];
            if (dscale) dscale[ch] = (T)(sdyx[ch] * inv[ch]);
        }
    }
    if (dx) {
        /* Training: dx = scale * inv * (dy - mean(dy) - xhat * mean(dy * xhat)),
         * the batch statistics depending on x too; global statistics are
         * constants, leaving only the first term. */
        nb_team_for(planes, par, FN(batch_norm_dx_range), &job);
    }
    nb_free(ps);
    nb_free(inv);
    return NB_OK;
}

/* One row of layer norm; its own function so that it is compiled for AVX2
 * too (simd.h). */
NB_SIMD_CLONES static void FN(layer_norm_row)(int64_t cols, const T *xr, const T *scale, const T *bias, double eps,
                                              T *yr, T *mean, T *var)
{
    const double mu = cols ? FN(row_sum)(xr, cols) / (double)cols : 0;
    const double v = cols ? FN(row_sqdev)(xr, cols, mu) / (double)cols : 0;
    if (mean) *mean = (T)mu;
    if (var) *var = (T)v;
    if (!yr) return;
    const T mt = (T)mu, inv = (T)(1.0 / sqrt(v + eps));
    if (scale && bias)
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mt) * inv * scale[j] + bias[j];
    else if (scale)
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mt) * inv * scale[j];
    else if (bias)
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mt) * inv + bias[j];
    else
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mt) * inv;
}

typedef struct FN(layer_norm_job) {
    int64_t cols;
    const T *x, *scale, *bias;
    double eps;
    T *y, *mean, *var;
} FN(layer_norm_job);

static void FN(layer_norm_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(layer_norm_job) *j = arg;
    const int64_t cols = j->cols;
    T *y = j->y, *mean = j->mean, *var = j->var;
    for (int64_t r = lo; r < hi; r++)
        FN(layer_norm_row)(cols, j->x + r * cols, j->scale, j->bias, j->eps, y ? y + r * cols : NULL,
                           mean ? mean + r : NULL, var ? var + r : NULL);
}

static void FN(layer_norm)(double eps, const ln_tensors *t)
{
    const int64_t rows = t->rows, cols = t->cols;
    FN(layer_norm_job) job = {cols, t->x, t->scale, t->bias, eps, t->y, t->mean, t->var};
    nb_team_for(rows, (double)rows * (double)cols >= PAR_MIN_WORK, FN(layer_norm_range), &job);
}

typedef struct FN(layer_norm_grad_job) {
    int64_t rows, cols;
    const T *x, *scale, *mean, *dy;
    const double *inv; /* per row */
    T *dx, *dscale, *dbias;
} FN(layer_norm_grad_job);

/* Columns [j0, j1) of DScale and DBias, summed over every row: COL_REG at a
 * time, whose sums stay in vector registers, and the rest together. */
NB_SIMD_CLONES static void FN(layer_norm_grad_cols)(const FN(layer_norm_grad_job) *job, int64_t j0, int64_t j1)
{
    const int64_t rows = job->rows, cols = job->cols;
    const T *x = job->x, *mean = job->mean, *dy = job->dy;
    const double *inv = job->inv;
    T *dscale = job->dscale, *dbias = job->dbias;
    for (int64_t jb = j0; jb < j1; jb += COL_REG) {
        const int64_t n = j1 - jb < COL_REG ? j1 - jb : COL_REG;
        double ds[COL_REG] = {0}, db[COL_REG] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const T *xr = x + r * cols + jb, *dr = dy + r * cols + jb;
            const double mu = mean[r], iv = inv[r];
            if (n == COL_REG) {
                NB_OMP_SIMD
                for (int j = 0; j < COL_REG; j++) {
                    db[j] += dr[j];
                    ds[j] += dr[j] * ((xr[j] - mu) * iv);
                }
            } else {
                for (int64_t j = 0; j < n; j++) {
                    db[j] += dr[j];
                    ds[j] += dr[j] * ((xr[j] - mu) * iv);
                }
            }
        }
        for (int64_t j = 0; j < n; j++) {
            if (dscale) dscale[jb + j] = (T)ds[j];
            if (dbias) dbias[jb + j] = (T)db[j];
        }
    }
}

/* One row of DX: with g = dy * scale, inv * (g - mean(g) - xhat * mean(g * xhat)). */
NB_SIMD_CLONES static void FN(layer_norm_grad_row)(int64_t cols, const T *xr, const T *scale, double mu, double iv,
                                                   const T *dr, T *dxr)
{
    double s1, s2;
    FN(row_dot2)(dr, scale, xr, cols, mu, iv, &s1, &s2);
    const T mt = (T)mu, ivt = (T)iv, c0 = (T)(cols ? s1 / (double)cols : 0), c1 = (T)(cols ? s2 / (double)cols : 0);
    for (int64_t j = 0; j < cols; j++) {
        T gj = scale ? dr[j] * scale[j] : dr[j];
        T xh = (xr[j] - mt) * ivt;
        dxr[j] = ivt * (gj - c0 - xh * c1);
    }
}

/* Column blocks [lo, hi) of DScale and DBias. */
static void FN(layer_norm_grad_cols_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(layer_norm_grad_job) *j = arg;
    const int64_t cols = j->cols;
    for (int64_t bk = lo; bk < hi; bk++) {
        const int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < cols ? j0 + COL_BLOCK : cols;
        FN(layer_norm_grad_cols)(j, j0, j1);
    }
}

/* Rows [lo, hi) of DX. */
static void FN(layer_norm_grad_rows_range)(void *arg, int64_t lo, int64_t hi)
{
    const FN(layer_norm_grad_job) *j = arg;
    const int64_t cols = j->cols;
    for (int64_t r = lo; r < hi; r++)
        FN(layer_norm_grad_row)(cols, j->x + r * cols, j->scale, j->mean[r], j->inv[r], j->dy + r * cols,
                                j->dx + r * cols);
}

static nb_status FN(layer_norm_grad)(const char *label, double eps, const ln_grad_tensors *t)
{
    const int64_t rows = t->rows, cols = t->cols;
    const T *x = t->x, *scale = t->scale, *mean = t->mean, *var = t->var, *dy = t->dy;
    T *dx = t->dx, *dscale = t->dscale, *dbias = t->dbias;
    const bool par = (double)rows * (double)cols >= PAR_MIN_WORK;
    double *inv = dalloc(rows);
    if (!inv) return nb_error(NB_ERR_NOMEM, "%s: out of memory", label);
    for (int64_t r = 0; r < rows; r++) inv[r] = 1.0 / sqrt((double)var[r] + eps);
    FN(layer_norm_grad_job) job = {rows, cols, x, scale, mean, dy, inv, dx, dscale, dbias};
    /* DScale and DBias first: dx may overwrite dy. They sum over rows, so
     * threads take blocks of columns and walk every row. */
    if (dscale || dbias) {
        const int64_t nblocks = (cols + COL_BLOCK - 1) / COL_BLOCK;
        nb_team_for(nblocks, par, FN(layer_norm_grad_cols_range), &job);
    }
    if (dx) nb_team_for(rows, par, FN(layer_norm_grad_rows_range), &job);
    nb_free(inv);
    return NB_OK;
}

#undef FN
#undef NORM_CAT
#undef NORM_CAT_
