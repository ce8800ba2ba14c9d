/* Tests of the creation family: fills, assign, random initialisers and
 * increment. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include "ops/op_internal.h"
#include "test.h"

#define N_STATS 100000

/* RUN1 for ops without inputs. */
#define RUN0(type, attrs) \
    run1_(__FILE__, __LINE__, (type), 0, NULL, (int)(sizeof(attrs) / sizeof(*(attrs))), (attrs))

/* Runs `def->infer` on build-time infos (dims may be -1), as a program
 * builder would, and returns the status; *out receives Out's info. */
static nb_status infer_with(const char *op, int n_in, const nb_var_info *in, int n_attrs, const nb_attr *attrs,
                            nb_var_info *out)
{
    return nb_op_infer(op, n_in, in, NB_ATTRS_N(n_attrs, attrs), 1, out);
}

static nb_var_info info(nb_dtype dt, int ndim, const int64_t *shape)
{
    nb_var_info v = {.dtype = dt, .ndim = ndim};
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    return v;
}

/* Runs a no-input op with attrs and an explicit generator (may be NULL). */
static nb_status run0(const char *op, int n_attrs, const nb_attr *attrs, nb_rng *rng, nb_tensor **out)
{
    *out = NULL;
    return nb_op_run_rng(op, 0, NULL, n_attrs, attrs, 1, out, rng);
}

static bool same_bytes(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    return !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
}

static void stats(const nb_tensor *t, double *mean, double *std, double *lo, double *hi)
{
    int64_t n = nb_tensor_numel(t);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = nb_tensor_get(t, i);
        s += v;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double d = nb_tensor_get(t, i) - *mean;
        s2 += d * d;
    }
    *std = sqrt(s2 / (double)(n - 1));
}

/* ---- fill_constant ----------------------------------------------------------- */

static void test_fill_constant_dtypes(void)
{
    const double want[NB_DTYPE_COUNT] = {
        [NB_F32] = 2.5, [NB_F64] = 2.5, [NB_I32] = 2, [NB_I64] = 2, [NB_U8] = 2, [NB_BOOL] = 1};
    for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) {
        nb_attr a[] = {NB_ATTR_INTS("shape", 2, 3), NB_ATTR_INT("dtype", dt), NB_ATTR_FLOAT("value", 2.5)};
        nb_tensor *o = RUN0("fill_constant", a);
        CHECK(o && o->dtype == (nb_dtype)dt);
        double w = want[dt];
        CHECK_TENSOR(o, S(2, 3), 0, w, w, w, w, w, w);
        nb_tensor_release(o);
    }
}

