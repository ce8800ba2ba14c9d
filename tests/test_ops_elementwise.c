/* Elementwise binary ops: values against libm in float32 and float64,
 * broadcasting, integer arithmetic, build-time inference and errors. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include "test.h"
#include "ops/op_internal.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/elementwise.h"

static const nb_dtype FLOATS[] = {NB_F32, NB_F64};
static double tol_of(nb_dtype dt) { return dt == NB_F32 ? 2e-6 : 1e-13; }

/* Element-by-element check with a relative tolerance and a readable report. */
static void check_values(const char *what, const nb_tensor *t, int64_t n, const double *want, double tol)
{
    if (!t) return;
    CHECK(nb_tensor_numel(t) == n);
    for (int64_t i = 0; i < n && i < nb_tensor_numel(t); i++) {
        double got = nb_tensor_get(t, i);
        if (isnan(got) && isnan(want[i])) continue;
        if (got == want[i]) continue;
        if (!(fabs(got - want[i]) <= tol * (1 + fabs(want[i])))) {
            fprintf(stderr, "  %s: element %lld is %.12g, expected %.12g\n", what, (long long)i, got, want[i]);
            test_failures_in_current++;
            return;
        }
    }
}

/* ---- binary ---------------------------------------------------------------------- */

static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }
static double r_max(double a, double b) { return a > b ? a : b; }
static double r_min(double a, double b) { return a < b ? a : b; }

static const struct {
    const char *name;
    double (*ref)(double, double);
} BINARY[] = {{"add", r_add}, {"sub", r_sub},     {"mul", r_mul},    {"div", r_div},
              {"pow", pow},   {"maximum", r_max}, {"minimum", r_min}};

static void test_binary_values(void)
{
    const double xs[6] = {0.5, 1.25, 2.0, 3.5, 0.1, 7.0};
    const double ys[6] = {2.0, -0.75, 3.0, 0.5, 4.0, -1.5};
    for (size_t d = 0; d < 2; d++) {
        nb_dtype dt = FLOATS[d];
        nb_tensor *x = tt(dt, 2, S(2, 3), xs), *y = tt(dt, 2, S(2, 3), ys);
        for (size_t k = 0; k < sizeof BINARY / sizeof *BINARY; k++) {
            nb_tensor *in[] = {x, y};
            nb_tensor *out = RUN1_NOATTR(BINARY[k].name, in);
            double want[6];
            for (int i = 0; i < 6; i++) want[i] = BINARY[k].ref(nb_tensor_get(x, i), nb_tensor_get(y, i));
            CHECK(out && out->dtype == dt && out->ndim == 2);
            check_values(BINARY[k].name, out, 6, want, tol_of(dt));
            nb_tensor_release(out);
        }
        release_all(x, y, NULL);
    }
}

/* out = x op y computed by hand with NumPy broadcasting, for comparison. */
static void reference_broadcast(const nb_tensor *x, const nb_tensor *y, const nb_tensor *out,
                                double (*f)(double, double), double *want)
{
    int64_t n = nb_tensor_numel(out), idx[NB_MAX_DIMS];
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = out->ndim - 1; d >= 0; d--) idx[d] = r % out->shape[d], r /= out->shape[d];
        int64_t ix[NB_MAX_DIMS], iy[NB_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) ix[d] = x->shape[d] == 1 ? 0 : idx[d + out->ndim - x->ndim];
        for (int d = 0; d < y->ndim; d++) iy[d] = y->shape[d] == 1 ? 0 : idx[d + out->ndim - y->ndim];
        want[i] = f(nb_tensor_at(x, ix), nb_tensor_at(y, iy));
    }
}

