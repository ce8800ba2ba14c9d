/* Tests of the positional and index ops of the shape family: slice, pad,
 * pad_grad, gather, index_select, scatter_add, one_hot; and the reduce
 * family's gather_elements and scatter_elements. */
#include "shape_test_util.h"

/* ---- slice ------------------------------------------------------------------------ */

static void test_slice(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(3, 4));
        /* x[1:3, -3:100] */
        nb_attr a[] = {NB_ATTR_INTS("axes", 0, 1), NB_ATTR_INTS("starts", 1, -3), NB_ATTR_INTS("ends", 3, 100)};
        nb_tensor *y = RUN1X("slice", x, a);
        CHECK_TENSOR(y, S(2, 3), 0, 5, 6, 7, 9, 10, 11);
        CHECK(y && y->dtype == dt);
        /* x[-100:, 0:4:2] along axes given as (-1, 0) */
        nb_attr b[] = {NB_ATTR_INTS("axes", -1, 0), NB_ATTR_INTS("starts", 0, -100), NB_ATTR_INTS("ends", 4, 3),
                       NB_ATTR_INTS("strides", 2, 1)};
        nb_tensor *z = RUN1X("slice", x, b);
        CHECK_TENSOR(z, S(3, 2), 0, 0, 2, 4, 6, 8, 10);
        /* x[:, 1:-1:2] */
        nb_attr c[] = {NB_ATTR_INTS("axes", 1), NB_ATTR_INTS("starts", 1), NB_ATTR_INTS("ends", -1),
                       NB_ATTR_INTS("strides", 2)};
        nb_tensor *w = RUN1X("slice", x, c);
        CHECK_TENSOR(w, S(3, 1), 0, 1, 5, 9);
        /* An empty range gives a zero-size dim. */
        nb_attr e[] = {NB_ATTR_INTS("axes", 0), NB_ATTR_INTS("starts", 2), NB_ATTR_INTS("ends", 1)};
        nb_tensor *v = RUN1X("slice", x, e);
        CHECK(v && v->ndim == 2 && v->shape[0] == 0 && v->shape[1] == 4);
        release_all(x, y, z, w, v, NULL);
    }
    nb_tensor *x = IOTA(NB_I64, S(2, 3, 4));
    nb_attr a[] = {NB_ATTR_INTS("axes", 2, 1), NB_ATTR_INTS("starts", 3, 1), NB_ATTR_INTS("ends", 4, 2)};
    nb_tensor *y = RUN1X("slice", x, a);
    CHECK_TENSOR(y, S(2, 1, 1), 0, 7, 19);
    release_all(x, y, NULL);
    /* Strided and large: the threaded path. */
    nb_tensor *big = IOTA(NB_F32, S(400, 300));
    nb_attr s[] = {NB_ATTR_INTS("axes", 1), NB_ATTR_INTS("starts", 1), NB_ATTR_INTS("ends", 300),
                   NB_ATTR_INTS("strides", 3)};
    nb_tensor *bs = RUN1X("slice", big, s);
    int64_t bad = 0;
    for (int64_t r = 0; bs && r < 400; r++)
        for (int64_t j = 0; j < 100; j++) bad += nb_tensor_get(bs, r * 100 + j) != (double)(r * 300 + 1 + 3 * j);
    CHECK(bs && bs->shape[1] == 100 && bad == 0);
    release_all(big, bs, NULL);
}

static void test_slice_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 4)}, out;
    nb_attr a[] = {NB_ATTR_INTS("axes", 1), NB_ATTR_INTS("starts", 1), NB_ATTR_INTS("ends", 3)};
    CHECK_OK(INFER1("slice", in, a, &out));
    CHECK_INFO(out, NB_F32, S(-1, 2));
    nb_attr b[] = {NB_ATTR_INTS("axes", 0), NB_ATTR_INTS("starts", 1), NB_ATTR_INTS("ends", 3)};
    CHECK_OK(INFER1("slice", in, b, &out));
    CHECK_INFO(out, NB_F32, S(-1, 4));

    nb_tensor *x = IOTA(NB_F32, S(3, 4)), *y = NULL;
    nb_attr len[] = {NB_ATTR_INTS("axes", 0, 1), NB_ATTR_INTS("starts", 0), NB_ATTR_INTS("ends", 1, 2)};
    CHECK_ERR(nb_op_run("slice", NB_TENSORS(x), NB_ATTRS_N(3, len), 1, &y), NB_ERR_ARG,
              "slice: axes, starts, ends (and strides, if given) need the same length; got 2, 1, 2, 0");
    nb_attr zero[] = {NB_ATTR_INTS("axes", 0), NB_ATTR_INTS("starts", 0), NB_ATTR_INTS("ends", 1),
                      NB_ATTR_INTS("strides", 0)};
    CHECK_ERR(nb_op_run("slice", NB_TENSORS(x), NB_ATTRS_N(4, zero), 1, &y), NB_ERR_ARG,
              "slice: strides[0] = 0 must be positive");
    nb_attr dup[] = {NB_ATTR_INTS("axes", 1, -1), NB_ATTR_INTS("starts", 0, 0), NB_ATTR_INTS("ends", 1, 1)};
    CHECK_ERR(nb_op_run("slice", NB_TENSORS(x), NB_ATTRS_N(3, dup), 1, &y), NB_ERR_ARG,
              "slice: axes names dim 1 twice");
    nb_attr far[] = {NB_ATTR_INTS("axes", 2), NB_ATTR_INTS("starts", 0), NB_ATTR_INTS("ends", 1)};
    CHECK_ERR(nb_op_run("slice", NB_TENSORS(x), NB_ATTRS_N(3, far), 1, &y), NB_ERR_ARG,
              "slice: axes entry 2 is out of range [-2, 2) for Input of shape [3, 4]");
    CHECK_ERR(nb_op_run("slice", NB_TENSORS(x), NB_ATTRS_N(2, far), 1, &y), NB_ERR_ARG,
              "missing required attribute 'ends'");
    CHECK(y == NULL);
    nb_tensor_release(x);
}