static void test_fill_constant_values(void)
{
    /* Defaults: float32 zeros. */
    nb_attr a0[] = {NB_ATTR_INTS("shape", 4)};
    nb_tensor *o = RUN0("fill_constant", a0);
    CHECK(o && o->dtype == NB_F32);
    CHECK_TENSOR(o, S(4), 0, 0, 0, 0, 0);
    nb_tensor_release(o);

    /* Integers truncate towards zero, as a cast does. */
    nb_attr a1[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", NB_I32), NB_ATTR_FLOAT("value", -3.7)};
    o = RUN0("fill_constant", a1);
    CHECK_TENSOR(o, S(2), 0, -3, -3);
    nb_tensor_release(o);

    /* An int value attribute is taken as a float. */
    nb_attr a2[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_INT("dtype", NB_F64), NB_ATTR_INT("value", 7)};
    o = RUN0("fill_constant", a2);
    CHECK_TENSOR(o, S(3), 0, 7, 7, 7);
    nb_tensor_release(o);

    /* float64 keeps the full value, float32 rounds it. */
    nb_attr a3[] = {NB_ATTR_INTS("shape", 1), NB_ATTR_INT("dtype", NB_F64), NB_ATTR_FLOAT("value", 0.1)};
    o = RUN0("fill_constant", a3);
    CHECK(o && ((double *)nb_tensor_data(o))[0] == 0.1);
    nb_tensor_release(o);
    nb_attr a4[] = {NB_ATTR_INTS("shape", 1), NB_ATTR_FLOAT("value", 0.1)};
    o = RUN0("fill_constant", a4);
    CHECK(o && ((float *)nb_tensor_data(o))[0] == 0.1f);
    nb_tensor_release(o);

    /* Non-finite floats are fine fill values (masks use -inf). */
    nb_attr a5[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_FLOAT("value", -INFINITY)};
    o = RUN0("fill_constant", a5);
    CHECK(o && isinf(nb_tensor_get(o, 1)) && nb_tensor_get(o, 1) < 0);
    nb_tensor_release(o);

    /* Large int64 values survive exactly. */
    nb_attr a6[] = {NB_ATTR_INTS("shape", 1), NB_ATTR_INT("dtype", NB_I64), NB_ATTR_FLOAT("value", 9007199254740992.0)};
    o = RUN0("fill_constant", a6);
    CHECK(o && ((int64_t *)nb_tensor_data(o))[0] == INT64_C(9007199254740992));
    nb_tensor_release(o);
}

static void test_fill_constant_shapes(void)
{
    /* An empty shape list makes a 0-d scalar. */
    nb_attr a0[] = {NB_ATTR_INTS_N("shape", 0, NULL), NB_ATTR_FLOAT("value", 4)};
    nb_tensor *o = RUN0("fill_constant", a0);
    CHECK(o && o->ndim == 0 && nb_tensor_numel(o) == 1);
    CHECK(o && nb_tensor_get(o, 0) == 4);
    nb_tensor_release(o);

    nb_attr a1[] = {NB_ATTR_INTS("shape", 0, 3), NB_ATTR_FLOAT("value", 4)};
    o = RUN0("fill_constant", a1);
    CHECK(o && o->ndim == 2 && o->shape[0] == 0 && o->shape[1] == 3 && nb_tensor_numel(o) == 0);
    nb_tensor_release(o);

    nb_attr a2[] = {NB_ATTR_INTS("shape", 1, 2, 1, 2, 1, 2, 1, 2), NB_ATTR_FLOAT("value", 1)};
    o = RUN0("fill_constant", a2);
    CHECK(o && o->ndim == 8 && nb_tensor_numel(o) == 16);
    nb_tensor_release(o);

    /* Large enough for the parallel path. */
    nb_attr a3[] = {NB_ATTR_INTS("shape", 300, 400), NB_ATTR_INT("dtype", NB_I64), NB_ATTR_FLOAT("value", -5)};
    o = RUN0("fill_constant", a3);
    bool all = o != NULL;
    for (int64_t i = 0; o && i < nb_tensor_numel(o); i++) all &= ((int64_t *)nb_tensor_data(o))[i] == -5;
    CHECK(all);
    nb_tensor_release(o);

    nb_var_info out;
    nb_attr a4[] = {NB_ATTR_INTS("shape", 2, 5), NB_ATTR_INT("dtype", NB_U8)};
    CHECK_OK(infer_with("fill_constant", 0, NULL, 2, a4, &out));
    CHECK(out.dtype == NB_U8 && nb_shape_equal(out.ndim, out.shape, 2, S(2, 5)));
}

static void test_fill_constant_errors(void)
{
    nb_tensor *o = NULL;
    nb_attr neg[] = {NB_ATTR_INTS("shape", 2, -3)};
    CHECK_ERR(run0("fill_constant", 1, neg, NULL, &o), NB_ERR_SHAPE, "fill_constant: attribute 'shape' [2, -3]");
    nb_attr unknown[] = {NB_ATTR_INTS("shape", -1, 3)};
    CHECK_ERR(run0("fill_constant", 1, unknown, NULL, &o), NB_ERR_SHAPE, "negative dimension");
    nb_attr nine[] = {NB_ATTR_INTS("shape", 1, 1, 1, 1, 1, 1, 1, 1, 1)};
    CHECK_ERR(run0("fill_constant", 1, nine, NULL, &o), NB_ERR_SHAPE, "9 dimensions");
    nb_attr bad_dt[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", 42)};
    CHECK_ERR(run0("fill_constant", 2, bad_dt, NULL, &o), NB_ERR_DTYPE, "fill_constant: attribute 'dtype' is 42");
    nb_attr neg_dt[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", -1)};
    CHECK_ERR(run0("fill_constant", 2, neg_dt, NULL, &o), NB_ERR_DTYPE, "fill_constant");
    nb_attr u8_big[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", NB_U8), NB_ATTR_FLOAT("value", 256)};
    CHECK_ERR(run0("fill_constant", 3, u8_big, NULL, &o), NB_ERR_ARG, "fill_constant: value 256 does not fit in uint8");
    nb_attr u8_neg[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", NB_U8), NB_ATTR_FLOAT("value", -1)};
    CHECK_ERR(run0("fill_constant", 3, u8_neg, NULL, &o), NB_ERR_ARG, "uint8");
    nb_attr i32_big[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", NB_I32), NB_ATTR_FLOAT("value", 3e9)};
    CHECK_ERR(run0("fill_constant", 3, i32_big, NULL, &o), NB_ERR_ARG, "int32");
    nb_attr i64_nan[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_INT("dtype", NB_I64), NB_ATTR_FLOAT("value", NAN)};
    CHECK_ERR(run0("fill_constant", 3, i64_nan, NULL, &o), NB_ERR_ARG, "int64");
    nb_attr f32_big[] = {NB_ATTR_INTS("shape", 2), NB_ATTR_FLOAT("value", 1e39)};
    CHECK_ERR(run0("fill_constant", 2, f32_big, NULL, &o), NB_ERR_ARG, "float32");
    nb_attr none[] = {NB_ATTR_FLOAT("value", 1)};
    CHECK_ERR(run0("fill_constant", 1, none, NULL, &o), NB_ERR_ARG, "missing required attribute 'shape'");
    nb_attr wrong_type[] = {NB_ATTR_FLOAT("shape", 1)};
    CHECK_ERR(run0("fill_constant", 1, wrong_type, NULL, &o), NB_ERR_ARG, "'shape'");
    CHECK(o == NULL);

    /* A given output of the wrong shape is refused, not overrun. */
    nb_tensor *small = T(NB_F32, S(2), 0, 0);
    nb_attr a[] = {NB_ATTR_INTS("shape", 3)};
    CHECK_ERR(nb_op_run("fill_constant", NB_NO_TENSORS, NB_ATTRS_N(1, a), 1, &small), NB_ERR_SHAPE, "fill_constant");
    nb_tensor_release(small);
}

/* ---- fill_constant_batch_size_like ------------------------------------------- */

static void test_fill_batch_size_like(void)
{
    nb_tensor *x = T(NB_I64, S(5, 3), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    nb_tensor *in[] = {x};
    nb_attr a0[] = {NB_ATTR_INTS("shape", -1, 2), NB_ATTR_FLOAT("value", 1.5)};
    nb_tensor *o = RUN1("fill_constant_batch_size_like", in, a0);
    CHECK(o && o->dtype == NB_F32);
    CHECK_TENSOR(o, S(5, 2), 0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5);
    nb_tensor_release(o);

    nb_attr a1[] = {NB_ATTR_INTS("shape", 2, -1, 1), NB_ATTR_INT("dtype", NB_I32), NB_ATTR_FLOAT("value", 7),
                    NB_ATTR_INT("input_dim_idx", 1), NB_ATTR_INT("output_dim_idx", 1)};
    o = RUN1("fill_constant_batch_size_like", in, a1);
    CHECK(o && o->dtype == NB_I32);
    CHECK_TENSOR(o, S(2, 3, 1), 0, 7, 7, 7, 7, 7, 7);
    nb_tensor_release(o);

    /* Whatever the shape attribute holds at output_dim_idx is replaced. */
    nb_attr a2[] = {NB_ATTR_INTS("shape", 9, 4), NB_ATTR_INT("dtype", NB_F64)};
    o = RUN1("fill_constant_batch_size_like", in, a2);
    CHECK(o && o->dtype == NB_F64);
    CHECK(o && nb_shape_equal(o->ndim, o->shape, 2, S(5, 4)));
    nb_tensor_release(o);

    /* Build time: an unknown batch size stays unknown. */
    nb_var_info xi = info(NB_F32, 2, S(-1, 784)), out;
    CHECK_OK(infer_with("fill_constant_batch_size_like", 1, &xi, 1, a0, &out));
    CHECK(out.dtype == NB_F32 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 2)));

    nb_tensor *o2 = NULL;
    nb_attr bad_in[] = {NB_ATTR_INTS("shape", -1, 2), NB_ATTR_INT("input_dim_idx", 2)};
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_TENSORS_N(1, in), NB_ATTRS_N(2, bad_in), 1, &o2),
              NB_ERR_ARG, "fill_constant_batch_size_like: input_dim_idx 2 is out of range for Input of shape [5, 3]");
    nb_attr bad_out[] = {NB_ATTR_INTS("shape", -1, 2), NB_ATTR_INT("output_dim_idx", 2)};
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_TENSORS_N(1, in), NB_ATTRS_N(2, bad_out), 1, &o2),
              NB_ERR_ARG, "output_dim_idx 2");
    nb_attr neg_out[] = {NB_ATTR_INTS("shape", -1, 2), NB_ATTR_INT("output_dim_idx", -1)};
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_TENSORS_N(1, in), NB_ATTRS_N(2, neg_out), 1, &o2),
              NB_ERR_ARG, "output_dim_idx -1");
    nb_attr neg_other[] = {NB_ATTR_INTS("shape", -1, -2)};
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_TENSORS_N(1, in), NB_ATTRS_N(1, neg_other), 1, &o2),
              NB_ERR_SHAPE, "fill_constant_batch_size_like: attribute 'shape' [-1, -2] has a negative dimension");
    nb_attr bad_dt[] = {NB_ATTR_INTS("shape", -1, 2), NB_ATTR_INT("dtype", 6)};
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_TENSORS_N(1, in), NB_ATTRS_N(2, bad_dt), 1, &o2),
              NB_ERR_DTYPE, "fill_constant_batch_size_like");
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_NO_TENSORS, NB_ATTRS_N(1, a0), 1, &o2), NB_ERR_ARG,
              "missing input 'Input'");
    nb_tensor *s = tscalar(NB_F32, 1);
    nb_tensor *sin[] = {s};
    CHECK_ERR(nb_op_run("fill_constant_batch_size_like", NB_TENSORS_N(1, sin), NB_ATTRS_N(1, a0), 1, &o2), NB_ERR_ARG,
              "input_dim_idx 0 is out of range for Input of shape []");
    CHECK(o2 == NULL);
    release_all(x, s, NULL);
}

