/* Forward values, shapes and errors of matmul and fc. */
#include <stdint.h>
#include <stdlib.h>
#include "ops/op_internal.h"
#include "test.h"

static const nb_dtype float_types[] = {NB_F32, NB_F64};

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

#define CHECK_SCALAR_TOL(t, tol, v) check_tensor_(__FILE__, __LINE__, (t), 0, NULL, (const double[]){(v)}, (tol))

static nb_tensor *matmul(nb_tensor *x, nb_tensor *y, bool tx, bool ty, double alpha)
{
    nb_attr attrs[] = {NB_ATTR_BOOL("transpose_x", tx), NB_ATTR_BOOL("transpose_y", ty), NB_ATTR_FLOAT("alpha", alpha)};
    nb_tensor *in[] = {x, y};
    return RUN1("matmul", in, attrs);
}

/* A tensor of the given shape filled with a fixed pseudo-random pattern. */
static nb_tensor *pattern(nb_dtype dt, int ndim, const int64_t *shape, int seed)
{
    int64_t n = nb_shape_numel(ndim, shape);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = sin(0.7 * (double)i + seed) * 2;
    nb_tensor *t = tt(dt, ndim, shape, v);
    free(v);
    return t;
}

/* Element (i, j) of matrix `b` in a stack of matrices of r x c (row-major). */
static double mat_at(const nb_tensor *t, int64_t b, int64_t r, int64_t c, int64_t i, int64_t j)
{
    return nb_tensor_get(t, b * r * c + i * c + j);
}

/* ---- matmul ---------------------------------------------------------------------- */

static void test_matmul_2d_and_transposes(void)
{
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        nb_tensor *x = T(dt, S(2, 3), 1, 2, 3, 4, 5, 6), *y = T(dt, S(3, 2), 7, 8, 9, 10, 11, 12);
        nb_tensor *xt = T(dt, S(3, 2), 1, 4, 2, 5, 3, 6), *yt = T(dt, S(2, 3), 7, 9, 11, 8, 10, 12);
        nb_tensor *r[4] = {matmul(x, y, false, false, 1), matmul(xt, y, true, false, 1), matmul(x, yt, false, true, 1),
                           matmul(xt, yt, true, true, 1)};
        for (int k = 0; k < 4; k++) {
            CHECK_TENSOR(r[k], S(2, 2), 0, 58, 64, 139, 154);
            CHECK(r[k] && r[k]->dtype == dt);
        }
        nb_tensor *a = matmul(x, y, false, false, -0.5);
        CHECK_TENSOR(a, S(2, 2), 0, -29, -32, -69.5, -77);
        release_all(x, y, xt, yt, r[0], r[1], r[2], r[3], a, NULL);
    }
}

static void test_matmul_vectors(void)
{
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        nb_tensor *v = T(dt, S(3), 1, 2, 3), *w = T(dt, S(3), 4, 5, 6);
        nb_tensor *y = T(dt, S(3, 2), 7, 8, 9, 10, 11, 12), *x = T(dt, S(2, 3), 1, 2, 3, 4, 5, 6);
        nb_tensor *vy = matmul(v, y, false, false, 1);
        CHECK_TENSOR(vy, S(2), 0, 58, 64);
        nb_tensor *xv = matmul(x, v, false, false, 1);
        CHECK_TENSOR(xv, S(2), 0, 14, 32);
        nb_tensor *dot = matmul(v, w, false, false, 1);
        CHECK_SCALAR_TOL(dot, 0, 32);
        CHECK(dot && dot->ndim == 0);
        /* Transposing a vector changes nothing; Y^T still applies. */
        nb_tensor *yt = T(dt, S(2, 3), 7, 9, 11, 8, 10, 12);
        nb_tensor *vyt = matmul(v, yt, true, true, 1);
        CHECK_TENSOR(vyt, S(2), 0, 58, 64);
        /* A batch of matrices times a vector. */
        nb_tensor *bx = T(dt, S(2, 2, 3), 1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 0, 1);
        nb_tensor *bxv = matmul(bx, v, false, false, 2);
        CHECK_TENSOR(bxv, S(2, 2), 0, 28, 64, 2, 6);
        /* A vector times a batch: [3] x [2, 3, 2] -> [2, 2]. */
        nb_tensor *by = T(dt, S(2, 3, 2), 7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 1, 1);
        nb_tensor *vby = matmul(v, by, false, false, 1);
        CHECK_TENSOR(vby, S(2, 2), 0, 58, 64, 4, 5);
        release_all(v, w, y, x, vy, xv, dot, yt, vyt, bx, bxv, by, vby, NULL);
    }
}

