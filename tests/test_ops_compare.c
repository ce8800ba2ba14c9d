/* Comparison ops, logic ops and where: values in every dtype, NaN, broadcasting,
 * build-time inference and errors. */
#include <stdlib.h>
#include "test.h"
#include "ops/op_internal.h"

static const nb_dtype NUMERIC[] = {NB_F32, NB_F64, NB_I32, NB_I64, NB_U8};

static void check_bools(const char *what, const nb_tensor *t, int64_t n, const int *want)
{
    if (!t) return;
    CHECK(t->dtype == NB_BOOL);
    const uint8_t *p = nb_tensor_data(t);
    for (int64_t i = 0; i < n; i++)
        if (p[i] != want[i]) {
            fprintf(stderr, "  %s: element %lld is %d, expected %d\n", what, (long long)i, p[i], want[i]);
            test_failures_in_current++;
            return;
        }
}

static const char *CMP[] = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"};

static int ref_cmp(int k, double a, double b)
{
    switch (k) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
    }
}

static void test_comparisons_all_dtypes(void)
{
    const double xs[6] = {1, 2, 3, 4, 5, 200}, ys[6] = {2, 2, 2, 5, 4, 200};
    for (size_t d = 0; d < sizeof NUMERIC / sizeof *NUMERIC; d++) {
        nb_tensor *x = tt(NUMERIC[d], 2, S(2, 3), xs), *y = tt(NUMERIC[d], 2, S(2, 3), ys);
        for (int k = 0; k < 6; k++) {
            nb_tensor *in[] = {x, y};
            nb_tensor *o = RUN1_NOATTR(CMP[k], in);
            int want[6];
            for (int i = 0; i < 6; i++) want[i] = ref_cmp(k, xs[i], ys[i]);
            CHECK(o && o->ndim == 2);
            check_bools(CMP[k], o, 6, want);
            nb_tensor_release(o);
        }
        release_all(x, y, NULL);
    }
    /* bool compares as 0 and 1. */
    nb_tensor *a = T(NB_BOOL, S(4), 0, 0, 1, 1), *b = T(NB_BOOL, S(4), 0, 1, 0, 1);
    nb_tensor *in[] = {a, b};
    nb_tensor *lt = RUN1_NOATTR("less", in), *eq = RUN1_NOATTR("equal", in);
    check_bools("bool less", lt, 4, (const int[]){0, 1, 0, 0});
    check_bools("bool equal", eq, 4, (const int[]){1, 0, 0, 1});
    release_all(a, b, lt, eq, NULL);
}

static void test_comparison_nan_and_int64(void)
{
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F64 : NB_F32;
        nb_tensor *x = T(dt, S(3), NAN, 1, NAN), *y = T(dt, S(3), 1, NAN, NAN);
        nb_tensor *in[] = {x, y};
        for (int k = 0; k < 6; k++) {
            nb_tensor *o = RUN1_NOATTR(CMP[k], in);
            int v = k == 1; /* only not_equal holds when a NaN is involved */
            check_bools(CMP[k], o, 3, (const int[]){v, v, v});
            nb_tensor_release(o);
        }
        release_all(x, y, NULL);
    }
    /* int64 values beyond double's 53-bit precision compare exactly. */
    int64_t xv[2] = {(1LL << 60) + 1, -5}, yv[2] = {(1LL << 60), -5};
    nb_tensor *x = NULL, *y = NULL;
    CHECK_OK(nb_tensor_from_data(&x, NB_I64, 1, S(2), xv));
    CHECK_OK(nb_tensor_from_data(&y, NB_I64, 1, S(2), yv));
    nb_tensor *in[] = {x, y};
    nb_tensor *gt = RUN1_NOATTR("greater", in), *eq = RUN1_NOATTR("equal", in);
    check_bools("i64 greater", gt, 2, (const int[]){1, 0});
    check_bools("i64 equal", eq, 2, (const int[]){0, 1});
    release_all(x, y, gt, eq, NULL);
}