/* ---- fill_zeros_like, ones_like ----------------------------------------------- */

static void test_fill_like(void)
{
    nb_tensor *x = T(NB_F64, S(2, 2), 1, -2, 3, NAN);
    nb_tensor *in[] = {x};
    nb_tensor *z = RUN1_NOATTR("fill_zeros_like", in);
    CHECK(z && z->dtype == NB_F64);
    CHECK_TENSOR(z, S(2, 2), 0, 0, 0, 0, 0);
    nb_tensor *o = RUN1_NOATTR("ones_like", in);
    CHECK(o && o->dtype == NB_F64);
    CHECK_TENSOR(o, S(2, 2), 0, 1, 1, 1, 1);
    release_all(z, o, NULL);

    nb_attr to_i32[] = {NB_ATTR_INT("dtype", NB_I32)};
    o = RUN1("ones_like", in, to_i32);
    CHECK(o && o->dtype == NB_I32);
    CHECK_TENSOR(o, S(2, 2), 0, 1, 1, 1, 1);
    z = RUN1("fill_zeros_like", in, to_i32);
    CHECK(z && z->dtype == NB_I32);
    CHECK_TENSOR(z, S(2, 2), 0, 0, 0, 0, 0);
    release_all(z, o, NULL);

    for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) {
        nb_tensor *b = T((nb_dtype)dt, S(3), 1, 0, 1);
        nb_tensor *bin[] = {b};
        o = RUN1_NOATTR("ones_like", bin);
        z = RUN1_NOATTR("fill_zeros_like", bin);
        CHECK(o && o->dtype == (nb_dtype)dt && z && z->dtype == (nb_dtype)dt);
        CHECK_TENSOR(o, S(3), 0, 1, 1, 1);
        CHECK_TENSOR(z, S(3), 0, 0, 0, 0);
        release_all(b, o, z, NULL);
    }

    /* Into an existing (dirty) output: the fill overwrites everything. */
    nb_tensor *dirty = T(NB_F64, S(2, 2), 5, 5, 5, 5);
    CHECK_OK(nb_op_run("fill_zeros_like", NB_TENSORS_N(1, in), NB_NO_ATTRS, 1, &dirty));
    CHECK_TENSOR(dirty, S(2, 2), 0, 0, 0, 0, 0);
    nb_tensor_release(dirty);

    /* Views as input: only the shape counts. */
    nb_tensor *xt = NULL;
    CHECK_OK(nb_tensor_slice(&xt, x, 1, 0, 1, 1));
    nb_tensor *vin[] = {xt};
    o = RUN1_NOATTR("ones_like", vin);
    CHECK_TENSOR(o, S(2, 1), 0, 1, 1);
    release_all(xt, o, NULL);

    nb_var_info xi = info(NB_I64, 3, S(-1, 4, -1)), out;
    CHECK_OK(infer_with("ones_like", 1, &xi, 0, NULL, &out));
    CHECK(out.dtype == NB_I64 && nb_shape_equal(out.ndim, out.shape, 3, S(-1, 4, -1)));
    nb_attr to_f32[] = {NB_ATTR_INT("dtype", NB_F32)};
    CHECK_OK(infer_with("fill_zeros_like", 1, &xi, 1, to_f32, &out));
    CHECK(out.dtype == NB_F32 && nb_shape_equal(out.ndim, out.shape, 3, S(-1, 4, -1)));

    nb_tensor *bad = NULL;
    nb_attr bad_dt[] = {NB_ATTR_INT("dtype", 17)};
    CHECK_ERR(nb_op_run("ones_like", NB_TENSORS_N(1, in), NB_ATTRS_N(1, bad_dt), 1, &bad), NB_ERR_DTYPE,
              "ones_like: attribute 'dtype' is 17");
    nb_attr bad_dt2[] = {NB_ATTR_INT("dtype", -2)};
    CHECK_ERR(nb_op_run("fill_zeros_like", NB_TENSORS_N(1, in), NB_ATTRS_N(1, bad_dt2), 1, &bad), NB_ERR_DTYPE,
              "fill_zeros_like");
    CHECK_ERR(nb_op_run("ones_like", NB_NO_TENSORS, NB_NO_ATTRS, 1, &bad), NB_ERR_ARG, "missing input 'X'");
    CHECK(bad == NULL);
    nb_tensor_release(x);
}

