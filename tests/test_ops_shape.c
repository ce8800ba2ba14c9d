/* Tests of the layout ops of the shape family: reshape, flatten, squeeze,
 * unsqueeze, reshape_as, transpose, expand, expand_as, concat, split, stack. */
#include "shape_test_util.h"

/* ---- reshape ------------------------------------------------------------------- */

static void test_reshape_values(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(2, 3));
        nb_attr a1[] = {NB_ATTR_INTS("shape", 3, 2)};
        nb_attr a2[] = {NB_ATTR_INTS("shape", -1)};
        nb_attr a3[] = {NB_ATTR_INTS("shape", 0, -1, 1)};
        nb_tensor *y1 = RUN1X("reshape", x, a1), *y2 = RUN1X("reshape", x, a2), *y3 = RUN1X("reshape", x, a3);
        CHECK_TENSOR(y1, S(3, 2), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y2, S(6), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y3, S(2, 3, 1), 0, 0, 1, 2, 3, 4, 5);
        CHECK(y1 && y1->dtype == dt);
        release_all(x, y1, y2, y3, NULL);
    }
    nb_tensor *x = T(NB_I64, S(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8);
    nb_attr a[] = {NB_ATTR_INTS("shape", 4, 0)};
    nb_tensor *y = RUN1X("reshape", x, a);
    CHECK_TENSOR(y, S(4, 2), 0, 1, 2, 3, 4, 5, 6, 7, 8);
    CHECK(y && y->dtype == NB_I64);
    release_all(x, y, NULL);
}

/* Run eagerly, the reshape family gives views of a contiguous input
 * (NB_OP_VIEW): the same storage, no copy; a view input is copied first. */
static void test_reshape_is_a_view(void)
{
    nb_tensor *x = IOTA(NB_F32, S(2, 3));
    nb_attr a[] = {NB_ATTR_INTS("shape", 3, 2)}, ax[] = {NB_ATTR_INTS("axes", 0)};
    nb_tensor *y = RUN1X("reshape", x, a), *z = RUN1X("unsqueeze", x, ax), *f = RUN1X_NOATTR("flatten", x);
    CHECK(y && z && f && y->storage == x->storage && z->storage == x->storage && f->storage == x->storage);
    CHECK(y && nb_tensor_data(y) == nb_tensor_data(x) && nb_tensor_is_contiguous(y));
    nb_tensor *t = NULL;
    REQUIRE_OK(nb_tensor_transpose(&t, x, 0, 1)); /* a strided view: reshaped, it is copied */
    nb_tensor *r = RUN1X("reshape", t, a);
    CHECK(r && r->storage != x->storage);
    CHECK_TENSOR(r, S(3, 2), 0, 0, 3, 1, 4, 2, 5);
    release_all(x, y, z, f, t, r, NULL);
}

static void test_reshape_infer(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 28, 28)}, out;
    nb_attr a1[] = {NB_ATTR_INTS("shape", 0, 784)};
    CHECK_OK(INFER1("reshape", in, a1, &out));
    CHECK_INFO(out, NB_F32, S(-1, 784));
    nb_attr a2[] = {NB_ATTR_INTS("shape", -1, 784)};
    CHECK_OK(INFER1("reshape", in, a2, &out));
    CHECK_INFO(out, NB_F32, S(-1, 784));
    /* The unknown batch dim is copied, so the -1 can still be worked out. */
    nb_attr a3[] = {NB_ATTR_INTS("shape", 0, -1)};
    CHECK_OK(INFER1("reshape", in, a3, &out));
    CHECK_INFO(out, NB_F32, S(-1, 784));
    nb_attr a4[] = {NB_ATTR_INTS("shape", 0, 4, -1)};
    CHECK_OK(INFER1("reshape", in, a4, &out));
    CHECK_INFO(out, NB_F32, S(-1, 4, 196));
    nb_var_info in2[] = {VI(NB_F64, 4, -1, 3)};
    nb_attr a5[] = {NB_ATTR_INTS("shape", 2, -1)};
    CHECK_OK(INFER1("reshape", in2, a5, &out));
    CHECK_INFO(out, NB_F64, S(2, -1));
    nb_attr a6[] = {NB_ATTR_INTS("shape", 0, 0, 3)};
    CHECK_OK(INFER1("reshape", in2, a6, &out));
    CHECK_INFO(out, NB_F64, S(4, -1, 3));
}