static void test_comparison_broadcasting(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *r = T(NB_F32, S(3), 2, 2, 6);
    nb_tensor *c = T(NB_F32, S(2, 1), 2, 5), *s = tscalar(NB_F32, 3);
    nb_tensor *in1[] = {x, r}, *in2[] = {x, c}, *in3[] = {s, x};
    nb_tensor *o1 = RUN1_NOATTR("greater", in1), *o2 = RUN1_NOATTR("less_equal", in2);
    nb_tensor *o3 = RUN1_NOATTR("less", in3);
    CHECK(o1 && nb_shape_equal(o1->ndim, o1->shape, 2, S(2, 3)));
    check_bools("row", o1, 6, (const int[]){0, 0, 0, 1, 1, 0});
    check_bools("column", o2, 6, (const int[]){1, 1, 0, 1, 1, 0});
    check_bools("scalar", o3, 6, (const int[]){0, 0, 0, 1, 1, 1});
    /* [4, 1, 3] with [2, 1] -> [4, 2, 3] */
    double av[12], bv[2] = {3, 8};
    for (int i = 0; i < 12; i++) av[i] = i;
    nb_tensor *a = tt(NB_I32, 3, S(4, 1, 3), av), *b = tt(NB_I32, 2, S(2, 1), bv);
    nb_tensor *in4[] = {a, b};
    nb_tensor *o4 = RUN1_NOATTR("greater_equal", in4);
    CHECK(o4 && nb_shape_equal(o4->ndim, o4->shape, 3, S(4, 2, 3)));
    int want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) want[(i * 2 + j) * 3 + k] = av[i * 3 + k] >= bv[j];
    check_bools("3-d", o4, 24, want);
    release_all(x, r, c, s, a, b, o1, o2, o3, o4, NULL);
}

static void test_logic(void)
{
    /* Mixed dtypes; NaN counts as true. */
    nb_tensor *x = T(NB_F32, S(2, 3), 0, 1, -2, NAN, 0, 0.5), *y = T(NB_I64, S(3), 0, 7, 0);
    nb_tensor *in[] = {x, y};
    nb_tensor *a = RUN1_NOATTR("logical_and", in), *o = RUN1_NOATTR("logical_or", in);
    nb_tensor *xo = RUN1_NOATTR("logical_xor", in);
    nb_tensor *inx[] = {x};
    nb_tensor *n = RUN1_NOATTR("logical_not", inx);
    CHECK(a && nb_shape_equal(a->ndim, a->shape, 2, S(2, 3)));
    check_bools("and", a, 6, (const int[]){0, 1, 0, 0, 0, 0});
    check_bools("or", o, 6, (const int[]){0, 1, 1, 1, 1, 1});
    check_bools("xor", xo, 6, (const int[]){0, 0, 1, 1, 1, 1});
    check_bools("not", n, 6, (const int[]){1, 0, 0, 0, 1, 0});
    /* Bool and uint8 inputs (a uint8 of 2 is true too). */
    nb_tensor *b = T(NB_BOOL, S(4), 0, 1, 0, 1), *u = T(NB_U8, S(4), 0, 0, 2, 2);
    nb_tensor *in2[] = {b, u};
    nb_tensor *a2 = RUN1_NOATTR("logical_and", in2), *x2 = RUN1_NOATTR("logical_xor", in2);
    nb_tensor *inu[] = {u};
    nb_tensor *n2 = RUN1_NOATTR("logical_not", inu);
    check_bools("and u8", a2, 4, (const int[]){0, 0, 0, 1});
    check_bools("xor u8", x2, 4, (const int[]){0, 1, 1, 0});
    check_bools("not u8", n2, 4, (const int[]){1, 1, 0, 0});
    release_all(x, y, a, o, xo, n, b, u, a2, x2, n2, NULL);
}

