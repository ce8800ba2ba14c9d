/* The convolution's column matrix packed for the GEMM straight from the
 * image (nb_gemm_packer), never stored whole; conv_impl.h includes it once
 * per dtype. Row p of the matrix is the tap (c, ki, kj) = (p / (kh kw),
 * p / kw % kh, p % kw), column j the output position (j / wo, j % wo). */

/* The column matrix, for the forward's product W col. im2col wrote the
 * matrix, and the GEMM's packing read it back and wrote it again (3.9% and 2.8% of the conv net's step). The packer pays for each
 * output row a strip crosses, so it is used for rows of PACK_MIN_WO outputs
 * or more: one thread, 64 images, alternated in one process, medians
 * (ms, im2col / packed): 32 x 32 outputs, 32 -> 64 channels, 3x3: 25.2-30.1
 * / 22.1-25.1; 16 x 16, 64 -> 64: 12.0 / 12.5; LeNet's 8 x 8, 20 -> 50,
 * 5x5: 2.73-2.77 / 3.47-3.49. */
typedef struct FN(col_packer) {
    const nb_conv2d_geom *g;
    const T *x; /* the image-group's channels */
} FN(col_packer);

NB_SIMD_CLONES static void FN(pack_cols)(void *ctx, const nb_gemm_panel *pn, T *dst)
{
    const FN(col_packer) *cp = ctx;
    const int64_t p0 = pn->p0, kc = pn->kc, j0 = pn->j0, nc = pn->nc, q0 = pn->q0, q1 = pn->q1;
    const int nr = pn->nr;
    const nb_conv2d_geom *g = cp->g;
    const int64_t H = g->h, W = g->w, Wo = g->wo, sh = g->stride_h, sw = g->stride_w, taps = g->kh * g->kw;
    /* k outermost, as the GEMM's own packing: a tap's geometry is worked out
     * once, and each strip's first output position follows from the last. */
    for (int64_t k = 0; k < kc; k++) {
        const int64_t p = p0 + k, ki = p % taps / g->kw, kj = p % g->kw;
        const int64_t offh = ki * g->dil_h - g->pad_top, offw = kj * g->dil_w - g->pad_left;
        int64_t ow_lo, ow_hi;
        valid_range(offw, sw, W, Wo, &ow_lo, &ow_hi);
        const T *xc = cp->x + p / taps * H * W;
        int64_t oh0 = (j0 + q0 * nr) / Wo, ow0 = (j0 + q0 * nr) % Wo;
        for (int64_t q = q0; q < q1; q++) {
            const int64_t n = nc - q * nr < nr ? nc - q * nr : nr;
            T *d = dst + (q * kc + k) * nr;
            /* The strip's columns, output row by output row. */
            for (int64_t r = 0, oh = oh0, ow = ow0; r < n; oh++, ow = 0) {
                const int64_t seg = Wo - ow < n - r ? Wo - ow : n - r, ih = oh * sh + offh, end = ow + seg;
                if (ih < 0 || ih >= H) {
                    for (int64_t t = 0; t < seg; t++) d[r + t] = 0;
                } else {
                    const T *xr = xc + ih * W + offw;
                    int64_t a = ow_lo > ow ? (ow_lo < end ? ow_lo : end) : ow; /* padding before a */
                    int64_t b = ow_hi < end ? (ow_hi > a ? ow_hi : a) : end;   /* and from b on */
                    for (int64_t t = ow; t < a; t++) d[r + t - ow] = 0;
                    if (sw == 1) {
                        if (b > a)
                            copy_runs((char *)(d + r + a - ow), 0, (const char *)(xr + a), 0, 1,
                                      (size_t)(b - a) * sizeof(T));
                    } else {
                        for (int64_t t = a; t < b; t++) d[r + t - ow] = xr[t * sw];
                    }
                    for (int64_t t = b; t < end; t++) d[r + t - ow] = 0;
                }
                r += seg;
            }
            for (int64_t t = n; t < nr; t++) d[t] = 0;
            for (ow0 += nr; ow0 >= Wo; ow0 -= Wo) oh0++;
        }
    }
}