/* ---- assign --------------------------------------------------------------------- */

static void test_assign(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6);
    nb_tensor *in[] = {x};
    nb_tensor *o = RUN1_NOATTR("assign", in);
    CHECK(o && o != x && o->storage != x->storage && o->dtype == NB_F32);
    CHECK_TENSOR(o, S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    /* A copy: changing the source leaves it alone. */
    nb_tensor_set(x, 0, 100);
    CHECK(o && nb_tensor_get(o, 0) == 1);
    nb_tensor_release(o);

    /* A transposed view is copied in its logical order. */
    nb_tensor *xt = NULL;
    CHECK_OK(nb_tensor_transpose(&xt, x, 0, 1));
    nb_tensor *tin[] = {xt};
    o = RUN1_NOATTR("assign", tin);
    CHECK(o && nb_tensor_is_contiguous(o));
    CHECK_TENSOR(o, S(3, 2), 0, 100, 4, 2, 5, 3, 6);
    release_all(o, xt, NULL);

    /* int64 beyond 2^53 is copied bit for bit, not through double. */
    int64_t big[2] = {INT64_C(9007199254740993), INT64_MIN};
    nb_tensor *xi = NULL;
    CHECK_OK(nb_tensor_from_data(&xi, NB_I64, 1, S(2), big));
    nb_tensor *iin[] = {xi};
    o = RUN1_NOATTR("assign", iin);
    CHECK(o && o->dtype == NB_I64 && !memcmp(nb_tensor_data(o), big, sizeof big));
    release_all(o, xi, NULL);

    for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) {
        nb_tensor *b = T((nb_dtype)dt, S(3), 1, 0, 1);
        nb_tensor *bin[] = {b};
        o = RUN1_NOATTR("assign", bin);
        CHECK(o && o->dtype == (nb_dtype)dt);
        CHECK_TENSOR(o, S(3), 0, 1, 0, 1);
        release_all(b, o, NULL);
    }

    nb_tensor *s = tscalar(NB_F64, -2.5);
    nb_tensor *sin[] = {s};
    o = RUN1_NOATTR("assign", sin);
    CHECK(o && o->ndim == 0 && nb_tensor_get(o, 0) == -2.5);
    nb_tensor_release(o);

    /* In place and into an existing output. */
    nb_tensor *same = s;
    CHECK_OK(nb_op_run("assign", NB_TENSORS_N(1, sin), NB_NO_ATTRS, 1, &same));
    CHECK(same == s && nb_tensor_get(s, 0) == -2.5);
    nb_tensor *dst = tscalar(NB_F64, 0);
    CHECK_OK(nb_op_run("assign", NB_TENSORS_N(1, sin), NB_NO_ATTRS, 1, &dst));
    CHECK(nb_tensor_get(dst, 0) == -2.5);
    nb_tensor *wrong = tscalar(NB_F32, 0);
    CHECK_ERR(nb_op_run("assign", NB_TENSORS_N(1, sin), NB_NO_ATTRS, 1, &wrong), NB_ERR_SHAPE, "assign");
    release_all(dst, wrong, s, NULL);

    nb_var_info vi = info(NB_I32, 2, S(-1, 7)), out;
    CHECK_OK(infer_with("assign", 1, &vi, 0, NULL, &out));
    CHECK(out.dtype == NB_I32 && nb_shape_equal(out.ndim, out.shape, 2, S(-1, 7)));
    nb_tensor_release(x);
}

