/* CPU kernel of topk (src/ops/reduce_topk.c), which sees X as
 * [outer, R, inner] around the axis. */
#include <math.h>
#include <string.h>
#include "../kernels.h"
#include "core/tensor_internal.h"
#include "nabla/device.h"
#include "reduce.h"

static void around_axis(const nb_tensor *x, int axis, int64_t *outer, int64_t *R, int64_t *inner)
{
    *outer = *R = *inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < axis) *outer *= x->shape[d];
        else if (d == axis) *R = x->shape[d];
        else *inner *= x->shape[d];
    }
}

static int norm_axis(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

/* ---- topk ------------------------------------------------------------------------- */

/* Whether element a of a slice goes before element b: the larger (or
 * smaller) first, NaN before every number when largest (after when
 * smallest, as NumPy sorts), and equals in index order. */
static inline bool goes_before(const double *v, int64_t a, int64_t b, bool largest)
{
    double x = v[a], y = v[b];
    bool xn = isnan(x), yn = isnan(y);
    if (xn || yn) return xn && yn ? a < b : largest ? xn : yn;
    if (x != y) return largest ? x > y : x < y;
    return a < b;
}

/* Sorts ord[0..n) by goes_before: a merge sort through tmp, stable and
 * n log n whatever the values. */
static void sort_slice(int64_t *ord, int64_t *tmp, int64_t n, const double *v, bool largest)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, t = lo;
            while (i < mid && j < hi) tmp[t++] = goes_before(v, ord[j], ord[i], largest) ? ord[j++] : ord[i++];
            while (i < mid) tmp[t++] = ord[i++];
            while (j < hi) tmp[t++] = ord[j++];
        }
        memcpy(ord, tmp, (size_t)n * sizeof *ord);
    }
}

static nb_status run_topk(const nb_kernel_ctx *k)
{
    const nb_topk_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *vals = nb_kout(k, 0, 0), *idxs = nb_kout(k, 1, 0);
    int axis = norm_axis(p->axis, x->ndim);
    int64_t outer, R, inner, kk = p->k;
    around_axis(x, axis, &outer, &R, &inner);
    if (kk > R)
        return nb_error(NB_ERR_ARG, "%s: k = %lld is more than the %lld elements along axis %d", k->label,
                        (long long)kk, (long long)R, axis);
    if (outer * inner * kk == 0) return NB_OK;
    double *v = nb_malloc((size_t)R * sizeof *v);
    int64_t *ord = nb_malloc((size_t)R * sizeof *ord), *tmp = nb_malloc((size_t)R * sizeof *tmp);
    if (!v || !ord || !tmp) {
        nb_free(v), nb_free(ord), nb_free(tmp);
        return nb_error(NB_ERR_NOMEM, "%s: out of memory for a slice of %lld", k->label, (long long)R);
    }
    const void *xd = nb_tensor_data(x);
    void *vd = nb_tensor_data(vals);
    int64_t *id = nb_tensor_data(idxs);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * R * inner + i, obase = o * kk * inner + i;
            for (int64_t r = 0; r < R; r++) v[r] = nb_load(x->dtype, xd, base + r * inner), ord[r] = r;
            sort_slice(ord, tmp, R, v, p->largest);
            /* Values copied as bytes: an int64 beyond 2^53 survives. */
            size_t el = nb_dtype_size(x->dtype);
            for (int64_t j = 0; j < kk; j++) {
                size_t to = (size_t)(obase + j * inner), from = (size_t)(base + ord[j] * inner);
                id[to] = ord[j];
                memcpy((char *)vd + to * el, (const char *)xd + from * el, el);
            }
        }
    nb_free(v), nb_free(ord), nb_free(tmp);
    return NB_OK;
}

const nb_kernel_def nb_cpu_kernel_topk = {
    .op = "topk", .device = NB_DEVICE_CPU, .dtypes = NB_DT_NUMERIC, .provider = "nabla", .run = run_topk};
