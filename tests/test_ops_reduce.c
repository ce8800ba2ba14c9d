/* Forward values, shapes and errors of the reduction family. */
#include <stdint.h>
#include <stdlib.h>
#include "ops/op_internal.h"
#include "test.h"

static const nb_dtype float_types[] = {NB_F32, NB_F64};
static const nb_dtype num_types[] = {NB_F32, NB_F64, NB_I32, NB_I64};

/* Shape inference alone, as a program builder runs it: inputs may hold -1. */
static nb_status infer(const char *op, int n_in, const nb_var_info *ins, int n_attrs, const nb_attr *attrs,
                       nb_var_info *out)
{
    return nb_op_infer(op, n_in, ins, NB_ATTRS_N(n_attrs, attrs), 1, out);
}

#define CHECK_INFO(info, dt, ...)                                                                     \
    do {                                                                                              \
        const int64_t want_[] = {__VA_ARGS__};                                                        \
        int n_ = (int)(sizeof want_ / sizeof *want_);                                                 \
        CHECK((info).dtype == (dt));                                                                  \
        CHECK(nb_shape_equal((info).ndim, (info).shape, n_, want_));                                  \
    } while (0)

/* A 0-d tensor's value. */
#define CHECK_SCALAR_TOL(t, tol, v) check_tensor_(__FILE__, __LINE__, (t), 0, NULL, (const double[]){(v)}, (tol))

/* X[i, j, k] = 12 i + 4 j + k, shape [2, 3, 4]. */
static nb_tensor *iota234(nb_dtype dt)
{
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = i;
    return tt(dt, 3, S(2, 3, 4), v);
}

/* Runs a single-output op with an axes list and keepdim. */
static nb_tensor *reduce(const char *op, nb_tensor *x, int n_axes, const int64_t *axes, bool keepdim)
{
    nb_attr attrs[] = {NB_ATTR_INTS_N("axes", n_axes, axes), NB_ATTR_BOOL("keepdim", keepdim)};
    nb_tensor *in[] = {x};
    return RUN1(op, in, attrs);
}

/* ---- reduce_sum and reduce_mean -------------------------------------------------- */

static void test_reduce_sum_axes_and_keepdim(void)
{
    for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
        nb_dtype dt = num_types[t];
        nb_tensor *x = iota234(dt);
        nb_tensor *all = reduce("reduce_sum", x, 0, NULL, false);
        CHECK_SCALAR_TOL(all, 0, 276);
        CHECK(all && all->ndim == 0 && all->dtype == dt);
        nb_tensor *mid = reduce("reduce_sum", x, 1, S(1), false);
        CHECK_TENSOR(mid, S(2, 4), 0, 12, 15, 18, 21, 48, 51, 54, 57);
        nb_tensor *last = reduce("reduce_sum", x, 1, S(-1), true);
        CHECK_TENSOR(last, S(2, 3, 1), 0, 6, 22, 38, 54, 70, 86);
        nb_tensor *first = reduce("reduce_sum", x, 1, S(0), false);
        CHECK_TENSOR(first, S(3, 4), 0, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34);
        /* Two separate reduced dims: the transposing path. */
        nb_tensor *outer = reduce("reduce_sum", x, 2, S(0, 2), false);
        CHECK_TENSOR(outer, S(3), 0, 60, 92, 124);
        nb_tensor *outer_k = reduce("reduce_sum", x, 2, S(2, -3), true);
        CHECK_TENSOR(outer_k, S(1, 3, 1), 0, 60, 92, 124);
        nb_tensor *every_k = reduce("reduce_sum", x, 3, S(0, 1, 2), true);
        CHECK_TENSOR(every_k, S(1, 1, 1), 0, 276);
        nb_tensor *tail = reduce("reduce_sum", x, 2, S(1, 2), false);
        CHECK_TENSOR(tail, S(2), 0, 66, 210);
        release_all(x, all, mid, last, first, outer, outer_k, every_k, tail, NULL);
    }
}

static void test_reduce_sum_scalar_and_size1(void)
{
    nb_tensor *s = tscalar(NB_F64, 2.5);
    nb_tensor *r = reduce("reduce_sum", s, 0, NULL, true);
    CHECK(r && r->ndim == 0);
    CHECK_SCALAR_TOL(r, 0, 2.5);
    /* Reducing a size-1 dim is a copy. */
    nb_tensor *x = T(NB_F32, S(2, 1, 2), 1, 2, 3, 4);
    nb_tensor *y = reduce("reduce_sum", x, 1, S(1), false);
    CHECK_TENSOR(y, S(2, 2), 0, 1, 2, 3, 4);
    release_all(s, r, x, y, NULL);
}