static void test_flags(void)
{
    static const char *const fills[] = {"fill_constant", "fill_constant_batch_size_like", "fill_zeros_like",
                                        "ones_like"};
    for (size_t i = 0; i < sizeof fills / sizeof *fills; i++) {
        const nb_op_def *d = nb_op_find(fills[i]);
        /* The fills that write every element say so (no zero-fill first). */
        CHECK(d && (d->flags & ~NB_OP_WRITES_ALL) == NB_OP_NOT_DIFFERENTIABLE);
        CHECK(d && d->doc && d->grad_uses_inputs == 0 && d->grad_uses_outputs == 0);
    }
    static const char *const rnd[] = {"uniform_random", "gaussian_random", "truncated_gaussian_random"};
    for (size_t i = 0; i < sizeof rnd / sizeof *rnd; i++) {
        const nb_op_def *d = nb_op_find(rnd[i]);
        CHECK(d && (d->flags & ~NB_OP_WRITES_ALL) == (NB_OP_RANDOM | NB_OP_NOT_DIFFERENTIABLE));
        CHECK(d && (i == 2 || (d->flags & NB_OP_WRITES_ALL)));
        CHECK(d && nb_op_attr_index(d, "seed") >= 0 && nb_op_num_inputs(d) == 0);
    }
    const nb_op_def *d = nb_op_find("assign");
    CHECK(d && d->flags == NB_OP_WRITES_ALL && d->grad_uses_inputs == 0 && d->grad_uses_outputs == 0);
    CHECK(d && !(d->inputs[0].flags & NB_SLOT_NO_GRAD));
    d = nb_op_find("increment");
    CHECK(d && d->flags == (NB_OP_STATEFUL | NB_OP_NOT_DIFFERENTIABLE));
    d = nb_op_find("fill_constant_batch_size_like");
    CHECK(d && (d->inputs[0].flags & NB_SLOT_NO_GRAD) && !strcmp(d->inputs[0].name, "Input"));
    d = nb_op_find("ones_like");
    CHECK(d && (d->inputs[0].flags & NB_SLOT_NO_GRAD));
}

/* ---- random initialisers --------------------------------------------------------- */

static void test_uniform_stats(void)
{
    for (int dt = NB_F32; dt <= NB_F64; dt++) {
        nb_tensor *o = NULL;
        nb_attr a[] = {NB_ATTR_INTS("shape", N_STATS), NB_ATTR_INT("dtype", dt), NB_ATTR_INT("seed", 11)};
        CHECK_OK(run0("uniform_random", 3, a, NULL, &o));
        CHECK(o && o->dtype == (nb_dtype)dt && nb_tensor_numel(o) == N_STATS);
        if (!o) continue;
        double mean, std, lo, hi;
        stats(o, &mean, &std, &lo, &hi);
        CHECK(lo >= -1.0 && hi < 1.0);
        CHECK(lo < -0.999 && hi > 0.999);
        CHECK_NEAR(mean, 0.0, 0.01);
        CHECK_NEAR(std, 1.0 / sqrt(3.0), 0.01);
        nb_tensor_release(o);

        nb_attr b[] = {NB_ATTR_INTS("shape", 250, 400), NB_ATTR_INT("dtype", dt), NB_ATTR_FLOAT("min", 2),
                       NB_ATTR_FLOAT("max", 5), NB_ATTR_INT("seed", 12)};
        CHECK_OK(run0("uniform_random", 5, b, NULL, &o));
        if (!o) continue;
        stats(o, &mean, &std, &lo, &hi);
        CHECK(lo >= 2.0 && hi < 5.0);
        CHECK_NEAR(mean, 3.5, 0.03);
        CHECK_NEAR(std, 3.0 / sqrt(12.0), 0.02);
        /* Ten equal bins each get about a tenth. */
        int64_t bins[10] = {0};
        for (int64_t i = 0; i < N_STATS; i++) bins[(int)((nb_tensor_get(o, i) - 2.0) / 0.3)]++;
        for (int k = 0; k < 10; k++) CHECK(bins[k] > 9400 && bins[k] < 10600);
        nb_tensor_release(o);
    }

    /* min == max gives that value; a range close to the float grid stays inside. */
    nb_tensor *o = NULL;
    nb_attr c[] = {NB_ATTR_INTS("shape", 100), NB_ATTR_FLOAT("min", 3), NB_ATTR_FLOAT("max", 3)};
    CHECK_OK(run0("uniform_random", 3, c, NULL, &o));
    for (int i = 0; o && i < 100; i++) CHECK(nb_tensor_get(o, i) == 3.0);
    nb_tensor_release(o);
    nb_attr d[] = {NB_ATTR_INTS("shape", 1000), NB_ATTR_FLOAT("min", 1), NB_ATTR_FLOAT("max", 1 + 1e-7)};
    CHECK_OK(run0("uniform_random", 3, d, NULL, &o));
    bool inside = o != NULL;
    for (int i = 0; o && i < 1000; i++) inside &= nb_tensor_get(o, i) >= 1.0 && nb_tensor_get(o, i) < 1 + 1e-7;
    CHECK(inside);
    nb_tensor_release(o);
}