/* Batched products against a plain loop, over shapes that take each path of
 * the kernel: folded batches, Y-only batches, broadcasting on both sides,
 * transposes with batches. */
static void check_batched(nb_dtype dt, int xnd, const int64_t *xs, int ynd, const int64_t *ys, bool tx, bool ty,
                          int ond, const int64_t *os)
{
    nb_tensor *x = pattern(dt, xnd, xs, 1), *y = pattern(dt, ynd, ys, 2);
    nb_tensor *r = matmul(x, y, tx, ty, 1);
    CHECK(r && nb_shape_equal(r->ndim, r->shape, ond, os));
    if (!r || !nb_shape_equal(r->ndim, r->shape, ond, os)) {
        release_all(x, y, r, NULL);
        return;
    }
    int64_t xr = xs[xnd - 2], xc = xs[xnd - 1], yr = ys[ynd - 2], yc = ys[ynd - 1];
    int64_t M = tx ? xc : xr, K = tx ? xr : xc, N = ty ? yr : yc;
    int bnd = ond - 2;
    int64_t nbatch = nb_shape_numel(bnd, os);
    double tol = dt == NB_F32 ? 1e-4 : 1e-11;
    int bad = 0;
    for (int64_t b = 0; b < nbatch; b++) {
        /* The batch index of each operand, with broadcast dims pinned at 0. */
        int64_t xb = 0, yb = 0, xm = 1, ym = 1, rem = b;
        for (int d = bnd - 1; d >= 0; d--) {
            int64_t i = rem % os[d];
            rem /= os[d];
            int xd = d - (bnd - (xnd - 2)), yd = d - (bnd - (ynd - 2));
            if (xd >= 0) xb += (xs[xd] == 1 ? 0 : i) * xm, xm *= xs[xd];
            if (yd >= 0) yb += (ys[yd] == 1 ? 0 : i) * ym, ym *= ys[yd];
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (tx ? mat_at(x, xb, xr, xc, k, i) : mat_at(x, xb, xr, xc, i, k)) *
                        (ty ? mat_at(y, yb, yr, yc, j, k) : mat_at(y, yb, yr, yc, k, j));
                double got = nb_tensor_get(r, (b * M + i) * N + j);
                if (!(fabs(got - acc) <= tol * (1 + fabs(acc)))) bad++;
            }
    }
    CHECK(bad == 0);
    release_all(x, y, r, NULL);
}

static void test_matmul_batched(void)
{
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        check_batched(dt, 3, S(2, 2, 3), 2, S(3, 2), false, false, 3, S(2, 2, 2));
        check_batched(dt, 2, S(2, 3), 3, S(2, 3, 2), false, false, 3, S(2, 2, 2));
        check_batched(dt, 4, S(2, 1, 2, 3), 3, S(3, 3, 2), false, false, 4, S(2, 3, 2, 2));
        check_batched(dt, 3, S(4, 3, 2), 3, S(1, 5, 3), true, true, 3, S(4, 2, 5));
        check_batched(dt, 3, S(4, 3, 2), 2, S(3, 5), true, false, 3, S(4, 2, 5));
        check_batched(dt, 3, S(4, 2, 3), 2, S(5, 3), false, true, 3, S(4, 2, 5));
        /* Big enough for the blocked GEMM and the threaded batch loop. */
        check_batched(dt, 3, S(3, 50, 70), 2, S(70, 40), false, false, 3, S(3, 50, 40));
        check_batched(dt, 3, S(6, 33, 17), 3, S(6, 33, 20), true, false, 3, S(6, 17, 20));
        check_batched(dt, 2, S(130, 7), 2, S(33, 130), true, true, 2, S(7, 33));
    }
}

