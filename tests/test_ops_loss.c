/* cross_entropy, mse_loss and bce_with_logits. */
#include "test_ops_nn.h"

static const nb_dtype FLOATS[] = {NB_F32, NB_F64};
static double tol_of(nb_dtype dt) { return dt == NB_F32 ? 2e-6 : 1e-12; }

/* ---- cross_entropy ------------------------------------------------------------ */

static void test_cross_entropy_values(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 3), 0.2, 0.3, 0.5, 0.1, 0.6, 0.3);
        nb_tensor *labs[] = {T(NB_I64, S(2, 1), 2, 1), T(NB_I64, S(2), 2, 1), T(NB_I32, S(2, 1), 2, 1),
                             T(NB_I32, S(2), 2, 1)};
        for (int l = 0; l < 4; l++) {
            nb_tensor *in[] = {x, labs[l]};
            nb_tensor *y = RUN1_NOATTR("cross_entropy", in);
            CHECK_TENSOR(y, S(2, 1), tol_of(dt), -log(0.5), -log(0.6));
            CHECK(y && y->dtype == dt);
            release_all(y, labs[l], NULL);
        }
        nb_tensor_release(x);
    }
}

static void test_cross_entropy_1d_and_3d(void)
{
    nb_tensor *x = T(NB_F64, S(4), 0.1, 0.2, 0.3, 0.4), *l = tscalar(NB_I64, 3);
    nb_tensor *in[] = {x, l};
    nb_tensor *y = RUN1_NOATTR("cross_entropy", in);
    CHECK_TENSOR(y, S(1), 1e-12, -log(0.4));
    release_all(x, l, y, NULL);

    x = T(NB_F32, S(2, 2, 2), 0.5, 0.5, 0.9, 0.1, 0.25, 0.75, 1, 0);
    l = T(NB_I32, S(2, 2, 1), 0, 1, 1, 0);
    nb_tensor *in2[] = {x, l};
    y = RUN1_NOATTR("cross_entropy", in2);
    CHECK_TENSOR(y, S(2, 2, 1), 2e-6, -log(0.5), -log(0.1), -log(0.75), 0);
    release_all(x, l, y, NULL);
}

static void test_cross_entropy_zero_probability(void)
{
    for (int k = 0; k < 2; k++) {
        nb_tensor *x = T(FLOATS[k], S(1, 2), 1, 0), *l = T(NB_I64, S(1), 1);
        nb_tensor *in[] = {x, l};
        nb_tensor *y = RUN1_NOATTR("cross_entropy", in);
        /* -log(1e-20), not inf */
        CHECK_TENSOR(y, S(1, 1), 1e-6, 46.051701859880914);
        CHECK(y && isfinite(nb_tensor_get(y, 0)));
        release_all(x, l, y, NULL);
    }
}

static void test_cross_entropy_soft_and_ignore(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 3), 0.2, 0.3, 0.5, 0.1, 0.6, 0.3);
        nb_tensor *soft = T(dt, S(2, 3), 0.5, 0.5, 0, 0, 0.25, 0.75);
        nb_tensor *in[] = {x, soft};
        nb_attr a[] = {NB_ATTR_BOOL("soft_label", true)};
        nb_tensor *y = RUN1("cross_entropy", in, a);
        CHECK_TENSOR(y, S(2, 1), tol_of(dt), -0.5 * log(0.2) - 0.5 * log(0.3), -0.25 * log(0.6) - 0.75 * log(0.3));
        release_all(y, soft, NULL);

        nb_tensor *lab = T(NB_I64, S(2, 1), -100, 1);
        nb_tensor *in2[] = {x, lab};
        y = RUN1_NOATTR("cross_entropy", in2);
        CHECK_TENSOR(y, S(2, 1), tol_of(dt), 0, -log(0.6));
        nb_attr ig[] = {NB_ATTR_INT("ignore_index", 1)};
        nb_tensor_set(lab, 0, 0);
        nb_tensor *y2 = RUN1("cross_entropy", in2, ig);
        CHECK_TENSOR(y2, S(2, 1), tol_of(dt), -log(0.2), 0);
        release_all(y, y2, lab, x, NULL);
    }
}

