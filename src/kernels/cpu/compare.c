/* Comparisons, logic and where, on the broadcasting iterator.
 *
 * Bool and uint8 share loops: both are one byte, and bool bytes are 0 or 1.
 * Logic ops read one-byte inputs directly and first turn wider ones into
 * bool (x != 0) with a cast, so there is one set of byte loops rather than a
 * loop for every pair of dtypes. where moves elements as opaque words of 1,
 * 4 or 8 bytes, which serves every dtype. */
#include <stdint.h>
#include "../kernels.h"
#include "broadcast.h"
#include "compare.h"
#include "elementwise.h"

/* Two inputs of type T, a bool output. */
#define CMP_LOOP(name, T, EXPR)                                                             \
    static void name(int64_t n, char *const p[], const int64_t s[], const void *aux)        \
    {                                                                                       \
        (void)aux;                                                                          \
        const T *x = (const T *)p[0], *y = (const T *)p[1];                                 \
        uint8_t *o = (uint8_t *)p[2];                                                       \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                          \
            for (int64_t i = 0; i < n; i++) {                                               \
                T a = x[i], b = y[i];                                                       \
                o[i] = (uint8_t)(EXPR);                                                     \
            }                                                                               \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                   \
            const T b = y[0];                                                               \
            for (int64_t i = 0; i < n; i++) {                                               \
                T a = x[i];                                                                 \
                o[i] = (uint8_t)(EXPR);                                                     \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                T a = x[i * s[0]], b = y[i * s[1]];                                         \
                o[i * s[2]] = (uint8_t)(EXPR);                                              \
            }                                                                               \
        }                                                                                   \
    }