static void test_reshape_errors(void)
{
    nb_tensor *x = IOTA(NB_F32, S(2, 3)), *y = NULL;
    nb_attr a1[] = {NB_ATTR_INTS("shape", 4, 2)};
    CHECK_ERR(nb_op_run("reshape", NB_TENSORS(x), NB_ATTRS_N(1, a1), 1, &y), NB_ERR_SHAPE,
              "reshape: cannot reshape X of shape [2, 3] (6 elements) into [4, 2]");
    nb_attr a2[] = {NB_ATTR_INTS("shape", -1, -1)};
    CHECK_ERR(nb_op_run("reshape", NB_TENSORS(x), NB_ATTRS_N(1, a2), 1, &y), NB_ERR_ARG,
              "reshape: shape [-1, -1] has more than one -1");
    nb_attr a3[] = {NB_ATTR_INTS("shape", 6, 1, 0)};
    CHECK_ERR(nb_op_run("reshape", NB_TENSORS(x), NB_ATTRS_N(1, a3), 1, &y), NB_ERR_ARG,
              "shape[2] = 0 copies dim 2 of X, but X has shape [2, 3]");
    nb_attr a4[] = {NB_ATTR_INTS("shape", -2, 3)};
    CHECK_ERR(nb_op_run("reshape", NB_TENSORS(x), NB_ATTRS_N(1, a4), 1, &y), NB_ERR_ARG, "shape[0] = -2 is invalid");
    nb_attr a5[] = {NB_ATTR_INTS("shape", 4, -1)};
    CHECK_ERR(nb_op_run("reshape", NB_TENSORS(x), NB_ATTRS_N(1, a5), 1, &y), NB_ERR_SHAPE,
              "reshape: cannot reshape X of shape [2, 3]");
    CHECK_ERR(nb_op_run("reshape", NB_TENSORS(x), NB_NO_ATTRS, 1, &y), NB_ERR_ARG,
              "missing required attribute 'shape'");
    CHECK(y == NULL);
    /* Known parts that cannot fit are caught at build time too. */
    nb_var_info in[] = {VI(NB_F32, 5, 7)}, out;
    nb_attr a6[] = {NB_ATTR_INTS("shape", 0, 2, -1)};
    CHECK_ERR(INFER1("reshape", in, a6, &out), NB_ERR_SHAPE, "reshape: cannot reshape X of shape [5, 7]");
    nb_tensor_release(x);
}

/* ---- flatten --------------------------------------------------------------------- */

static void test_flatten(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(2, 3, 4));
        nb_attr a0[] = {NB_ATTR_INT("start_axis", 0)};
        nb_attr a1[] = {NB_ATTR_INT("start_axis", 0), NB_ATTR_INT("stop_axis", 1)};
        nb_attr a2[] = {NB_ATTR_INT("start_axis", -2)};
        nb_attr a3[] = {NB_ATTR_INT("start_axis", 1), NB_ATTR_INT("stop_axis", 1)};
        nb_tensor *y = RUN1X_NOATTR("flatten", x), *y0 = RUN1X("flatten", x, a0), *y1 = RUN1X("flatten", x, a1),
                  *y2 = RUN1X("flatten", x, a2), *y3 = RUN1X("flatten", x, a3);
        CHECK(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 12 && y->dtype == dt);
        CHECK(y0 && y0->ndim == 1 && y0->shape[0] == 24);
        CHECK(y1 && y1->ndim == 2 && y1->shape[0] == 6 && y1->shape[1] == 4);
        CHECK(y2 && y2->ndim == 2 && y2->shape[0] == 2 && y2->shape[1] == 12);
        CHECK(y3 && y3->ndim == 3 && y3->shape[1] == 3);
        for (int i = 0; y && i < 24; i++) CHECK(nb_tensor_get(y, i) == i);
        release_all(x, y, y0, y1, y2, y3, NULL);
    }
    nb_tensor *s = tscalar(NB_I64, 7);
    nb_attr a[] = {NB_ATTR_INT("start_axis", 0)};
    nb_tensor *y = RUN1X("flatten", s, a);
    CHECK_TENSOR(y, S(1), 0, 7);
    release_all(s, y, NULL);
}

static void test_flatten_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 3, 4)}, in2[] = {VI(NB_F32, 2, -1, 4)}, out;
    nb_attr none[] = {NB_ATTR_INT("stop_axis", -1)};
    CHECK_OK(INFER1("flatten", in, none, &out));
    CHECK_INFO(out, NB_F32, S(-1, 12));
    nb_attr a0[] = {NB_ATTR_INT("start_axis", 0)};
    CHECK_OK(INFER1("flatten", in2, a0, &out));
    CHECK_INFO(out, NB_F32, S(-1));
    nb_attr bad[] = {NB_ATTR_INT("start_axis", 2), NB_ATTR_INT("stop_axis", 1)};
    CHECK_ERR(INFER1("flatten", in, bad, &out), NB_ERR_ARG,
              "flatten: start_axis (dim 2) comes after stop_axis (dim 1) for X of shape [-1, 3, 4]");
    nb_attr far[] = {NB_ATTR_INT("start_axis", 3)};
    CHECK_ERR(INFER1("flatten", in, far, &out), NB_ERR_ARG,
              "flatten: start_axis 3 is out of range [-3, 3) for X of shape [-1, 3, 4]");
}

/* ---- squeeze, unsqueeze ------------------------------------------------------------ */

