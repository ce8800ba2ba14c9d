/* Byte-moving kernels: strided copies, concatenation, splitting, padding;
 * and the shape family's kernel table. */
#include <stdbool.h>
#include "../kernels.h"
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "nabla/tensor.h"
#include "index.h"
#include "shape.h"
#include "team.h"

/* One element is copied with memcpy of a constant size: the compiler emits a
 * single move, and the bytes (floats or integers alike) never go through a
 * typed pointer of the wrong type. */
#define ELEMENT_LOOPS(K)                                                                      \
    static void gather_run_##K(char *d, const char *s, int64_t n, int64_t step)                \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) memcpy(d + j * K, s + j * step, K);                   \
    }                                                                                         \
    static void fill_run_##K(char *d, const char *e, int64_t n)                                \
    {                                                                                         \
        for (int64_t j = 0; j < n; j++) memcpy(d + j * K, e, K);                              \
    }                                                                                         \
    /* Rows i0..i1 of a transposition: d[i][j] = s[i + j * step] for j < b, walked in   \
     * column tiles so that the source lines a tile touches stay in cache. */               \
    static void tile_rows_##K(char *d, const char *s, int64_t i0, int64_t i1, int64_t b,     \
                              int64_t step)                                                   \
    {                                                                                         \
        for (int64_t j0 = 0; j0 < b; j0 += TILE) {                                            \
            int64_t j1 = j0 + TILE < b ? j0 + TILE : b;                                       \
            for (int64_t i = i0; i < i1; i++)                                                 \
                for (int64_t j = j0; j < j1; j++) memcpy(d + (i * b + j) * K, s + i * K + j * step, K); \
        }                                                                                     \
    }

#define TILE 32

ELEMENT_LOOPS(1)
ELEMENT_LOOPS(2)
ELEMENT_LOOPS(4)
ELEMENT_LOOPS(8)

static void gather_run(char *d, const char *s, int64_t n, int64_t step, size_t el)
{
    switch (el) {
    case 1: gather_run_1(d, s, n, step); return;
    case 2: gather_run_2(d, s, n, step); return;
    case 4: gather_run_4(d, s, n, step); return;
    case 8: gather_run_8(d, s, n, step); return;
    default:
        for (int64_t j = 0; j < n; j++) memcpy(d + (size_t)j * el, s + j * step, el);
    }
}

static void fill_run(char *d, const char *e, int64_t n, size_t el)
{
    switch (el) {
    case 1: fill_run_1(d, e, n); return;
    case 2: fill_run_2(d, e, n); return;
    case 4: fill_run_4(d, e, n); return;
    case 8: fill_run_8(d, e, n); return;
    default:
        for (int64_t j = 0; j < n; j++) memcpy(d + (size_t)j * el, e, el);
    }
}

static void tile_rows(char *d, const char *s, int64_t i0, int64_t i1, int64_t b, int64_t step, size_t el)
{
    switch (el) {
    case 1: tile_rows_1(d, s, i0, i1, b, step); return;
    case 2: tile_rows_2(d, s, i0, i1, b, step); return;
    case 4: tile_rows_4(d, s, i0, i1, b, step); return;
    case 8: tile_rows_8(d, s, i0, i1, b, step); return;
    default:
        for (int64_t i = i0; i < i1; i++) gather_run(d + (size_t)(i * b) * el, s + (size_t)i * el, b, step, el);
    }
}

/* ---- strided copy ------------------------------------------------------- */

/* A copy after dropping size-1 dims and merging dims that are laid out
 * back to back in the source (the destination is contiguous, so any two
 * neighbours merge there); strides are in bytes. A plain reshape ends up as
 * one run, a batched transpose as three dims. */
typedef struct copy_plan {
    int nd;
    int64_t shape[NB_MAX_DIMS];
    int64_t stride[NB_MAX_DIMS];
    size_t el;
    char *dst;
    const char *src;
} copy_plan;

/* Byte offset in the source of row r (all dims but the last) of the plan,
 * with the per-dim counters it starts from. */