static void test_where(void)
{
    nb_dtype dts[] = {NB_F32, NB_F64, NB_I32, NB_I64, NB_U8, NB_BOOL};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        nb_tensor *c = T(NB_BOOL, S(2, 3), 1, 0, 1, 0, 0, 1);
        nb_tensor *x = T(dts[d], S(2, 3), 1, 1, 1, 1, 1, 1), *y = T(dts[d], S(2, 3), 0, 0, 0, 0, 0, 0);
        nb_tensor *in[] = {c, x, y};
        nb_tensor *o = RUN1_NOATTR("where", in);
        CHECK(o && o->dtype == dts[d]);
        CHECK_TENSOR(o, S(2, 3), 0, 1, 0, 1, 0, 0, 1);
        release_all(c, x, y, o, NULL);
    }
    /* Three-way broadcasting: [2, 1] condition, [3] X, scalar Y. */
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F64 : NB_F32;
        nb_tensor *c = T(NB_BOOL, S(2, 1), 1, 0), *x = T(dt, S(3), 1.5, -2, 3), *y = tscalar(dt, 9);
        nb_tensor *in[] = {c, x, y};
        nb_tensor *o = RUN1_NOATTR("where", in);
        CHECK_TENSOR(o, S(2, 3), 0, 1.5, -2, 3, 9, 9, 9);
        /* [3] condition against [2, 1] X and [2, 3] Y. */
        nb_tensor *c2 = T(NB_BOOL, S(3), 0, 1, 0), *x2 = T(dt, S(2, 1), -1, -2);
        nb_tensor *y2 = T(dt, S(2, 3), 10, 11, 12, 13, 14, 15);
        nb_tensor *in2[] = {c2, x2, y2};
        nb_tensor *o2 = RUN1_NOATTR("where", in2);
        CHECK_TENSOR(o2, S(2, 3), 0, 10, -1, 12, 13, -2, 15);
        release_all(c, x, y, o, c2, x2, y2, o2, NULL);
    }
}

static void test_large(void)
{
    /* Large enough for the parallel path: every element must still be right. */
    enum { R = 513, C = 257 };
    double *xv = malloc(sizeof(double) * R * C), cv[C];
    for (int i = 0; i < R * C; i++) xv[i] = (i * 7919) % 1000;
    for (int j = 0; j < C; j++) cv[j] = (j * 31) % 1000;
    nb_tensor *x = tt(NB_F32, 2, S(R, C), xv), *y = tt(NB_F32, 1, S(C), cv);
    nb_tensor *in[] = {x, y};
    nb_tensor *lt = RUN1_NOATTR("less", in);
    nb_tensor *inw[] = {lt, x, y};
    nb_tensor *w = RUN1_NOATTR("where", inw);
    int bad = 0;
    if (lt && w) {
        const uint8_t *pl = nb_tensor_data(lt);
        const float *pw = nb_tensor_data(w);
        for (int i = 0; i < R * C; i++) {
            double a = xv[i], b = cv[i % C];
            bad += pl[i] != (a < b) || pw[i] != (float)(a < b ? a : b);
        }
    }
    CHECK(lt && w && bad == 0);
    release_all(x, y, lt, w, NULL);
    free(xv);
}

/* ---- build-time inference and errors ------------------------------------------ */

static nb_status infer(const char *op, int n, const nb_var_info *in, nb_var_info *out)
{
    return nb_op_infer(op, n, in, NB_NO_ATTRS, 1, out);
}

#define INFO(dt, ...) ((nb_var_info){(dt), NDIM_OF(S(__VA_ARGS__)), {__VA_ARGS__}})