static void check_broadcast(nb_dtype dt, int ndx, const int64_t *sx, int ndy, const int64_t *sy, int ndo,
                            const int64_t *so)
{
    int64_t nx = nb_shape_numel(ndx, sx), ny = nb_shape_numel(ndy, sy);
    double *vx = malloc(sizeof(double) * (size_t)(nx + 1)), *vy = malloc(sizeof(double) * (size_t)(ny + 1));
    for (int64_t i = 0; i < nx; i++) vx[i] = 1.5 * (double)i - 2;
    for (int64_t i = 0; i < ny; i++) vy[i] = 0.25 * (double)i + 1;
    nb_tensor *x = tt(dt, ndx, sx, vx), *y = tt(dt, ndy, sy, vy);
    const char *ops[] = {"sub", "div", "maximum"};
    double (*refs[])(double, double) = {r_sub, r_div, r_max};
    for (int k = 0; k < 3; k++) {
        /* Both orders, so that either side may be the broadcast one. */
        for (int swap = 0; swap < 2; swap++) {
            nb_tensor *in[] = {swap ? y : x, swap ? x : y};
            nb_tensor *out = RUN1_NOATTR(ops[k], in);
            if (!out) continue;
            CHECK(nb_shape_equal(out->ndim, out->shape, ndo, so));
            int64_t n = nb_tensor_numel(out);
            double *want = malloc(sizeof(double) * (size_t)n);
            reference_broadcast(in[0], in[1], out, refs[k], want);
            check_values(ops[k], out, n, want, tol_of(dt));
            free(want);
            nb_tensor_release(out);
        }
    }
    release_all(x, y, NULL);
    free(vx);
    free(vy);
}

static void test_broadcasting(void)
{
    for (size_t d = 0; d < 2; d++) {
        nb_dtype dt = FLOATS[d];
        check_broadcast(dt, 2, S(2, 3), 1, S(3), 2, S(2, 3));
        check_broadcast(dt, 2, S(2, 1), 2, S(1, 3), 2, S(2, 3));
        check_broadcast(dt, 0, NULL, 2, S(2, 3), 2, S(2, 3));
        check_broadcast(dt, 3, S(4, 1, 3), 2, S(2, 1), 3, S(4, 2, 3));
        check_broadcast(dt, 2, S(5, 1), 2, S(5, 4), 2, S(5, 4));
        check_broadcast(dt, 4, S(2, 1, 3, 1), 3, S(4, 1, 5), 4, S(2, 4, 3, 5));
        /* Big enough for the parallel path: bias add and column broadcast. */
        check_broadcast(dt, 2, S(700, 130), 1, S(130), 2, S(700, 130));
        check_broadcast(dt, 2, S(700, 130), 2, S(700, 1), 2, S(700, 130));
        check_broadcast(dt, 2, S(300, 1), 2, S(1, 400), 2, S(300, 400));
    }
    /* A zero-size dimension broadcasts like any other. */
    nb_tensor *x = tt(NB_F32, 2, S(0, 3), NULL), *y = T(NB_F32, S(3), 1, 2, 3);
    nb_tensor *in[] = {x, y};
    nb_tensor *out = RUN1_NOATTR("add", in);
    CHECK(out && out->ndim == 2 && out->shape[0] == 0 && out->shape[1] == 3);
    release_all(x, y, out, NULL);
}

static void test_scalar_and_row_values(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *b = T(NB_F32, S(3), 10, 20, 30);
    nb_tensor *s = tscalar(NB_F32, 2);
    nb_tensor *in1[] = {x, b}, *in2[] = {s, x}, *in3[] = {x, s};
    nb_tensor *o1 = RUN1_NOATTR("add", in1), *o2 = RUN1_NOATTR("sub", in2), *o3 = RUN1_NOATTR("div", in3);
    CHECK_TENSOR(o1, S(2, 3), 0, 11, 22, 33, 14, 25, 36);
    CHECK_TENSOR(o2, S(2, 3), 0, 1, 0, -1, -2, -3, -4);
    CHECK_TENSOR(o3, S(2, 3), 0, 0.5, 1, 1.5, 2, 2.5, 3);
    /* Two scalars give a scalar. */
    nb_tensor *in4[] = {s, s};
    nb_tensor *o4 = RUN1_NOATTR("mul", in4);
    CHECK(o4 && o4->ndim == 0 && nb_tensor_get(o4, 0) == 4);
    release_all(x, b, s, o1, o2, o3, o4, NULL);
}

static void test_in_place(void)
{
    /* The output may be the input itself (an optimiser's update). */
    nb_tensor *x = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6), *b = T(NB_F64, S(3), 1, 1, 2);
    nb_tensor *in[] = {x, b}, *out[] = {x};
    CHECK_OK(nb_op_run("mul", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, out));
    CHECK_TENSOR(x, S(2, 3), 0, 1, 2, 6, 4, 5, 12);
    nb_tensor *in2[] = {x};
    CHECK_OK(nb_op_run("exp", NB_TENSORS_N(1, in2), NB_NO_ATTRS, 1, out));
    CHECK_TENSOR(x, S(2, 3), 1e-13, exp(1), exp(2), exp(6), exp(4), exp(5), exp(12));
    release_all(x, b, NULL);
}