/* The column matrix transposed, as the filter gradient's product dW += dY
 * col^T packs it: strips of nr taps (its columns), kc output positions
 * down. Each output row's run of positions is, for one tap, a run of the
 * tap's input row (unit stride across), so the taps' runs go side by side
 * through nb_gemm_pack_streams, vectorised; the positions where some tap
 * of the strip reads padding go one element at a time. im2col wrote the
 * matrix and the GEMM's packing read it back to transpose it: the whole
 * gradient, old and new alternated in one process, 64 images, medians
 * (ms): the conv net's second convolution 58.6 -> 54.9, 69.9 -> 67.0, 64.5
 * -> 60.0 at one thread and 37.2 -> 34.6, 36.4 -> 34.5 at two; LeNet's
 * second 7.74 -> 7.49, 7.40 -> 7.27, 5.38 -> 5.30 and 3.89 -> 3.73, 3.80
 * -> 3.66. */
static const T FN(col_zeros)[COL_RUN]; /* the run of a tap that reads only padding */

/* Element (ow, tap j) of a strip of pack_cols_t, where some tap of the strip
 * reads padding. */
static inline void FN(pack_cols_t_edge)(const T *const *row, const int64_t *offw, const int64_t *lo, const int64_t *hi,
                                        int64_t n, int nr, int64_t ow, T *e)
{
    for (int64_t j = 0; j < nr; j++) e[j] = j < n && row[j] && ow >= lo[j] && ow < hi[j] ? row[j][ow + offw[j]] : 0;
}

NB_SIMD_CLONES static void FN(pack_cols_t)(void *ctx, const nb_gemm_panel *pn, T *dst)
{
    const FN(col_packer) *cp = ctx;
    const int64_t p0 = pn->p0, kc = pn->kc, j0 = pn->j0, nc = pn->nc, q0 = pn->q0, q1 = pn->q1;
    const int nr = pn->nr;
    const nb_conv2d_geom *g = cp->g;
    const int64_t H = g->h, W = g->w, Wo = g->wo, sh = g->stride_h, taps = g->kh * g->kw;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n = nc - q * nr < nr ? nc - q * nr : nr;
        /* Each tap's plane, offsets, and the output columns whose input is
         * inside the image across; the strip's common part of those. */
        const T *plane[COL_MAX_NR];
        int64_t offh[COL_MAX_NR], offw[COL_MAX_NR], lo[COL_MAX_NR], hi[COL_MAX_NR], lo_all = 0, hi_all = Wo;
        for (int64_t j = 0; j < n; j++) {
            const int64_t t = j0 + q * nr + j, ki = t % taps / g->kw, kj = t % g->kw;
            plane[j] = cp->x + t / taps * H * W;
            offh[j] = ki * g->dil_h - g->pad_top;
            offw[j] = kj * g->dil_w - g->pad_left;
            valid_range(offw[j], 1, W, Wo, &lo[j], &hi[j]);
            lo_all = lo[j] > lo_all ? lo[j] : lo_all;
            hi_all = hi[j] < hi_all ? hi[j] : hi_all;
        }
        T *d = dst + q * kc * nr;
        /* Output row by output row. */
        for (int64_t k = 0; k < kc;) {
            const int64_t p = p0 + k, oh = p / Wo, ow0 = p % Wo;
            const int64_t ow1 = ow0 + (Wo - ow0 < kc - k ? Wo - ow0 : kc - k);
            const T *row[COL_MAX_NR]; /* the tap's input row, or NULL where it is padding */
            for (int64_t j = 0; j < n; j++) {
                const int64_t ih = oh * sh + offh[j];
                row[j] = ih >= 0 && ih < H ? plane[j] + ih * W : NULL;
            }
            const int64_t a = lo_all < ow0 ? ow0 : lo_all > ow1 ? ow1 : lo_all;
            const int64_t b = hi_all > ow1 ? ow1 : hi_all < a ? a : hi_all;
            T *dk = d + (k - ow0) * nr; /* output column ow's taps at dk + ow * nr */
            for (int64_t ow = ow0; ow < a; ow++) FN(pack_cols_t_edge)(row, offw, lo, hi, n, nr, ow, dk + ow * nr);
            for (int64_t r0 = a; r0 < b; r0 += COL_RUN) {
                const int64_t len = b - r0 < COL_RUN ? b - r0 : COL_RUN;
                const T *src[COL_MAX_NR];
                for (int64_t j = 0; j < nr; j++) src[j] = j < n && row[j] ? row[j] + r0 + offw[j] : FN(col_zeros);
                GEMM_PACK_STREAMS(src, len, nr, dk + r0 * nr);
            }
            for (int64_t ow = b; ow < ow1; ow++) FN(pack_cols_t_edge)(row, offw, lo, hi, n, nr, ow, dk + ow * nr);
            k += ow1 - ow0;
        }
    }
}