static void test_gaussian_stats(void)
{
    for (int dt = NB_F32; dt <= NB_F64; dt++) {
        nb_tensor *o = NULL;
        nb_attr a[] = {NB_ATTR_INTS("shape", N_STATS), NB_ATTR_INT("dtype", dt), NB_ATTR_FLOAT("mean", 1.0),
                       NB_ATTR_FLOAT("std", 2.0), NB_ATTR_INT("seed", 5)};
        CHECK_OK(run0("gaussian_random", 5, a, NULL, &o));
        CHECK(o && o->dtype == (nb_dtype)dt);
        if (!o) continue;
        double mean, std, lo, hi;
        stats(o, &mean, &std, &lo, &hi);
        CHECK_NEAR(mean, 1.0, 0.05);
        CHECK_NEAR(std, 2.0, 0.05);
        /* An untruncated normal goes beyond 2 std about 4.55% of the time. */
        int64_t beyond = 0, within1 = 0;
        for (int64_t i = 0; i < N_STATS; i++) {
            double z = (nb_tensor_get(o, i) - 1.0) / 2.0;
            beyond += fabs(z) > 2.0;
            within1 += fabs(z) <= 1.0;
        }
        CHECK(beyond > 4000 && beyond < 5100);
        CHECK(within1 > 67500 && within1 < 69000);
        CHECK(lo < 1.0 - 8.0 && hi > 1.0 + 8.0);
        nb_tensor_release(o);
    }

    /* std 0: every value is the mean. */
    nb_tensor *o = NULL;
    nb_attr z[] = {NB_ATTR_INTS("shape", 10), NB_ATTR_FLOAT("mean", -3), NB_ATTR_FLOAT("std", 0)};
    CHECK_OK(run0("gaussian_random", 3, z, NULL, &o));
    for (int i = 0; o && i < 10; i++) CHECK(nb_tensor_get(o, i) == -3.0);
    nb_tensor_release(o);
}

static void test_truncated_gaussian_stats(void)
{
    /* Truncating N(0, 1) at +-2 leaves std sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))). */
    const double trunc_std = sqrt(1.0 - 4.0 * 0.05399096651318806 / 0.9544997361036416);
    for (int dt = NB_F32; dt <= NB_F64; dt++) {
        nb_tensor *o = NULL;
        nb_attr a[] = {NB_ATTR_INTS("shape", 100, 1000), NB_ATTR_INT("dtype", dt), NB_ATTR_FLOAT("mean", -1.0),
                       NB_ATTR_FLOAT("std", 0.5), NB_ATTR_INT("seed", 9)};
        CHECK_OK(run0("truncated_gaussian_random", 5, a, NULL, &o));
        CHECK(o && o->dtype == (nb_dtype)dt);
        if (!o) continue;
        double mean, std, lo, hi;
        stats(o, &mean, &std, &lo, &hi);
        CHECK(lo >= -1.0 - 1.0 - 1e-6 && hi <= -1.0 + 1.0 + 1e-6);
        /* The bound is reached, not a narrower one. */
        CHECK(lo < -1.99 && hi > -0.01);
        CHECK_NEAR(mean, -1.0, 0.01);
        CHECK_NEAR(std, 0.5 * trunc_std, 0.01);
        nb_tensor_release(o);
    }
}

/* Same seed, same values; different seeds, different values; and the
 * generator is the only source. */
static void test_random_reproducible(void)
{
    static const char *const ops[] = {"uniform_random", "gaussian_random", "truncated_gaussian_random"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        const char *op = ops[k];
        nb_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
        nb_attr s1[] = {NB_ATTR_INTS("shape", 40, 50), NB_ATTR_INT("seed", 1)};
        nb_attr s2[] = {NB_ATTR_INTS("shape", 40, 50), NB_ATTR_INT("seed", 2)};
        CHECK_OK(run0(op, 2, s1, NULL, &a));
        CHECK_OK(run0(op, 2, s1, NULL, &b));
        CHECK_OK(run0(op, 2, s2, NULL, &c));
        CHECK(same_bytes(a, b));
        CHECK(a && c && !same_bytes(a, c));
        int64_t equal = 0;
        for (int64_t i = 0; a && c && i < 2000; i++) equal += nb_tensor_get(a, i) == nb_tensor_get(c, i);
        CHECK(equal < 5);
        release_all(a, b, c, NULL);

        /* With an explicit generator: reseeding repeats the values, and each
         * run moves the generator on, so two runs of n values equal one run of
         * 2n values. */
        nb_rng r;
        nb_attr n10[] = {NB_ATTR_INTS("shape", 10)};
        nb_attr n20[] = {NB_ATTR_INTS("shape", 20)};
        nb_rng_seed(&r, 77);
        CHECK_OK(run0(op, 1, n10, &r, &a));
        CHECK_OK(run0(op, 1, n10, &r, &b));
        CHECK(a && b && !same_bytes(a, b));
        nb_rng_seed(&r, 77);
        CHECK_OK(run0(op, 1, n20, &r, &c));
        nb_rng_seed(&r, 77);
        CHECK_OK(run0(op, 1, n10, &r, &d));
        CHECK(same_bytes(a, d));
        for (int i = 0; a && b && c && i < 10; i++) {
            CHECK(nb_tensor_get(c, i) == nb_tensor_get(a, i));
            CHECK(nb_tensor_get(c, 10 + i) == nb_tensor_get(b, i));
        }
        release_all(a, b, c, d, NULL);

        /* The seed attribute is ignored when a generator is given. */
        nb_rng_seed(&r, 3);
        CHECK_OK(run0(op, 2, s1, &r, &a));
        nb_rng_seed(&r, 3);
        CHECK_OK(run0(op, 2, s2, &r, &b));
        CHECK(same_bytes(a, b));
        release_all(a, b, NULL);

        /* A big (parallel) draw starts with the values of a small one: each
         * element depends on its position only, not on the thread that drew it. */
        nb_attr big[] = {NB_ATTR_INTS("shape", 200000), NB_ATTR_INT("dtype", NB_F64), NB_ATTR_INT("seed", 4)};
        nb_attr small[] = {NB_ATTR_INTS("shape", 100), NB_ATTR_INT("dtype", NB_F64), NB_ATTR_INT("seed", 4)};
        CHECK_OK(run0(op, 3, big, NULL, &a));
        CHECK_OK(run0(op, 3, small, NULL, &b));
        CHECK(a && b && !memcmp(nb_tensor_data(a), nb_tensor_data(b), 100 * sizeof(double)));

        /* float32 draws are the float64 draws rounded. */
        nb_attr small32[] = {NB_ATTR_INTS("shape", 100), NB_ATTR_INT("seed", 4)};
        CHECK_OK(run0(op, 2, small32, NULL, &c));
        bool rounded = b && c;
        for (int i = 0; b && c && i < 100; i++)
            rounded &= ((float *)nb_tensor_data(c))[i] == (float)((double *)nb_tensor_data(b))[i];
        CHECK(rounded);
        release_all(a, b, c, NULL);
    }
}

