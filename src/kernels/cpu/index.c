/* Index-driven kernels: gather, scatter_add, one_hot. */
#include <string.h>
#include "core/tensor_internal.h"
#include "index.h"
#include "shape.h"

static inline int64_t index_at(const void *idx, bool idx64, int64_t i)
{
    return idx64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
}

bool nb_cpu_index_check(const void *idx, bool idx64, int64_t count, int64_t n, int64_t *bad_pos,
                        int64_t *bad_value)
{
    for (int64_t i = 0; i < count; i++) {
        int64_t v = index_at(idx, idx64, i);
        if (v < 0 || v >= n) {
            *bad_pos = i;
            *bad_value = v;
            return false;
        }
    }
    return true;
}

/* ---- gather ------------------------------------------------------------------ */

typedef struct gather_args {
    char *dst;
    const char *src;
    const void *idx;
    bool idx64;
    int64_t nidx, n;
    size_t row_bytes; /* inner * elsize */
} gather_args;

/* Output rows r0..r1 of the [outer * nidx] rows; a constant K lets the
 * compiler turn the copy of a single element into one move. */
#define GATHER_ROWS(K)                                                                           \
    for (int64_t r = r0; r < r1; r++) {                                                           \
        memcpy(a->dst + (size_t)r * (K), a->src + (size_t)(o * a->n + index_at(a->idx, a->idx64, i)) * (K), (K)); \
        if (++i == a->nidx) i = 0, o++;                                                           \
    }

static void gather_rows(const gather_args *a, int64_t r0, int64_t r1)
{
    int64_t o = r0 / a->nidx, i = r0 % a->nidx;
    size_t rb = a->row_bytes;
    switch (rb) {
    case 4: GATHER_ROWS(4) break;
    case 8: GATHER_ROWS(8) break;
    default: GATHER_ROWS(rb) break;
    }
}

void nb_cpu_gather(void *dst, const void *src, const void *idx, bool idx64, int64_t nidx, int64_t outer,
                   int64_t n, int64_t inner, size_t elsize)
{
    int64_t rows = outer * nidx;
    if (rows == 0 || inner == 0) return;
    gather_args a = {dst, src, idx, idx64, nidx, n, (size_t)inner * elsize};
    int64_t chunks = rows < 256 ? rows : 256;
    NB_SHAPE_PARALLEL_FOR(rows * inner >= NB_SHAPE_PARALLEL_MIN && chunks > 1)
    for (int64_t c = 0; c < chunks; c++) gather_rows(&a, rows * c / chunks, rows * (c + 1) / chunks);
}

/* ---- scatter_add ----------------------------------------------------------- */

/* Two updates may hit the same output row, so threads split the work by
 * output region, never by update: task t owns columns [j0, j1) of outer
 * slice o and applies every update to them in order. */
#define DEF_SCATTER_ADD(NAME, T)                                                                  \
    static void NAME(T *out, const T *upd, const void *idx, bool idx64, int64_t nidx, int64_t outer, \
                     int64_t n, int64_t inner)                                                     \
    {                                                                                              \
        int64_t blk = outer >= 16 || inner < 64 ? inner : 64;                                      \
        int64_t nblk = (inner + blk - 1) / blk, tasks = outer * nblk;                              \
        NB_SHAPE_PARALLEL_FOR(outer * nidx * inner >= NB_SHAPE_PARALLEL_MIN && tasks > 1)          \
        for (int64_t t = 0; t < tasks; t++) {                                                      \
            int64_t o = t / nblk, j0 = (t % nblk) * blk, j1 = j0 + blk < inner ? j0 + blk : inner;  \
            T *orow = out + o * n * inner;                                                         \
            const T *urow = upd + o * nidx * inner;                                                \
            for (int64_t i = 0; i < nidx; i++) {                                                   \
                T *d = orow + index_at(idx, idx64, i) * inner;                                     \
                const T *u = urow + i * inner;                                                     \
                for (int64_t j = j0; j < j1; j++) d[j] += u[j];                                    \
            }                                                                                      \
        }                                                                                          \
    }

DEF_SCATTER_ADD(scatter_add_f32, float)
DEF_SCATTER_ADD(scatter_add_f64, double)
DEF_SCATTER_ADD(scatter_add_i32, int32_t)
DEF_SCATTER_ADD(scatter_add_i64, int64_t)

bool nb_cpu_scatter_add(nb_dtype dt, void *out, const void *upd, const void *idx, bool idx64, int64_t nidx,
                        int64_t outer, int64_t n, int64_t inner)
{
    bool ok = dt == NB_F32 || dt == NB_F64 || dt == NB_I32 || dt == NB_I64;
    if (!ok || outer == 0 || nidx == 0 || inner == 0) return ok;
    switch (dt) {
    case NB_F32: scatter_add_f32(out, upd, idx, idx64, nidx, outer, n, inner); break;
    case NB_F64: scatter_add_f64(out, upd, idx, idx64, nidx, outer, n, inner); break;
    case NB_I32: scatter_add_i32(out, upd, idx, idx64, nidx, outer, n, inner); break;
    default: scatter_add_i64(out, upd, idx, idx64, nidx, outer, n, inner); break;
    }
    return true;
}

/* ---- one_hot ------------------------------------------------------------------ */

void nb_cpu_one_hot(nb_dtype dt, void *out, const void *idx, bool idx64, int64_t count, int64_t depth)
{
    size_t el = nb_dtype_size(dt);
    memset(out, 0, (size_t)(count * depth) * el);
    union { double f; int64_t i; unsigned char bytes[8]; } one; /* aligned for any dtype */
    nb_store(dt, &one, 0, 1.0);
    char *o = out;
    for (int64_t i = 0; i < count; i++) memcpy(o + (size_t)(i * depth + index_at(idx, idx64, i)) * el, one.bytes, el);
}
