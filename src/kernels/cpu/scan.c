/* CPU kernels of the scans of nabla/scan_ops.h (src/ops/scan.c): one loop,
 * made for each op and dtype from the op's combine below. X is seen as
 * [outer, R, inner] around the axis. */
#include <stdint.h>
#include "../kernels.h"
#include "../params/scan.h"
#include "core/tensor_internal.h"
#include "nabla/device.h"
#include "nn.h"

/* S_<name>(T, U, a, b): a combined with b, elements of type T. U is the
 * type to compute in: T for floats, T's unsigned twin for integers, whose
 * arithmetic wraps (as NumPy's does) where T's would overflow. */
#define S_cumsum(T, U, a, b) ((T)((U)(a) + (U)(b)))
#define S_cumprod(T, U, a, b) ((T)((U)(a) * (U)(b)))

/* Row r of Out is row `prev` of Out combined with row r (inclusive) or row
 * `prev` (exclusive) of X, rows visited in order or from the end. */
#define SCAN_LOOP(op, sfx, T, U, identity)                                                                         \
    static void op##_##sfx(const void *xv, void *ov, int64_t outer, int64_t R, int64_t inner, bool excl, bool rev) \
    {                                                                                                              \
        for (int64_t o = 0; o < outer; o++) {                                                                      \
            const T *xs = (const T *)xv + o * R * inner;                                                           \
            T *os = (T *)ov + o * R * inner;                                                                       \
            for (int64_t s = 0; s < R; s++) {                                                                      \
                int64_t r = rev ? R - 1 - s : s, prev = rev ? r + 1 : r - 1;                                       \
                T *row = os + r * inner;                                                                           \
                if (s == 0) {                                                                                      \
                    for (int64_t i = 0; i < inner; i++) row[i] = excl ? (T)(identity) : xs[r * inner + i];         \
                    continue;                                                                                      \
                }                                                                                                  \
                const T *before = os + prev * inner, *with = xs + (excl ? prev : r) * inner;                       \
                for (int64_t i = 0; i < inner; i++) row[i] = S_##op(T, U, before[i], with[i]);                     \
            }                                                                                                      \
        }                                                                                                          \
    }
#define LOOPS_FLOAT(op, identity) \
    SCAN_LOOP(op, f32, float, float, identity) SCAN_LOOP(op, f64, double, double, identity)
#define LOOPS_NUMERIC(op, identity) \
    LOOPS_FLOAT(op, identity)       \
    SCAN_LOOP(op, i32, int32_t, uint32_t, identity) SCAN_LOOP(op, i64, int64_t, uint64_t, identity)
#define NB_SCAN(name, dtypes, identity, ...) LOOPS_##dtypes(name, identity)
#include "nabla/scan_ops.h"

typedef void (*scan_loop)(const void *x, void *out, int64_t outer, int64_t R, int64_t inner, bool excl, bool rev);

/* (Marked unused: a list with no line leaves it unused.) */
__attribute__((unused)) static nb_status run_scan(const nb_kernel_ctx *k, const scan_loop loops[NB_DTYPE_COUNT])
{
    const nb_scan_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    scan_loop loop = nb_dtype_valid((int)x->dtype) ? loops[x->dtype] : NULL;
    if (!loop) return nb_error(NB_ERR_DTYPE, "%s: no kernel for %s", k->label, nb_dtype_name(x->dtype));
    int64_t outer, R, inner;
    nb_nn_split_axis(x->ndim, x->shape, (int)(p->axis < 0 ? p->axis + x->ndim : p->axis), &outer, &R, &inner);
    if (nb_tensor_numel(x) == 0) return NB_OK;
    loop(nb_tensor_data(x), nb_tensor_data(o), outer, R, inner, p->exclusive, p->reverse);
    return NB_OK;
}

#define ROW_FLOAT(op)                            \
    {                                            \
        [NB_F32] = op##_f32, [NB_F64] = op##_f64 \
    }
#define ROW_NUMERIC(op)                                                                    \
    {                                                                                      \
        [NB_F32] = op##_f32, [NB_F64] = op##_f64, [NB_I32] = op##_i32, [NB_I64] = op##_i64 \
    }
#define NB_SCAN(name, dts, ...)                                         \
    static nb_status run_##name(const nb_kernel_ctx *k)                 \
    {                                                                   \
        static const scan_loop loops[NB_DTYPE_COUNT] = ROW_##dts(name); \
        return run_scan(k, loops);                                      \
    }                                                                   \
    static const nb_kernel_def kernel_##name = {                        \
        .op = #name, .device = NB_DEVICE_CPU, .dtypes = NB_DT_##dts, .provider = "nabla", .run = run_##name};
#include "nabla/scan_ops.h"

const nb_kernel_def *const nb_cpu_kernels_scan[] = {
#define NB_SCAN(name, ...) &kernel_##name,
#include "nabla/scan_ops.h"
    NULL,
};
