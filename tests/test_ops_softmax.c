/* softmax, log_softmax, softmax_with_cross_entropy and its fused gradient. */
#include "test_ops_nn.h"

static const nb_dtype FLOATS[] = {NB_F32, NB_F64};
static double tol_of(nb_dtype dt) { return dt == NB_F32 ? 2e-6 : 1e-12; }

/* softmax (or log_softmax) of a [outer, C, inner] view, in double with libm. */
static void ref_softmax(const nb_tensor *x, int axis, bool lg, double *y)
{
    int64_t outer = 1, C = x->shape[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            double m = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) m = fmax(m, nb_tensor_get(x, (o * C + c) * inner + j));
            for (int64_t c = 0; c < C; c++) s += exp(nb_tensor_get(x, (o * C + c) * inner + j) - m);
            for (int64_t c = 0; c < C; c++) {
                int64_t i = (o * C + c) * inner + j;
                double z = nb_tensor_get(x, i) - m;
                y[i] = lg ? z - log(s) : exp(z) / s;
            }
        }
}

static void check_against_ref(const char *op, nb_tensor *x, int axis, double tol)
{
    nb_tensor *in[] = {x};
    nb_attr a[] = {NB_ATTR_INT("axis", axis)};
    nb_tensor *y = RUN1(op, in, a);
    int64_t n = nb_tensor_numel(x);
    double *ref = malloc((size_t)n * sizeof *ref);
    int ax = axis < 0 ? axis + x->ndim : axis;
    ref_softmax(x, ax, !strcmp(op, "log_softmax"), ref);
    check_tensor_(__FILE__, __LINE__, y, x->ndim, x->shape, ref, tol);
    free(ref);
    nb_tensor_release(y);
}

/* ---- softmax, log_softmax ---------------------------------------------------- */

static void test_softmax_values(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(3), 1, 2, 3);
        nb_tensor *in[] = {x};
        nb_tensor *y = RUN1_NOATTR("softmax", in), *ly = RUN1_NOATTR("log_softmax", in);
        CHECK_TENSOR(y, S(3), tol_of(dt), 0.09003057317038046, 0.24472847105479764, 0.6652409557748219);
        CHECK_TENSOR(ly, S(3), tol_of(dt), -2.4076059644443806, -1.4076059644443806, -0.4076059644443806);
        CHECK(y && y->dtype == dt && ly && ly->dtype == dt);
        release_all(x, y, ly, NULL);
    }
}

static void test_softmax_axes(void)
{
    for (int k = 0; k < 2; k++) {
        nb_tensor *x = NEW(FLOATS[k], S(2, 3, 4));
        for (int i = 0; i < 24; i++) nb_tensor_set(x, i, 0.37 * i - 2 + (i % 5) * 0.9);
        for (int axis = -3; axis < 3; axis++) {
            check_against_ref("softmax", x, axis, tol_of(FLOATS[k]));
            check_against_ref("log_softmax", x, axis, tol_of(FLOATS[k]));
        }
        nb_tensor_release(x);
    }
}

static void test_softmax_rows_sum_to_one(void)
{
    nb_tensor *x = T(NB_F64, S(2, 3), 1, 2, 3, -4, 0, 4);
    nb_tensor *in[] = {x};
    nb_attr a0[] = {NB_ATTR_INT("axis", 0)};
    nb_tensor *y = RUN1("softmax", in, a0);
    /* Along axis 0 each column sums to one. */
    for (int j = 0; y && j < 3; j++) CHECK_NEAR(nb_tensor_get(y, j) + nb_tensor_get(y, 3 + j), 1.0, 1e-15);
    CHECK_TENSOR(y, S(2, 3), 1e-12, 1 / (1 + exp(-5)), 1 / (1 + exp(-2)), 1 / (1 + exp(1)), 1 / (1 + exp(5)),
                 1 / (1 + exp(2)), 1 / (1 + exp(-1)));
    release_all(x, y, NULL);
}