static void test_random_errors(void)
{
    static const char *const ops[] = {"uniform_random", "gaussian_random", "truncated_gaussian_random"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        const char *op = ops[k];
        char want[128];
        nb_tensor *o = NULL;
        nb_attr i32[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_INT("dtype", NB_I32)};
        snprintf(want, sizeof want, "%s: dtype is int32", op);
        CHECK_ERR(run0(op, 2, i32, NULL, &o), NB_ERR_DTYPE, want);
        nb_attr boolean[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_INT("dtype", NB_BOOL)};
        CHECK_ERR(run0(op, 2, boolean, NULL, &o), NB_ERR_DTYPE, op);
        nb_attr bad_dt[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_INT("dtype", 99)};
        CHECK_ERR(run0(op, 2, bad_dt, NULL, &o), NB_ERR_DTYPE, op);
        nb_attr neg[] = {NB_ATTR_INTS("shape", 3, -1)};
        snprintf(want, sizeof want, "%s: attribute 'shape' [3, -1] has a negative dimension", op);
        CHECK_ERR(run0(op, 1, neg, NULL, &o), NB_ERR_SHAPE, want);
        CHECK_ERR(run0(op, 0, NULL, NULL, &o), NB_ERR_ARG, "missing required attribute 'shape'");
        CHECK(o == NULL);
    }
    nb_tensor *o = NULL;
    nb_attr rev[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_FLOAT("min", 1), NB_ATTR_FLOAT("max", 0)};
    CHECK_ERR(run0("uniform_random", 3, rev, NULL, &o), NB_ERR_ARG, "uniform_random: min 1 and max 0");
    nb_attr inf[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_FLOAT("max", INFINITY)};
    CHECK_ERR(run0("uniform_random", 2, inf, NULL, &o), NB_ERR_ARG, "uniform_random");
    nb_attr wide[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_FLOAT("min", -DBL_MAX), NB_ATTR_FLOAT("max", DBL_MAX)};
    CHECK_ERR(run0("uniform_random", 3, wide, NULL, &o), NB_ERR_ARG, "uniform_random");
    nb_attr negstd[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_FLOAT("std", -1)};
    CHECK_ERR(run0("gaussian_random", 2, negstd, NULL, &o), NB_ERR_ARG, "gaussian_random: mean 0 and std -1");
    CHECK_ERR(run0("truncated_gaussian_random", 2, negstd, NULL, &o), NB_ERR_ARG, "truncated_gaussian_random");
    nb_attr nanmean[] = {NB_ATTR_INTS("shape", 3), NB_ATTR_FLOAT("mean", NAN)};
    CHECK_ERR(run0("gaussian_random", 2, nanmean, NULL, &o), NB_ERR_ARG, "gaussian_random");
    CHECK(o == NULL);

    /* Shapes: scalar and empty outputs are fine. */
    nb_attr scalar[] = {NB_ATTR_INTS_N("shape", 0, NULL)};
    CHECK_OK(run0("gaussian_random", 1, scalar, NULL, &o));
    CHECK(o && o->ndim == 0 && isfinite(nb_tensor_get(o, 0)));
    nb_tensor_release(o);
    nb_attr empty[] = {NB_ATTR_INTS("shape", 4, 0)};
    CHECK_OK(run0("uniform_random", 1, empty, NULL, &o));
    CHECK(o && nb_tensor_numel(o) == 0);
    nb_tensor_release(o);
}

/* ---- increment ---------------------------------------------------------------------- */

static void test_increment_values(void)
{
    nb_tensor *x = T(NB_F32, S(1), 1.5);
    nb_tensor *in[] = {x};
    nb_attr two[] = {NB_ATTR_FLOAT("step", 2)};
    nb_tensor *o = RUN1("increment", in, two);
    CHECK_TENSOR(o, S(1), 0, 3.5);
    CHECK(nb_tensor_get(x, 0) == 1.5); /* a new output leaves X alone */
    nb_tensor_release(o);
    o = RUN1_NOATTR("increment", in); /* default step 1 */
    CHECK_TENSOR(o, S(1), 0, 2.5);
    release_all(o, x, NULL);

    nb_tensor *d = tscalar(NB_F64, 0.25);
    nb_tensor *din[] = {d};
    nb_attr neg[] = {NB_ATTR_FLOAT("step", -0.5)};
    o = RUN1("increment", din, neg);
    CHECK(o && o->ndim == 0 && o->dtype == NB_F64 && nb_tensor_get(o, 0) == -0.25);
    release_all(o, d, NULL);

    nb_tensor *i = T(NB_I32, S(1, 1), 10);
    nb_tensor *iin[] = {i};
    nb_attr minus3[] = {NB_ATTR_FLOAT("step", -3)};
    o = RUN1("increment", iin, minus3);
    CHECK(o && o->dtype == NB_I32);
    CHECK_TENSOR(o, S(1, 1), 0, 7);
    release_all(o, i, NULL);

    /* int64 counters count exactly beyond 2^53. */
    int64_t big = INT64_C(9007199254740994);
    nb_tensor *l = NULL;
    CHECK_OK(nb_tensor_from_data(&l, NB_I64, 1, S(1), &big));
    nb_tensor *lin[] = {l};
    nb_attr step_int[] = {NB_ATTR_INT("step", 1)};
    o = RUN1("increment", lin, step_int);
    CHECK(o && *(int64_t *)nb_tensor_data(o) == INT64_C(9007199254740995));
    release_all(o, l, NULL);
}