static void test_squeeze(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(1, 3, 1, 2));
        nb_attr a0[] = {NB_ATTR_INTS("axes", 0)};
        nb_attr a1[] = {NB_ATTR_INTS("axes", -2)};
        nb_attr a2[] = {NB_ATTR_INTS("axes", 1)}; /* size 3: left alone */
        nb_tensor *y = RUN1X_NOATTR("squeeze", x), *y0 = RUN1X("squeeze", x, a0), *y1 = RUN1X("squeeze", x, a1),
                  *y2 = RUN1X("squeeze", x, a2);
        CHECK_TENSOR(y, S(3, 2), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y0, S(3, 1, 2), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y1, S(1, 3, 2), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y2, S(1, 3, 1, 2), 0, 0, 1, 2, 3, 4, 5);
        release_all(x, y, y0, y1, y2, NULL);
    }
    nb_var_info in[] = {VI(NB_I64, -1, 1, 3)}, out;
    nb_attr none[] = {NB_ATTR_INTS_N("axes", 0, NULL)};
    CHECK_OK(INFER1("squeeze", in, none, &out));
    CHECK_INFO(out, NB_I64, S(-1, 3));
    nb_attr a0[] = {NB_ATTR_INTS("axes", 0)};
    CHECK_OK(INFER1("squeeze", in, a0, &out));
    CHECK_INFO(out, NB_I64, S(1, 3));
    nb_attr bad[] = {NB_ATTR_INTS("axes", 3)};
    CHECK_ERR(INFER1("squeeze", in, bad, &out), NB_ERR_ARG,
              "squeeze: axes entry 3 is out of range [-3, 3) for X of shape [-1, 1, 3]");
}

static void test_unsqueeze(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(2, 3));
        nb_attr a0[] = {NB_ATTR_INTS("axes", 0)};
        nb_attr a1[] = {NB_ATTR_INTS("axes", -1)};
        nb_attr a2[] = {NB_ATTR_INTS("axes", 3, 0)};
        nb_tensor *y0 = RUN1X("unsqueeze", x, a0), *y1 = RUN1X("unsqueeze", x, a1), *y2 = RUN1X("unsqueeze", x, a2);
        CHECK_TENSOR(y0, S(1, 2, 3), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y1, S(2, 3, 1), 0, 0, 1, 2, 3, 4, 5);
        CHECK_TENSOR(y2, S(1, 2, 3, 1), 0, 0, 1, 2, 3, 4, 5);
        release_all(x, y0, y1, y2, NULL);
    }
    nb_var_info in[] = {VI(NB_F32, -1, 3)}, out;
    nb_attr a[] = {NB_ATTR_INTS("axes", 1)};
    CHECK_OK(INFER1("unsqueeze", in, a, &out));
    CHECK_INFO(out, NB_F32, S(-1, 1, 3));
    nb_attr twice[] = {NB_ATTR_INTS("axes", 1, -3)};
    CHECK_ERR(INFER1("unsqueeze", in, twice, &out), NB_ERR_ARG, "unsqueeze: axes names output dim 1 twice");
    nb_attr far[] = {NB_ATTR_INTS("axes", 4)};
    CHECK_ERR(INFER1("unsqueeze", in, far, &out), NB_ERR_ARG,
              "unsqueeze: axes entry 4 is out of range [-3, 3) for the rank-3 output from X of shape [-1, 3]");
    nb_var_info big[] = {VI(NB_F32, 1, 1, 1, 1, 1, 1, 1)};
    nb_attr two[] = {NB_ATTR_INTS("axes", 0, 1)};
    CHECK_ERR(INFER1("unsqueeze", big, two, &out), NB_ERR_ARG,
              "unsqueeze: inserting 2 dims into X of shape [1, 1, 1, 1, 1, 1, 1]");
}

/* ---- reshape_as ------------------------------------------------------------------ */

static void test_reshape_as(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(2, 3)), *like = IOTA(NB_I64, S(3, 1, 2));
        nb_tensor *ins[] = {x, like};
        nb_tensor *y = RUN1_NOATTR("reshape_as", ins);
        CHECK_TENSOR(y, S(3, 1, 2), 0, 0, 1, 2, 3, 4, 5);
        CHECK(y && y->dtype == dt);
        release_all(x, like, y, NULL);
    }
    nb_tensor *x = T(NB_F64, S(1), 7), *like = tscalar(NB_F32, 0);
    nb_tensor *ins[] = {x, like};
    nb_tensor *y = RUN1_NOATTR("reshape_as", ins);
    CHECK_SCALAR(y, 7, 0);
    release_all(x, like, y, NULL);

    nb_tensor *a = IOTA(NB_F32, S(2, 3)), *b = IOTA(NB_F32, S(4)), *out = NULL;
    nb_tensor *bad[] = {a, b};
    CHECK_ERR(nb_op_run("reshape_as", NB_TENSORS_N(2, bad), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "reshape_as: X of shape [2, 3] (6 elements) cannot take the shape [4] of Like");
    CHECK(out == NULL);
    release_all(a, b, NULL);
}