static void test_softmax_large_logits(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 3), 1000, 1001, 1002, -1000, 0, 1000);
        nb_tensor *in[] = {x};
        nb_tensor *y = RUN1_NOATTR("softmax", in), *ly = RUN1_NOATTR("log_softmax", in);
        CHECK_TENSOR(y, S(2, 3), tol_of(dt), 0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 0, 0, 1);
        CHECK_TENSOR(ly, S(2, 3), tol_of(dt), -2.4076059644443806, -1.4076059644443806, -0.4076059644443806, -2000,
                     -1000, 0);
        for (int i = 0; y && ly && i < 6; i++) CHECK(isfinite(nb_tensor_get(y, i)) && isfinite(nb_tensor_get(ly, i)));
        release_all(x, y, ly, NULL);
    }
}

static void test_softmax_big(void)
{
    /* Big enough for the parallel paths; 300 columns leave a partial tile. */
    for (int k = 0; k < 2; k++) {
        nb_tensor *a = NEW(FLOATS[k], S(64, 600)), *b = NEW(FLOATS[k], S(3, 50, 300));
        fill_pattern(a, -20, 20, 1);
        fill_pattern(b, -20, 20, 2);
        check_against_ref("softmax", a, -1, tol_of(FLOATS[k]));
        check_against_ref("log_softmax", a, 1, tol_of(FLOATS[k]));
        check_against_ref("softmax", b, 1, tol_of(FLOATS[k]));
        check_against_ref("log_softmax", b, 1, tol_of(FLOATS[k]));
        check_against_ref("softmax", b, 0, tol_of(FLOATS[k]));
        release_all(a, b, NULL);
    }
}

static void test_softmax_in_place(void)
{
    for (int axis = 0; axis < 2; axis++) {
        nb_tensor *x = T(NB_F64, S(2, 3), 1, 2, 3, 3, 2, 1), *ref = T(NB_F64, S(2, 3), 1, 2, 3, 3, 2, 1);
        nb_tensor *in[] = {x}, *rin[] = {ref}, *out[] = {x};
        nb_attr a[] = {NB_ATTR_INT("axis", axis)};
        nb_tensor *want = RUN1("log_softmax", rin, a);
        CHECK_OK(nb_op_run("log_softmax", NB_TENSORS_N(1, in), NB_ATTRS_N(1, a), 1, out));
        CHECK_CLOSE(x, want, 1e-14, 1e-14);
        release_all(x, ref, want, NULL);
    }
}

static void test_softmax_scalar(void)
{
    nb_tensor *x = tscalar(NB_F32, 7);
    nb_tensor *in[] = {x};
    nb_tensor *y = RUN1_NOATTR("softmax", in), *ly = RUN1_NOATTR("log_softmax", in);
    CHECK(y && y->ndim == 0 && nb_tensor_get(y, 0) == 1);
    CHECK(ly && ly->ndim == 0 && nb_tensor_get(ly, 0) == 0);
    release_all(x, y, ly, NULL);
}

static void test_softmax_infer_and_errors(void)
{
    nb_var_info in[] = {INFO(NB_F32, S(-1, 10))}, out[1];
    CHECK_OK(infer_op("softmax", 1, in, 0, NULL, 1, out));
    CHECK(INFO_IS(out[0], NB_F32, S(-1, 10)));
    nb_attr a0[] = {NB_ATTR_INT("axis", 0)};
    CHECK_OK(infer_op("log_softmax", 1, in, 1, a0, 1, out));
    CHECK(INFO_IS(out[0], NB_F32, S(-1, 10)));

    nb_attr bad[] = {NB_ATTR_INT("axis", 2)};
    CHECK_ERR(infer_op("softmax", 1, in, 1, bad, 1, out), NB_ERR_ARG, "softmax: axis 2 is out of range");
    nb_attr bad2[] = {NB_ATTR_INT("axis", -3)};
    CHECK_ERR(infer_op("log_softmax", 1, in, 1, bad2, 1, out), NB_ERR_ARG, "log_softmax: axis -3");
    nb_tensor *xi = T(NB_I32, S(3), 1, 2, 3), *out1 = NULL;
    nb_tensor *ins[] = {xi};
    CHECK_ERR(nb_op_run("softmax", NB_TENSORS_N(1, ins), NB_NO_ATTRS, 1, &out1), NB_ERR_DTYPE,
              "softmax: X must be float32");
    CHECK(out1 == NULL);
    nb_tensor_release(xi);
}

/* ---- softmax_with_cross_entropy ------------------------------------------------- */

