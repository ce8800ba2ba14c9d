/* Index-driven kernels: the loops of gather, scatter_add and one_hot, and
 * the kernels of the ops that run them (gather, index_select, scatter_add,
 * one_hot). */
#include <string.h>
#include "core/tensor_internal.h"
#include "nabla/device.h"
#include "index.h"
#include "shape.h"
#include "simd.h"
#include "team.h"

/* An index tensor (int32 or int64, `idx64`) of nidx indices, and the tensor
 * it indexes viewed as [outer, n, inner], along n. */
typedef struct index_view {
    const void *idx;
    bool idx64;
    int64_t nidx, outer, n, inner;
} index_view;

static inline int64_t index_at(const void *idx, bool idx64, int64_t i)
{
    return idx64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
}

/* True if all `count` indices lie in [0, n); otherwise false, with the
 * position and value of the first one that does not. */
static bool index_check(const void *idx, bool idx64, int64_t count, int64_t n, int64_t *bad_pos, int64_t *bad_value)
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

typedef struct gather_job {
    gather_args a;
    int64_t rows, chunks;
} gather_job;

static void gather_chunks(void *arg, int64_t lo, int64_t hi)
{
    const gather_job *j = arg;
    const int64_t rows = j->rows, chunks = j->chunks;
    for (int64_t c = lo; c < hi; c++) gather_rows(&j->a, rows * c / chunks, rows * (c + 1) / chunks);
}

/* dst[o, i, :] = src[o, idx[i], :], src viewed as v says and dst as
 * [outer, nidx, inner], elements of elsize bytes. */
static void gather(void *dst, const void *src, const index_view *v, size_t elsize)
{
    const int64_t rows = v->outer * v->nidx, inner = v->inner;
    if (rows == 0 || inner == 0) return;
    int64_t chunks = rows < 256 ? rows : 256;
    gather_job j = {{dst, src, v->idx, v->idx64, v->nidx, v->n, (size_t)inner * elsize}, rows, chunks};
    nb_team_for(chunks, rows * inner >= NB_SHAPE_PARALLEL_MIN && chunks > 1, gather_chunks, &j);
}

/* ---- scatter_add ----------------------------------------------------------- */

/* Two updates may hit the same output row, so threads split the work by
 * output region, never by update: task t owns columns [j0, j1) of outer
 * slice o and applies every update to them in order. */