static void test_reshape_as_infer(void)
{
    nb_var_info out;
    /* Like's shape, unknown dims included, as long as nothing can be worked out. */
    nb_var_info in1[] = {VI(NB_F32, -1, 6), VI(NB_I64, -1, 2, 3)};
    CHECK_OK(infer_op("reshape_as", 2, in1, 0, NULL, 1, &out));
    CHECK_INFO(out, NB_F32, S(-1, 2, 3));
    nb_var_info in2[] = {VI(NB_F64, 4, 6), VI(NB_F32, -1, 3)};
    CHECK_OK(infer_op("reshape_as", 2, in2, 0, NULL, 1, &out));
    CHECK_INFO(out, NB_F64, S(8, 3));
    nb_var_info in3[] = {VI(NB_F64, 4, 6), VI(NB_F32, -1, -1)};
    CHECK_OK(infer_op("reshape_as", 2, in3, 0, NULL, 1, &out));
    CHECK_INFO(out, NB_F64, S(-1, -1));
    nb_var_info in4[] = {VI(NB_F32, 0, 6), VI(NB_F32, -1, 0)};
    CHECK_OK(infer_op("reshape_as", 2, in4, 0, NULL, 1, &out));
    CHECK_INFO(out, NB_F32, S(-1, 0));
    nb_var_info bad1[] = {VI(NB_F32, 4, 6), VI(NB_F32, -1, 5)};
    CHECK_ERR(infer_op("reshape_as", 2, bad1, 0, NULL, 1, &out), NB_ERR_SHAPE,
              "reshape_as: X of shape [4, 6] (24 elements) cannot take the shape [-1, 5] of Like");
    nb_var_info bad2[] = {VI(NB_F32, 4, 6), VI(NB_F32, 5, 5)};
    CHECK_ERR(infer_op("reshape_as", 2, bad2, 0, NULL, 1, &out), NB_ERR_SHAPE, "cannot take the shape [5, 5] of Like");
}

/* ---- transpose ------------------------------------------------------------------------ */

static void test_transpose_values(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(2, 3));
        nb_attr p[] = {NB_ATTR_INTS("perm", 1, 0)};
        nb_tensor *y = RUN1X("transpose", x, p);
        CHECK_TENSOR(y, S(3, 2), 0, 0, 3, 1, 4, 2, 5);
        CHECK(y && y->dtype == dt);
        nb_tensor *x3 = IOTA(dt, S(2, 3, 2));
        nb_attr p3[] = {NB_ATTR_INTS("perm", -1, 0, 1)};
        nb_tensor *y3 = RUN1X("transpose", x3, p3);
        /* y3[i][j][k] = x3[j][k][i] */
        CHECK_TENSOR(y3, S(2, 2, 3), 0, 0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11);
        release_all(x, y, x3, y3, NULL);
    }
    nb_tensor *x = T(NB_I64, S(2, 2), 1, 2, 3, 4);
    nb_attr p[] = {NB_ATTR_INTS("perm", 1, 0)};
    nb_tensor *y = RUN1X("transpose", x, p);
    CHECK_TENSOR(y, S(2, 2), 0, 1, 3, 2, 4);
    release_all(x, y, NULL);
}

/* Compares the kernel against the definition element by element on shapes
 * big enough for the tiled and multi-threaded paths. */
static void check_transpose_big(nb_dtype dt, int ndim, const int64_t *shape, const int64_t *perm)
{
    nb_tensor *x = iota(dt, ndim, shape), *y = NULL;
    nb_attr p[] = {NB_ATTR_INTS_N("perm", ndim, perm)};
    CHECK_OK(nb_op_run("transpose", NB_TENSORS(x), NB_ATTRS_N(1, p), 1, &y));
    if (!y) {
        nb_tensor_release(x);
        return;
    }
    int64_t n = nb_tensor_numel(y), idx[NB_MAX_DIMS], src[NB_MAX_DIMS], bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = ndim - 1; d >= 0; d--) idx[d] = r % y->shape[d], r /= y->shape[d];
        for (int d = 0; d < ndim; d++) src[perm[d]] = idx[d];
        if (nb_tensor_get(y, i) != nb_tensor_at(x, src)) bad++;
    }
    CHECK(bad == 0);
    release_all(x, y, NULL);
}

static void test_transpose_big(void)
{
    check_transpose_big(NB_F32, 2, S(300, 200), S(1, 0));
    check_transpose_big(NB_F64, 2, S(37, 1100), S(1, 0));
    check_transpose_big(NB_F32, 4, S(2, 16, 33, 35), S(0, 2, 3, 1)); /* NCHW -> NHWC */
    check_transpose_big(NB_F64, 4, S(2, 33, 35, 16), S(0, 3, 1, 2)); /* NHWC -> NCHW */
    check_transpose_big(NB_I32, 3, S(40, 30, 50), S(2, 1, 0));
    check_transpose_big(NB_U8, 3, S(64, 48, 20), S(1, 0, 2));
}

static void test_transpose_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 3, 5)}, out;
    nb_attr p[] = {NB_ATTR_INTS("perm", 2, 0, 1)};
    CHECK_OK(INFER1("transpose", in, p, &out));
    CHECK_INFO(out, NB_F32, S(5, -1, 3));
    nb_attr dup[] = {NB_ATTR_INTS("perm", 0, 0, 1)};
    CHECK_ERR(INFER1("transpose", in, dup, &out), NB_ERR_ARG,
              "transpose: perm [0, 0, 1] is not a permutation of the 3 dims of X (shape [-1, 3, 5])");
    nb_attr shortp[] = {NB_ATTR_INTS("perm", 1, 0)};
    CHECK_ERR(INFER1("transpose", in, shortp, &out), NB_ERR_ARG,
              "transpose: perm [1, 0] has 2 entries but X has shape [-1, 3, 5]");
    nb_attr far[] = {NB_ATTR_INTS("perm", 0, 1, 3)};
    CHECK_ERR(INFER1("transpose", in, far, &out), NB_ERR_ARG, "not a permutation");
}