static void test_reduce_mean(void)
{
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        nb_tensor *x = iota234(dt);
        nb_tensor *mid = reduce("reduce_mean", x, 1, S(1), false);
        CHECK_TENSOR(mid, S(2, 4), 1e-6, 4, 5, 6, 7, 16, 17, 18, 19);
        nb_tensor *all = reduce("reduce_mean", x, 0, NULL, false);
        CHECK_SCALAR_TOL(all, 1e-6, 11.5);
        nb_tensor *two = reduce("reduce_mean", x, 2, S(0, 2), true);
        CHECK_TENSOR(two, S(1, 3, 1), 1e-6, 7.5, 11.5, 15.5);
        release_all(x, mid, all, two, NULL);
    }
}

/* Reduced axes separated by kept ones ([2 r, 3 k, 2 r, 3 k, 2 r] and the
 * like), for each kind, against a loop over multi-indices. */
static void check_scattered(nb_dtype dt, const char *op, int n_axes, const int64_t *axes)
{
    const int64_t shape[5] = {2, 3, 2, 3, 2};
    double v[72];
    for (int i = 0; i < 72; i++) v[i] = sin(1.3 * i) * 3;
    nb_tensor *x = tt(dt, 5, shape, v);
    nb_tensor *r = reduce(op, x, n_axes, axes, true);
    bool red[5] = {false};
    for (int k = 0; k < n_axes; k++) red[axes[k]] = true;
    int bad = 0;
    for (int o = 0; r && o < 72; o++) {
        /* o enumerates X; the output element is the one with reduced dims at 0. */
        int64_t idx[5], rem = o, oi = 0, om = 1;
        for (int d = 4; d >= 0; d--) idx[d] = rem % shape[d], rem /= shape[d];
        bool rep = true;
        for (int d = 0; d < 5; d++) rep = rep && (!red[d] || idx[d] == 0);
        if (!rep) continue;
        for (int d = 4; d >= 0; d--) {
            if (!red[d]) oi += idx[d] * om, om *= shape[d];
        }
        double sum = 0, mx = -INFINITY, se = 0;
        int cnt = 0;
        for (int e = 0; e < 72; e++) {
            int64_t j[5], rr = e;
            for (int d = 4; d >= 0; d--) j[d] = rr % shape[d], rr /= shape[d];
            bool same = true;
            for (int d = 0; d < 5; d++) same = same && (red[d] || j[d] == idx[d]);
            if (!same) continue;
            double val = dt == NB_F32 ? (float)v[e] : v[e];
            sum += val, cnt++, mx = val > mx ? val : mx, se += exp(val);
        }
        double want = !strcmp(op, "reduce_sum") ? sum
            : !strcmp(op, "reduce_mean")        ? sum / cnt
            : !strcmp(op, "reduce_max")         ? mx
                                                : log(se);
        if (!(fabs(nb_tensor_get(r, oi) - want) <= 1e-5 * (1 + fabs(want)))) bad++;
    }
    CHECK(r && r->ndim == 5 && bad == 0);
    release_all(x, r, NULL);
}

static void test_reduce_scattered_axes(void)
{
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "logsumexp"};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 4; k++) {
            check_scattered(float_types[t], ops[k], 3, S(0, 2, 4));
            check_scattered(float_types[t], ops[k], 2, S(1, 3));
            check_scattered(float_types[t], ops[k], 2, S(4, 0));
            check_scattered(float_types[t], ops[k], 3, S(0, 1, 3));
        }
}

/* Empty reductions give NumPy's identities; max/min of nothing is an error. */
static void test_reduce_empty(void)
{
    nb_tensor *x;
    CHECK_OK(nb_tensor_new(&x, NB_F64, 2, S(0, 3)));
    nb_tensor *sum = reduce("reduce_sum", x, 1, S(0), false);
    CHECK_TENSOR(sum, S(3), 0, 0, 0, 0);
    nb_tensor *prod = reduce("reduce_prod", x, 1, S(0), false);
    CHECK_TENSOR(prod, S(3), 0, 1, 1, 1);
    nb_tensor *mean = reduce("reduce_mean", x, 0, NULL, false);
    CHECK(mean && isnan(nb_tensor_get(mean, 0)));
    nb_tensor *lse = reduce("logsumexp", x, 1, S(0), false);
    CHECK(lse && isinf(nb_tensor_get(lse, 0)) && nb_tensor_get(lse, 0) < 0);
    /* Keeping the empty dim gives an empty result: nothing to complain about. */
    nb_tensor *kept = reduce("reduce_max", x, 1, S(1), false);
    CHECK(kept && nb_tensor_numel(kept) == 0);
    nb_tensor *out = NULL, *in[] = {x};
    nb_attr a[] = {NB_ATTR_INTS("axes", 0)};
    CHECK_ERR(nb_op_run("reduce_max", NB_TENSORS_N(1, in), NB_ATTRS_N(1, a), 1, &out), NB_ERR_SHAPE,
              "reduce_max: cannot take the maximum");
    CHECK_ERR(nb_op_run("reduce_min", NB_TENSORS_N(1, in), NB_ATTRS_N(1, a), 1, &out), NB_ERR_SHAPE, "reduce_min");
    nb_attr b[] = {NB_ATTR_INT("axis", 0)};
    CHECK_ERR(nb_op_run("argmax", NB_TENSORS_N(1, in), NB_ATTRS_N(1, b), 1, &out), NB_ERR_SHAPE,
              "argmax: X has shape [0, 3]");
    CHECK(out == NULL);
    release_all(x, sum, prod, mean, lse, kept, NULL);
}