/* ---- pad ------------------------------------------------------------------------------ */

static void test_pad(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = T(dt, S(2, 2), 1, 2, 3, 4);
        nb_attr c[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 2), NB_ATTR_FLOAT("pad_value", 9)};
        nb_tensor *y = RUN1X("pad", x, c);
        CHECK_TENSOR(y, S(3, 4), 0, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9);
        nb_attr z[] = {NB_ATTR_INTS("paddings", 0, 1, 1, 0)};
        nb_tensor *y0 = RUN1X("pad", x, z);
        CHECK_TENSOR(y0, S(3, 3), 0, 0, 1, 2, 0, 3, 4, 0, 0, 0);
        nb_tensor *v = T(dt, S(3), 1, 2, 3);
        nb_attr r[] = {NB_ATTR_INTS("paddings", 2, 2), NB_ATTR_STRING("mode", "reflect")};
        nb_attr e[] = {NB_ATTR_INTS("paddings", 2, 1), NB_ATTR_STRING("mode", "edge")};
        nb_tensor *vr = RUN1X("pad", v, r), *ve = RUN1X("pad", v, e);
        CHECK_TENSOR(vr, S(7), 0, 3, 2, 1, 2, 3, 2, 1);
        CHECK_TENSOR(ve, S(6), 0, 1, 1, 1, 2, 3, 3);
        nb_tensor *m = IOTA(dt, S(3, 3));
        nb_attr r2[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 1), NB_ATTR_STRING("mode", "reflect")};
        nb_attr e2[] = {NB_ATTR_INTS("paddings", 0, 1, 1, 0), NB_ATTR_STRING("mode", "edge")};
        nb_tensor *mr = RUN1X("pad", m, r2), *me = RUN1X("pad", m, e2);
        CHECK_TENSOR(mr, S(4, 4), 0, 3, 4, 5, 4, 0, 1, 2, 1, 3, 4, 5, 4, 6, 7, 8, 7);
        CHECK_TENSOR(me, S(4, 4), 0, 0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 6, 6, 7, 8);
        release_all(x, y, y0, v, vr, ve, m, mr, me, NULL);
    }
    nb_tensor *x = T(NB_I64, S(1, 2), 5, 6);
    nb_attr c[] = {NB_ATTR_INTS("paddings", 1, 1, 1, 0), NB_ATTR_FLOAT("pad_value", -1)};
    nb_tensor *y = RUN1X("pad", x, c);
    CHECK_TENSOR(y, S(3, 3), 0, -1, -1, -1, -1, 5, 6, -1, -1, -1);
    CHECK(y && y->dtype == NB_I64);
    release_all(x, y, NULL);
    /* NCHW image padding large enough for the threaded path. */
    nb_tensor *img = IOTA(NB_F32, S(2, 3, 100, 100));
    nb_attr p[] = {NB_ATTR_INTS("paddings", 0, 0, 0, 0, 2, 2, 2, 2), NB_ATTR_STRING("mode", "reflect")};
    nb_tensor *pi = RUN1X("pad", img, p);
    int64_t bad = 0;
    for (int64_t b = 0; pi && b < 6; b++)
        for (int64_t i = 0; i < 104; i++)
            for (int64_t j = 0; j < 104; j++) {
                int64_t si = i - 2 < 0 ? 2 - i : i - 2 > 99 ? 198 - (i - 2) : i - 2;
                int64_t sj = j - 2 < 0 ? 2 - j : j - 2 > 99 ? 198 - (j - 2) : j - 2;
                bad += nb_tensor_get(pi, (b * 104 + i) * 104 + j) != (double)(b * 10000 + si * 100 + sj);
            }
    CHECK(pi && bad == 0);
    release_all(img, pi, NULL);
}