static int64_t row_offset(const copy_plan *p, int dims, int64_t r, int64_t *idx)
{
    int64_t off = 0;
    for (int k = dims - 1; k >= 0; k--) {
        idx[k] = r % p->shape[k];
        r /= p->shape[k];
        off += idx[k] * p->stride[k];
    }
    return off;
}

static void copy_rows(const copy_plan *p, int64_t r0, int64_t r1)
{
    int outer = p->nd - 1;
    int64_t len = p->shape[outer], step = p->stride[outer];
    int64_t idx[NB_MAX_DIMS];
    int64_t off = row_offset(p, outer, r0, idx);
    size_t row_bytes = (size_t)len * p->el;
    char *d = p->dst + (size_t)r0 * row_bytes;
    for (int64_t r = r0; r < r1; r++, d += row_bytes) {
        const char *s = p->src + off;
        if (step == (int64_t)p->el) memcpy(d, s, row_bytes);
        else if (step == 0) fill_run(d, s, len, p->el);
        else gather_run(d, s, len, step, p->el);
        for (int k = outer - 1; k >= 0; k--) {
            off += p->stride[k];
            if (++idx[k] < p->shape[k]) break;
            off -= p->stride[k] * p->shape[k];
            idx[k] = 0;
        }
    }
}

/* Work unit u of a batched transposition: batch u / blocks, row block u % blocks. */
static void copy_tiles(const copy_plan *p, int64_t u0, int64_t u1)
{
    int batch_dims = p->nd - 2;
    int64_t a = p->shape[p->nd - 2], b = p->shape[p->nd - 1], step = p->stride[p->nd - 1];
    int64_t blocks = (a + TILE - 1) / TILE;
    int64_t idx[NB_MAX_DIMS];
    for (int64_t u = u0; u < u1; u++) {
        int64_t batch = u / blocks, i0 = (u % blocks) * TILE;
        int64_t i1 = i0 + TILE < a ? i0 + TILE : a;
        int64_t off = row_offset(p, batch_dims, batch, idx);
        tile_rows(p->dst + (size_t)(batch * a * b) * p->el, p->src + off, i0, i1, b, step, p->el);
    }
}

/* A copy cut into `chunks` even pieces of its `units` (tiles or rows); a
 * range function copies pieces [lo, hi). */
typedef struct copy_job {
    const copy_plan *plan;
    int64_t units, chunks;
} copy_job;

static void copy_tiles_range(void *arg, int64_t lo, int64_t hi)
{
    const copy_job *j = arg;
    for (int64_t c = lo; c < hi; c++) copy_tiles(j->plan, j->units * c / j->chunks, j->units * (c + 1) / j->chunks);
}

static void copy_rows_range(void *arg, int64_t lo, int64_t hi)
{
    const copy_job *j = arg;
    for (int64_t c = lo; c < hi; c++) copy_rows(j->plan, j->units * c / j->chunks, j->units * (c + 1) / j->chunks);
}

void nb_cpu_strided_copy(void *dst, const void *src, int ndim, const int64_t *shape, const int64_t *strides, size_t el)
{
    copy_plan p = {.nd = 0, .el = el, .dst = dst, .src = src};
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= shape[d];
    if (total == 0) return;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        if (p.nd > 0 && p.stride[p.nd - 1] == strides[d] * shape[d]) {
            p.shape[p.nd - 1] *= shape[d];
            p.stride[p.nd - 1] = strides[d];
        } else {
            p.shape[p.nd] = shape[d];
            p.stride[p.nd] = strides[d];
            p.nd++;
        }
    }
    for (int d = 0; d < p.nd; d++) p.stride[d] *= (int64_t)el;
    if (p.nd == 0) {
        memcpy(dst, src, el);
        return;
    }
    bool par = total >= NB_SHAPE_PARALLEL_MIN;
    int64_t last = p.stride[p.nd - 1];
    if (p.nd >= 2 && p.stride[p.nd - 2] == (int64_t)el && last != (int64_t)el && last != 0) {
        /* The source's unit-stride dim is not the last: a transposition. */
        int64_t units = total / (p.shape[p.nd - 2] * p.shape[p.nd - 1]) * ((p.shape[p.nd - 2] + TILE - 1) / TILE);
        int64_t chunks = units < 256 ? units : 256;
        copy_job j = {&p, units, chunks};
        nb_team_for(chunks, par && chunks > 1, copy_tiles_range, &j);
        return;
    }
    int64_t rows = total / p.shape[p.nd - 1];
    int64_t chunks = rows < 256 ? rows : 256;
    copy_job j = {&p, rows, chunks};
    nb_team_for(chunks, par && chunks > 1, copy_rows_range, &j);
}