/* Rows [1, 2, 3]: logsumexp = 3.40760596444438, so label 2 costs 0.4076... */
#define LSE123 3.4076059644443806

static void test_swce_values(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 3), 1, 2, 3, 1, 2, 3);
        nb_tensor *labs[] = {T(NB_I64, S(2, 1), 2, 0), T(NB_I64, S(2), 2, 0), T(NB_I32, S(2, 1), 2, 0),
                             T(NB_I32, S(2), 2, 0)};
        for (int l = 0; l < 4; l++) {
            nb_tensor *in[] = {x, labs[l]}, *out[2];
            CHECK_OK(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out));
            CHECK_TENSOR(out[0], S(2, 3), tol_of(dt), 0.09003057317038046, 0.24472847105479764, 0.6652409557748219,
                         0.09003057317038046, 0.24472847105479764, 0.6652409557748219);
            CHECK_TENSOR(out[1], S(2, 1), tol_of(dt), LSE123 - 3, LSE123 - 1);
            CHECK(out[1] && out[1]->dtype == dt);
            release_all(out[0], out[1], NULL);
            nb_tensor_release(labs[l]);
        }
        nb_tensor_release(x);
    }
}

static void test_swce_large_logits(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 3), 1000, 0, -1000, 1000, 0, -1000), *lab = T(NB_I64, S(2), 0, 2);
        nb_tensor *in[] = {x, lab}, *out[2];
        CHECK_OK(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out));
        CHECK_TENSOR(out[0], S(2, 3), tol_of(dt), 1, 0, 0, 1, 0, 0);
        CHECK_TENSOR(out[1], S(2, 1), tol_of(dt), 0, 2000);
        for (int i = 0; out[1] && i < 2; i++) CHECK(isfinite(nb_tensor_get(out[1], i)));
        release_all(x, lab, out[0], out[1], NULL);
    }
}

static void test_swce_ignore_index(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(3, 3), 1, 2, 3, 1, 2, 3, 3, 2, 1);
        nb_tensor *lab = T(NB_I64, S(3, 1), 2, -100, 0);
        nb_tensor *in[] = {x, lab}, *out[2];
        CHECK_OK(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out));
        CHECK_TENSOR(out[1], S(3, 1), tol_of(dt), LSE123 - 3, 0, LSE123 - 3);
        /* The softmax of an ignored row is still computed. */
        CHECK(out[0] && fabs(nb_tensor_get(out[0], 5) - 0.6652409557748219) < 1e-6);
        release_all(out[0], out[1], lab, NULL);

        /* A custom ignore_index, which is also a valid class. */
        lab = T(NB_I32, S(3), 2, 1, 0);
        nb_tensor *in2[] = {x, lab};
        nb_attr a[] = {NB_ATTR_INT("ignore_index", 0)};
        CHECK_OK(run_op("softmax_with_cross_entropy", 2, in2, 1, a, 2, out));
        CHECK_TENSOR(out[1], S(3, 1), tol_of(dt), LSE123 - 3, LSE123 - 2, 0);
        release_all(out[0], out[1], lab, x, NULL);
    }
}

static void test_swce_soft_labels(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 3), 1, 2, 3, 1000, 0, -1000);
        nb_tensor *lab = T(dt, S(2, 3), 0.2, 0.3, 0.5, 0.5, 0, 0.5);
        nb_tensor *in[] = {x, lab}, *out[2];
        nb_attr a[] = {NB_ATTR_BOOL("soft_label", true), NB_ATTR_INT("ignore_index", 0)};
        CHECK_OK(run_op("softmax_with_cross_entropy", 2, in, NATTR(a), a, 2, out));
        double l0 = 0.2 * (LSE123 - 1) + 0.3 * (LSE123 - 2) + 0.5 * (LSE123 - 3);
        /* -0.5*log_softmax(1000) - 0.5*log_softmax(-1000) = 0 + 0.5*2000 */
        CHECK_TENSOR(out[1], S(2, 1), tol_of(dt), l0, 1000);
        CHECK_TENSOR(out[0], S(2, 3), tol_of(dt), 0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 1, 0,
                     0);
        release_all(out[0], out[1], x, lab, NULL);
    }
}