/* An output given as the input's own tensor still gets the right values. */
static void test_in_place_outputs(void)
{
    nb_tensor *x = IOTA(NB_F32, S(3, 3));
    nb_attr p[] = {NB_ATTR_INTS("perm", 1, 0)};
    CHECK_OK(nb_op_run("transpose", NB_TENSORS(x), NB_ATTRS_N(1, p), 1, &x));
    CHECK_TENSOR(x, S(3, 3), 0, 0, 3, 6, 1, 4, 7, 2, 5, 8);
    nb_attr s[] = {NB_ATTR_INTS("shape", 3, 3)};
    CHECK_OK(nb_op_run("reshape", NB_TENSORS(x), NB_ATTRS_N(1, s), 1, &x));
    CHECK_TENSOR(x, S(3, 3), 0, 0, 3, 6, 1, 4, 7, 2, 5, 8);
    nb_tensor_release(x);
}

/* ---- expand, expand_as ------------------------------------------------------------------ */

static void test_expand(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = T(dt, S(3, 1), 1, 2, 3);
        nb_attr a[] = {NB_ATTR_INTS("shape", 2, 3, 2)};
        nb_attr keep[] = {NB_ATTR_INTS("shape", -1, 4)};
        nb_tensor *y = RUN1X("expand", x, a), *y2 = RUN1X("expand", x, keep);
        CHECK_TENSOR(y, S(2, 3, 2), 0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
        CHECK_TENSOR(y2, S(3, 4), 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        release_all(x, y, y2, NULL);
    }
    nb_tensor *x = T(NB_I64, S(1, 2), 5, 6);
    nb_attr a[] = {NB_ATTR_INTS("shape", 3, 2)};
    nb_tensor *y = RUN1X("expand", x, a);
    CHECK_TENSOR(y, S(3, 2), 0, 5, 6, 5, 6, 5, 6);
    release_all(x, y, NULL);
    /* Large enough for the threaded path. */
    nb_tensor *r = IOTA(NB_F32, S(1, 300)), *big = NULL;
    nb_attr ab[] = {NB_ATTR_INTS("shape", 200, 300)};
    CHECK_OK(nb_op_run("expand", NB_TENSORS(r), NB_ATTRS_N(1, ab), 1, &big));
    int64_t bad = 0;
    for (int64_t i = 0; big && i < 200 * 300; i++) bad += nb_tensor_get(big, i) != (double)(i % 300);
    CHECK(big && bad == 0);
    release_all(r, big, NULL);
}

static void test_expand_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 1)}, out;
    nb_attr a[] = {NB_ATTR_INTS("shape", -1, 5)};
    CHECK_OK(INFER1("expand", in, a, &out));
    CHECK_INFO(out, NB_F32, S(-1, 5));
    nb_attr lead[] = {NB_ATTR_INTS("shape", 2, -1, 5)};
    CHECK_OK(INFER1("expand", in, lead, &out));
    CHECK_INFO(out, NB_F32, S(2, -1, 5));
    nb_tensor *x = IOTA(NB_F32, S(3, 2)), *y = NULL;
    nb_attr bad[] = {NB_ATTR_INTS("shape", 3, 4)};
    CHECK_ERR(nb_op_run("expand", NB_TENSORS(x), NB_ATTRS_N(1, bad), 1, &y), NB_ERR_SHAPE,
              "expand: X of shape [3, 2] cannot expand to [3, 4]: dim 1 has size 2, not 1 or 4");
    nb_attr newneg[] = {NB_ATTR_INTS("shape", -1, 3, 2)};
    CHECK_ERR(nb_op_run("expand", NB_TENSORS(x), NB_ATTRS_N(1, newneg), 1, &y), NB_ERR_ARG,
              "expand: shape[0] = -1 is invalid");
    nb_attr shortp[] = {NB_ATTR_INTS("shape", 6)};
    CHECK_ERR(nb_op_run("expand", NB_TENSORS(x), NB_ATTRS_N(1, shortp), 1, &y), NB_ERR_ARG,
              "expand: shape [6] must have between 2");
    CHECK(y == NULL);
    nb_tensor_release(x);
}