/* Long rows and columns: the eight-way partial sums, the chunked inner loop
 * and (with OpenMP) the threaded paths, against plain double loops. */
static void test_reduce_large(void)
{
    enum { A = 37, B = 1500, C = 3 };
    double *v = malloc(sizeof(double) * A * B * C);
    for (int i = 0; i < A * B * C; i++) v[i] = sin(0.37 * i) + 0.25;
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        nb_tensor *x = tt(dt, 3, S(A, B, C), v);
        nb_tensor *s1 = reduce("reduce_sum", x, 1, S(1), false);
        nb_tensor *s12 = reduce("reduce_sum", x, 2, S(1, 2), false);
        nb_tensor *m0 = reduce("reduce_max", x, 2, S(0, 2), false);
        nb_tensor *mean = reduce("reduce_mean", x, 0, NULL, false);
        nb_attr am[] = {NB_ATTR_INT("axis", 1)};
        nb_tensor *in[] = {x};
        nb_tensor *arg = RUN1("argmax", in, am);
        double tol = dt == NB_F32 ? 1e-5 : 1e-12;
        double total = 0;
        for (int a = 0; a < A; a++) {
            double row = 0;
            for (int c = 0; c < C; c++) {
                double s = 0, best = -INFINITY;
                int64_t bi = 0;
                for (int b = 0; b < B; b++) {
                    double e = dt == NB_F32 ? (float)v[(a * B + b) * C + c] : v[(a * B + b) * C + c];
                    s += e;
                    if (e > best) best = e, bi = b;
                }
                row += s;
                if (s1) CHECK_NEAR(nb_tensor_get(s1, a * C + c), s, tol * B);
                if (arg) CHECK(nb_tensor_get(arg, a * C + c) == (double)bi);
            }
            if (s12) CHECK_NEAR(nb_tensor_get(s12, a), row, tol * B * C);
            total += row;
        }
        for (int b = 0; b < B; b++) {
            double best = -INFINITY;
            for (int a = 0; a < A; a++)
                for (int c = 0; c < C; c++) {
                    double e = dt == NB_F32 ? (float)v[(a * B + b) * C + c] : v[(a * B + b) * C + c];
                    best = e > best ? e : best;
                }
            if (m0) CHECK(nb_tensor_get(m0, b) == best);
        }
        if (mean) CHECK_NEAR(nb_tensor_get(mean, 0), total / (A * B * C), tol);
        release_all(x, s1, s12, m0, mean, arg, NULL);
    }
    free(v);
}

/* ---- max, min, prod, logsumexp ----------------------------------------------------- */

static void test_reduce_max_min(void)
{
    for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
        nb_dtype dt = num_types[t];
        nb_tensor *x = T(dt, S(2, 3), 1, 5, -2, 7, 7, 0);
        nb_tensor *mx = reduce("reduce_max", x, 1, S(1), false);
        CHECK_TENSOR(mx, S(2), 0, 5, 7);
        nb_tensor *mn = reduce("reduce_min", x, 1, S(0), true);
        CHECK_TENSOR(mn, S(1, 3), 0, 1, 5, -2);
        nb_tensor *all = reduce("reduce_max", x, 0, NULL, false);
        CHECK_SCALAR_TOL(all, 0, 7);
        nb_tensor *lo = reduce("reduce_min", x, 2, S(-1, 0), false);
        CHECK_SCALAR_TOL(lo, 0, -2);
        CHECK(mx && mx->dtype == dt);
        release_all(x, mx, mn, all, lo, NULL);
    }
}

static void test_reduce_max_min_nan(void)
{
    for (int t = 0; t < 2; t++) {
        /* NaN anywhere in a row wins, as in numpy.max. */
        nb_tensor *x = T(float_types[t], S(2, 10), 1, NAN, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, NAN);
        nb_tensor *mx = reduce("reduce_max", x, 1, S(1), false);
        nb_tensor *mn = reduce("reduce_min", x, 1, S(1), false);
        nb_tensor *col = reduce("reduce_max", x, 1, S(0), false);
        CHECK_TENSOR(mx, S(2), 0, NAN, NAN);
        CHECK_TENSOR(mn, S(2), 0, NAN, NAN);
        CHECK_TENSOR(col, S(10), 0, 1, NAN, 3, 4, 5, 6, 7, 8, 9, NAN);
        release_all(x, mx, mn, col, NULL);
    }
}