/* Loss of one (outer, inner) row of logits along axis 1 of [A, C, B]. */
static double ref_row_loss(const nb_tensor *x, int64_t o, int64_t j, int64_t label)
{
    int64_t C = x->shape[1], B = x->shape[2];
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; c++) m = fmax(m, nb_tensor_get(x, (o * C + c) * B + j));
    for (int64_t c = 0; c < C; c++) s += exp(nb_tensor_get(x, (o * C + c) * B + j) - m);
    return m + log(s) - nb_tensor_get(x, (o * C + label) * B + j);
}

static void test_swce_axis(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        /* A small case and one big enough for the parallel, partially tiled path. */
        const int64_t shapes[2][3] = {{2, 3, 2}, {4, 20, 500}};
        for (int sc = 0; sc < 2; sc++) {
            const int64_t *sh = shapes[sc];
            nb_tensor *x = new_tensor(dt, 3, sh);
            fill_pattern(x, -5, 5, 3 + sc);
            int64_t lsh[3] = {sh[0], 1, sh[2]}, tsh[2] = {sh[0], sh[2]};
            nb_tensor *lp = new_tensor(NB_I64, 3, lsh), *lt = new_tensor(NB_I32, 2, tsh);
            int64_t rows = sh[0] * sh[2];
            double *want = malloc((size_t)rows * sizeof *want), *sm = malloc((size_t)nb_tensor_numel(x) * sizeof *sm);
            for (int64_t r = 0; r < rows; r++) {
                int64_t l = (r * 7 + 1) % sh[1];
                nb_tensor_set(lp, r, (double)l);
                nb_tensor_set(lt, r, (double)l);
                want[r] = ref_row_loss(x, r / sh[2], r % sh[2], l);
            }
            ref_softmax(x, 1, false, sm);
            nb_attr a[] = {NB_ATTR_INT("axis", 1)}, an[] = {NB_ATTR_INT("axis", -2)};
            nb_tensor *in1[] = {x, lp}, *in2[] = {x, lt}, *o1[2], *o2[2];
            CHECK_OK(run_op("softmax_with_cross_entropy", 2, in1, 1, a, 2, o1));
            CHECK_OK(run_op("softmax_with_cross_entropy", 2, in2, 1, an, 2, o2));
            check_tensor_(__FILE__, __LINE__, o1[1], 3, lsh, want, 4 * tol_of(dt));
            check_tensor_(__FILE__, __LINE__, o2[1], 3, lsh, want, 4 * tol_of(dt));
            check_tensor_(__FILE__, __LINE__, o1[0], 3, sh, sm, tol_of(dt));
            release_all(o1[0], o1[1], o2[0], o2[1], NULL);

            /* Soft one-hot labels give the same loss. */
            nb_tensor *soft = new_tensor(dt, 3, sh);
            for (int64_t r = 0; r < rows; r++)
                nb_tensor_set(soft, ((r / sh[2]) * sh[1] + (int64_t)nb_tensor_get(lp, r)) * sh[2] + r % sh[2], 1);
            nb_attr as[] = {NB_ATTR_INT("axis", 1), NB_ATTR_BOOL("soft_label", true)};
            nb_tensor *in3[] = {x, soft};
            CHECK_OK(run_op("softmax_with_cross_entropy", 2, in3, 2, as, 2, o1));
            check_tensor_(__FILE__, __LINE__, o1[1], 3, lsh, want, 4 * tol_of(dt));
            release_all(o1[0], o1[1], soft, x, lp, lt, NULL);
            free(want);
            free(sm);
        }
    }
}

static void test_swce_big_rows(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = NEW(dt, S(40, 1000)), *lab = NEW(NB_I64, S(40));
        fill_pattern(x, -30, 30, 9);
        double want[40];
        for (int r = 0; r < 40; r++) {
            int64_t l = (r * 37) % 1000;
            nb_tensor_set(lab, r, (double)l);
            double m = -INFINITY, s = 0;
            for (int c = 0; c < 1000; c++) m = fmax(m, nb_tensor_get(x, r * 1000 + c));
            for (int c = 0; c < 1000; c++) s += exp(nb_tensor_get(x, r * 1000 + c) - m);
            want[r] = m + log(s) - nb_tensor_get(x, r * 1000 + l);
        }
        nb_tensor *in[] = {x, lab}, *out[2];
        CHECK_OK(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out));
        check_tensor_(__FILE__, __LINE__, out[1], 2, S(40, 1), want, 10 * tol_of(dt));
        release_all(out[0], out[1], x, lab, NULL);
    }
}