/* ---- concat / split -------------------------------------------------------- */

typedef struct concat_job {
    void *dst;
    int n;
    const void *const *src;
    const size_t *row_bytes;
    size_t total;
} concat_job;

static void concat_range(void *arg, int64_t lo, int64_t hi)
{
    const concat_job *j = arg;
    for (int64_t o = lo; o < hi; o++) {
        char *d = (char *)j->dst + (size_t)o * j->total;
        for (int i = 0; i < j->n; i++) {
            memcpy(d, (const char *)j->src[i] + (size_t)o * j->row_bytes[i], j->row_bytes[i]);
            d += j->row_bytes[i];
        }
    }
}

typedef struct split_job {
    void *const *dst;
    int n;
    const void *src;
    const size_t *row_bytes;
    size_t total;
} split_job;

static void split_range(void *arg, int64_t lo, int64_t hi)
{
    const split_job *j = arg;
    for (int64_t o = lo; o < hi; o++) {
        const char *s = (const char *)j->src + (size_t)o * j->total;
        for (int i = 0; i < j->n; i++) {
            memcpy((char *)j->dst[i] + (size_t)o * j->row_bytes[i], s, j->row_bytes[i]);
            s += j->row_bytes[i];
        }
    }
}

void nb_cpu_concat(void *dst, int n, const void *const *src, const size_t *row_bytes, int64_t outer)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += row_bytes[i];
    if (!total) return;
    concat_job j = {dst, n, src, row_bytes, total};
    nb_team_for(outer, outer > 1 && (size_t)outer * total >= NB_SHAPE_PARALLEL_BYTES, concat_range, &j);
}

void nb_cpu_split(void *const *dst, int n, const void *src, const size_t *row_bytes, int64_t outer)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += row_bytes[i];
    if (!total) return;
    split_job j = {dst, n, src, row_bytes, total};
    nb_team_for(outer, outer > 1 && (size_t)outer * total >= NB_SHAPE_PARALLEL_BYTES, split_range, &j);
}

/* ---- pad --------------------------------------------------------------------- */

/* For every dim, map[d][j] is the source index that output index j reads,
 * or -1 where the constant fills in. Rows (all dims but the last) whose
 * outer indices all map somewhere copy their middle in one run. */
typedef struct pad_plan {
    int nd;
    int64_t out_shape[NB_MAX_DIMS];
    int64_t in_stride[NB_MAX_DIMS]; /* bytes */
    int64_t *map[NB_MAX_DIMS];
    int64_t before_last, in_last;
    const char *fill;
    size_t el;
    char *dst;
    const char *src;
} pad_plan;

static void pad_rows(const pad_plan *p, int64_t r0, int64_t r1)
{
    int outer = p->nd - 1;
    int64_t len = p->out_shape[outer], idx[NB_MAX_DIMS];
    int64_t r = r0;
    for (int k = outer - 1; k >= 0; k--) {
        idx[k] = r % p->out_shape[k];
        r /= p->out_shape[k];
    }
    size_t el = p->el, row_bytes = (size_t)len * el;
    const int64_t *ml = p->map[outer];
    int64_t b = p->before_last, n = p->in_last;
    char *d = p->dst + (size_t)r0 * row_bytes;
    for (int64_t row = r0; row < r1; row++, d += row_bytes) {
        int64_t off = 0;
        bool inside = true;
        for (int k = 0; k < outer && inside; k++) {
            int64_t m = p->map[k][idx[k]];
            inside = m >= 0;
            off += m * p->in_stride[k];
        }
        if (!inside) {
            fill_run(d, p->fill, len, el);
        } else {
            const char *s = p->src + off;
            for (int64_t j = 0; j < b; j++)
                memcpy(d + (size_t)j * el, ml[j] < 0 ? p->fill : s + (size_t)ml[j] * el, el);
            memcpy(d + (size_t)b * el, s, (size_t)n * el);
            for (int64_t j = b + n; j < len; j++)
                memcpy(d + (size_t)j * el, ml[j] < 0 ? p->fill : s + (size_t)ml[j] * el, el);
        }
        for (int k = outer - 1; k >= 0; k--) {
            if (++idx[k] < p->out_shape[k]) break;
            idx[k] = 0;
        }
    }
}