static void test_increment_in_place(void)
{
    nb_tensor *x = T(NB_I64, S(1), 0);
    nb_tensor *in[] = {x};
    nb_tensor *out = x;
    void *data = nb_tensor_data(x);
    for (int k = 0; k < 5; k++) CHECK_OK(nb_op_run("increment", NB_TENSORS_N(1, in), NB_NO_ATTRS, 1, &out));
    CHECK(out == x && nb_tensor_data(x) == data && x->refcount == 1);
    CHECK_TENSOR(x, S(1), 0, 5);
    nb_attr half[] = {NB_ATTR_FLOAT("step", 0.5)};
    nb_tensor *f = tscalar(NB_F32, 1);
    nb_tensor *fin[] = {f};
    out = f;
    CHECK_OK(nb_op_run("increment", NB_TENSORS_N(1, fin), NB_ATTRS_N(1, half), 1, &out));
    CHECK_OK(nb_op_run("increment", NB_TENSORS_N(1, fin), NB_ATTRS_N(1, half), 1, &out));
    CHECK(out == f && nb_tensor_get(f, 0) == 2.0 && f->refcount == 1);
    release_all(x, f, NULL);
}

static void test_increment_errors(void)
{
    nb_tensor *o = NULL;
    nb_tensor *two = T(NB_F32, S(2), 1, 2);
    nb_tensor *in2[] = {two};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, in2), NB_NO_ATTRS, 1, &o), NB_ERR_SHAPE,
              "increment: X has shape [2] but must hold exactly one element");
    nb_tensor *e = NULL;
    CHECK_OK(nb_tensor_new(&e, NB_F32, 1, S(0)));
    nb_tensor *ine[] = {e};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, ine), NB_NO_ATTRS, 1, &o), NB_ERR_SHAPE,
              "increment: X has shape [0]");
    nb_tensor *b = T(NB_BOOL, S(1), 1);
    nb_tensor *inb[] = {b};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, inb), NB_NO_ATTRS, 1, &o), NB_ERR_DTYPE, "increment: X is bool");
    nb_tensor *u = T(NB_U8, S(1), 1);
    nb_tensor *inu[] = {u};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, inu), NB_NO_ATTRS, 1, &o), NB_ERR_DTYPE, "increment: X is uint8");
    nb_tensor *i = T(NB_I32, S(1), 2147483647);
    nb_tensor *ini[] = {i};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, ini), NB_NO_ATTRS, 1, &o), NB_ERR_ARG,
              "increment: int32 counter 2147483647 + 1 overflows");
    CHECK(nb_tensor_get(i, 0) == 2147483647);
    nb_attr half[] = {NB_ATTR_FLOAT("step", 0.5)};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, ini), NB_ATTRS_N(1, half), 1, &o), NB_ERR_ARG,
              "increment: step 0.5 is not a whole number");
    nb_attr huge[] = {NB_ATTR_FLOAT("step", 1e10)};
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, ini), NB_ATTRS_N(1, huge), 1, &o), NB_ERR_ARG, "int32");
    CHECK(o == NULL);

    /* In place with an output of the wrong shape is refused before writing. */
    nb_tensor *out = two;
    CHECK_ERR(nb_op_run("increment", NB_TENSORS_N(1, in2), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE, "increment");
    CHECK_TENSOR(two, S(2), 0, 1, 2);

    /* Build time: unknown dims may still be 1; known dims other than 1 cannot. */
    nb_var_info vi = info(NB_I64, 2, S(-1, 1)), res;
    CHECK_OK(infer_with("increment", 1, &vi, 0, NULL, &res));
    CHECK(res.dtype == NB_I64 && nb_shape_equal(res.ndim, res.shape, 2, S(-1, 1)));
    vi = info(NB_I64, 2, S(-1, 3));
    CHECK_ERR(infer_with("increment", 1, &vi, 0, NULL, &res), NB_ERR_SHAPE, "increment: X has shape [-1, 3]");
    release_all(two, e, b, u, i, NULL);
}

int main(void)
{
    RUN(test_fill_constant_dtypes);
    RUN(test_fill_constant_values);
    RUN(test_fill_constant_shapes);
    RUN(test_fill_constant_errors);
    RUN(test_fill_batch_size_like);
    RUN(test_fill_like);
    RUN(test_assign);
    RUN(test_flags);
    RUN(test_uniform_stats);
    RUN(test_gaussian_stats);
    RUN(test_truncated_gaussian_stats);
    RUN(test_random_reproducible);
    RUN(test_random_errors);
    RUN(test_increment_values);
    RUN(test_increment_in_place);
    RUN(test_increment_errors);
    return test_report();
}