static void test_swce_in_place(void)
{
    /* Softmax written over Logits still gives the right loss. */
    nb_tensor *x = T(NB_F64, S(2, 3), 1, 2, 3, 1, 2, 3), *lab = T(NB_I64, S(2), 2, 0);
    nb_tensor *in[] = {x, lab}, *out[2] = {x, NULL};
    CHECK_OK(nb_op_run("softmax_with_cross_entropy", NB_TENSORS_N(2, in), NB_NO_ATTRS, 2, out));
    CHECK_TENSOR(out[1], S(2, 1), 1e-12, LSE123 - 3, LSE123 - 1);
    CHECK_TENSOR(x, S(2, 3), 1e-12, 0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 0.09003057317038046,
                 0.24472847105479764, 0.6652409557748219);
    release_all(x, lab, out[1], NULL);
}

static void test_swce_errors(void)
{
    nb_tensor *x = T(NB_F32, S(2, 3), 1, 2, 3, 1, 2, 3), *out[2];
    nb_tensor *bad = T(NB_I64, S(2, 1), 0, 3);
    nb_tensor *in[] = {x, bad};
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out), NB_ERR_ARG,
              "softmax_with_cross_entropy: Label value 3 at position [1, 0] is out of range");
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out), NB_ERR_ARG, "[0, 3)");
    nb_tensor_release(bad);
    bad = T(NB_I32, S(2), -1, 0);
    in[1] = bad;
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out), NB_ERR_ARG,
              "Label value -1 at position [0]");
    nb_tensor_release(bad);

    bad = T(NB_I64, S(2, 3), 0, 0, 0, 0, 0, 0);
    in[1] = bad;
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out), NB_ERR_SHAPE,
              "softmax_with_cross_entropy: Label has shape [2, 3] but Logits has shape [2, 3]: hard labels need "
              "shape [2, 1] or [2]");
    nb_tensor_release(bad);
    bad = T(NB_F32, S(2, 1), 0, 1);
    in[1] = bad;
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 0, NULL, 2, out), NB_ERR_DTYPE,
              "softmax_with_cross_entropy: hard labels must be int32 or int64, got float32");
    nb_attr soft[] = {NB_ATTR_BOOL("soft_label", true)};
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 1, soft, 2, out), NB_ERR_SHAPE,
              "soft labels need the same shape");
    nb_tensor_release(bad);
    bad = T(NB_F64, S(2, 3), 0, 0, 1, 0, 0, 1);
    in[1] = bad;
    CHECK_ERR(run_op("softmax_with_cross_entropy", 2, in, 1, soft, 2, out), NB_ERR_DTYPE,
              "softmax_with_cross_entropy: Label (soft) is float64 but Logits is float32");
    release_all(bad, x, NULL);

    nb_var_info vi[] = {INFO0(NB_F32), INFO0(NB_I64)}, vo[2];
    CHECK_ERR(infer_op("softmax_with_cross_entropy", 2, vi, 0, NULL, 2, vo), NB_ERR_SHAPE,
              "softmax_with_cross_entropy: Logits must have at least 1 dimension");
    nb_var_info vi2[] = {INFO(NB_I32, S(2, 3)), INFO(NB_I64, S(2))};
    CHECK_ERR(infer_op("softmax_with_cross_entropy", 2, vi2, 0, NULL, 2, vo), NB_ERR_DTYPE,
              "softmax_with_cross_entropy: Logits must be float32 or float64");
    nb_var_info vi3[] = {INFO(NB_F32, S(2, 3)), INFO(NB_I64, S(2))};
    nb_attr ax[] = {NB_ATTR_INT("axis", 2)};
    CHECK_ERR(infer_op("softmax_with_cross_entropy", 2, vi3, 1, ax, 2, vo), NB_ERR_ARG,
              "softmax_with_cross_entropy: axis 2 is out of range");
}