#define DEF_SCATTER_ADD(NAME, T)                                                                   \
    typedef struct NAME##_job {                                                                    \
        T *out;                                                                                    \
        const T *upd;                                                                              \
        const void *idx;                                                                           \
        bool idx64;                                                                                \
        int64_t nidx, n, inner, blk, nblk;                                                         \
    } NAME##_job;                                                                                  \
    NB_SIMD_CLONES static void NAME##_tasks(void *arg, int64_t lo, int64_t hi)                     \
    {                                                                                              \
        const NAME##_job *jb = arg;                                                                \
        T *out = jb->out;                                                                          \
        const T *upd = jb->upd;                                                                    \
        const void *idx = jb->idx;                                                                 \
        const bool idx64 = jb->idx64;                                                              \
        const int64_t nidx = jb->nidx, n = jb->n, inner = jb->inner, blk = jb->blk, nblk = jb->nblk; \
        for (int64_t t = lo; t < hi; t++) {                                                        \
            int64_t o = t / nblk, j0 = (t % nblk) * blk, j1 = j0 + blk < inner ? j0 + blk : inner;  \
            T *orow = out + o * n * inner;                                                         \
            const T *urow = upd + o * nidx * inner;                                                \
            for (int64_t i = 0; i < nidx; i++) {                                                   \
                T *d = orow + index_at(idx, idx64, i) * inner;                                     \
                const T *u = urow + i * inner;                                                     \
                for (int64_t j = j0; j < j1; j++) d[j] += u[j];                                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void NAME(T *out, const T *upd, const index_view *v)                                    \
    {                                                                                              \
        const int64_t nidx = v->nidx, outer = v->outer, n = v->n, inner = v->inner;                \
        int64_t blk = outer >= 16 || inner < 64 ? inner : 64;                                      \
        int64_t nblk = (inner + blk - 1) / blk, tasks = outer * nblk;                              \
        NAME##_job jb = {out, upd, v->idx, v->idx64, nidx, n, inner, blk, nblk};                   \
        bool par = outer * nidx * inner >= NB_SHAPE_PARALLEL_MIN && tasks > 1;                     \
        nb_team_for(tasks, par, NAME##_tasks, &jb);                                                \
    }

DEF_SCATTER_ADD(scatter_add_f32, float)
DEF_SCATTER_ADD(scatter_add_f64, double)
DEF_SCATTER_ADD(scatter_add_i32, int32_t)
DEF_SCATTER_ADD(scatter_add_i64, int64_t)

/* out viewed as v says, upd as [outer, nidx, inner]: out[o, idx[i], :] +=
 * upd[o, i, :], summed in order of i (so results do not depend on the
 * thread count). Returns false for a dtype other than
 * float32/float64/int32/int64. */
static bool scatter_add(nb_dtype dt, void *out, const void *upd, const index_view *v)
{
    bool ok = dt == NB_F32 || dt == NB_F64 || dt == NB_I32 || dt == NB_I64;
    if (!ok || v->outer == 0 || v->nidx == 0 || v->inner == 0) return ok;
    switch (dt) {
    case NB_F32: scatter_add_f32(out, upd, v); break;
    case NB_F64: scatter_add_f64(out, upd, v); break;
    case NB_I32: scatter_add_i32(out, upd, v); break;
    default: scatter_add_i64(out, upd, v); break;
    }
    return true;
}

/* ---- one_hot ------------------------------------------------------------------ */

/* out viewed as [count, depth] of dtype dt: all zero but out[i, idx[i]] = 1. */
static void one_hot(nb_dtype dt, void *out, const void *idx, bool idx64, int64_t count, int64_t depth)
{
    size_t el = nb_dtype_size(dt);
    memset(out, 0, (size_t)(count * depth) * el);
    union {
        double f;
        int64_t i;
        unsigned char bytes[8];
    } one; /* aligned for any dtype */
    nb_store(dt, &one, 0, 1.0);
    char *o = out;
    for (int64_t i = 0; i < count; i++) memcpy(o + (size_t)(i * depth + index_at(idx, idx64, i)) * el, one.bytes, el);
}

/* ---- the kernels of gather, index_select, scatter_add, one_hot ------------------ */

/* Index tensors come from data, so every index is checked here, before
 * anything is read or written through it. */

/* Checks every index of the Index tensor (slot `slot`) against dim `axis`
 * of X, naming the first bad one. */
static nb_status check_indices(const nb_kernel_ctx *k, int slot, int axis)
{
    nb_tensor *x = nb_kin(k, 0, 0), *idx = nb_kin(k, slot, 0);
    int64_t pos, val, n = x->shape[axis];
    if (index_check(nb_tensor_data(idx), idx->dtype == NB_I64, nb_tensor_numel(idx), n, &pos, &val)) return NB_OK;
    char a[NB_SHAPE_STR_MAX];
    return nb_error(NB_ERR_ARG, "%s: Index[%lld] = %lld is out of range [0, %lld) for dim %d of X (shape %s)", k->label,
                    (long long)pos, (long long)val, (long long)n, axis, nb_shape_str(a, sizeof a, x->ndim, x->shape));
}

/* Index tensor idx into dim `axis` of x. */
static index_view index_view_of(const nb_tensor *x, const nb_tensor *idx, int axis)
{
    return (index_view){nb_tensor_data(idx),  idx->dtype == NB_I64,
                        nb_tensor_numel(idx), nb_cpu_shape_product(x->shape, 0, axis),
                        x->shape[axis],       nb_cpu_shape_product(x->shape, axis + 1, x->ndim)};
}

/* gather and index_select, whose parameter is the axis (index_select's "dim"). */
static nb_status run_gather(const nb_kernel_ctx *k)
{
    const nb_shape_axis_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *idx = nb_kin(k, 1, 0), *o = nb_kout(k, 0, 0);
    int axis = nb_shapeparam_axis(p->axis, x->ndim);
    nb_status st = check_indices(k, 1, axis);
    if (st) return st;
    nb_cpu_shape_out ob;
    if ((st = nb_cpu_shape_out_begin(k, o, &ob))) return st;
    const index_view v = index_view_of(x, idx, axis);
    gather(ob.data, nb_tensor_data(x), &v, nb_dtype_size(x->dtype));
    nb_cpu_shape_out_end(&ob);
    return NB_OK;
}

static nb_status run_scatter_add(const nb_kernel_ctx *k)
{
    const nb_shape_axis_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *idx = nb_kin(k, 1, 0), *upd = nb_kin(k, 2, 0), *o = nb_kout(k, 0, 0);
    int axis = nb_shapeparam_axis(p->axis, x->ndim);
    nb_status st = check_indices(k, 1, axis);
    if (st) return st;
    /* Out = X in place is the usual case and needs no copy; any other
     * overlap with an input goes through a scratch buffer. */
    size_t bytes = (size_t)nb_tensor_numel(o) * nb_dtype_size(o->dtype);
    void *xd = nb_tensor_data(x), *dst = nb_tensor_data(o), *scratch = NULL;
    bool in_place = dst == xd;
    if (nb_cpu_shape_overlap(o, idx) || nb_cpu_shape_overlap(o, upd) || (!in_place && nb_cpu_shape_overlap(o, x))) {
        if (!(scratch = nb_malloc(bytes ? bytes : 1)))
            return nb_error(NB_ERR_NOMEM, "%s: out of memory for a scratch copy of the output", k->label);
        dst = scratch;
    }
    if (dst != xd && bytes) memcpy(dst, xd, bytes);
    const index_view v = index_view_of(x, idx, axis);
    if (!scatter_add(o->dtype, dst, nb_tensor_data(upd), &v)) {
        nb_free(scratch);
        return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(o->dtype));
    }
    if (scratch) {
        memcpy(nb_tensor_data(o), scratch, bytes);
        nb_free(scratch);
    }
    return NB_OK;
}

static nb_status run_one_hot(const nb_kernel_ctx *k)
{
    const nb_one_hot_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    int64_t depth = p->depth, pos, val, count = nb_tensor_numel(x);
    bool idx64 = x->dtype == NB_I64;
    if (!index_check(nb_tensor_data(x), idx64, count, depth, &pos, &val)) {
        char a[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_ARG,
                        "%s: X[%lld] = %lld (flat index into X of shape %s) is out of range [0, %lld) for depth %lld",
                        k->label, (long long)pos, (long long)val, nb_shape_str(a, sizeof a, x->ndim, x->shape),
                        (long long)depth, (long long)depth);
    }
    nb_cpu_shape_out ob;
    nb_status st = nb_cpu_shape_out_begin(k, o, &ob);
    if (st) return st;
    one_hot(o->dtype, ob.data, nb_tensor_data(x), idx64, count, depth);
    nb_cpu_shape_out_end(&ob);
    return NB_OK;
}

/* The dtypes are those of the first input, X: gather moves any element,
 * scatter_add adds numbers, one_hot reads int32 or int64 indices. */
const nb_kernel_def nb_cpu_kernel_gather = {
    .op = "gather", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = run_gather};
const nb_kernel_def nb_cpu_kernel_index_select = {
    .op = "index_select", .device = NB_DEVICE_CPU, .dtypes = NB_DT_ALL, .provider = "nabla", .run = run_gather};
const nb_kernel_def nb_cpu_kernel_scatter_add = {
    .op = "scatter_add", .device = NB_DEVICE_CPU, .dtypes = NB_DT_NUMERIC, .provider = "nabla", .run = run_scatter_add};
const nb_kernel_def nb_cpu_kernel_one_hot = {
    .op = "one_hot", .device = NB_DEVICE_CPU, .dtypes = NB_DT_INT, .provider = "nabla", .run = run_one_hot};