static void test_reduce_prod(void)
{
    for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
        nb_dtype dt = num_types[t];
        nb_tensor *x = T(dt, S(2, 3), 1, 2, 3, 4, 5, -6);
        nb_tensor *r = reduce("reduce_prod", x, 1, S(-1), false);
        CHECK_TENSOR(r, S(2), 0, 6, -120);
        nb_tensor *c = reduce("reduce_prod", x, 1, S(0), true);
        CHECK_TENSOR(c, S(1, 3), 0, 4, 10, -18);
        nb_tensor *all = reduce("reduce_prod", x, 0, NULL, false);
        CHECK_SCALAR_TOL(all, 0, -720);
        release_all(x, r, c, all, NULL);
    }
    /* Integer products wrap like NumPy's instead of being undefined. */
    nb_tensor *big = T(NB_I32, S(2), 65536, 65536);
    nb_tensor *w = reduce("reduce_prod", big, 0, NULL, false);
    CHECK_SCALAR_TOL(w, 0, 0);
    release_all(big, w, NULL);
}

static void test_logsumexp(void)
{
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        double tol = dt == NB_F32 ? 1e-6 : 1e-13;
        /* The second row would overflow exp() without the shift by the max. */
        nb_tensor *x = T(dt, S(2, 3), 1, 2, 3, 1000, 1000, 1000);
        nb_tensor *r = reduce("logsumexp", x, 1, S(1), false);
        CHECK_TENSOR(r, S(2), tol, log(exp(1) + exp(2) + exp(3)), 1000 + log(3));
        nb_tensor *c = reduce("logsumexp", x, 1, S(0), true);
        CHECK_TENSOR(c, S(1, 3), tol, 1000, 1000, 1000);
        nb_tensor *y = T(dt, S(2, 2), 0, 0, -1000, -1000);
        nb_tensor *all = reduce("logsumexp", y, 0, NULL, false);
        CHECK_SCALAR_TOL(all, tol, log(2));
        nb_tensor *low = reduce("logsumexp", y, 1, S(1), false);
        CHECK_TENSOR(low, S(2), tol, log(2), -1000 + log(2));
        /* Infinite and NaN maxima give themselves, not NaN from inf - inf. */
        nb_tensor *z = T(dt, S(3, 2), -INFINITY, -INFINITY, INFINITY, 1, NAN, 1);
        nb_tensor *zr = reduce("logsumexp", z, 1, S(1), false);
        CHECK_TENSOR(zr, S(3), 0, -INFINITY, INFINITY, NAN);
        release_all(x, r, c, y, all, low, z, zr, NULL);
    }
}

/* ---- argmax / argmin ---------------------------------------------------------------- */

static void test_argmax_argmin(void)
{
    for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
        nb_dtype dt = num_types[t];
        /* Ties: the first index wins. */
        nb_tensor *x = T(dt, S(2, 4), 3, 9, 9, 1, 4, 4, -1, 1);
        nb_tensor *in[] = {x};
        nb_attr none[] = {NB_ATTR_BOOL("keepdim", false)};
        nb_tensor *amax = RUN1("argmax", in, none);
        CHECK_TENSOR(amax, S(2), 0, 1, 0);
        CHECK(amax && amax->dtype == NB_I64);
        nb_tensor *amin = RUN1("argmin", in, none);
        CHECK_TENSOR(amin, S(2), 0, 3, 2);
        nb_attr ax0[] = {NB_ATTR_INT("axis", 0), NB_ATTR_BOOL("keepdim", true)};
        nb_tensor *c = RUN1("argmax", in, ax0);
        CHECK_TENSOR(c, S(1, 4), 0, 1, 0, 0, 0);
        nb_tensor *cm = RUN1("argmin", in, ax0);
        CHECK_TENSOR(cm, S(1, 4), 0, 0, 1, 1, 0);
        nb_attr neg[] = {NB_ATTR_INT("axis", -2)};
        nb_tensor *n = RUN1("argmin", in, neg);
        CHECK_TENSOR(n, S(4), 0, 0, 1, 1, 0);
        CHECK(n && n->ndim == 1);
        release_all(x, amax, amin, c, cm, n, NULL);
    }
    /* NaN counts as the extreme, the first one winning (numpy.argmax). */
    nb_tensor *f = T(NB_F64, S(5), 1, NAN, 7, NAN, 9);
    nb_tensor *in[] = {f};
    nb_tensor *a = RUN1_NOATTR("argmax", in), *b = RUN1_NOATTR("argmin", in);
    CHECK_SCALAR_TOL(a, 0, 1);
    CHECK_SCALAR_TOL(b, 0, 1);
    /* A 0-d X is a single element. */
    nb_tensor *s = tscalar(NB_F32, 4);
    nb_tensor *sin_[] = {s};
    nb_tensor *sa = RUN1_NOATTR("argmax", sin_);
    CHECK(sa && sa->ndim == 0 && nb_tensor_get(sa, 0) == 0);
    release_all(f, a, b, s, sa, NULL);
}