static void test_swce_infer(void)
{
    nb_var_info vo[2];
    nb_var_info a[] = {INFO(NB_F32, S(-1, 10)), INFO(NB_I64, S(-1, 1))};
    CHECK_OK(infer_op("softmax_with_cross_entropy", 2, a, 0, NULL, 2, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(-1, 10)) && INFO_IS(vo[1], NB_F32, S(-1, 1)));
    nb_var_info b[] = {INFO(NB_F64, S(-1, 10)), INFO(NB_I32, S(-1))};
    CHECK_OK(infer_op("softmax_with_cross_entropy", 2, b, 0, NULL, 2, vo));
    CHECK(INFO_IS(vo[0], NB_F64, S(-1, 10)) && INFO_IS(vo[1], NB_F64, S(-1, 1)));
    nb_var_info c[] = {INFO(NB_F32, S(-1, 5, 7)), INFO(NB_I64, S(8, -1))};
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    CHECK_OK(infer_op("softmax_with_cross_entropy", 2, c, 1, ax, 2, vo));
    CHECK(INFO_IS(vo[1], NB_F32, S(-1, 1, 7)));
    nb_var_info d[] = {INFO(NB_F32, S(3, 10)), INFO(NB_I64, S(4, 1))};
    CHECK_ERR(infer_op("softmax_with_cross_entropy", 2, d, 0, NULL, 2, vo), NB_ERR_SHAPE,
              "Label has shape [4, 1] but Logits has shape [3, 10]");
    nb_var_info e[] = {INFO(NB_F32, S(-1, 10)), INFO(NB_F32, S(-1, 10))};
    nb_attr soft[] = {NB_ATTR_BOOL("soft_label", true)};
    CHECK_OK(infer_op("softmax_with_cross_entropy", 2, e, 1, soft, 2, vo));
    CHECK(INFO_IS(vo[1], NB_F32, S(-1, 1)));

    nb_var_info g[] = {INFO(NB_F32, S(-1, 10)), INFO(NB_I64, S(-1, 1)), INFO(NB_F32, S(-1, 1))};
    CHECK_OK(infer_op("softmax_with_cross_entropy_grad", 3, g, 0, NULL, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(-1, 10)));
    nb_var_info h[] = {INFO(NB_F32, S(4, 10)), INFO(NB_I64, S(4, 1)), INFO(NB_F32, S(4, 2))};
    CHECK_ERR(infer_op("softmax_with_cross_entropy_grad", 3, h, 0, NULL, 1, vo), NB_ERR_SHAPE,
              "softmax_with_cross_entropy_grad: DLoss has shape [4, 2]");
}

/* ---- softmax_with_cross_entropy_grad against finite differences ------------------- */

static void check_swce_grad(nb_tensor *x, nb_tensor *lab, nb_tensor *w, int n_attrs, const nb_attr *attrs)
{
    nb_tensor *in[] = {x, lab}, *fwd[2], *dx = NULL;
    nb_tensor *num = numeric_grad("softmax_with_cross_entropy", 2, in, n_attrs, attrs, 2, 1, w, 0);
    CHECK_OK(run_op("softmax_with_cross_entropy", 2, in, n_attrs, attrs, 2, fwd));
    nb_tensor *gin[] = {fwd[0], lab, w};
    CHECK_OK(run_op("softmax_with_cross_entropy_grad", 3, gin, n_attrs, attrs, 1, &dx));
    CHECK_CLOSE(dx, num, 1e-6, 1e-7);

    /* float32 agrees with float64. */
    nb_tensor *s32 = NULL, *w32 = NULL, *l32 = NULL, *dx32 = NULL;
    CHECK_OK(nb_tensor_cast(&s32, fwd[0], NB_F32));
    CHECK_OK(nb_tensor_cast(&w32, w, NB_F32));
    CHECK_OK(nb_tensor_cast(&l32, lab, nb_dtype_is_float(lab->dtype) ? NB_F32 : lab->dtype));
    nb_tensor *gin32[] = {s32, l32, w32};
    CHECK_OK(run_op("softmax_with_cross_entropy_grad", 3, gin32, n_attrs, attrs, 1, &dx32));
    CHECK(dx32 && dx32->dtype == NB_F32);
    CHECK_CLOSE(dx32, num, 1e-5, 1e-6);
    release_all(num, fwd[0], fwd[1], dx, s32, w32, l32, dx32, NULL);
}