static void test_pad_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 4)}, out;
    nb_attr a[] = {NB_ATTR_INTS("paddings", 1, 1, 2, 3)};
    CHECK_OK(INFER1("pad", in, a, &out));
    CHECK_INFO(out, NB_F32, S(-1, 9));
    nb_attr r[] = {NB_ATTR_INTS("paddings", 5, 5, 1, 1), NB_ATTR_STRING("mode", "reflect")};
    CHECK_OK(INFER1("pad", in, r, &out)); /* the unknown dim is checked at run time */
    CHECK_INFO(out, NB_F32, S(-1, 6));

    nb_tensor *x = IOTA(NB_F32, S(2, 3)), *y = NULL;
    nb_attr neg[] = {NB_ATTR_INTS("paddings", 0, 0, -1, 0)};
    CHECK_ERR(nb_op_run("pad", NB_TENSORS(x), NB_ATTRS_N(1, neg), 1, &y), NB_ERR_ARG,
              "pad: paddings [0, 0, -1, 0] for dim 1 must be >= 0");
    nb_attr count[] = {NB_ATTR_INTS("paddings", 1, 1)};
    CHECK_ERR(nb_op_run("pad", NB_TENSORS(x), NB_ATTRS_N(1, count), 1, &y), NB_ERR_ARG,
              "pad: paddings [1, 1] has 2 entries but X of shape [2, 3] needs 4");
    nb_attr refl[] = {NB_ATTR_INTS("paddings", 0, 0, 3, 0), NB_ATTR_STRING("mode", "reflect")};
    CHECK_ERR(nb_op_run("pad", NB_TENSORS(x), NB_ATTRS_N(2, refl), 1, &y), NB_ERR_SHAPE,
              "pad: reflect padding (3, 0) of dim 1 needs pads smaller than its size 3 (X has shape [2, 3])");
    nb_attr mode[] = {NB_ATTR_INTS("paddings", 0, 0, 1, 0), NB_ATTR_STRING("mode", "wrap")};
    CHECK_ERR(nb_op_run("pad", NB_TENSORS(x), NB_ATTRS_N(2, mode), 1, &y), NB_ERR_ARG,
              "pad: mode \"wrap\" is not one of constant, reflect, edge");
    nb_tensor *empty = IOTA(NB_F32, S(0, 2));
    nb_attr edge[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 0), NB_ATTR_STRING("mode", "edge")};
    CHECK_ERR(nb_op_run("pad", NB_TENSORS(empty), NB_ATTRS_N(2, edge), 1, &y), NB_ERR_SHAPE,
              "pad: edge padding of dim 0 has no edge to repeat");
    nb_attr cst[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 1), NB_ATTR_FLOAT("pad_value", 2)};
    CHECK(y == NULL);
    y = RUN1X("pad", empty, cst);
    CHECK_TENSOR(y, S(1, 3), 0, 2, 2, 2);
    release_all(x, empty, y, NULL);
}

/* ---- pad_grad ----------------------------------------------------------------------------- */

static void test_pad_grad(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        /* pad [3] by (2, 2) reflect reads x[2 1 0 1 2 1 0]. */
        nb_tensor *dy = T(dt, S(7), 1, 2, 3, 4, 5, 6, 7);
        nb_attr r[] = {NB_ATTR_INTS("paddings", 2, 2), NB_ATTR_STRING("mode", "reflect")};
        nb_tensor *dr = RUN1X("pad_grad", dy, r);
        CHECK_TENSOR(dr, S(3), 0, 3 + 7, 2 + 4 + 6, 1 + 5);
        CHECK(dr && dr->dtype == dt);
        /* edge (2, 1) on [4] reads x[0 0 0 1 2 3 3]. */
        nb_attr e[] = {NB_ATTR_INTS("paddings", 2, 1), NB_ATTR_STRING("mode", "edge")};
        nb_tensor *de = RUN1X("pad_grad", dy, e);
        CHECK_TENSOR(de, S(4), 0, 1 + 2 + 3, 4, 5, 6 + 7);
        /* constant: the middle. */
        nb_attr c[] = {NB_ATTR_INTS("paddings", 1, 3)};
        nb_tensor *dc = RUN1X("pad_grad", dy, c);
        CHECK_TENSOR(dc, S(3), 0, 2, 3, 4);
        /* 2-D: pad [2, 2] by (1, 0, 0, 1) reflect reads rows [1 0 1] and columns [0 1 0]. */
        nb_tensor *dm = IOTA(dt, S(3, 3));
        nb_attr r2[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 1), NB_ATTR_STRING("mode", "reflect")};
        nb_tensor *d2 = RUN1X("pad_grad", dm, r2);
        CHECK_TENSOR(d2, S(2, 2), 0, 3 + 5, 4, 0 + 2 + 6 + 8, 1 + 7);
        nb_tensor *s = tscalar(dt, 4);
        nb_attr none[] = {NB_ATTR_INTS_N("paddings", 0, NULL), NB_ATTR_STRING("mode", "edge")};
        nb_tensor *ds = RUN1X("pad_grad", s, none);
        CHECK_SCALAR(ds, 4, 0);
        release_all(dy, dr, de, dc, dm, d2, s, ds, NULL);
    }
    /* pad_grad is the transpose of pad: <pad(x), y> = <x, pad_grad(y)>. */
    const char *modes[] = {"constant", "reflect", "edge"};
    for (int m = 0; m < 3; m++) {
        nb_tensor *x = IOTA(NB_F64, S(2, 3, 4)), *y = NULL;
        nb_attr a[] = {NB_ATTR_INTS("paddings", 1, 1, 2, 0, 0, 3), NB_ATTR_STRING("mode", modes[m])};
        nb_tensor *px = RUN1X("pad", x, a);
        CHECK_OK(nb_tensor_new(&y, NB_F64, 3, S(4, 5, 7)));
        for (int64_t i = 0; y && i < 140; i++) nb_tensor_set(y, i, (double)((i * 37) % 11) - 5);
        nb_tensor *gy = RUN1X("pad_grad", y, a);
        double lhs = 0, rhs = 0;
        for (int64_t i = 0; px && y && i < 140; i++) lhs += nb_tensor_get(px, i) * nb_tensor_get(y, i);
        for (int64_t i = 0; gy && i < 24; i++) rhs += nb_tensor_get(x, i) * nb_tensor_get(gy, i);
        CHECK(px && gy);
        CHECK_NEAR(lhs, rhs, 1e-9);
        release_all(x, y, px, gy, NULL);
    }
}