static void test_expand_as(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = T(dt, S(1, 3), 1, 2, 3), *like = IOTA(NB_I64, S(2, 3));
        nb_tensor *ins[] = {x, like};
        nb_tensor *y = RUN1_NOATTR("expand_as", ins);
        CHECK_TENSOR(y, S(2, 3), 0, 1, 2, 3, 1, 2, 3);
        CHECK(y && y->dtype == dt);
        release_all(x, like, y, NULL);
    }
    nb_var_info in[] = {VI(NB_F32, 1, 3), VI(NB_F32, -1, 3)}, out;
    nb_attr none[1];
    CHECK_OK(infer_op("expand_as", 2, in, 0, none, 1, &out));
    CHECK_INFO(out, NB_F32, S(-1, 3));
    nb_var_info in2[] = {VI(NB_F64, 4, 3), VI(NB_F32, 2, -1, 3)};
    CHECK_OK(infer_op("expand_as", 2, in2, 0, none, 1, &out));
    CHECK_INFO(out, NB_F64, S(2, 4, 3));
    nb_var_info bad[] = {VI(NB_F32, 2, 3), VI(NB_F32, 4, 3)};
    CHECK_ERR(infer_op("expand_as", 2, bad, 0, none, 1, &out), NB_ERR_SHAPE,
              "expand_as: X of shape [2, 3] cannot broadcast to the shape [4, 3] of Like");
    nb_var_info bad2[] = {VI(NB_F32, 2, 3), VI(NB_F32, 3)};
    CHECK_ERR(infer_op("expand_as", 2, bad2, 0, none, 1, &out), NB_ERR_SHAPE, "expand_as: X of shape [2, 3]");
}

/* ---- concat ------------------------------------------------------------------------------------ */

static void test_concat(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *a = T(dt, S(1, 2), 1, 2), *b = T(dt, S(2, 2), 3, 4, 5, 6);
        nb_tensor *ins[] = {a, b};
        nb_tensor *y = RUN1_NOATTR("concat", ins);
        CHECK_TENSOR(y, S(3, 2), 0, 1, 2, 3, 4, 5, 6);
        nb_tensor *c = T(dt, S(2, 1), 7, 8), *ins2[] = {b, c};
        nb_attr ax[] = {NB_ATTR_INT("axis", -1)};
        nb_tensor *y2 = RUN1("concat", ins2, ax);
        CHECK_TENSOR(y2, S(2, 3), 0, 3, 4, 7, 5, 6, 8);
        release_all(a, b, c, y, y2, NULL);
    }
    nb_tensor *a = T(NB_I64, S(2, 1, 2), 1, 2, 3, 4), *b = T(NB_I64, S(2, 2, 2), 5, 6, 7, 8, 9, 10, 11, 12),
              *c = T(NB_I64, S(2, 1, 2), 13, 14, 15, 16);
    nb_tensor *ins[] = {a, b, c};
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    nb_tensor *y = RUN1("concat", ins, ax);
    CHECK_TENSOR(y, S(2, 4, 2), 0, 1, 2, 5, 6, 7, 8, 13, 14, 3, 4, 9, 10, 11, 12, 15, 16);
    CHECK(y && y->dtype == NB_I64);
    release_all(a, b, c, y, NULL);
    /* Enough rows for the threaded path. */
    nb_tensor *p = IOTA(NB_F32, S(400, 100)), *q = IOTA(NB_F32, S(400, 3)), *ins2[] = {p, q};
    nb_attr last[] = {NB_ATTR_INT("axis", 1)};
    nb_tensor *big = RUN1("concat", ins2, last);
    int64_t bad = 0;
    for (int64_t r = 0; big && r < 400; r++)
        for (int64_t j = 0; j < 103; j++)
            bad += nb_tensor_get(big, r * 103 + j) != (double)(j < 100 ? r * 100 + j : r * 3 + j - 100);
    CHECK(big && bad == 0);
    release_all(p, q, big, NULL);
}

static void test_concat_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 3), VI(NB_F32, -1, 4)}, out;
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    CHECK_OK(INFER1("concat", in, ax, &out));
    CHECK_INFO(out, NB_F32, S(-1, 7));
    nb_var_info in2[] = {VI(NB_F32, -1, 3), VI(NB_F32, 2, 3), VI(NB_F32, 5, -1)};
    nb_attr ax0[] = {NB_ATTR_INT("axis", 0)};
    CHECK_OK(INFER1("concat", in2, ax0, &out));
    CHECK_INFO(out, NB_F32, S(-1, 3));
    nb_var_info in3[] = {VI(NB_F32, 2, 3), VI(NB_F32, 4, 3)};
    CHECK_OK(INFER1("concat", in3, ax0, &out));
    CHECK_INFO(out, NB_F32, S(6, 3));

    nb_tensor *a = IOTA(NB_F32, S(2, 3)), *b = IOTA(NB_F32, S(3, 4)), *y = NULL, *ins[] = {a, b};
    CHECK_ERR(nb_op_run("concat", NB_TENSORS_N(2, ins), NB_ATTRS_N(1, ax), 1, &y), NB_ERR_SHAPE,
              "concat: X[1] has shape [3, 4] but X[0] has shape [2, 3]: all dims but axis 1 must match");
    nb_var_info mid[] = {VI(NB_F32, -1, 3), VI(NB_F32, 2, 3), VI(NB_F32, 4, 3)};
    CHECK_ERR(INFER1("concat", mid, ax, &out), NB_ERR_SHAPE, "concat: X[2] has shape [4, 3] but X[1] has shape [2, 3]");
    nb_var_info rank[] = {VI(NB_F32, 2, 3), VI(NB_F32, 2, 3, 1)};
    CHECK_ERR(INFER1("concat", rank, ax0, &out), NB_ERR_SHAPE,
              "concat: X[1] has shape [2, 3, 1] but X[0] has shape [2, 3]");
    nb_var_info dts[] = {VI(NB_F32, 2, 3), VI(NB_F64, 2, 3)};
    CHECK_ERR(INFER1("concat", dts, ax0, &out), NB_ERR_DTYPE, "concat: X[1] is float64 but X[0] is float32");
    nb_attr far[] = {NB_ATTR_INT("axis", 2)};
    CHECK_ERR(INFER1("concat", in3, far, &out), NB_ERR_ARG,
              "concat: axis 2 is out of range [-2, 2) for X[0] of shape [2, 3]");
    nb_var_info sc[] = {VI0(NB_F32)};
    CHECK_ERR(INFER1("concat", sc, ax0, &out), NB_ERR_SHAPE, "concat: X[0] is a scalar");
    CHECK(y == NULL);
    release_all(a, b, NULL);
}