static void test_matmul_empty_and_inplace(void)
{
    nb_tensor *x, *y;
    CHECK_OK(nb_tensor_new(&x, NB_F32, 2, S(0, 3)));
    CHECK_OK(nb_tensor_new(&y, NB_F32, 2, S(3, 4)));
    nb_tensor *r = matmul(x, y, false, false, 1);
    CHECK(r && r->ndim == 2 && r->shape[0] == 0 && r->shape[1] == 4);
    /* K = 0: a matrix of zeros. */
    nb_tensor *a, *b;
    CHECK_OK(nb_tensor_new(&a, NB_F64, 2, S(2, 0)));
    CHECK_OK(nb_tensor_new(&b, NB_F64, 2, S(0, 2)));
    nb_tensor *z = matmul(a, b, false, false, 1);
    CHECK_TENSOR(z, S(2, 2), 0, 0, 0, 0, 0);
    /* Out written over X. */
    nb_tensor *p = T(NB_F64, S(2, 2), 1, 2, 3, 4), *q = T(NB_F64, S(2, 2), 0, 1, 1, 0);
    nb_tensor *in[] = {p, q}, *out[] = {p};
    CHECK_OK(nb_op_run("matmul", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, out));
    CHECK_TENSOR(p, S(2, 2), 0, 2, 1, 4, 3);
    release_all(x, y, r, a, b, z, p, q, NULL);
}