static void test_strided_views(void)
{
    /* The kernels also take views directly (other kernels call them so). */
    nb_tensor *a = T(NB_F32, S(3, 2), 1, 2, 3, 4, 5, 6), *at = NULL, *y = T(NB_F32, S(3), 10, 20, 30);
    CHECK_OK(nb_tensor_transpose(&at, a, 0, 1)); /* [[1,3,5],[2,4,6]] */
    nb_tensor *out = NULL;
    CHECK_OK(nb_tensor_new(&out, NB_F32, 2, S(2, 3)));
    CHECK_OK(nb_ew_binary(NB_EW_sub, y, at, out, "sub"));
    CHECK_TENSOR(out, S(2, 3), 0, 9, 17, 25, 8, 16, 24);
    CHECK_OK(nb_ew_unary(NB_EW_square, at, out, NULL, "square"));
    CHECK_TENSOR(out, S(2, 3), 0, 1, 9, 25, 4, 16, 36);
    nb_tensor *ci = NULL;
    CHECK_OK(nb_tensor_new(&ci, NB_I32, 2, S(2, 3)));
    CHECK_OK(nb_ew_cast(at, ci, "cast"));
    CHECK_TENSOR(ci, S(2, 3), 0, 1, 3, 5, 2, 4, 6);
    /* An input that does not broadcast to the output is refused, not read. */
    nb_tensor *bad = NULL;
    CHECK_OK(nb_tensor_new(&bad, NB_F32, 1, S(4)));
    CHECK_ERR(nb_ew_binary(NB_EW_add, bad, at, out, "add"), NB_ERR_SHAPE, "add: input 0 of shape [4]");
    release_all(a, at, y, out, ci, bad, NULL);
}

