/* Dtype conversion between the six dtypes: one loop per (source, target).
 *
 * C leaves float-to-integer conversion of out-of-range values undefined, so
 * those go through nb_ew_sat_i64 (truncate, saturate, NaN to 0). Integer to
 * narrower integer wraps: the conversion to the unsigned type is defined
 * modulo 2^n, and gcc defines the step back to signed the same way. */
#include <stdint.h>
#include <string.h>
#include "broadcast.h"
#include "elementwise.h"

#define CAST_LOOP(name, S, D, EXPR)                                                  \
    static void name(int64_t n, char *const p[], const int64_t s[], const void *aux) \
    {                                                                                \
        (void)aux;                                                                   \
        NB_MAP_LOOP_BODY(S, D, EXPR)                                                 \
    }

static inline int32_t f_to_i32(double v) { return v != v ? 0 : (int32_t)nb_ew_sat_i64(v, INT32_MIN, INT32_MAX); }
static inline int64_t f_to_i64(double v) { return v != v ? 0 : nb_ew_sat_i64(v, INT64_MIN, INT64_MAX); }
static inline uint8_t f_to_u8(double v) { return v != v ? 0 : (uint8_t)nb_ew_sat_i64(v, 0, 255); }

/* Targets from a float source. */
#define FROM_FLOAT(S, sfx)                                       \
    CAST_LOOP(sfx##_to_f32, S, float, (float)v)                  \
    CAST_LOOP(sfx##_to_f64, S, double, (double)v)                \
    CAST_LOOP(sfx##_to_i32, S, int32_t, f_to_i32((double)v))     \
    CAST_LOOP(sfx##_to_i64, S, int64_t, f_to_i64((double)v))     \
    CAST_LOOP(sfx##_to_u8, S, uint8_t, f_to_u8((double)v))       \
    CAST_LOOP(sfx##_to_bool, S, uint8_t, (uint8_t)(v != 0))

/* Targets from an integer source (bool is a 0/1 byte, read as != 0 so that
 * stray byte values still mean true). */
#define FROM_INT(S, sfx, VAL)                                    \
    CAST_LOOP(sfx##_to_f32, S, float, (float)(VAL))              \
    CAST_LOOP(sfx##_to_f64, S, double, (double)(VAL))            \
    CAST_LOOP(sfx##_to_i32, S, int32_t, (int32_t)(uint32_t)(VAL)) \
    CAST_LOOP(sfx##_to_i64, S, int64_t, (int64_t)(VAL))          \
    CAST_LOOP(sfx##_to_u8, S, uint8_t, (uint8_t)(VAL))           \
    CAST_LOOP(sfx##_to_bool, S, uint8_t, (uint8_t)(v != 0))

FROM_FLOAT(float, f32)
FROM_FLOAT(double, f64)
FROM_INT(int32_t, i32, v)
FROM_INT(int64_t, i64, v)
FROM_INT(uint8_t, u8, v)
FROM_INT(uint8_t, bool, v != 0)

#define FROM(sfx)                                                                     \
    {[NB_F32] = sfx##_to_f32, [NB_F64] = sfx##_to_f64, [NB_I32] = sfx##_to_i32,       \
     [NB_I64] = sfx##_to_i64, [NB_U8] = sfx##_to_u8, [NB_BOOL] = sfx##_to_bool}

static const nb_bcast_loop loops[NB_DTYPE_COUNT][NB_DTYPE_COUNT] = {
    [NB_F32] = FROM(f32), [NB_F64] = FROM(f64), [NB_I32] = FROM(i32),
    [NB_I64] = FROM(i64), [NB_U8] = FROM(u8),   [NB_BOOL] = FROM(bool),
};

nb_status nb_ew_cast(const nb_tensor *x, nb_tensor *out, const char *label)
{
    if (!nb_dtype_valid((int)x->dtype) || !nb_dtype_valid((int)out->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: cannot cast %s to %s", label, nb_dtype_name(x->dtype),
                        nb_dtype_name(out->dtype));
    nb_bcast_plan plan;
    nb_status st = nb_bcast_plan_init(&plan, label, 1, &x, out);
    if (st) return st;
    /* Same dtype, both contiguous: a copy (none at all when in place). */
    if (x->dtype == out->dtype && x->dtype != NB_BOOL && nb_tensor_is_contiguous(x) && nb_tensor_is_contiguous(out) &&
        nb_shape_equal(x->ndim, x->shape, out->ndim, out->shape)) {
        void *src = nb_tensor_data(x), *dst = nb_tensor_data(out);
        if (src != dst) memmove(dst, src, (size_t)plan.numel * nb_dtype_size(x->dtype));
        return NB_OK;
    }
    nb_bcast_run(&plan, loops[x->dtype][out->dtype], NULL, NB_BCAST_GRAIN_CHEAP);
    return NB_OK;
}