static void test_cross_entropy_errors_and_infer(void)
{
    nb_tensor *x = T(NB_F64, S(2, 3), 0.2, 0.3, 0.5, 0.1, 0.6, 0.3), *lab = T(NB_I64, S(2), 1, 3), *y = NULL;
    nb_tensor *in[] = {x, lab};
    CHECK_ERR(nb_op_run("cross_entropy", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &y), NB_ERR_ARG,
              "cross_entropy: Label value 3 at position [1] is out of range");
    nb_tensor_release(lab);
    lab = T(NB_I64, S(3), 1, 1, 1);
    in[1] = lab;
    CHECK_ERR(nb_op_run("cross_entropy", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &y), NB_ERR_SHAPE,
              "cross_entropy: Label has shape [3] but X has shape [2, 3]");
    CHECK(y == NULL);
    release_all(x, lab, NULL);

    nb_var_info vi[] = {INFO(NB_F32, S(-1, 10)), INFO(NB_I64, S(-1, 1))}, vo[1];
    CHECK_OK(infer_op("cross_entropy", 2, vi, 0, NULL, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(-1, 1)));
    nb_var_info vi2[] = {INFO(NB_F64, S(-1, 4, -1)), INFO(NB_I32, S(8, -1))};
    CHECK_OK(infer_op("cross_entropy", 2, vi2, 0, NULL, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F64, S(-1, 4, 1)));
    nb_var_info vi3[] = {INFO(NB_I64, S(2, 3)), INFO(NB_I64, S(2, 1))};
    CHECK_ERR(infer_op("cross_entropy", 2, vi3, 0, NULL, 1, vo), NB_ERR_DTYPE,
              "cross_entropy: X must be float32 or float64, got int64");
}

/* ---- mse_loss ------------------------------------------------------------------ */

static void test_mse_loss_reductions(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(2, 2), 1, 2, 3, -1), *y = T(dt, S(2, 2), 1, 1, 1, 1);
        nb_tensor *in[] = {x, y};
        nb_attr none[] = {NB_ATTR_STRING("reduction", "none")}, sum[] = {NB_ATTR_STRING("reduction", "sum")},
                mean[] = {NB_ATTR_STRING("reduction", "mean")};
        nb_tensor *a = RUN1("mse_loss", in, none), *b = RUN1("mse_loss", in, sum), *c = RUN1("mse_loss", in, mean);
        nb_tensor *d = RUN1_NOATTR("mse_loss", in);
        CHECK_TENSOR(a, S(2, 2), tol_of(dt), 0, 1, 4, 4);
        CHECK(b && b->ndim == 0 && fabs(nb_tensor_get(b, 0) - 9) < 1e-6);
        CHECK(c && c->ndim == 0 && fabs(nb_tensor_get(c, 0) - 2.25) < 1e-6);
        CHECK(d && d->ndim == 0 && fabs(nb_tensor_get(d, 0) - 2.25) < 1e-6 && d->dtype == dt);
        release_all(x, y, a, b, c, d, NULL);
    }
}

static void test_mse_loss_big(void)
{
    /* Big enough for the parallel reduction; compared with a serial sum. */
    for (int k = 0; k < 2; k++) {
        nb_tensor *x = NEW(FLOATS[k], S(300, 401)), *y = NEW(FLOATS[k], S(300, 401));
        fill_pattern(x, -2, 2, 21);
        fill_pattern(y, -2, 2, 22);
        double s = 0;
        int64_t n = 300 * 401;
        for (int64_t i = 0; i < n; i++) s += pow(nb_tensor_get(x, i) - nb_tensor_get(y, i), 2);
        nb_tensor *in[] = {x, y};
        nb_attr sum[] = {NB_ATTR_STRING("reduction", "sum")};
        nb_tensor *m = RUN1_NOATTR("mse_loss", in), *t = RUN1("mse_loss", in, sum), *t2 = RUN1("mse_loss", in, sum);
        CHECK(m && fabs(nb_tensor_get(m, 0) - s / (double)n) < 1e-6 * s / (double)n);
        CHECK(t && fabs(nb_tensor_get(t, 0) - s) < 1e-6 * s);
        CHECK(t && t2 && nb_tensor_get(t, 0) == nb_tensor_get(t2, 0));
        release_all(x, y, m, t, t2, NULL);
    }
}

static void test_mse_loss_errors_and_infer(void)
{
    nb_tensor *x = T(NB_F32, S(3), 1, 2, 3), *y = T(NB_F32, S(3, 1), 1, 2, 3), *o = NULL;
    nb_tensor *in[] = {x, y};
    CHECK_ERR(nb_op_run("mse_loss", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &o), NB_ERR_SHAPE,
              "mse_loss: X has shape [3] but Label has shape [3, 1]");
    nb_tensor_release(y);
    y = T(NB_F64, S(3), 1, 2, 3);
    in[1] = y;
    CHECK_ERR(nb_op_run("mse_loss", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &o), NB_ERR_DTYPE,
              "mse_loss: Label is float64 but X is float32");
    nb_tensor_release(y);
    y = T(NB_F32, S(3), 1, 2, 3);
    in[1] = y;
    nb_attr bad[] = {NB_ATTR_STRING("reduction", "avg")};
    CHECK_ERR(nb_op_run("mse_loss", NB_TENSORS_N(2, in), NB_ATTRS_N(1, bad), 1, &o), NB_ERR_ARG,
              "mse_loss: reduction must be \"mean\", \"sum\" or \"none\", got \"avg\"");
    CHECK(o == NULL);
    release_all(x, y, NULL);

    nb_var_info vi[] = {INFO(NB_F32, S(-1, 4)), INFO(NB_F32, S(8, -1))}, vo[1];
    nb_attr none[] = {NB_ATTR_STRING("reduction", "none")};
    CHECK_OK(infer_op("mse_loss", 2, vi, 1, none, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(8, 4)));
    CHECK_OK(infer_op("mse_loss", 2, vi, 0, NULL, 1, vo));
    CHECK(vo[0].ndim == 0 && vo[0].dtype == NB_F32);
    nb_var_info vi2[] = {INFO(NB_F32, S(-1, 4)), INFO(NB_F32, S(-1, 5))};
    CHECK_ERR(infer_op("mse_loss", 2, vi2, 0, NULL, 1, vo), NB_ERR_SHAPE,
              "mse_loss: X has shape [-1, 4] but Label has shape [-1, 5]");
}

