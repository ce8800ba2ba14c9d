/* The max pooling of the usual window, 2 x 2 at stride 2 tiling the image
 * (LeNet's, VGG's), and its gradient; pool_impl.h includes it once per
 * dtype, after window_argmax and POOL_MAX. */

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
    int64_t hit = top[c] == v ? c
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