static void test_pad_grad_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 9)}, out;
    nb_attr a[] = {NB_ATTR_INTS("paddings", 1, 1, 2, 3), NB_ATTR_STRING("mode", "reflect")};
    CHECK_OK(INFER1("pad_grad", in, a, &out));
    CHECK_INFO(out, NB_F32, S(-1, 4));
    nb_var_info small[] = {VI(NB_F64, 3, 4)};
    nb_attr big[] = {NB_ATTR_INTS("paddings", 2, 2, 0, 0)};
    CHECK_ERR(INFER1("pad_grad", small, big, &out), NB_ERR_SHAPE,
              "pad_grad: DOut of shape [3, 4] is smaller than paddings [2, 2, 0, 0] along dim 0");
    nb_attr refl[] = {NB_ATTR_INTS("paddings", 0, 0, 2, 0), NB_ATTR_STRING("mode", "reflect")};
    CHECK_ERR(INFER1("pad_grad", small, refl, &out), NB_ERR_SHAPE,
              "pad_grad: reflect padding (2, 0) of dim 1 needs pads smaller than its size 2 (DX has shape [3, 2])");
    nb_attr count[] = {NB_ATTR_INTS("paddings", 1, 1)};
    CHECK_ERR(INFER1("pad_grad", small, count, &out), NB_ERR_ARG,
              "pad_grad: paddings [1, 1] has 2 entries but DOut of shape [3, 4] needs 4");
    nb_var_info ints[] = {VI(NB_I64, 3, 4)};
    nb_attr zero[] = {NB_ATTR_INTS("paddings", 0, 0, 0, 0)};
    CHECK_ERR(INFER1("pad_grad", ints, zero, &out), NB_ERR_DTYPE,
              "pad_grad: DOut is int64; pad_grad takes float32 or float64");
    nb_attr mode[] = {NB_ATTR_INTS("paddings", 0, 0, 0, 0), NB_ATTR_STRING("mode", "wrap")};
    CHECK_ERR(INFER1("pad_grad", small, mode, &out), NB_ERR_ARG,
              "pad_grad: mode \"wrap\" is not one of constant, reflect, edge");
    nb_var_info empty[] = {VI(NB_F32, 1, 2)};
    nb_attr edge[] = {NB_ATTR_INTS("paddings", 1, 0, 0, 0), NB_ATTR_STRING("mode", "edge")};
    CHECK_ERR(INFER1("pad_grad", empty, edge, &out), NB_ERR_SHAPE,
              "pad_grad: edge padding of dim 0 has no edge to repeat");
}

/* ---- gather, index_select -------------------------------------------------------------- */

static void test_gather(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(3, 2)), *i64 = T(NB_I64, S(3), 2, 0, 2), *i32 = T(NB_I32, S(2), 1, 1);
        nb_tensor *in0[] = {x, i64}, *in1[] = {x, i32};
        nb_attr ax1[] = {NB_ATTR_INT("axis", -1)};
        nb_tensor *y0 = RUN1_NOATTR("gather", in0), *y1 = RUN1("gather", in1, ax1);
        CHECK_TENSOR(y0, S(3, 2), 0, 4, 5, 0, 1, 4, 5);
        CHECK_TENSOR(y1, S(3, 2), 0, 1, 1, 3, 3, 5, 5);
        CHECK(y0 && y0->dtype == dt);
        /* index_select is the same op under torch's name for the axis. */
        nb_attr d1[] = {NB_ATTR_INT("dim", 1)};
        nb_tensor *s0 = RUN1_NOATTR("index_select", in0), *s1 = RUN1("index_select", in1, d1);
        CHECK_TENSOR(s0, S(3, 2), 0, 4, 5, 0, 1, 4, 5);
        CHECK_TENSOR(s1, S(3, 2), 0, 1, 1, 3, 3, 5, 5);
        release_all(x, i64, i32, y0, y1, s0, s1, NULL);
    }
    nb_tensor *x = IOTA(NB_I64, S(2, 3, 2)), *idx = T(NB_I32, S(4), 2, 1, 0, 2), *in[] = {x, idx};
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    nb_tensor *y = RUN1("gather", in, ax);
    CHECK_TENSOR(y, S(2, 4, 2), 0, 4, 5, 2, 3, 0, 1, 4, 5, 10, 11, 8, 9, 6, 7, 10, 11);
    CHECK(y && y->dtype == NB_I64);
    release_all(x, idx, y, NULL);
    /* Embedding-like lookup, large enough for the threaded path. */
    nb_tensor *table = IOTA(NB_F32, S(50, 64)), *ids;
    int64_t n = 1000;
    CHECK_OK(nb_tensor_new(&ids, NB_I64, 1, &n));
    for (int64_t i = 0; i < n; i++) nb_tensor_set(ids, i, (double)((i * 7) % 50));
    nb_tensor *ins[] = {table, ids};
    nb_tensor *rows = RUN1_NOATTR("gather", ins);
    int64_t bad = 0;
    for (int64_t i = 0; rows && i < n; i++)
        for (int64_t j = 0; j < 64; j++) bad += nb_tensor_get(rows, i * 64 + j) != (double)(((i * 7) % 50) * 64 + j);
    CHECK(rows && bad == 0);
    release_all(table, ids, rows, NULL);
}