static void test_broadcast_plan(void)
{
    /* The plan flattens the common cases into few long runs. */
    struct {
        int ndx, ndy, ndo;
        int64_t sx[4], sy[4], so[4];
        int ndim;         /* merged rank */
        int64_t shape[2]; /* merged shape */
        int64_t inner_x, inner_y;
    } cases[] = {
        {2, 2, 2, {64, 32}, {64, 32}, {64, 32}, 1, {2048}, 1, 1},     /* same shape */
        {2, 0, 2, {64, 32}, {0}, {64, 32}, 1, {2048}, 1, 0},          /* scalar */
        {2, 1, 2, {64, 32}, {32}, {64, 32}, 2, {64, 32}, 1, 1},       /* bias row */
        {2, 2, 2, {64, 32}, {64, 1}, {64, 32}, 2, {64, 32}, 1, 0},    /* column */
        {3, 3, 3, {8, 1, 5}, {8, 1, 5}, {8, 1, 5}, 1, {40}, 1, 1},    /* size-1 dims vanish */
        {4, 1, 4, {2, 3, 4, 5}, {5}, {2, 3, 4, 5}, 2, {24, 5}, 1, 1}, /* leading dims merge */
        {3, 2, 3, {4, 1, 3}, {2, 1}, {4, 2, 3}, 3, {4, 2}, 1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        nb_tensor *x = NULL, *y = NULL, *o = NULL;
        CHECK_OK(nb_tensor_new(&x, NB_F32, cases[k].ndx, cases[k].sx));
        CHECK_OK(nb_tensor_new(&y, NB_F64, cases[k].ndy, cases[k].sy));
        CHECK_OK(nb_tensor_new(&o, NB_I32, cases[k].ndo, cases[k].so));
        nb_bcast_plan p;
        const nb_tensor *in[] = {x, y};
        CHECK_OK(nb_bcast_plan_init(&p, "plan", 2, in, o));
        int last = p.ndim - 1;
        CHECK(p.nops == 3 && p.ndim == cases[k].ndim && p.elsize[0] == 4 && p.elsize[1] == 8);
        if (p.ndim <= 2)
            for (int d = 0; d < p.ndim; d++) CHECK(p.shape[d] == cases[k].shape[d]);
        CHECK(p.strides[0][last] == cases[k].inner_x && p.strides[1][last] == cases[k].inner_y);
        CHECK(p.strides[2][last] == 1);
        release_all(x, y, o, NULL);
    }
}

/* ---- integers ----------------------------------------------------------------- */

static void test_int_arithmetic(void)
{
    nb_dtype ints[] = {NB_I32, NB_I64};
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = T(ints[d], S(6), 7, -7, 7, -7, 0, 100), *y = T(ints[d], S(6), 2, 2, -2, -2, 5, 3);
        nb_tensor *in[] = {x, y};
        nb_tensor *a = RUN1_NOATTR("add", in), *s = RUN1_NOATTR("sub", in), *m = RUN1_NOATTR("mul", in);
        nb_tensor *q = RUN1_NOATTR("div", in), *mx = RUN1_NOATTR("maximum", in), *mn = RUN1_NOATTR("minimum", in);
        CHECK(a && a->dtype == ints[d]);
        CHECK_TENSOR(a, S(6), 0, 9, -5, 5, -9, 5, 103);
        CHECK_TENSOR(s, S(6), 0, 5, -9, 9, -5, -5, 97);
        CHECK_TENSOR(m, S(6), 0, 14, -14, -14, 14, 0, 300);
        CHECK_TENSOR(q, S(6), 0, 3, -3, -3, 3, 0, 33); /* truncation toward zero */
        CHECK_TENSOR(mx, S(6), 0, 7, 2, 7, -2, 5, 100);
        CHECK_TENSOR(mn, S(6), 0, 2, -7, -2, -7, 0, 3);
        release_all(x, y, a, s, m, q, mx, mn, NULL);
    }
    /* Wrapping instead of undefined behaviour (this runs under UBSan). */
    int32_t big[2] = {INT32_MAX, INT32_MIN}, m1[2] = {1, -1};
    nb_tensor *x = NULL, *y = NULL;
    CHECK_OK(nb_tensor_from_data(&x, NB_I32, 1, S(2), big));
    CHECK_OK(nb_tensor_from_data(&y, NB_I32, 1, S(2), m1));
    nb_tensor *in[] = {x, y};
    nb_tensor *a = RUN1_NOATTR("add", in), *q = RUN1_NOATTR("div", in), *m = RUN1_NOATTR("mul", in);
    if (a && q && m) {
        const int32_t *pa = nb_tensor_data(a), *pq = nb_tensor_data(q), *pm = nb_tensor_data(m);
        CHECK(pa[0] == INT32_MIN && pa[1] == INT32_MAX);
        CHECK(pq[0] == INT32_MAX && pq[1] == INT32_MIN);
        CHECK(pm[0] == INT32_MAX && pm[1] == INT32_MIN);
    }
    int64_t b64[1] = {INT64_MIN}, n64[1] = {-1};
    nb_tensor *x64 = NULL, *y64 = NULL;
    CHECK_OK(nb_tensor_from_data(&x64, NB_I64, 1, S(1), b64));
    CHECK_OK(nb_tensor_from_data(&y64, NB_I64, 1, S(1), n64));
    nb_tensor *in64[] = {x64, y64};
    nb_tensor *q64 = RUN1_NOATTR("div", in64);
    CHECK(q64 && *(const int64_t *)nb_tensor_data(q64) == INT64_MIN);
    release_all(x, y, a, q, m, x64, y64, q64, NULL);
}

static void test_int_division_by_zero(void)
{
    nb_tensor *x = T(NB_I32, S(2, 2), 1, 2, 3, 4), *y = T(NB_I32, S(2), 5, 0), *out = NULL;
    nb_tensor *in[] = {x, y};
    CHECK_ERR(nb_op_run("div", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &out), NB_ERR_ARG, "div: integer division by zero");
    CHECK(out == NULL);
    nb_tensor *x64 = T(NB_I64, S(3), 1, 2, 3), *z64 = tscalar(NB_I64, 0);
    nb_tensor *in64[] = {x64, z64};
    CHECK_ERR(nb_op_run("div", NB_TENSORS_N(2, in64), NB_NO_ATTRS, 1, &out), NB_ERR_ARG, "element 0 of Y is 0");
    /* Floats divide by zero the IEEE way. */
    nb_tensor *xf = T(NB_F32, S(3), 1, -1, 0), *zf = tscalar(NB_F32, 0);
    nb_tensor *inf[] = {xf, zf};
    nb_tensor *of = RUN1_NOATTR("div", inf);
    if (of) CHECK(isinf(nb_tensor_get(of, 0)) && nb_tensor_get(of, 1) < 0 && isnan(nb_tensor_get(of, 2)));
    release_all(x, y, x64, z64, xf, zf, of, NULL);
}