/* ---- split ------------------------------------------------------------------------------------- */

static void test_split(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *x = IOTA(dt, S(4, 2)), *outs[2] = {NULL, NULL};
        CHECK_OK(nb_op_run("split", NB_TENSORS(x), NB_NO_ATTRS, 2, outs));
        CHECK_TENSOR(outs[0], S(2, 2), 0, 0, 1, 2, 3);
        CHECK_TENSOR(outs[1], S(2, 2), 0, 4, 5, 6, 7);
        nb_tensor *x2 = IOTA(dt, S(2, 3)), *o2[2] = {NULL, NULL};
        nb_attr a[] = {NB_ATTR_INT("axis", -1), NB_ATTR_INTS("sections", 1, -1)};
        CHECK_OK(nb_op_run("split", NB_TENSORS(x2), NB_ATTRS_N(2, a), 2, o2));
        CHECK_TENSOR(o2[0], S(2, 1), 0, 0, 3);
        CHECK_TENSOR(o2[1], S(2, 2), 0, 1, 2, 4, 5);
        release_all(x, outs[0], outs[1], x2, o2[0], o2[1], NULL);
    }
    nb_tensor *x = IOTA(NB_I64, S(2, 6)), *o[3] = {NULL, NULL, NULL};
    nb_attr a[] = {NB_ATTR_INT("axis", 1), NB_ATTR_INTS("sections", 3, 0, 3)};
    CHECK_OK(nb_op_run("split", NB_TENSORS(x), NB_ATTRS_N(2, a), 3, o));
    CHECK_TENSOR(o[0], S(2, 3), 0, 0, 1, 2, 6, 7, 8);
    CHECK(o[1] && o[1]->shape[1] == 0);
    CHECK_TENSOR(o[2], S(2, 3), 0, 3, 4, 5, 9, 10, 11);
    release_all(x, o[0], o[1], o[2], NULL);
}

static void test_split_infer_errors(void)
{
    nb_var_info in[] = {VI(NB_F32, -1, 6)}, out[3];
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    CHECK_OK(infer_op("split", 1, in, 1, ax, 3, out));
    for (int k = 0; k < 3; k++) CHECK_INFO(out[k], NB_F32, S(-1, 2));
    nb_attr ax0[] = {NB_ATTR_INT("axis", 0)};
    CHECK_OK(infer_op("split", 1, in, 1, ax0, 2, out));
    CHECK_INFO(out[1], NB_F32, S(-1, 6));
    nb_attr sec[] = {NB_ATTR_INT("axis", 0), NB_ATTR_INTS("sections", 2, -1)};
    CHECK_OK(infer_op("split", 1, in, 2, sec, 2, out));
    CHECK_INFO(out[0], NB_F32, S(2, 6));
    CHECK_INFO(out[1], NB_F32, S(-1, 6));

    nb_tensor *x = IOTA(NB_F32, S(5, 2)), *o[3] = {NULL, NULL, NULL};
    CHECK_ERR(nb_op_run("split", NB_TENSORS(x), NB_NO_ATTRS, 2, o), NB_ERR_SHAPE,
              "split: dim 0 of X (shape [5, 2]) has size 5, which does not split into 2 equal parts");
    nb_attr sum[] = {NB_ATTR_INTS("sections", 2, 2)};
    CHECK_ERR(nb_op_run("split", NB_TENSORS(x), NB_ATTRS_N(1, sum), 2, o), NB_ERR_SHAPE,
              "split: sections [2, 2] do not add up to 5, the size of dim 0 of X (shape [5, 2])");
    nb_attr over[] = {NB_ATTR_INTS("sections", 4, -1, 2)};
    CHECK_ERR(nb_op_run("split", NB_TENSORS(x), NB_ATTRS_N(1, over), 3, o), NB_ERR_SHAPE,
              "split: sections [4, -1, 2] do not add up to 5");
    nb_attr count[] = {NB_ATTR_INTS("sections", 2, 3)};
    CHECK_ERR(nb_op_run("split", NB_TENSORS(x), NB_ATTRS_N(1, count), 3, o), NB_ERR_ARG,
              "split: sections [2, 3] has 2 entries but 3 outputs were given");
    nb_attr neg[] = {NB_ATTR_INTS("sections", -1, -1)};
    CHECK_ERR(nb_op_run("split", NB_TENSORS(x), NB_ATTRS_N(1, neg), 2, o), NB_ERR_ARG, "at most one -1");
    nb_attr far[] = {NB_ATTR_INT("axis", -3)};
    CHECK_ERR(nb_op_run("split", NB_TENSORS(x), NB_ATTRS_N(1, far), 1, o), NB_ERR_ARG,
              "split: axis -3 is out of range [-2, 2) for X of shape [5, 2]");
    CHECK(!o[0] && !o[1] && !o[2]);
    nb_tensor_release(x);
}