static void test_gather_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 5), VI(NB_I64, -1)}, out;
    nb_attr ax1[] = {NB_ATTR_INT("axis", 1)};
    CHECK_OK(INFER1("gather", in, ax1, &out));
    CHECK_INFO(out, NB_F32, S(-1, -1));
    nb_var_info in2[] = {VI(NB_F64, -1, 5), VI(NB_I32, 7)};
    nb_attr d0[] = {NB_ATTR_INT("dim", 0)};
    CHECK_OK(INFER1("index_select", in2, d0, &out));
    CHECK_INFO(out, NB_F64, S(7, 5));

    nb_tensor *x = IOTA(NB_F32, S(3, 2)), *bad = T(NB_I64, S(3), 0, 5, 1), *neg = T(NB_I32, S(2), 1, -1), *y = NULL;
    nb_tensor *in_bad[] = {x, bad}, *in_neg[] = {x, neg};
    CHECK_ERR(nb_op_run("gather", NB_TENSORS_N(2, in_bad), NB_NO_ATTRS, 1, &y), NB_ERR_ARG,
              "gather: Index[1] = 5 is out of range [0, 3) for dim 0 of X (shape [3, 2])");
    CHECK_ERR(nb_op_run("index_select", NB_TENSORS_N(2, in_neg), NB_ATTRS_N(1, ax1 /* unknown */), 1, &y), NB_ERR_ARG,
              "index_select: unknown attribute 'axis'");
    nb_attr dm1[] = {NB_ATTR_INT("dim", -1)};
    CHECK_ERR(nb_op_run("index_select", NB_TENSORS_N(2, in_neg), NB_ATTRS_N(1, dm1), 1, &y), NB_ERR_ARG,
              "index_select: Index[1] = -1 is out of range [0, 2) for dim 1 of X (shape [3, 2])");
    nb_tensor *fidx = T(NB_F32, S(1), 0), *idx2 = T(NB_I64, S(1, 1), 0);
    nb_tensor *in_f[] = {x, fidx}, *in_2[] = {x, idx2};
    CHECK_ERR(nb_op_run("gather", NB_TENSORS_N(2, in_f), NB_NO_ATTRS, 1, &y), NB_ERR_DTYPE,
              "gather: Index must be int32 or int64, got float32");
    CHECK_ERR(nb_op_run("gather", NB_TENSORS_N(2, in_2), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
              "gather: Index must be 1-D, got shape [1, 1]");
    nb_attr far[] = {NB_ATTR_INT("axis", 2)};
    CHECK_ERR(nb_op_run("gather", NB_TENSORS_N(2, in_bad), NB_ATTRS_N(1, far), 1, &y), NB_ERR_ARG,
              "gather: axis 2 is out of range [-2, 2) for X of shape [3, 2]");
    nb_tensor *s = tscalar(NB_F32, 1), *in_s[] = {s, neg};
    CHECK_ERR(nb_op_run("gather", NB_TENSORS_N(2, in_s), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE, "gather: X is a scalar");
    CHECK(y == NULL);
    release_all(x, bad, neg, fidx, idx2, s, NULL);
}

/* ---- scatter_add ------------------------------------------------------------------------ */

static void test_scatter_add(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = T(dt, S(3, 2), 0, 0, 0, 0, 10, 10), *idx = T(NB_I64, S(3), 0, 2, 0);
        nb_tensor *u = T(dt, S(3, 2), 1, 2, 3, 4, 5, 6), *in[] = {x, idx, u};
        nb_tensor *y = RUN1_NOATTR("scatter_add", in);
        CHECK_TENSOR(y, S(3, 2), 0, 6, 8, 0, 0, 13, 14);
        CHECK(y && y->dtype == dt);
        /* Along the last axis: Updates [3, 1] into columns. */
        nb_tensor *i1 = T(NB_I32, S(1), 1), *u1 = T(dt, S(3, 1), 1, 2, 3), *in1[] = {x, i1, u1};
        nb_attr ax[] = {NB_ATTR_INT("axis", -1)};
        nb_tensor *y1 = RUN1("scatter_add", in1, ax);
        CHECK_TENSOR(y1, S(3, 2), 0, 0, 1, 0, 2, 10, 13);
        /* In place: Out is X's own tensor. */
        CHECK_OK(nb_op_run("scatter_add", NB_TENSORS_N(3, in), NB_NO_ATTRS, 1, &x));
        CHECK_TENSOR(x, S(3, 2), 0, 6, 8, 0, 0, 13, 14);
        release_all(x, idx, u, y, i1, u1, y1, NULL);
    }
    nb_tensor *x = T(NB_I64, S(2), 1, 1), *idx = T(NB_I32, S(4), 1, 1, 0, 1), *u = T(NB_I64, S(4), 1, 2, 3, 4);
    nb_tensor *in[] = {x, idx, u};
    nb_tensor *y = RUN1_NOATTR("scatter_add", in);
    CHECK_TENSOR(y, S(2), 0, 4, 8);
    release_all(x, idx, u, y, NULL);
    /* The gradient of an embedding lookup: many repeated rows, threaded. */
    nb_tensor *z, *ids, *g;
    int64_t zs[] = {50, 64}, n = 1000, gs[] = {1000, 64};
    CHECK_OK(nb_tensor_new(&z, NB_F64, 2, zs));
    CHECK_OK(nb_tensor_new(&ids, NB_I64, 1, &n));
    CHECK_OK(nb_tensor_full(&g, NB_F64, 2, gs, 0.5));
    for (int64_t i = 0; i < n; i++) nb_tensor_set(ids, i, (double)((i * 7) % 50));
    nb_tensor *ins[] = {z, ids, g};
    nb_tensor *acc = RUN1_NOATTR("scatter_add", ins);
    int64_t bad = 0; /* every row is hit 1000 / 50 = 20 times */
    for (int64_t i = 0; acc && i < 50 * 64; i++) bad += nb_tensor_get(acc, i) != 10.0;
    CHECK(acc && bad == 0);
    release_all(z, ids, g, acc, NULL);
}