/* A padding cut into `chunks` even pieces of its rows; pad_rows_range
 * writes pieces [lo, hi). */
typedef struct pad_job {
    const pad_plan *plan;
    int64_t rows, chunks;
} pad_job;

static void pad_rows_range(void *arg, int64_t lo, int64_t hi)
{
    const pad_job *j = arg;
    for (int64_t c = lo; c < hi; c++) pad_rows(j->plan, j->rows * c / j->chunks, j->rows * (c + 1) / j->chunks);
}

/* The index maps of nb_cpu_pad, in one allocation of map_len entries (the
 * sum of the padded sizes) that the caller frees; NULL for lack of memory. */
static int64_t *pad_maps(int ndim, const int64_t *in_shape, const int64_t *out_shape, const int64_t *pads,
                         nb_pad_mode mode, int64_t map_len, int64_t **map)
{
    int64_t *maps = nb_malloc((size_t)(map_len ? map_len : 1) * sizeof *maps);
    if (!maps) return NULL;
    int64_t *m = maps;
    for (int d = 0; d < ndim; d++) {
        int64_t n = in_shape[d], before = pads[2 * d];
        map[d] = m;
        for (int64_t j = 0; j < out_shape[d]; j++) {
            int64_t k = j - before;
            if (k < 0 || k >= n) {
                if (mode == NB_PAD_CONSTANT) k = -1;
                else if (mode == NB_PAD_EDGE) k = k < 0 ? 0 : n - 1;
                else k = k < 0 ? -k : 2 * (n - 1) - k;
            }
            *m++ = k;
        }
    }
    return maps;
}

nb_status nb_cpu_pad(void *dst, const void *src, int ndim, const int64_t *in_shape, const int64_t *pads,
                     nb_pad_mode mode, const void *fill, size_t el)
{
    if (ndim == 0) {
        memcpy(dst, src, el);
        return NB_OK;
    }
    pad_plan p = {.nd = ndim, .fill = fill, .el = el, .dst = dst, .src = src};
    int64_t total = 1, map_len = 0, stride = (int64_t)el;
    for (int d = ndim - 1; d >= 0; d--) {
        p.out_shape[d] = in_shape[d] + pads[2 * d] + pads[2 * d + 1];
        p.in_stride[d] = stride;
        stride *= in_shape[d];
        total *= p.out_shape[d];
        map_len += p.out_shape[d];
    }
    if (total == 0) return NB_OK;
    int64_t *maps = pad_maps(ndim, in_shape, p.out_shape, pads, mode, map_len, p.map);
    if (!maps) return NB_ERR_NOMEM;
    p.before_last = pads[2 * (ndim - 1)];
    p.in_last = in_shape[ndim - 1];
    if (p.in_last == 0) {
        /* Nothing to copy from: only a constant border is possible. */
        fill_run(dst, fill, total, el);
        nb_free(maps);
        return NB_OK;
    }
    int64_t rows = total / p.out_shape[ndim - 1];
    int64_t chunks = rows < 256 ? rows : 256;
    pad_job j = {&p, rows, chunks};
    nb_team_for(chunks, total >= NB_SHAPE_PARALLEL_MIN && chunks > 1, pad_rows_range, &j);
    nb_free(maps);
    return NB_OK;
}

/* ---- pad_grad ------------------------------------------------------------------ */