static void test_swce_grad_hard(void)
{
    nb_tensor *x = NEW(NB_F64, S(4, 5));
    fill_pattern(x, -3, 3, 11);
    nb_tensor *lab = T(NB_I64, S(4, 1), 1, -100, 4, 0), *w = T(NB_F64, S(4, 1), 0.5, 2, -1.5, 1);
    check_swce_grad(x, lab, w, 0, NULL);
    nb_tensor *labt = T(NB_I32, S(4), 3, 3, 2, 2);
    nb_attr ig[] = {NB_ATTR_INT("ignore_index", 2)};
    check_swce_grad(x, labt, w, 1, ig);
    release_all(x, lab, labt, w, NULL);
}

static void test_swce_grad_soft(void)
{
    nb_tensor *x = NEW(NB_F64, S(3, 4));
    fill_pattern(x, -3, 3, 12);
    /* Rows that do not sum to one check the exact form of the gradient. */
    nb_tensor *lab = T(NB_F64, S(3, 4), 0.1, 0.2, 0.3, 0.4, 0, 0, 1, 0, 0.3, 0.3, 0.3, 0.4);
    nb_tensor *w = T(NB_F64, S(3, 1), 1, -0.5, 2);
    nb_attr soft[] = {NB_ATTR_BOOL("soft_label", true)};
    check_swce_grad(x, lab, w, 1, soft);
    release_all(x, lab, w, NULL);
}

static void test_swce_grad_axis(void)
{
    nb_tensor *x = NEW(NB_F64, S(2, 3, 2));
    fill_pattern(x, -3, 3, 13);
    nb_tensor *lab = T(NB_I64, S(2, 2), 0, 2, 1, -100), *w = T(NB_F64, S(2, 1, 2), 1, 2, 3, 4);
    nb_attr ax[] = {NB_ATTR_INT("axis", 1)};
    check_swce_grad(x, lab, w, 1, ax);
    nb_tensor *soft = NEW(NB_F64, S(2, 3, 2));
    fill_pattern(soft, 0, 1, 14);
    nb_attr axs[] = {NB_ATTR_INT("axis", 1), NB_ATTR_BOOL("soft_label", true)};
    check_swce_grad(x, soft, w, 2, axs);
    release_all(x, lab, w, soft, NULL);
}

static void test_swce_grad_errors(void)
{
    nb_tensor *s = T(NB_F64, S(2, 3), 0.2, 0.3, 0.5, 0.2, 0.3, 0.5), *lab = T(NB_I64, S(2), 1, 7);
    nb_tensor *dl = T(NB_F64, S(2, 1), 1, 1), *dx = NULL;
    nb_tensor *in[] = {s, lab, dl};
    CHECK_ERR(run_op("softmax_with_cross_entropy_grad", 3, in, 0, NULL, 1, &dx), NB_ERR_ARG,
              "softmax_with_cross_entropy_grad: Label value 7 at position [1]");
    nb_tensor *dl32 = T(NB_F32, S(2, 1), 1, 1);
    nb_tensor *in2[] = {s, lab, dl32};
    CHECK_ERR(run_op("softmax_with_cross_entropy_grad", 3, in2, 0, NULL, 1, &dx), NB_ERR_DTYPE,
              "softmax_with_cross_entropy_grad: DLoss is float32 but Softmax is float64");
    release_all(s, lab, dl, dl32, NULL);
}

int main(void)
{
    RUN(test_softmax_values);
    RUN(test_softmax_axes);
    RUN(test_softmax_rows_sum_to_one);
    RUN(test_softmax_large_logits);
    RUN(test_softmax_big);
    RUN(test_softmax_in_place);
    RUN(test_softmax_scalar);
    RUN(test_softmax_infer_and_errors);
    RUN(test_swce_values);
    RUN(test_swce_large_logits);
    RUN(test_swce_ignore_index);
    RUN(test_swce_soft_labels);
    RUN(test_swce_axis);
    RUN(test_swce_big_rows);
    RUN(test_swce_in_place);
    RUN(test_swce_errors);
    RUN(test_swce_infer);
    RUN(test_swce_grad_hard);
    RUN(test_swce_grad_soft);
    RUN(test_swce_grad_axis);
    RUN(test_swce_grad_errors);
    return test_report();
}