static void test_scatter_add_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 5), VI(NB_I64, -1), VI(NB_F32, -1, 5)}, out;
    nb_attr none[] = {NB_ATTR_INT("axis", 0)};
    CHECK_OK(INFER1("scatter_add", in, none, &out));
    CHECK_INFO(out, NB_F32, S(-1, 5));

    nb_tensor *x = IOTA(NB_F32, S(3, 2)), *idx = T(NB_I64, S(2), 1, 3), *u = IOTA(NB_F32, S(2, 2)), *y = NULL;
    nb_tensor *in_bad[] = {x, idx, u};
    CHECK_ERR(nb_op_run("scatter_add", NB_TENSORS_N(3, in_bad), NB_NO_ATTRS, 1, &y), NB_ERR_ARG,
              "scatter_add: Index[1] = 3 is out of range [0, 3) for dim 0 of X (shape [3, 2])");
    nb_tensor *idx_ok = T(NB_I64, S(2), 1, 2), *u3 = IOTA(NB_F32, S(3, 2)), *in_shape[] = {x, idx_ok, u3};
    CHECK_ERR(
        nb_op_run("scatter_add", NB_TENSORS_N(3, in_shape), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
        "scatter_add: Updates has shape [3, 2] but X has shape [3, 2] and Index [2]: Updates must be X's shape with dim 0 = len(Index)");
    nb_tensor *ud = IOTA(NB_F64, S(2, 2)), *in_dt[] = {x, idx_ok, ud};
    CHECK_ERR(nb_op_run("scatter_add", NB_TENSORS_N(3, in_dt), NB_NO_ATTRS, 1, &y), NB_ERR_DTYPE,
              "scatter_add: Updates is float64 but X is float32");
    nb_tensor *xb = IOTA(NB_U8, S(3, 2)), *ub = IOTA(NB_U8, S(2, 2)), *in_u8[] = {xb, idx_ok, ub};
    CHECK_ERR(nb_op_run("scatter_add", NB_TENSORS_N(3, in_u8), NB_NO_ATTRS, 1, &y), NB_ERR_DTYPE,
              "scatter_add: X is uint8");
    CHECK(y == NULL);
    release_all(x, idx, u, idx_ok, u3, ud, xb, ub, NULL);
}

/* ---- one_hot ---------------------------------------------------------------------------- */

static void test_one_hot(void)
{
    nb_tensor *x = T(NB_I64, S(3), 0, 2, 1);
    nb_attr a[] = {NB_ATTR_INT("depth", 3)};
    nb_tensor *y = RUN1X("one_hot", x, a);
    CHECK_TENSOR(y, S(3, 3), 0, 1, 0, 0, 0, 0, 1, 0, 1, 0);
    CHECK(y && y->dtype == NB_F32);
    nb_tensor *x2 = T(NB_I32, S(2, 2), 3, 0, 1, 3);
    nb_attr b[] = {NB_ATTR_INT("depth", 4), NB_ATTR_INT("dtype", NB_F64)};
    nb_tensor *y2 = RUN1X("one_hot", x2, b);
    CHECK_TENSOR(y2, S(2, 2, 4), 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1);
    CHECK(y2 && y2->dtype == NB_F64);
    nb_attr c[] = {NB_ATTR_INT("depth", 2), NB_ATTR_INT("dtype", NB_I64)};
    nb_tensor *x3 = T(NB_I64, S(2), 1, 0), *y3 = RUN1X("one_hot", x3, c);
    CHECK_TENSOR(y3, S(2, 2), 0, 0, 1, 1, 0);
    CHECK(y3 && y3->dtype == NB_I64);
    release_all(x, y, x2, y2, x3, y3, NULL);

    const nb_op_def *d = nb_op_find("one_hot");
    CHECK(d && (d->flags & NB_OP_NOT_DIFFERENTIABLE) && (d->inputs[0].flags & NB_SLOT_NO_GRAD));
}