static void test_matmul_errors(void)
{
    nb_tensor *x, *y, *out = NULL;
    CHECK_OK(nb_tensor_new(&x, NB_F32, 2, S(64, 784)));
    CHECK_OK(nb_tensor_new(&y, NB_F32, 2, S(256, 10)));
    nb_tensor *in[] = {x, y};
    CHECK_ERR(nb_op_run("matmul", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "matmul: X has shape [64, 784] but Y has shape [256, 10]: inner dimensions differ");
    nb_attr ty[] = {NB_ATTR_BOOL("transpose_y", true)};
    CHECK_ERR(nb_op_run("matmul", NB_TENSORS_N(2, in), NB_ATTRS_N(1, ty), 1, &out), NB_ERR_SHAPE,
              "matmul: X has shape [64, 784] but Y has shape [256, 10]: inner dimensions differ (Y transposed)");
    nb_tensor *b1, *b2, *i32, *s;
    CHECK_OK(nb_tensor_new(&b1, NB_F64, 3, S(2, 3, 4)));
    CHECK_OK(nb_tensor_new(&b2, NB_F64, 3, S(3, 4, 5)));
    nb_tensor *ib[] = {b1, b2};
    CHECK_ERR(nb_op_run("matmul", NB_TENSORS_N(2, ib), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "matmul: X has shape [2, 3, 4] but Y has shape [3, 4, 5]: batch dimensions do not broadcast");
    nb_tensor *mixed[] = {x, b2};
    CHECK_ERR(nb_op_run("matmul", NB_TENSORS_N(2, mixed), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "matmul: X has dtype float32 but Y has dtype float64");
    CHECK_OK(nb_tensor_new(&i32, NB_I32, 2, S(2, 2)));
    nb_tensor *ii[] = {i32, i32};
    CHECK_ERR(nb_op_run("matmul", NB_TENSORS_N(2, ii), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "matmul: X has dtype int32");
    s = tscalar(NB_F32, 1);
    nb_tensor *is[] = {s, x};
    CHECK_ERR(nb_op_run("matmul", NB_TENSORS_N(2, is), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE, "matmul: X has shape []");
    CHECK(out == NULL);
    release_all(x, y, b1, b2, i32, s, NULL);
}

static void test_matmul_inference_unknown_dims(void)
{
    nb_var_info o;
    nb_var_info a[] = {{NB_F32, 2, {-1, 784}}, {NB_F32, 2, {784, 256}}};
    CHECK_OK(infer("matmul", 2, a, 0, NULL, &o));
    CHECK_INFO(o, NB_F32, -1, 256);
    nb_var_info b[] = {{NB_F64, 3, {-1, 5, -1}}, {NB_F64, 2, {7, 3}}};
    CHECK_OK(infer("matmul", 2, b, 0, NULL, &o));
    CHECK_INFO(o, NB_F64, -1, 5, 3);
    nb_attr tt_[] = {NB_ATTR_BOOL("transpose_x", true), NB_ATTR_BOOL("transpose_y", true)};
    nb_var_info c[] = {{NB_F32, 3, {-1, 8, -1}}, {NB_F32, 4, {2, 1, 6, 8}}};
    CHECK_OK(infer("matmul", 2, c, 2, tt_, &o));
    CHECK_INFO(o, NB_F32, 2, -1, -1, 6);
    nb_var_info d[] = {{NB_F32, 1, {-1}}, {NB_F32, 1, {4}}};
    CHECK_OK(infer("matmul", 2, d, 0, NULL, &o));
    CHECK(o.ndim == 0);
    nb_var_info e[] = {{NB_F32, 2, {-1, 784}}, {NB_F32, 2, {256, 10}}};
    CHECK_ERR(infer("matmul", 2, e, 0, NULL, &o), NB_ERR_SHAPE,
              "matmul: X has shape [-1, 784] but Y has shape [256, 10]: inner dimensions differ");
}

/* ---- fc ----------------------------------------------------------------------------- */

static nb_tensor *fc(nb_tensor *in, nb_tensor *w, nb_tensor *bias, int64_t ncd, const char *act)
{
    nb_attr attrs[] = {NB_ATTR_INT("in_num_col_dims", ncd), NB_ATTR_STRING("activation", act)};
    nb_tensor *ins[] = {in, w, bias};
    nb_tensor *out = NULL;
    nb_status st = nb_op_run("fc", NB_TENSORS_N(bias ? 3 : 2, ins), NB_ATTRS_N(2, attrs), 1, &out);
    if (st) {
        fprintf(stderr, "  fc failed: %s\n", nb_last_error());
        test_failures_in_current++;
    }
    return out;
}

static double act_ref(const char *act, double v)
{
    if (!strcmp(act, "relu")) return v > 0 ? v : 0;
    if (!strcmp(act, "sigmoid")) return 1 / (1 + exp(-v));
    if (!strcmp(act, "tanh")) return tanh(v);
    return v;
}

static void test_fc_values(void)
{
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        nb_tensor *in = T(dt, S(2, 3), 1, 2, 3, 4, 5, 6), *w = T(dt, S(3, 2), 7, 8, 9, 10, 11, 12);
        nb_tensor *bias = T(dt, S(2), -100, 1), *bias2 = T(dt, S(1, 2), -100, 1);
        nb_tensor *plain = fc(in, w, NULL, 1, "");
        CHECK_TENSOR(plain, S(2, 2), 0, 58, 64, 139, 154);
        nb_tensor *biased = fc(in, w, bias, 1, "");
        CHECK_TENSOR(biased, S(2, 2), 0, -42, 65, 39, 155);
        nb_tensor *row_bias = fc(in, w, bias2, 1, "relu");
        CHECK_TENSOR(row_bias, S(2, 2), 0, 0, 65, 39, 155);
        /* Input [2, 2, 3] with in_num_col_dims = 2: four rows of three. */
        nb_tensor *in3 = T(dt, S(2, 2, 3), 1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0);
        nb_tensor *r2 = fc(in3, w, bias, 2, "");
        CHECK_TENSOR(r2, S(2, 2, 2), 0, -42, 65, 39, 155, -89, 13, -93, 9);
        /* Input [2, 3, 2] with in_num_col_dims = 1: two rows of six. */
        nb_tensor *in6 = T(dt, S(2, 3, 2), 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0);
        nb_tensor *w6 = T(dt, S(6, 2), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
        nb_tensor *r1 = fc(in6, w6, NULL, 1, "");
        CHECK_TENSOR(r1, S(2, 2), 0, 12, 14, 8, 10);
        release_all(in, w, bias, bias2, plain, biased, row_bias, in3, r2, in6, w6, r1, NULL);
    }
}

static void test_fc_activations(void)
{
    static const char *const acts[] = {"", "relu", "sigmoid", "tanh"};
    for (int t = 0; t < 2; t++) {
        nb_dtype dt = float_types[t];
        /* Big enough for the blocked GEMM and the threaded epilogue. */
        nb_tensor *in = pattern(dt, 3, S(4, 30, 40), 3), *w = pattern(dt, 2, S(40, 300), 4);
        nb_tensor *bias = pattern(dt, 1, S(300), 5);
        for (int a = 0; a < 4; a++) {
            nb_tensor *r = fc(in, w, bias, 2, acts[a]);
            CHECK(r && r->ndim == 3 && r->shape[0] == 4 && r->shape[1] == 30 && r->shape[2] == 300);
            if (!r) continue;
            int bad = 0;
            double tol = dt == NB_F32 ? 1e-4 : 1e-11;
            for (int64_t i = 0; i < 120; i += 7)
                for (int64_t j = 0; j < 300; j++) {
                    double acc = nb_tensor_get(bias, j);
                    for (int64_t k = 0; k < 40; k++)
                        acc += nb_tensor_get(in, i * 40 + k) * nb_tensor_get(w, k * 300 + j);
                    double want = act_ref(acts[a], acc), got = nb_tensor_get(r, i * 300 + j);
                    if (!(fabs(got - want) <= tol * (1 + fabs(want)))) bad++;
                }
            CHECK(bad == 0);
            nb_tensor_release(r);
        }
        release_all(in, w, bias, NULL);
    }
    /* Saturation: sigmoid and tanh stay finite and exact at the ends. */
    nb_tensor *in = T(NB_F32, S(1, 2), 1, -1), *w = T(NB_F32, S(2, 2), 200, -200, 0, 0);
    nb_tensor *s = fc(in, w, NULL, 1, "sigmoid"), *h = fc(in, w, NULL, 1, "tanh");
    CHECK_TENSOR(s, S(1, 2), 0, 1, 0);
    CHECK_TENSOR(h, S(1, 2), 0, 1, -1);
    release_all(in, w, s, h, NULL);
}

static void test_fc_errors_and_inference(void)
{
    nb_var_info o;
    nb_var_info a[] = {{NB_F32, 2, {-1, 784}}, {NB_F32, 2, {784, 256}}, {NB_F32, 1, {256}}};
    CHECK_OK(infer("fc", 3, a, 0, NULL, &o));
    CHECK_INFO(o, NB_F32, -1, 256);
    nb_var_info b[] = {{NB_F64, 3, {-1, 28, 28}}, {NB_F64, 2, {784, 10}}};
    CHECK_OK(infer("fc", 2, b, 0, NULL, &o));
    CHECK_INFO(o, NB_F64, -1, 10);
    nb_attr two[] = {NB_ATTR_INT("in_num_col_dims", 2), NB_ATTR_STRING("activation", "tanh")};
    nb_var_info c[] = {{NB_F32, 3, {-1, -1, 3}}, {NB_F32, 2, {3, 5}}};
    CHECK_OK(infer("fc", 2, c, 2, two, &o));
    CHECK_INFO(o, NB_F32, -1, -1, 5);
    nb_var_info d[] = {{NB_F32, 3, {-1, 28, 27}}, {NB_F32, 2, {784, 10}}};
    CHECK_ERR(infer("fc", 2, d, 0, NULL, &o), NB_ERR_SHAPE,
              "fc: Input has shape [-1, 28, 27] (756 columns with in_num_col_dims=1) but W has shape [784, 10]");

    nb_tensor *in = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *w = T(NB_F32, S(3, 2), 1, 2, 3, 4, 5, 6);
    nb_tensor *bad_bias = T(NB_F32, S(3), 1, 2, 3), *w3, *wd, *out = NULL;
    CHECK_OK(nb_tensor_new(&w3, NB_F32, 3, S(3, 2, 1)));
    CHECK_OK(nb_tensor_new(&wd, NB_F64, 2, S(3, 2)));
    nb_tensor *i1[] = {in, w, bad_bias}, *i2[] = {in, w3}, *i3[] = {in, wd}, *i4[] = {in, w}, *i5[] = {w, w};
    CHECK_ERR(nb_op_run("fc", NB_TENSORS_N(3, i1), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "fc: Bias has shape [3] but W has shape [3, 2]");
    CHECK_ERR(nb_op_run("fc", NB_TENSORS_N(2, i2), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "fc: W has shape [3, 2, 1] but it must be 2-D");
    CHECK_ERR(nb_op_run("fc", NB_TENSORS_N(2, i3), NB_NO_ATTRS, 1, &out), NB_ERR_DTYPE,
              "fc: Input has dtype float32 but W has dtype float64");
    nb_attr bad_act[] = {NB_ATTR_STRING("activation", "gelu")};
    CHECK_ERR(nb_op_run("fc", NB_TENSORS_N(2, i4), NB_ATTRS_N(1, bad_act), 1, &out), NB_ERR_ARG,
              "fc: unknown activation \"gelu\"");
    nb_attr bad_ncd[] = {NB_ATTR_INT("in_num_col_dims", 2)};
    CHECK_ERR(nb_op_run("fc", NB_TENSORS_N(2, i4), NB_ATTRS_N(1, bad_ncd), 1, &out), NB_ERR_ARG,
              "fc: in_num_col_dims is 2 but Input has shape [2, 3]");
    CHECK_ERR(
        nb_op_run("fc", NB_TENSORS_N(2, i5), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
        "fc: Input has shape [3, 2] (2 columns with in_num_col_dims=1) but W has shape [3, 2]: inner dimensions differ");
    CHECK(out == NULL);
    release_all(in, w, bad_bias, w3, wd, NULL);
}

static void test_op_metadata(void)
{
    const nb_op_def *m = nb_op_find("matmul"), *f = nb_op_find("fc");
    CHECK(m && f);
    if (!m || !f) return;
    CHECK(m->grad_uses_inputs == 3 && m->grad_uses_outputs == 0);
    /* fc's gradient reads Bias too, for its rank (dBias is [N] or [1, N]). */
    CHECK(f->grad_uses_inputs == 7 && f->grad_uses_outputs == 1);
    CHECK(m->vjp && f->vjp);
    CHECK(f->inputs[2].flags & NB_SLOT_OPTIONAL);
}

int main(void)
{
    RUN(test_matmul_2d_and_transposes);
    RUN(test_matmul_vectors);
    RUN(test_matmul_batched);
    RUN(test_matmul_empty_and_inplace);
    RUN(test_matmul_errors);
    RUN(test_matmul_inference_unknown_dims);
    RUN(test_fc_values);
    RUN(test_fc_activations);
    RUN(test_fc_errors_and_inference);
    RUN(test_op_metadata);
    return test_report();
}