/* Adds every element of the padded src to the element of dst that pad
 * copied it from, walking src row by row (all dims but the last) in order,
 * so sums do not depend on anything but the shapes. */
#define PAD_GRAD_ROWS(T)                                                                             \
    static void pad_grad_rows_##T(T *dst, const T *src, int nd, const int64_t *out_shape,           \
                                  const int64_t *in_stride, int64_t *const *map)                   \
    {                                                                                                \
        int outer = nd - 1;                                                                          \
        int64_t len = out_shape[outer], rows = 1, idx[NB_MAX_DIMS] = {0};                            \
        const int64_t *ml = map[outer];                                                              \
        for (int k = 0; k < outer; k++) rows *= out_shape[k];                                        \
        for (int64_t r = 0; r < rows; r++, src += len) {                                             \
            int64_t off = 0;                                                                         \
            bool inside = true;                                                                      \
            for (int k = 0; k < outer && inside; k++) {                                              \
                int64_t m = map[k][idx[k]];                                                          \
                inside = m >= 0;                                                                     \
                off += m * in_stride[k];                                                             \
            }                                                                                        \
            if (inside)                                                                              \
                for (int64_t j = 0; j < len; j++)                                                    \
                    if (ml[j] >= 0) dst[off + ml[j]] += src[j];                                      \
            for (int k = outer - 1; k >= 0; k--) {                                                   \
                if (++idx[k] < out_shape[k]) break;                                                  \
                idx[k] = 0;                                                                          \
            }                                                                                        \
        }                                                                                            \
    }

PAD_GRAD_ROWS(float)
PAD_GRAD_ROWS(double)

nb_status nb_cpu_pad_grad(nb_dtype dt, void *dst, const void *src, int ndim, const int64_t *in_shape,
                          const int64_t *pads, nb_pad_mode mode)
{
    if (dt != NB_F32 && dt != NB_F64) return NB_ERR_DTYPE;
    size_t el = nb_dtype_size(dt);
    if (ndim == 0) {
        memcpy(dst, src, el);
        return NB_OK;
    }
    int64_t out_shape[NB_MAX_DIMS], in_stride[NB_MAX_DIMS], *map[NB_MAX_DIMS];
    int64_t total = 1, in_total = 1, map_len = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        out_shape[d] = in_shape[d] + pads[2 * d] + pads[2 * d + 1];
        in_stride[d] = in_total;
        in_total *= in_shape[d];
        total *= out_shape[d];
        map_len += out_shape[d];
    }
    if (in_total) memset(dst, 0, (size_t)in_total * el);
    if (total == 0 || in_total == 0) return NB_OK;
    int64_t *maps = pad_maps(ndim, in_shape, out_shape, pads, mode, map_len, map);
    if (!maps) return NB_ERR_NOMEM;
    if (dt == NB_F32) pad_grad_rows_float(dst, src, ndim, out_shape, in_stride, map);
    else pad_grad_rows_double(dst, src, ndim, out_shape, in_stride, map);
    nb_free(maps);
    return NB_OK;
}

/* ---- the family's table ------------------------------------------------------------ */

/* Kernels of shape_kernels.c and index.c. */
const nb_kernel_def *const nb_cpu_kernels_shape[] = {
    &nb_cpu_kernel_reshape,
    &nb_cpu_kernel_flatten,
    &nb_cpu_kernel_squeeze,
    &nb_cpu_kernel_unsqueeze,
    &nb_cpu_kernel_reshape_as,
    &nb_cpu_kernel_transpose,
    &nb_cpu_kernel_expand,
    &nb_cpu_kernel_expand_as,
    &nb_cpu_kernel_concat,
    &nb_cpu_kernel_split,
    &nb_cpu_kernel_stack,
    &nb_cpu_kernel_slice,
    &nb_cpu_kernel_pad,
    &nb_cpu_kernel_pad_grad,
    &nb_cpu_kernel_gather,
    &nb_cpu_kernel_index_select,
    &nb_cpu_kernel_scatter_add,
    &nb_cpu_kernel_one_hot,
    NULL,
};