static void test_one_hot_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_I64, -1, 3)}, out;
    nb_attr a[] = {NB_ATTR_INT("depth", 10)};
    CHECK_OK(INFER1("one_hot", in, a, &out));
    CHECK_INFO(out, NB_F32, S(-1, 3, 10));

    nb_tensor *x = T(NB_I64, S(2, 2), 0, 1, 4, 2), *y = NULL;
    nb_attr d3[] = {NB_ATTR_INT("depth", 3)};
    CHECK_ERR(nb_op_run("one_hot", NB_TENSORS(x), NB_ATTRS_N(1, d3), 1, &y), NB_ERR_ARG,
              "one_hot: X[2] = 4 (flat index into X of shape [2, 2]) is out of range [0, 3) for depth 3");
    nb_tensor *neg = T(NB_I32, S(1), -2);
    CHECK_ERR(nb_op_run("one_hot", NB_TENSORS(neg), NB_ATTRS_N(1, d3), 1, &y), NB_ERR_ARG, "one_hot: X[0] = -2");
    nb_attr d0[] = {NB_ATTR_INT("depth", 0)};
    CHECK_ERR(nb_op_run("one_hot", NB_TENSORS(x), NB_ATTRS_N(1, d0), 1, &y), NB_ERR_ARG,
              "one_hot: depth must be positive, got 0");
    nb_attr bad_dt[] = {NB_ATTR_INT("depth", 5), NB_ATTR_INT("dtype", 99)};
    CHECK_ERR(nb_op_run("one_hot", NB_TENSORS(x), NB_ATTRS_N(2, bad_dt), 1, &y), NB_ERR_ARG,
              "one_hot: dtype 99 is not a valid nb_dtype");
    nb_tensor *f = T(NB_F32, S(1), 0);
    CHECK_ERR(nb_op_run("one_hot", NB_TENSORS(f), NB_ATTRS_N(1, d3), 1, &y), NB_ERR_DTYPE,
              "one_hot: X must be int32 or int64, got float32");
    CHECK_ERR(nb_op_run("one_hot", NB_TENSORS(x), NB_NO_ATTRS, 1, &y), NB_ERR_ARG,
              "missing required attribute 'depth'");
    CHECK(y == NULL);
    release_all(x, neg, f, NULL);
}

/* Outputs given as an input's own tensor: the kernels must not read what
 * they have already overwritten. */
static void test_in_place_outputs(void)
{
    nb_tensor *x = IOTA(NB_F32, S(3, 2)), *idx = T(NB_I64, S(3), 2, 1, 0), *in[] = {x, idx};
    CHECK_OK(nb_op_run("gather", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &x));
    CHECK_TENSOR(x, S(3, 2), 0, 4, 5, 2, 3, 0, 1);
    nb_attr none[] = {NB_ATTR_INTS("paddings", 0, 0, 0, 0)};
    CHECK_OK(nb_op_run("pad", NB_TENSORS(x), NB_ATTRS_N(1, none), 1, &x));
    CHECK_TENSOR(x, S(3, 2), 0, 4, 5, 2, 3, 0, 1);
    nb_attr rev[] = {NB_ATTR_INTS("axes", 0), NB_ATTR_INTS("starts", 0), NB_ATTR_INTS("ends", 3)};
    CHECK_OK(nb_op_run("slice", NB_TENSORS(x), NB_ATTRS_N(3, rev), 1, &x));
    CHECK_TENSOR(x, S(3, 2), 0, 4, 5, 2, 3, 0, 1);
    /* scatter_add writing over its Updates. */
    nb_tensor *b = T(NB_F64, S(3), 1, 2, 3), *u = T(NB_F64, S(3), 10, 20, 30), *j = T(NB_I32, S(3), 2, 2, 0);
    nb_tensor *sin[] = {b, j, u};
    CHECK_OK(nb_op_run("scatter_add", NB_TENSORS_N(3, sin), NB_NO_ATTRS, 1, &u));
    CHECK_TENSOR(u, S(3), 0, 31, 2, 33);
    CHECK_TENSOR(b, S(3), 0, 1, 2, 3);
    release_all(x, idx, b, u, j, NULL);
}