/* ---- stack ------------------------------------------------------------------------------------- */

static void test_stack(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = float_dtypes[k];
        nb_tensor *a = T(dt, S(2), 1, 2), *b = T(dt, S(2), 3, 4), *c = T(dt, S(2), 5, 6), *ins[] = {a, b, c};
        nb_attr ax1[] = {NB_ATTR_INT("axis", 1)}, axm[] = {NB_ATTR_INT("axis", -1)};
        nb_tensor *y0 = RUN1_NOATTR("stack", ins), *y1 = RUN1("stack", ins, ax1), *ym = RUN1("stack", ins, axm);
        CHECK_TENSOR(y0, S(3, 2), 0, 1, 2, 3, 4, 5, 6);
        CHECK_TENSOR(y1, S(2, 3), 0, 1, 3, 5, 2, 4, 6);
        CHECK_TENSOR(ym, S(2, 3), 0, 1, 3, 5, 2, 4, 6);
        release_all(a, b, c, y0, y1, ym, NULL);
    }
    nb_tensor *a = T(NB_I64, S(2, 2), 1, 2, 3, 4), *b = T(NB_I64, S(2, 2), 5, 6, 7, 8), *ins[] = {a, b};
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    nb_tensor *y = RUN1("stack", ins, ax);
    CHECK_TENSOR(y, S(2, 2, 2), 0, 1, 2, 5, 6, 3, 4, 7, 8);
    release_all(a, b, y, NULL);

    nb_var_info in[] = {VI(NB_F32, -1, 3), VI(NB_F32, -1, 3)}, out;
    nb_attr ax0[] = {NB_ATTR_INT("axis", 0)};
    CHECK_OK(INFER1("stack", in, ax0, &out));
    CHECK_INFO(out, NB_F32, S(2, -1, 3));
    nb_var_info bad[] = {VI(NB_F32, 2, 3), VI(NB_F32, 2, 4)};
    CHECK_ERR(INFER1("stack", bad, ax0, &out), NB_ERR_SHAPE,
              "stack: X[1] has shape [2, 4] but X[0] has shape [2, 3]: stack needs equal shapes");
    nb_attr far[] = {NB_ATTR_INT("axis", 3)};
    CHECK_ERR(INFER1("stack", in, far, &out), NB_ERR_ARG,
              "stack: axis 3 is out of range [-3, 3) for the rank-3 output from X[0] of shape [-1, 3]");
}

/* The family's definitions declare what the later gradient rules rely on. */
static void test_definitions(void)
{
    static const struct {
        const char *name;
        unsigned uses, uses_out;
    } ops[] = {
        {"reshape", 1, 0},    {"flatten", 1, 0}, {"squeeze", 1, 0},   {"unsqueeze", 1, 0},
        {"reshape_as", 1, 0}, {"expand", 1, 0},  {"expand_as", 1, 0}, {"transpose", 0, 0},
        {"concat", 1, 0},     {"split", 0, 1},   {"stack", 0, 0},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        const nb_op_def *d = nb_op_find(ops[i].name);
        CHECK(d != NULL);
        if (!d) continue;
        CHECK(d->grad_uses_inputs == ops[i].uses && d->grad_uses_outputs == ops[i].uses_out);
        CHECK(!(d->flags & NB_OP_NOT_DIFFERENTIABLE));
        CHECK(d->vjp != NULL);
    }
    const char *like[] = {"expand_as", "reshape_as"};
    for (int i = 0; i < 2; i++) {
        const nb_op_def *d = nb_op_find(like[i]);
        CHECK(d && (d->inputs[1].flags & NB_SLOT_NO_GRAD));
    }
}

int main(void)
{
    RUN(test_reshape_values);
    RUN(test_reshape_is_a_view);
    RUN(test_reshape_infer);
    RUN(test_reshape_errors);
    RUN(test_flatten);
    RUN(test_flatten_infer_errors);
    RUN(test_squeeze);
    RUN(test_unsqueeze);
    RUN(test_reshape_as);
    RUN(test_reshape_as_infer);
    RUN(test_transpose_values);
    RUN(test_transpose_big);
    RUN(test_transpose_infer_errors);
    RUN(test_in_place_outputs);
    RUN(test_expand);
    RUN(test_expand_infer_errors);
    RUN(test_expand_as);
    RUN(test_concat);
    RUN(test_concat_infer_errors);
    RUN(test_split);
    RUN(test_split_infer_errors);
    RUN(test_stack);
    RUN(test_definitions);
    return test_report();
}
