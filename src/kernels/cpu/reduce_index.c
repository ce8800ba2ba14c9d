/* CPU kernels of gather_elements and scatter_elements (src/ops/reduce_index.c).
 * Index may be smaller than X in the dims other than axis, so the walk is an
 * odometer over Index's shape that keeps the offset into X of the element
 * at the same coordinates, less the axis; the index adds its own. Every
 * index is checked before anything is read or written through it. */
#include <string.h>
#include "../kernels.h"
#include "core/tensor_internal.h"
#include "nabla/device.h"
#include "reduce.h"

typedef struct elements_walk {
    int ndim, axis;
    int64_t n;                        /* X's size along axis */
    int64_t stride_axis;              /* X's stride along axis */
    int64_t xstride[NB_MAX_DIMS];     /* X's strides (contiguous) */
    const int64_t *ishape;            /* Index's shape */
    int64_t coord[NB_MAX_DIMS], base; /* where the walk is, and X's offset there less the axis */
} elements_walk;

static void walk_begin(elements_walk *w, const nb_tensor *x, const nb_tensor *idx, int axis)
{
    w->ndim = x->ndim;
    w->axis = axis;
    w->n = x->shape[axis];
    int64_t s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) w->xstride[d] = s, s *= x->shape[d];
    w->stride_axis = w->xstride[axis];
    w->ishape = idx->shape;
    memset(w->coord, 0, sizeof w->coord);
    w->base = 0;
}

static inline void walk_next(elements_walk *w)
{
    for (int d = w->ndim - 1; d >= 0; d--) {
        if (d != w->axis) w->base += w->xstride[d];
        if (++w->coord[d] < w->ishape[d]) return;
        if (d != w->axis) w->base -= w->coord[d] * w->xstride[d];
        w->coord[d] = 0;
    }
}

static inline int64_t index_at(const nb_tensor *idx, int64_t e)
{
    const void *d = nb_tensor_data(idx);
    return idx->dtype == NB_I64 ? ((const int64_t *)d)[e] : ((const int32_t *)d)[e];
}

/* Every index in [-n, n) (a negative one counts from the end). */
static nb_status check_indices(const nb_kernel_ctx *k, const nb_tensor *x, const nb_tensor *idx, int axis)
{
    int64_t n = x->shape[axis], count = nb_tensor_numel(idx);
    for (int64_t e = 0; e < count; e++) {
        int64_t v = index_at(idx, e);
        if (v < -n || v >= n) {
            char xs[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_ARG,
                            "%s: Index[%lld] = %lld (flat) is out of range [%lld, %lld) for dim %d of X "
                            "(shape %s)",
                            k->label, (long long)e, (long long)v, (long long)-n, (long long)n, axis,
                            nb_shape_str(xs, sizeof xs, x->ndim, x->shape));
        }
    }
    return NB_OK;
}

static int axis_of(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

static nb_status run_gather_elements(const nb_kernel_ctx *k)
{
    const nb_elements_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *idx = nb_kin(k, 1, 0), *o = nb_kout(k, 0, 0);
    int axis = axis_of(p->axis, x->ndim);
    nb_status st = check_indices(k, x, idx, axis);
    if (st) return st;
    int64_t count = nb_tensor_numel(idx);
    size_t el = nb_dtype_size(x->dtype);
    const char *src = nb_tensor_data(x);
    char *dst = nb_tensor_data(o);
    elements_walk w;
    walk_begin(&w, x, idx, axis);
    for (int64_t e = 0; e < count; e++, walk_next(&w)) {
        int64_t v = index_at(idx, e);
        if (v < 0) v += w.n;
        memcpy(dst + (size_t)e * el, src + (size_t)(w.base + v * w.stride_axis) * el, el);
    }
    return NB_OK;
}

#define SCATTER_LOOP(T, U)                                                                \
    do {                                                                                  \
        T *out = (T *)dst;                                                                \
        const T *u = (const T *)upd;                                                      \
        for (int64_t e = 0; e < count; e++, walk_next(&w)) {                              \
            int64_t v = index_at(idx, e);                                                 \
            T *at = out + w.base + (v < 0 ? v + w.n : v) * w.stride_axis;                 \
            if (p->reduction == NB_SCATTER_ADD) *at = (T)((U)*at + (U)u[e]);              \
            else *at = (T)((U)*at * (U)u[e]);                                             \
        }                                                                                 \
    } while (0)

static nb_status run_scatter_elements(const nb_kernel_ctx *k)
{
    const nb_elements_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *idx = nb_kin(k, 1, 0), *updt = nb_kin(k, 2, 0), *o = nb_kout(k, 0, 0);
    int axis = axis_of(p->axis, x->ndim);
    nb_status st = check_indices(k, x, idx, axis);
    if (st) return st;
    int64_t count = nb_tensor_numel(idx);
    size_t el = nb_dtype_size(x->dtype), bytes = (size_t)nb_tensor_numel(x) * el;
    char *dst = nb_tensor_data(o);
    const char *upd = nb_tensor_data(updt);
    if (dst != (const char *)nb_tensor_data(x) && bytes) memmove(dst, nb_tensor_data(x), bytes);
    elements_walk w;
    walk_begin(&w, x, idx, axis);
    if (p->reduction == NB_SCATTER_NONE) {
        for (int64_t e = 0; e < count; e++, walk_next(&w)) {
            int64_t v = index_at(idx, e);
            memcpy(dst + (size_t)(w.base + (v < 0 ? v + w.n : v) * w.stride_axis) * el, upd + (size_t)e * el, el);
        }
        return NB_OK;
    }
    switch (x->dtype) {
    case NB_F32: SCATTER_LOOP(float, float); break;
    case NB_F64: SCATTER_LOOP(double, double); break;
    case NB_I32: SCATTER_LOOP(int32_t, uint32_t); break;
    case NB_I64: SCATTER_LOOP(int64_t, uint64_t); break;
    default: return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s with a reduction", k->label, nb_dtype_name(x->dtype));
    }
    return NB_OK;
}

const nb_kernel_def nb_cpu_kernel_gather_elements = {.op = "gather_elements",
                                                     .device = NB_DEVICE_CPU,
                                                     .dtypes = NB_DT_ALL,
                                                     .provider = "nabla",
                                                     .run = run_gather_elements};
const nb_kernel_def nb_cpu_kernel_scatter_elements = {.op = "scatter_elements",
                                                      .device = NB_DEVICE_CPU,
                                                      .dtypes = NB_DT_ALL,
                                                      .provider = "nabla",
                                                      .run = run_scatter_elements};