static void test_definitions(void)
{
    static const struct {
        const char *name;
        unsigned uses;
    } ops[] = {
        {"slice", 1}, {"pad", 0}, {"pad_grad", 0}, {"gather", 3}, {"index_select", 3}, {"scatter_add", 2},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        const nb_op_def *d = nb_op_find(ops[i].name);
        CHECK(d != NULL);
        if (!d) continue;
        CHECK(d->grad_uses_inputs == ops[i].uses && d->grad_uses_outputs == 0);
        CHECK(!(d->flags & NB_OP_NOT_DIFFERENTIABLE));
        CHECK(d->vjp != NULL);
    }
    const char *indexed[] = {"gather", "index_select", "scatter_add"};
    for (int i = 0; i < 3; i++) {
        const nb_op_def *d = nb_op_find(indexed[i]);
        CHECK(d && !strcmp(d->inputs[1].name, "Index") && (d->inputs[1].flags & NB_SLOT_NO_GRAD));
    }
}

/* ---- gather_elements, scatter_elements ------------------------------------------------ */

static void test_gather_elements(void)
{
    nb_tensor *x = IOTA(NB_F32, S(3, 3)), *i = T(NB_I64, S(2, 3), 1, 2, 0, -1, 0, 0), *in[] = {x, i};
    nb_attr a0[] = {NB_ATTR_INT("axis", 0)}, a1[] = {NB_ATTR_INT("axis", -1)};
    nb_tensor *y0 = RUN1("gather_elements", in, a0), *y1 = RUN1("gather_elements", in, a1);
    CHECK_TENSOR(y0, S(2, 3), 0, 3, 7, 2, 6, 1, 2);
    CHECK_TENSOR(y1, S(2, 3), 0, 1, 2, 0, 5, 3, 3);
    nb_tensor *bad = T(NB_I32, S(1, 1), 3), *ib[] = {x, bad}, *out = NULL;
    CHECK_ERR(nb_op_run("gather_elements", NB_TENSORS_N(2, ib), NB_ATTRS_N(1, a0), 1, &out), NB_ERR_ARG,
              "Index[0] = 3 (flat) is out of range [-3, 3) for dim 0 of X (shape [3, 3])");
    nb_tensor *wide = T(NB_I64, S(1, 4), 0, 0, 0, 0), *iw[] = {x, wide};
    CHECK_ERR(nb_op_run("gather_elements", NB_TENSORS_N(2, iw), NB_ATTRS_N(1, a0), 1, &out), NB_ERR_SHAPE,
              "Index of shape [1, 4] does not fit X of shape [3, 3]");
    release_all(x, i, y0, y1, bad, wide, NULL);
}

static void test_scatter_elements(void)
{
    nb_tensor *x = T(NB_F64, S(2, 3), 1, 1, 1, 1, 1, 1), *i = T(NB_I64, S(2, 2), 0, 0, 2, -1);
    nb_tensor *u = T(NB_F64, S(2, 2), 2, 3, 4, 5), *in[] = {x, i, u};
    nb_attr none[] = {NB_ATTR_INT("axis", 1)};
    nb_attr add[] = {NB_ATTR_INT("axis", 1), NB_ATTR_STRING("reduction", "add")};
    nb_attr mul[] = {NB_ATTR_INT("axis", 1), NB_ATTR_STRING("reduction", "mul")};
    nb_tensor *a = RUN1("scatter_elements", in, none), *b = RUN1("scatter_elements", in, add);
    nb_tensor *c = RUN1("scatter_elements", in, mul);
    /* Repeated targets: the last update wins, or all add up or multiply. */
    CHECK_TENSOR(a, S(2, 3), 0, 3, 1, 1, 1, 1, 5);
    CHECK_TENSOR(b, S(2, 3), 0, 6, 1, 1, 1, 1, 10);
    CHECK_TENSOR(c, S(2, 3), 0, 6, 1, 1, 1, 1, 20);
    nb_tensor *xi = T(NB_I32, S(3), 5, 6, 7), *ii = T(NB_I32, S(2), 2, 0), *ui = T(NB_I32, S(2), 1, 2);
    nb_tensor *ini[] = {xi, ii, ui};
    nb_attr a0[] = {NB_ATTR_INT("axis", 0), NB_ATTR_STRING("reduction", "add")};
    nb_tensor *d = RUN1("scatter_elements", ini, a0), *out = NULL;
    CHECK_TENSOR(d, S(3), 0, 7, 6, 8);
    nb_attr odd[] = {NB_ATTR_INT("axis", 1), NB_ATTR_STRING("reduction", "max")};
    CHECK_ERR(nb_op_run("scatter_elements", NB_TENSORS_N(3, in), NB_ATTRS_N(2, odd), 1, &out), NB_ERR_ARG,
              "reduction \"max\" is not one of none, add, mul");
    release_all(x, i, u, a, b, c, xi, ii, ui, d, NULL);
}

int main(void)
{
    RUN(test_slice);
    RUN(test_slice_infer_errors);
    RUN(test_pad);
    RUN(test_pad_infer_errors);
    RUN(test_gather);
    RUN(test_gather_infer_errors);
    RUN(test_scatter_add);
    RUN(test_scatter_add_infer_errors);
    RUN(test_one_hot);
    RUN(test_one_hot_infer_errors);
    RUN(test_in_place_outputs);
    RUN(test_pad_grad);
    RUN(test_pad_grad_infer_errors);
    RUN(test_gather_elements);
    RUN(test_scatter_elements);
    RUN(test_definitions);
    return test_report();
}