static void test_int_unary(void)
{
    nb_dtype ints[] = {NB_I32, NB_I64};
    for (int d = 0; d < 2; d++) {
        nb_tensor *x = T(ints[d], S(5), -3, -1, 0, 2, 9);
        nb_tensor *in[] = {x};
        struct {
            const char *op;
            double want[5];
        } cases[] = {{"neg", {3, 1, 0, -2, -9}},
                     {"abs", {3, 1, 0, 2, 9}},
                     {"sign", {-1, -1, 0, 1, 1}},
                     {"square", {9, 1, 0, 4, 81}},
                     {"relu", {0, 0, 0, 2, 9}}};
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            nb_tensor *o = RUN1_NOATTR(cases[k].op, in);
            CHECK(o && o->dtype == ints[d]);
            check_values(cases[k].op, o, 5, cases[k].want, 0);
            nb_tensor_release(o);
        }
        nb_attr clip[] = {NB_ATTR_FLOAT("min", -1.5), NB_ATTR_FLOAT("max", 4)};
        nb_tensor *c = RUN1("clip", in, clip);
        CHECK_TENSOR(c, S(5), 0, -1, -1, 0, 2, 4);
        nb_attr sc[] = {NB_ATTR_FLOAT("scale", 3), NB_ATTR_FLOAT("bias", -2)};
        nb_tensor *s = RUN1("scale", in, sc);
        CHECK_TENSOR(s, S(5), 0, -11, -5, -2, 4, 25);
        nb_attr sc2[] = {NB_ATTR_FLOAT("scale", 3), NB_ATTR_FLOAT("bias", -2), NB_ATTR_BOOL("bias_after_scale", false)};
        nb_tensor *s2 = RUN1("scale", in, sc2);
        CHECK_TENSOR(s2, S(5), 0, -15, -9, -6, 0, 21);
        /* A fractional scale goes through double and truncates like a cast. */
        nb_attr sc3[] = {NB_ATTR_FLOAT("scale", 0.5)};
        nb_tensor *s3 = RUN1("scale", in, sc3);
        CHECK_TENSOR(s3, S(5), 0, -1, 0, 0, 1, 4);
        release_all(x, c, s, s2, s3, NULL);
    }
    /* neg and abs of INT_MIN wrap. */
    int32_t mn = INT32_MIN;
    nb_tensor *x = NULL;
    CHECK_OK(nb_tensor_from_data(&x, NB_I32, 1, S(1), &mn));
    nb_tensor *in[] = {x};
    nb_tensor *n = RUN1_NOATTR("neg", in), *a = RUN1_NOATTR("abs", in);
    CHECK(n && *(const int32_t *)nb_tensor_data(n) == INT32_MIN);
    CHECK(a && *(const int32_t *)nb_tensor_data(a) == INT32_MIN);
    release_all(x, n, a, NULL);
}

/* ---- build-time inference and errors ---------------------------------------------- */

/* Runs an op's infer on build-time shapes (with -1) like a program builder. */
static nb_status infer(const char *op, int n, const nb_var_info *in, int n_attrs, const nb_attr *attrs,
                       nb_var_info *out)
{
    return nb_op_infer(op, n, in, NB_ATTRS_N(n_attrs, attrs), 1, out);
}

#define INFO(dt, ...) ((nb_var_info){(dt), NDIM_OF(S(__VA_ARGS__)), {__VA_ARGS__}})

static void test_infer_unknown_dims(void)
{
    nb_var_info out;
    nb_var_info a[] = {INFO(NB_F32, -1, 3), INFO(NB_F32, 3)};
    CHECK_OK(infer("add", 2, a, 0, NULL, &out));
    CHECK(out.dtype == NB_F32 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 3)));
    nb_var_info b[] = {INFO(NB_F64, -1, 1), INFO(NB_F64, 1, 4)};
    CHECK_OK(infer("mul", 2, b, 0, NULL, &out));
    CHECK(out.dtype == NB_F64 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 4)));
    nb_var_info c[] = {INFO(NB_F32, -1, 1, 3), INFO(NB_F32, 2, 1)};
    CHECK_OK(infer("pow", 2, c, 0, NULL, &out));
    CHECK(nb_shape_equal(out.ndim, out.shape, 3, S(-1, 2, 3)));
    nb_var_info d[] = {INFO(NB_F32, -1, 3), INFO(NB_F32, 5)};
    CHECK_ERR(infer("sub", 2, d, 0, NULL, &out), NB_ERR_SHAPE,
              "sub: cannot broadcast X of shape [-1, 3] with Y of shape [5]");
    nb_var_info u[] = {INFO(NB_F32, -1, 7)};
    CHECK_OK(infer("gelu", 1, u, 0, NULL, &out));
    CHECK(out.dtype == NB_F32 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 7)));
    nb_attr to[] = {NB_ATTR_INT("dtype", NB_I64)};
    CHECK_OK(infer("cast", 1, u, 1, to, &out));
    CHECK(out.dtype == NB_I64 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 7)));
}