/* ---- sum of several tensors --------------------------------------------------------- */

static void test_sum_variadic(void)
{
    for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
        nb_dtype dt = num_types[t];
        nb_tensor *a = T(dt, S(2, 2), 1, 2, 3, 4), *b = T(dt, S(2, 2), 10, 20, 30, 40);
        nb_tensor *c = T(dt, S(2, 2), 100, 200, 300, 400);
        nb_tensor *in3[] = {a, b, c}, *in1[] = {a};
        nb_tensor *s3 = RUN1_NOATTR("sum", in3), *s1 = RUN1_NOATTR("sum", in1);
        CHECK_TENSOR(s3, S(2, 2), 0, 111, 222, 333, 444);
        CHECK_TENSOR(s1, S(2, 2), 0, 1, 2, 3, 4);
        /* Accumulating into one of the inputs. */
        nb_tensor *out[] = {b};
        CHECK_OK(nb_op_run("sum", NB_TENSORS_N(3, in3), NB_NO_ATTRS, 1, out));
        CHECK_TENSOR(b, S(2, 2), 0, 111, 222, 333, 444);
        release_all(a, b, c, s3, s1, NULL);
    }
    /* Long enough for several blocks. */
    enum { N = 5000 };
    double *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = i * 0.5;
    nb_tensor *x = tt(NB_F32, 1, S(N), v), *y = tt(NB_F32, 1, S(N), v);
    nb_tensor *in[] = {x, y, x};
    nb_tensor *s = RUN1_NOATTR("sum", in);
    int bad = 0;
    for (int i = 0; s && i < N; i++) bad += nb_tensor_get(s, i) != 1.5 * i;
    CHECK(s && bad == 0);
    release_all(x, y, s, NULL);
    free(v);
}