/* ---- bce_with_logits ---------------------------------------------------------------- */

static double ref_bce(double x, double y)
{
    double p = 1 / (1 + exp(-x));
    return -(y * log(p) + (1 - y) * log(1 - p));
}

static void test_bce_with_logits(void)
{
    const double xs[] = {-2, 0, 3, 0.5}, ys[] = {0, 1, 1, 0.3};
    double want[4], sum = 0;
    for (int i = 0; i < 4; i++) sum += want[i] = ref_bce(xs[i], ys[i]);
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = tt(dt, 2, S(2, 2), xs), *y = tt(dt, 2, S(2, 2), ys);
        nb_tensor *in[] = {x, y};
        nb_attr none[] = {NB_ATTR_STRING("reduction", "none")}, s[] = {NB_ATTR_STRING("reduction", "sum")};
        nb_tensor *a = RUN1("bce_with_logits", in, none), *b = RUN1("bce_with_logits", in, s);
        nb_tensor *c = RUN1_NOATTR("bce_with_logits", in);
        check_tensor_(__FILE__, __LINE__, a, 2, S(2, 2), want, tol_of(dt));
        CHECK_SCALAR(b, sum, tol_of(dt));
        CHECK_SCALAR(c, sum / 4, tol_of(dt));
        release_all(x, y, a, b, c, NULL);
    }
}

static void test_bce_with_logits_large(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = T(dt, S(4), 1000, -1000, 1000, -1000), *y = T(dt, S(4), 0, 1, 1, 0);
        nb_tensor *in[] = {x, y};
        nb_attr none[] = {NB_ATTR_STRING("reduction", "none")};
        nb_tensor *a = RUN1("bce_with_logits", in, none);
        CHECK_TENSOR(a, S(4), tol_of(dt), 1000, 1000, 0, 0);
        release_all(x, y, a, NULL);
    }
}

static void test_bce_with_logits_errors_and_infer(void)
{
    nb_tensor *x = T(NB_F32, S(2), 1, 2), *y = T(NB_F32, S(3), 1, 0, 1), *o = NULL;
    nb_tensor *in[] = {x, y};
    CHECK_ERR(nb_op_run("bce_with_logits", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &o), NB_ERR_SHAPE,
              "bce_with_logits: X has shape [2] but Label has shape [3]");
    release_all(x, y, NULL);
    nb_var_info vi[] = {INFO(NB_F64, S(-1, 3)), INFO(NB_F64, S(-1, 3))}, vo[1];
    nb_attr none[] = {NB_ATTR_STRING("reduction", "none")}, bad[] = {NB_ATTR_STRING("reduction", "")};
    CHECK_OK(infer_op("bce_with_logits", 2, vi, 1, none, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F64, S(-1, 3)));
    CHECK_ERR(infer_op("bce_with_logits", 2, vi, 1, bad, 1, vo), NB_ERR_ARG, "bce_with_logits: reduction must be");
    nb_var_info vi2[] = {INFO(NB_I32, S(3)), INFO(NB_I32, S(3))};
    CHECK_ERR(infer_op("bce_with_logits", 2, vi2, 0, NULL, 1, vo), NB_ERR_DTYPE, "bce_with_logits: X must be");
}

int main(void)
{
    RUN(test_cross_entropy_values);
    RUN(test_cross_entropy_1d_and_3d);
    RUN(test_cross_entropy_zero_probability);
    RUN(test_cross_entropy_soft_and_ignore);
    RUN(test_cross_entropy_errors_and_infer);
    RUN(test_mse_loss_reductions);
    RUN(test_mse_loss_big);
    RUN(test_mse_loss_errors_and_infer);
    RUN(test_bce_with_logits);
    RUN(test_bce_with_logits_large);
    RUN(test_bce_with_logits_errors_and_infer);
    return test_report();
}