static void test_shape_and_dtype_errors(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *y = T(NB_F32, S(4), 1, 2, 3, 4), *out = NULL;
    nb_tensor *in[] = {x, y};
    CHECK_ERR(nb_op_run("add", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "add: cannot broadcast X of shape [2, 3] with Y of shape [4]");
    nb_tensor *a = T(NB_F32, S(2, 1, 3), 1, 2, 3, 4, 5, 6), *b = T(NB_F32, S(3, 2, 1), 1, 2, 3, 4, 5, 6);
    nb_tensor *in2[] = {a, b};
    CHECK_ERR(nb_op_run("maximum", NB_TENSORS_N(2, in2), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "maximum: cannot broadcast X of shape [2, 1, 3] with Y of shape [3, 2, 1]");
    nb_tensor *z = T(NB_F64, S(3), 1, 2, 3);
    nb_tensor *in3[] = {x, z};
    CHECK_ERR(nb_op_run("mul", NB_TENSORS_N(2, in3), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "mul: X is float32 but Y is float64; they must have the same dtype");
    nb_tensor *iz = T(NB_I32, S(3), 1, 2, 3);
    nb_tensor *in4[] = {iz, x};
    CHECK_ERR(nb_op_run("div", NB_TENSORS_N(2, in4), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "div: X is int32 but Y is float32");
    CHECK(out == NULL);
    release_all(x, y, a, b, z, iz, NULL);
}

static void test_registry_flags(void)
{
    /* The gradient bookkeeping the VJP rules will rely on. */
    const nb_op_def *mul = nb_op_find("mul"), *exp_ = nb_op_find("exp"), *add = nb_op_find("add");
    const nb_op_def *pw = nb_op_find("pow"), *cast = nb_op_find("cast");
    CHECK(mul && mul->grad_uses_inputs == 3 && mul->grad_uses_outputs == 0);
    CHECK(exp_ && exp_->grad_uses_inputs == 0 && exp_->grad_uses_outputs == 1);
    /* add reads X and Y only for their shapes, to sum a broadcast gradient back. */
    CHECK(add && add->grad_uses_inputs == 3 && add->grad_uses_outputs == 0);
    CHECK(pw && pw->grad_uses_inputs == 3 && pw->grad_uses_outputs == 1);
    CHECK(cast && cast->attrs[0].required);
    const char *names[] = {"add",  "sub",      "mul",    "div",  "pow",     "maximum", "minimum",    "neg",
                           "abs",  "sign",     "square", "sqrt", "rsqrt",   "exp",     "log",        "log1p",
                           "sin",  "cos",      "tan",    "tanh", "sigmoid", "relu",    "leaky_relu", "elu",
                           "gelu", "softplus", "silu",   "clip", "scale",   "cast"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const nb_op_def *d = nb_op_find(names[i]);
        CHECK(d && d->doc && d->infer && nb_kernel_find(names[i], NB_DEVICE_CPU, NB_F64, NULL) &&
              !(d->flags & NB_OP_NOT_DIFFERENTIABLE) && d->vjp);
    }
}

int main(void)
{
    RUN(test_binary_values);
    RUN(test_broadcasting);
    RUN(test_scalar_and_row_values);
    RUN(test_in_place);
    RUN(test_strided_views);
    RUN(test_broadcast_plan);
    RUN(test_int_arithmetic);
    RUN(test_int_division_by_zero);
    RUN(test_int_unary);
    RUN(test_infer_unknown_dims);
    RUN(test_shape_and_dtype_errors);
    RUN(test_registry_flags);
    return test_report();
}