#define CMP_LOOPS(T, sfx)                   \
    CMP_LOOP(eq_##sfx, T, a == b)           \
    CMP_LOOP(ne_##sfx, T, a != b)           \
    CMP_LOOP(lt_##sfx, T, a < b)            \
    CMP_LOOP(le_##sfx, T, a <= b)           \
    CMP_LOOP(gt_##sfx, T, a > b)            \
    CMP_LOOP(ge_##sfx, T, a >= b)

CMP_LOOPS(float, f32)
CMP_LOOPS(double, f64)
CMP_LOOPS(int32_t, i32)
CMP_LOOPS(int64_t, i64)
CMP_LOOPS(uint8_t, u8)

#define CMP_ROW(op)                                                                     \
    {[NB_F32] = op##_f32, [NB_F64] = op##_f64, [NB_I32] = op##_i32, [NB_I64] = op##_i64, \
     [NB_U8] = op##_u8, [NB_BOOL] = op##_u8}

static const nb_bcast_loop cmp_loops[NB_CMP_COUNT][NB_DTYPE_COUNT] = {
    [NB_CMP_EQ] = CMP_ROW(eq), [NB_CMP_NE] = CMP_ROW(ne), [NB_CMP_LT] = CMP_ROW(lt),
    [NB_CMP_LE] = CMP_ROW(le), [NB_CMP_GT] = CMP_ROW(gt), [NB_CMP_GE] = CMP_ROW(ge),
};

nb_status nb_cmp(nb_cmp_op op, const nb_tensor *x, const nb_tensor *y, nb_tensor *out, const char *label)
{
    if ((unsigned)op >= NB_CMP_COUNT) return nb_error(NB_ERR_ARG, "%s: unknown comparison %d", label, (int)op);
    if (x->dtype != y->dtype || !nb_dtype_valid((int)x->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: X is %s but Y is %s; they must have the same dtype", label,
                        nb_dtype_name(x->dtype), nb_dtype_name(y->dtype));
    if (out->dtype != NB_BOOL)
        return nb_error(NB_ERR_DTYPE, "%s: Out must be bool, not %s", label, nb_dtype_name(out->dtype));
    nb_bcast_plan plan;
    const nb_tensor *in[2] = {x, y};
    nb_status st = nb_bcast_plan_init(&plan, label, 2, in, out);
    if (st) return st;
    nb_bcast_run(&plan, cmp_loops[op][x->dtype], NULL, NB_BCAST_GRAIN_CHEAP);
    return NB_OK;
}

/* ---- logic ------------------------------------------------------------------------ */

CMP_LOOP(and_u8, uint8_t, (a != 0) & (b != 0))
CMP_LOOP(or_u8, uint8_t, (a != 0) | (b != 0))
CMP_LOOP(xor_u8, uint8_t, (a != 0) ^ (b != 0))

static void not_u8(int64_t n, char *const p[], const int64_t s[], const void *aux)
{
    (void)aux;
    const uint8_t *x = (const uint8_t *)p[0];
    uint8_t *o = (uint8_t *)p[1];
    if (s[0] == 1 && s[1] == 1)
        for (int64_t i = 0; i < n; i++) o[i] = x[i] == 0;
    else
        for (int64_t i = 0; i < n; i++) o[i * s[1]] = x[i * s[0]] == 0;
}

/* t itself if it is one byte wide, else a new bool tensor of its truth. */
static nb_status as_bytes(const nb_tensor *t, nb_tensor **tmp, const nb_tensor **view, const char *label)
{
    *tmp = NULL;
    *view = t;
    if (t->dtype == NB_BOOL || t->dtype == NB_U8) return NB_OK;
    nb_status st = nb_tensor_new(tmp, NB_BOOL, t->ndim, t->shape);
    if (!st) st = nb_ew_cast(t, *tmp, label);
    *view = *tmp;
    return st;
}

nb_status nb_logic(nb_logic_op op, const nb_tensor *x, const nb_tensor *y, nb_tensor *out, const char *label)
{
    if ((unsigned)op >= NB_LOGIC_COUNT) return nb_error(NB_ERR_ARG, "%s: unknown logic op %d", label, (int)op);
    if (out->dtype != NB_BOOL)
        return nb_error(NB_ERR_DTYPE, "%s: Out must be bool, not %s", label, nb_dtype_name(out->dtype));
    int n_in = op == NB_LOGIC_NOT ? 1 : 2;
    if (n_in == 2 && !y) return nb_error(NB_ERR_ARG, "%s: Y is missing", label);
    nb_tensor *tmp[2] = {NULL, NULL};
    const nb_tensor *in[2] = {x, y};
    nb_status st = as_bytes(x, &tmp[0], &in[0], label);
    if (!st && n_in == 2) st = as_bytes(y, &tmp[1], &in[1], label);
    nb_bcast_plan plan;
    if (!st) st = nb_bcast_plan_init(&plan, label, n_in, in, out);
    if (!st) {
        static const nb_bcast_loop loops[NB_LOGIC_COUNT] = {and_u8, or_u8, xor_u8, not_u8};
        nb_bcast_run(&plan, loops[op], NULL, NB_BCAST_GRAIN_CHEAP);
    }
    nb_tensor_release(tmp[0]);
    nb_tensor_release(tmp[1]);
    return st;
}

/* ---- where ------------------------------------------------------------------------ */

#define WHERE_LOOP(name, W)                                                                 \
    static void name(int64_t n, char *const p[], const int64_t s[], const void *aux)        \
    {                                                                                       \
        (void)aux;                                                                          \
        const uint8_t *c = (const uint8_t *)p[0];                                           \
        const W *x = (const W *)p[1], *y = (const W *)p[2];                                 \
        W *o = (W *)p[3];                                                                   \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                             \
            for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];                      \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) o[i * s[3]] = c[i * s[0]] ? x[i * s[1]] : y[i * s[2]]; \
        }                                                                                   \
    }

WHERE_LOOP(where_1, uint8_t)
WHERE_LOOP(where_4, uint32_t)
WHERE_LOOP(where_8, uint64_t)

/* out = cond ? x : y, elementwise, all three broadcast to out. cond is bool;
 * x, y and out share one dtype. */
static nb_status select_where(const nb_tensor *cond, const nb_tensor *x, const nb_tensor *y, nb_tensor *out,
                              const char *label)
{
    if (cond->dtype != NB_BOOL)
        return nb_error(NB_ERR_DTYPE, "%s: Condition must be bool, not %s", label, nb_dtype_name(cond->dtype));
    if (x->dtype != y->dtype || out->dtype != x->dtype || !nb_dtype_valid((int)x->dtype))
        return nb_error(NB_ERR_DTYPE, "%s: X is %s, Y is %s and Out is %s; they must have the same dtype", label,
                        nb_dtype_name(x->dtype), nb_dtype_name(y->dtype), nb_dtype_name(out->dtype));
    nb_bcast_plan plan;
    const nb_tensor *in[3] = {cond, x, y};
    nb_status st = nb_bcast_plan_init(&plan, label, 3, in, out);
    if (st) return st;
    size_t w = nb_dtype_size(x->dtype);
    nb_bcast_loop loop = w == 1 ? where_1 : w == 4 ? where_4 : where_8;
    nb_bcast_run(&plan, loop, NULL, NB_BCAST_GRAIN_CHEAP);
    return NB_OK;
}

/* ---- the family's kernels --------------------------------------------------------- */

#define CMP_KERNEL(id, ENUM)                                                                       \
    static nb_status run_##id(const nb_kernel_ctx *k)                                              \
    {                                                                                              \
        return nb_cmp(ENUM, nb_kin(k, 0, 0), nb_kin(k, 1, 0), nb_kout(k, 0, 0), k->label);        \
    }                                                                                              \
    static const nb_kernel_def kernel_##id = {#id, NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, run_##id, NULL, NULL};
#define LOGIC_KERNEL(id, ENUM)                                                                     \
    static nb_status run_##id(const nb_kernel_ctx *k)                                              \
    {                                                                                              \
        return nb_logic(ENUM, nb_kin(k, 0, 0), ENUM == NB_LOGIC_NOT ? NULL : nb_kin(k, 1, 0),      \
                        nb_kout(k, 0, 0), k->label);                                               \
    }                                                                                              \
    static const nb_kernel_def kernel_##id = {#id, NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, run_##id, NULL, NULL};

CMP_KERNEL(equal, NB_CMP_EQ)
CMP_KERNEL(not_equal, NB_CMP_NE)
CMP_KERNEL(less, NB_CMP_LT)
CMP_KERNEL(less_equal, NB_CMP_LE)
CMP_KERNEL(greater, NB_CMP_GT)
CMP_KERNEL(greater_equal, NB_CMP_GE)
LOGIC_KERNEL(logical_and, NB_LOGIC_AND)
LOGIC_KERNEL(logical_or, NB_LOGIC_OR)
LOGIC_KERNEL(logical_xor, NB_LOGIC_XOR)
LOGIC_KERNEL(logical_not, NB_LOGIC_NOT)

/* The dtype that chooses where's kernel is Condition's (bool); X's may be any. */
static nb_status run_where(const nb_kernel_ctx *k)
{
    return select_where(nb_kin(k, 0, 0), nb_kin(k, 1, 0), nb_kin(k, 2, 0), nb_kout(k, 0, 0), k->label);
}
static const nb_kernel_def kernel_where = {"where", NB_DEVICE_CPU, NB_DT_ALL, "nabla", 0, run_where, NULL, NULL};

const nb_kernel_def *const nb_cpu_kernels_compare[] = {
    &kernel_equal,       &kernel_not_equal,     &kernel_less,        &kernel_less_equal,
    &kernel_greater,     &kernel_greater_equal, &kernel_logical_and, &kernel_logical_or,
    &kernel_logical_xor, &kernel_logical_not,   &kernel_where,       NULL,
};