static void test_infer_unknown_dims(void)
{
    nb_var_info out;
    nb_var_info a[] = {INFO(NB_F32, -1, 10), INFO(NB_F32, 10)};
    CHECK_OK(infer("less", 2, a, &out));
    CHECK(out.dtype == NB_BOOL && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 10)));
    nb_var_info b[] = {INFO(NB_F32, -1, 1), INFO(NB_I64, 1, 4)};
    CHECK_OK(infer("logical_or", 2, b, &out));
    CHECK(out.dtype == NB_BOOL && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 4)));
    nb_var_info c[] = {INFO(NB_BOOL, -1, 1), INFO(NB_F64, 3), INFO(NB_F64, -1, 3)};
    CHECK_OK(infer("where", 3, c, &out));
    CHECK(out.dtype == NB_F64 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 3)));
    nb_var_info n[] = {INFO(NB_I32, -1, 2)};
    CHECK_OK(infer("logical_not", 1, n, &out));
    CHECK(out.dtype == NB_BOOL && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 2)));
    nb_var_info e[] = {INFO(NB_BOOL, -1, 2), INFO(NB_F32, 3), INFO(NB_F32, 1)};
    CHECK_ERR(infer("where", 3, e, &out), NB_ERR_SHAPE,
              "where: cannot broadcast Condition of shape [-1, 2], X of shape [3] and Y of shape [1]");
}

static void test_errors(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *y = T(NB_F32, S(2), 1, 2), *out = NULL;
    nb_tensor *yd = T(NB_F64, S(3), 1, 2, 3), *c = T(NB_BOOL, S(3), 1, 0, 1), *ci = T(NB_I32, S(3), 1, 0, 1);
    nb_tensor *in1[] = {x, y};
    CHECK_ERR(nb_op_run("equal", NB_TENSORS_N(2, in1), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "equal: cannot broadcast X of shape [2, 3] with Y of shape [2]");
    CHECK_ERR(nb_op_run("logical_and", NB_TENSORS_N(2, in1), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "logical_and: cannot broadcast");
    nb_tensor *in2[] = {x, yd};
    CHECK_ERR(nb_op_run("less", NB_TENSORS_N(2, in2), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "less: X is float32 but Y is float64; they must have the same dtype");
    nb_tensor *in3[] = {ci, x, x};
    CHECK_ERR(nb_op_run("where", NB_TENSORS_N(3, in3), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "where: Condition must be bool, not int32");
    nb_tensor *in4[] = {c, x, yd};
    CHECK_ERR(nb_op_run("where", NB_TENSORS_N(3, in4), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "where: X is float32 but Y is float64");
    nb_tensor *in5[] = {y, x, x};
    CHECK_ERR(nb_op_run("where", NB_TENSORS_N(3, in5), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "where: Condition must be bool");
    nb_tensor *cb = T(NB_BOOL, S(2), 1, 0);
    nb_tensor *in6[] = {cb, x, x};
    CHECK_ERR(nb_op_run("where", NB_TENSORS_N(3, in6), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "where: cannot broadcast Condition of shape [2], X of shape [2, 3] and Y of shape [2, 3]");
    CHECK(out == NULL);
    release_all(x, y, yd, c, ci, cb, NULL);
}

static void test_flags(void)
{
    const char *nd[] = {"equal",         "not_equal",   "less",       "less_equal",  "greater",
                        "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not"};
    for (size_t i = 0; i < sizeof nd / sizeof *nd; i++) {
        const nb_op_def *d = nb_op_find(nd[i]);
        CHECK(d && (d->flags & NB_OP_NOT_DIFFERENTIABLE) && d->doc);
    }
    const nb_op_def *w = nb_op_find("where");
    CHECK(w && !(w->flags & NB_OP_NOT_DIFFERENTIABLE) && (w->inputs[0].flags & NB_SLOT_NO_GRAD) &&
          w->grad_uses_inputs == 7 && w->grad_uses_outputs == 0 && w->vjp);
}

int main(void)
{
    RUN(test_comparisons_all_dtypes);
    RUN(test_comparison_nan_and_int64);
    RUN(test_comparison_broadcasting);
    RUN(test_logic);
    RUN(test_where);
    RUN(test_large);
    RUN(test_infer_unknown_dims);
    RUN(test_errors);
    RUN(test_flags);
    return test_report();
}