static void test_sum_errors(void)
{
    nb_tensor *a = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *b = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6);
    nb_tensor *c = T(NB_F32, S(2, 4), 1, 2, 3, 4, 5, 6, 7, 8), *d = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6);
    nb_tensor *out = NULL;
    nb_tensor *bad_shape[] = {a, b, c}, *bad_dtype[] = {a, d};
    CHECK_ERR(nb_op_run("sum", NB_TENSORS_N(3, bad_shape), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "sum: X[2] has shape [2, 4] but X[0] has shape [2, 3]");
    CHECK_ERR(nb_op_run("sum", NB_TENSORS_N(2, bad_dtype), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "sum: X[1] has dtype float64 but X[0] has dtype float32");
    CHECK_ERR(nb_op_run("sum", NB_NO_TENSORS, NB_NO_ATTRS, 1, &out), NB_ERR_ARG, "sum");
    CHECK(out == NULL);
    /* Build time: -1 matches anything, and a known size fills it in. */
    nb_var_info ins[] = {{NB_F32, 2, {-1, 3}}, {NB_F32, 2, {4, -1}}}, o;
    CHECK_OK(infer("sum", 2, ins, 0, NULL, &o));
    CHECK_INFO(o, NB_F32, 4, 3);
    nb_var_info bad[] = {{NB_F32, 2, {-1, 3}}, {NB_F32, 2, {-1, 5}}};
    CHECK_ERR(infer("sum", 2, bad, 0, NULL, &o), NB_ERR_SHAPE,
              "sum: X[1] has shape [-1, 5] but X[0] has shape [-1, 3]");
    release_all(a, b, c, d, NULL);
}

/* ---- sum_to ---------------------------------------------------------------------------- */

static void test_sum_to(void)
{
    for (size_t t = 0; t < sizeof num_types / sizeof *num_types; t++) {
        nb_dtype dt = num_types[t];
        nb_tensor *x = iota234(dt);
        nb_tensor *l31, *l4, *l1, *same, *l134;
        CHECK_OK(nb_tensor_new(&l31, NB_I64, 2, S(3, 1)));
        CHECK_OK(nb_tensor_new(&l4, NB_F32, 1, S(4)));
        CHECK_OK(nb_tensor_new(&l1, NB_F64, 0, NULL));
        CHECK_OK(nb_tensor_new(&same, dt, 3, S(2, 3, 4)));
        CHECK_OK(nb_tensor_new(&l134, dt, 3, S(1, 3, 4)));
        nb_tensor *i1[] = {x, l31}, *i2[] = {x, l4}, *i3[] = {x, l1}, *i4[] = {x, same}, *i5[] = {x, l134};
        nb_tensor *r1 = RUN1_NOATTR("sum_to", i1);
        CHECK_TENSOR(r1, S(3, 1), 0, 60, 92, 124);
        CHECK(r1 && r1->dtype == dt);
        nb_tensor *r2 = RUN1_NOATTR("sum_to", i2);
        CHECK_TENSOR(r2, S(4), 0, 60, 66, 72, 78);
        nb_tensor *r3 = RUN1_NOATTR("sum_to", i3);
        CHECK_SCALAR_TOL(r3, 0, 276);
        CHECK(r3 && r3->ndim == 0);
        nb_tensor *r4 = RUN1_NOATTR("sum_to", i4);
        CHECK(r4 && nb_tensor_allclose(r4, x, 0, 0));
        nb_tensor *r5 = RUN1_NOATTR("sum_to", i5);
        CHECK_TENSOR(r5, S(1, 3, 4), 0, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34);
        release_all(x, l31, l4, l1, same, l134, r1, r2, r3, r4, r5, NULL);
    }
}

static void test_sum_to_errors_and_inference(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *like, *out = NULL;
    CHECK_OK(nb_tensor_new(&like, NB_F32, 1, S(2)));
    nb_tensor *in[] = {x, like};
    CHECK_ERR(nb_op_run("sum_to", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "sum_to: Like has shape [2], which does not broadcast to X's shape [2, 3]");
    CHECK(out == NULL);
    nb_var_info o;
    nb_var_info a[] = {{NB_F32, 2, {-1, 3}}, {NB_F32, 1, {3}}};
    CHECK_OK(infer("sum_to", 2, a, 0, NULL, &o));
    CHECK_INFO(o, NB_F32, 3);
    nb_var_info b[] = {{NB_F64, 3, {-1, 5, 3}}, {NB_I64, 3, {-1, 1, 3}}};
    CHECK_OK(infer("sum_to", 2, b, 0, NULL, &o));
    CHECK_INFO(o, NB_F64, -1, 1, 3);
    nb_var_info c[] = {{NB_F32, 1, {3}}, {NB_F32, 2, {2, 3}}};
    CHECK_ERR(infer("sum_to", 2, c, 0, NULL, &o), NB_ERR_SHAPE, "sum_to: Like has shape [2, 3]");
    release_all(x, like, NULL);
}

/* ---- inference and errors of reductions ----------------------------------------------- */

static void test_reduce_inference_unknown_dims(void)
{
    nb_var_info x = {NB_F32, 2, {-1, 784}}, o;
    nb_attr a1[] = {NB_ATTR_INTS("axes", 1)};
    CHECK_OK(infer("reduce_mean", 1, &x, 1, a1, &o));
    CHECK_INFO(o, NB_F32, -1);
    nb_attr a0[] = {NB_ATTR_INTS("axes", 0), NB_ATTR_BOOL("keepdim", true)};
    CHECK_OK(infer("reduce_sum", 1, &x, 2, a0, &o));
    CHECK_INFO(o, NB_F32, 1, 784);
    CHECK_OK(infer("logsumexp", 1, &x, 0, NULL, &o));
    CHECK(o.ndim == 0 && o.dtype == NB_F32);
    nb_var_info xi = {NB_I32, 3, {-1, 10, 4}};
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    CHECK_OK(infer("argmax", 1, &xi, 1, ax, &o));
    CHECK_INFO(o, NB_I64, -1, 4);
    CHECK_OK(infer("reduce_max", 1, &xi, 1, a1, &o));
    CHECK_INFO(o, NB_I32, -1, 4);
}

static void test_reduce_errors(void)
{
    nb_tensor *x = iota234(NB_F32), *out = NULL, *in[] = {x};
    nb_attr big[] = {NB_ATTR_INTS("axes", 3)};
    CHECK_ERR(nb_op_run("reduce_sum", NB_TENSORS_N(1, in), NB_ATTRS_N(1, big), 1, &out), NB_ERR_ARG,
              "reduce_sum: axis 3 is out of range for X of shape [2, 3, 4]");
    nb_attr neg[] = {NB_ATTR_INTS("axes", -4)};
    CHECK_ERR(nb_op_run("reduce_max", NB_TENSORS_N(1, in), NB_ATTRS_N(1, neg), 1, &out), NB_ERR_ARG,
              "reduce_max: axis -4 is out of range");
    nb_attr dup[] = {NB_ATTR_INTS("axes", 1, -2)};
    CHECK_ERR(nb_op_run("reduce_mean", NB_TENSORS_N(1, in), NB_ATTRS_N(1, dup), 1, &out), NB_ERR_ARG,
              "reduce_mean: axes [1, -2] name dim 1 twice");
    nb_attr bad_axis[] = {NB_ATTR_INT("axis", 3)};
    CHECK_ERR(nb_op_run("argmin", NB_TENSORS_N(1, in), NB_ATTRS_N(1, bad_axis), 1, &out), NB_ERR_ARG,
              "argmin: axis 3 is out of range for X of shape [2, 3, 4]");
    nb_attr wrong_type[] = {NB_ATTR_INT("axes", 1)};
    CHECK_ERR(nb_op_run("reduce_sum", NB_TENSORS_N(1, in), NB_ATTRS_N(1, wrong_type), 1, &out), NB_ERR_ARG,
              "reduce_sum");
    nb_tensor *xi = T(NB_I32, S(2), 1, 2), *xb, *ii[] = {xi};
    CHECK_ERR(nb_op_run("reduce_mean", NB_TENSORS_N(1, ii), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "reduce_mean: X has dtype int32 but it takes float32 or float64");
    CHECK_ERR(nb_op_run("logsumexp", NB_TENSORS_N(1, ii), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "logsumexp: X has dtype int32");
    CHECK_OK(nb_tensor_new(&xb, NB_BOOL, 1, S(2)));
    nb_tensor *ib[] = {xb};
    CHECK_ERR(nb_op_run("reduce_sum", NB_TENSORS_N(1, ib), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "reduce_sum: X has dtype bool");
    /* A 0-d X has no axes to name. */
    nb_tensor *s = tscalar(NB_F64, 1), *is[] = {s};
    nb_attr zero[] = {NB_ATTR_INTS("axes", 0)};
    CHECK_ERR(nb_op_run("reduce_sum", NB_TENSORS_N(1, is), NB_ATTRS_N(1, zero), 1, &out), NB_ERR_ARG,
              "reduce_sum: axis 0 is out of range");
    CHECK(out == NULL);
    release_all(x, xi, xb, s, NULL);
}

/* ---- select_last, cumsum, topk -------------------------------------------------------- */

static void test_argmax_select_last(void)
{
    nb_tensor *x = T(NB_F32, S(2, 4), 1, 3, 3, 0, 2, 2, 1, 2), *in[] = {x};
    nb_attr first[] = {NB_ATTR_INT("axis", 1)}, last[] = {NB_ATTR_INT("axis", 1), NB_ATTR_BOOL("select_last", true)};
    nb_tensor *a = RUN1("argmax", in, first), *b = RUN1("argmax", in, last), *c = RUN1("argmin", in, last);
    CHECK_TENSOR(a, S(2), 0, 1, 0);
    CHECK_TENSOR(b, S(2), 0, 2, 3);
    CHECK_TENSOR(c, S(2), 0, 3, 2);
    release_all(x, a, b, c, NULL);
}

/* A scan of [[1, 2, 3], [4, 5, 6]] in each dtype: along axis 1, along -1
 * exclusive, along 1 reversed, and along 0 both; want holds the four
 * results. */
static void check_scan(const char *op, const double want[4][6])
{
    const nb_attr sets[4][3] = {
        {NB_ATTR_INT("axis", 1)},
        {NB_ATTR_INT("axis", -1), NB_ATTR_BOOL("exclusive", true)},
        {NB_ATTR_INT("axis", 1), NB_ATTR_BOOL("reverse", true)},
        {NB_ATTR_INT("axis", 0), NB_ATTR_BOOL("exclusive", true), NB_ATTR_BOOL("reverse", true)},
    };
    const int n_attrs[4] = {1, 2, 2, 3};
    for (int k = 0; k < 4; k++) {
        nb_tensor *x = T(num_types[k], S(2, 3), 1, 2, 3, 4, 5, 6), *in[] = {x};
        for (int s = 0; s < 4; s++) {
            nb_tensor *y = run1_(__FILE__, __LINE__, op, 1, in, n_attrs[s], sets[s]);
            check_tensor_(__FILE__, __LINE__, y, 2, S(2, 3), want[s], 0);
            CHECK(y && y->dtype == num_types[k]);
            release_all(y, NULL);
        }
        release_all(x, NULL);
    }
}

static void test_cumsum(void)
{
    check_scan("cumsum",
               (const double[4][6]){{1, 3, 6, 4, 9, 15}, {0, 1, 3, 0, 4, 9}, {6, 5, 3, 15, 11, 6}, {4, 5, 6, 0, 0, 0}});
    nb_tensor *x = T(NB_F32, S(2), 1, 2), *in[] = {x}, *out = NULL;
    nb_attr far[] = {NB_ATTR_INT("axis", 1)};
    CHECK_ERR(nb_op_run("cumsum", NB_TENSORS_N(1, in), NB_ATTRS_N(1, far), 1, &out), NB_ERR_ARG,
              "cumsum: axis 1 is out of range for X of shape [2]");
    release_all(x, NULL);
}

/* Integer products wrap, as NumPy's do: 65536^2 is 0 in int32. */
static void test_cumprod(void)
{
    check_scan(
        "cumprod",
        (const double[4][6]){{1, 2, 6, 4, 20, 120}, {1, 1, 2, 1, 4, 20}, {6, 6, 3, 120, 30, 6}, {4, 5, 6, 1, 1, 1}});
    nb_tensor *w = T(NB_I32, S(3), 65536, 65536, 3), *in[] = {w};
    nb_attr row[] = {NB_ATTR_INT("axis", 0)};
    nb_tensor *p = RUN1("cumprod", in, row);
    CHECK_TENSOR(p, S(3), 0, 65536, 0, 0);
    release_all(w, p, NULL);
}

static void test_topk(void)
{
    /* Ties: the lower index first, largest or smallest. */
    nb_tensor *x = T(NB_F64, S(2, 4), 3, 1, 3, 2, 0, 5, 5, -1), *in[] = {x}, *out[2] = {NULL, NULL};
    nb_attr big[] = {NB_ATTR_INT("k", 3)};
    CHECK_OK(nb_op_run("topk", NB_TENSORS_N(1, in), NB_ATTRS_N(1, big), 2, out));
    CHECK_TENSOR(out[0], S(2, 3), 0, 3, 3, 2, 5, 5, 0);
    CHECK_TENSOR(out[1], S(2, 3), 0, 0, 2, 3, 1, 2, 0);
    CHECK(out[1] && out[1]->dtype == NB_I64);
    release_all(out[0], out[1], NULL);
    out[0] = out[1] = NULL;
    nb_attr small[] = {NB_ATTR_INT("k", 1), NB_ATTR_INT("axis", 0), NB_ATTR_BOOL("largest", false)};
    CHECK_OK(nb_op_run("topk", NB_TENSORS_N(1, in), NB_ATTRS_N(3, small), 2, out));
    CHECK_TENSOR(out[0], S(1, 4), 0, 0, 1, 3, -1);
    CHECK_TENSOR(out[1], S(1, 4), 0, 1, 0, 0, 1);
    release_all(out[0], out[1], NULL);
    out[0] = out[1] = NULL;
    nb_attr many[] = {NB_ATTR_INT("k", 5)};
    CHECK_ERR(nb_op_run("topk", NB_TENSORS_N(1, in), NB_ATTRS_N(1, many), 2, out), NB_ERR_ARG,
              "topk: k = 5 is not in [0, 4]");
    release_all(x, NULL);
}

static void test_op_metadata(void)
{
    const nb_op_def *sum = nb_op_find("reduce_sum"), *mx = nb_op_find("reduce_max");
    const nb_op_def *am = nb_op_find("argmax"), *vs = nb_op_find("sum"), *st = nb_op_find("sum_to");
    CHECK(sum && mx && am && vs && st);
    if (!sum || !mx || !am || !vs || !st) return;
    CHECK(sum->grad_uses_inputs == 1 && sum->grad_uses_outputs == 0);
    CHECK(mx->grad_uses_inputs == 1 && mx->grad_uses_outputs == 1);
    CHECK(am->flags & NB_OP_NOT_DIFFERENTIABLE);
    CHECK(vs->inputs[0].flags & NB_SLOT_VARIADIC);
    CHECK(st->inputs[1].flags & NB_SLOT_NO_GRAD);
    for (const char *const *n =
             (const char *const[]){"reduce_mean", "reduce_min", "reduce_prod", "logsumexp", "argmin", NULL};
         *n; n++)
        CHECK(nb_op_find(*n) != NULL);
}

int main(void)
{
    RUN(test_reduce_sum_axes_and_keepdim);
    RUN(test_reduce_sum_scalar_and_size1);
    RUN(test_reduce_mean);
    RUN(test_reduce_scattered_axes);
    RUN(test_reduce_empty);
    RUN(test_reduce_large);
    RUN(test_reduce_max_min);
    RUN(test_reduce_max_min_nan);
    RUN(test_reduce_prod);
    RUN(test_logsumexp);
    RUN(test_argmax_argmin);
    RUN(test_argmax_select_last);
    RUN(test_cumsum);
    RUN(test_cumprod);
    RUN(test_topk);
    RUN(test_sum_variadic);
    RUN(test_sum_errors);
    RUN(test_sum_to);
    RUN(test_sum_to_errors_and_inference);
    RUN(test_reduce_inference_unknown_dims);
    RUN(test_reduce_errors);
    RUN(test_op_metadata);
    return test_report();
}
