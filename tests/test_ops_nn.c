/* dropout, embedding, embedding_grad and accuracy. */
#include "test_ops_nn.h"

static const nb_dtype FLOATS[] = {NB_F32, NB_F64};

/* ---- dropout ------------------------------------------------------------------ */

static int64_t count_kept(const nb_tensor *mask)
{
    int64_t kept = 0, n = nb_tensor_numel(mask);
    for (int64_t i = 0; i < n; i++) kept += nb_tensor_get(mask, i) != 0;
    return kept;
}

static void test_dropout_seed_and_rate(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = NEW(dt, S(100, 100));
        fill_pattern(x, 1, 2, 31);
        nb_tensor *in[] = {x}, *a[2], *b[2], *c[2];
        nb_attr s7[] = {NB_ATTR_FLOAT("dropout_prob", 0.3), NB_ATTR_INT("seed", 7)};
        nb_attr s8[] = {NB_ATTR_FLOAT("dropout_prob", 0.3), NB_ATTR_INT("seed", 8)};
        CHECK_OK(run_op("dropout", 1, in, 2, s7, 2, a));
        CHECK_OK(run_op("dropout", 1, in, 2, s7, 2, b));
        CHECK_OK(run_op("dropout", 1, in, 2, s8, 2, c));
        if (!a[0] || !b[0] || !c[0]) return;
        CHECK(a[1]->dtype == NB_U8 && nb_shape_equal(a[1]->ndim, a[1]->shape, 2, S(100, 100)));
        CHECK(nb_tensor_allclose(a[1], b[1], 0, 0) && nb_tensor_allclose(a[0], b[0], 0, 0));
        CHECK(!nb_tensor_allclose(a[1], c[1], 0, 0));
        /* 10000 draws: the dropped fraction is 0.3 give or take 0.0046. */
        double dropped = 1 - (double)count_kept(a[1]) / 10000;
        CHECK_NEAR(dropped, 0.3, 0.02);
        /* upscale_in_train: kept elements are divided by 1 - p, the rest are zero. */
        int bad = 0;
        for (int64_t i = 0; i < 10000; i++) {
            double m = nb_tensor_get(a[1], i), want = m ? nb_tensor_get(x, i) / 0.7 : 0;
            bad += (m != 0 && m != 1) || fabs(nb_tensor_get(a[0], i) - want) > 1e-6 * fabs(want);
        }
        CHECK(bad == 0);
        release_all(x, a[0], a[1], b[0], b[1], c[0], c[1], NULL);
    }
}

static void test_dropout_draws_from_ctx_rng(void)
{
    /* Element i takes the i-th uniform draw of the given generator, also on
     * the parallel path, and the generator moves on past them. */
    const double p = 0.4;
    nb_tensor *x = NEW(NB_F64, S(50000));
    fill_pattern(x, -1, 1, 32);
    nb_rng r, ref;
    nb_rng_seed(&r, 5);
    nb_rng_seed(&ref, 5);
    nb_attr a[] = {NB_ATTR_FLOAT("dropout_prob", p)};
    for (int call = 0; call < 2; call++) {
        nb_tensor *out[2] = {NULL, NULL}, *in[] = {x};
        CHECK_OK(nb_op_run_rng("dropout", 1, in, 1, a, 2, out, &r));
        if (!out[0]) return;
        int bad = 0;
        for (int64_t i = 0; i < 50000; i++) bad += nb_tensor_get(out[1], i) != (nb_rng_uniform(&ref) >= p);
        CHECK(bad == 0);
        CHECK(r.counter == ref.counter && r.key == ref.key);
        release_all(out[0], out[1], NULL);
    }
    nb_tensor_release(x);
}

static void test_dropout_modes(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *x = NEW(dt, S(4, 250));
        fill_pattern(x, -3, 3, 33);
        nb_tensor *in[] = {x}, *o[2];
        double tol = dt == NB_F32 ? 1e-6 : 1e-14;

        /* downgrade_in_infer, training: X * mask, unscaled. */
        nb_attr dtr[] = {NB_ATTR_FLOAT("dropout_prob", 0.25), NB_ATTR_STRING("mode", "downgrade_in_infer")};
        CHECK_OK(run_op("dropout", 1, in, 2, dtr, 2, o));
        int bad = 0;
        for (int64_t i = 0; o[0] && i < 1000; i++)
            bad += nb_tensor_get(o[0], i) != nb_tensor_get(x, i) * nb_tensor_get(o[1], i);
        CHECK(bad == 0 && o[1] && count_kept(o[1]) > 650 && count_kept(o[1]) < 850);
        release_all(o[0], o[1], NULL);

        /* downgrade_in_infer, test: X * (1 - p), mask all ones. */
        nb_attr dte[] = {NB_ATTR_FLOAT("dropout_prob", 0.25), NB_ATTR_STRING("mode", "downgrade_in_infer"),
                         NB_ATTR_BOOL("is_test", true)};
        CHECK_OK(run_op("dropout", 1, in, 3, dte, 2, o));
        bad = 0;
        for (int64_t i = 0; o[0] && i < 1000; i++)
            bad += fabs(nb_tensor_get(o[0], i) - 0.75 * nb_tensor_get(x, i)) > tol;
        CHECK(bad == 0 && o[1] && count_kept(o[1]) == 1000);
        release_all(o[0], o[1], NULL);

        /* upscale_in_train, test: the identity. */
        nb_attr ute[] = {NB_ATTR_FLOAT("dropout_prob", 0.25), NB_ATTR_BOOL("is_test", true)};
        CHECK_OK(run_op("dropout", 1, in, 2, ute, 2, o));
        CHECK(o[0] && nb_tensor_allclose(o[0], x, 0, 0) && count_kept(o[1]) == 1000);
        release_all(o[0], o[1], NULL);

        /* p = 0 keeps everything in training too. */
        nb_attr p0[] = {NB_ATTR_FLOAT("dropout_prob", 0)};
        CHECK_OK(run_op("dropout", 1, in, 1, p0, 2, o));
        CHECK(o[0] && nb_tensor_allclose(o[0], x, 0, 0) && count_kept(o[1]) == 1000);
        CHECK(o[0] && o[0]->dtype == dt);
        release_all(o[0], o[1], x, NULL);
    }
}

static void test_dropout_errors_and_infer(void)
{
    nb_var_info vi[] = {INFO(NB_F32, S(-1, 8))}, vo[2];
    CHECK_OK(infer_op("dropout", 1, vi, 0, NULL, 2, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(-1, 8)) && INFO_IS(vo[1], NB_U8, S(-1, 8)));
    nb_attr p1[] = {NB_ATTR_FLOAT("dropout_prob", 1.0)}, pn[] = {NB_ATTR_FLOAT("dropout_prob", -0.1)};
    nb_attr bm[] = {NB_ATTR_STRING("mode", "upscale")};
    CHECK_ERR(infer_op("dropout", 1, vi, 1, p1, 2, vo), NB_ERR_ARG, "dropout: dropout_prob must be in [0, 1), got 1");
    CHECK_ERR(infer_op("dropout", 1, vi, 1, pn, 2, vo), NB_ERR_ARG,
              "dropout: dropout_prob must be in [0, 1), got -0.1");
    CHECK_ERR(infer_op("dropout", 1, vi, 1, bm, 2, vo), NB_ERR_ARG, "dropout: mode must be");
    nb_var_info vi2[] = {INFO(NB_I64, S(3))};
    CHECK_ERR(infer_op("dropout", 1, vi2, 0, NULL, 2, vo), NB_ERR_DTYPE, "dropout: X must be float32 or float64");
    const nb_op_def *def = nb_op_find("dropout");
    CHECK(def && (def->flags & NB_OP_RANDOM) && def->grad_uses_outputs == (1u << 1));
}

/* ---- embedding ---------------------------------------------------------------------- */

static void test_embedding_values(void)
{
    const nb_dtype wts[] = {NB_F32, NB_F64, NB_I32}, ids_t[] = {NB_I64, NB_I32};
    for (int k = 0; k < 3; k++)
        for (int m = 0; m < 2; m++) {
            nb_tensor *w = T(wts[k], S(4, 3), 0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32);
            nb_tensor *ids = T(ids_t[m], S(2, 2), 0, 2, 3, 2);
            nb_tensor *in[] = {w, ids};
            nb_tensor *o = RUN1_NOATTR("embedding", in);
            CHECK_TENSOR(o, S(2, 2, 3), 0, 0, 1, 2, 20, 21, 22, 30, 31, 32, 20, 21, 22);
            CHECK(o && o->dtype == wts[k]);
            nb_attr pad[] = {NB_ATTR_INT("padding_idx", 2)};
            nb_tensor *op = RUN1("embedding", in, pad);
            CHECK_TENSOR(op, S(2, 2, 3), 0, 0, 1, 2, 0, 0, 0, 30, 31, 32, 0, 0, 0);
            release_all(w, ids, o, op, NULL);
        }
}

static void test_embedding_scalar_id_and_big(void)
{
    nb_tensor *w = T(NB_F64, S(3, 2), 1, 2, 3, 4, 5, 6), *id = tscalar(NB_I64, 1);
    nb_tensor *in[] = {w, id};
    nb_tensor *o = RUN1_NOATTR("embedding", in);
    CHECK_TENSOR(o, S(2), 0, 3, 4);
    release_all(w, id, o, NULL);

    /* Many ids, enough for the parallel path. */
    w = NEW(NB_F32, S(1000, 64));
    fill_pattern(w, -1, 1, 41);
    nb_tensor *ids = NEW(NB_I32, S(50, 100));
    for (int i = 0; i < 5000; i++) nb_tensor_set(ids, i, (i * 7919) % 1000);
    nb_tensor *in2[] = {w, ids};
    nb_attr pad[] = {NB_ATTR_INT("padding_idx", 0)};
    o = RUN1("embedding", in2, pad);
    int bad = 0;
    for (int i = 0; o && i < 5000; i++) {
        int64_t id = (int64_t)nb_tensor_get(ids, i);
        for (int j = 0; j < 64; j++)
            bad += nb_tensor_get(o, i * 64 + j) != (id == 0 ? 0 : nb_tensor_get(w, id * 64 + j));
    }
    CHECK(o && bad == 0);
    release_all(w, ids, o, NULL);
}

static void test_embedding_errors_and_infer(void)
{
    nb_tensor *w = T(NB_F32, S(4, 2), 0, 1, 2, 3, 4, 5, 6, 7), *ids = T(NB_I64, S(2, 2), 0, 1, 4, 2), *o = NULL;
    nb_tensor *in[] = {w, ids};
    CHECK_ERR(nb_op_run("embedding", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &o), NB_ERR_ARG,
              "embedding: Ids value 4 at position [1, 0] is out of range: W has V = 4 rows");
    nb_tensor_set(ids, 2, -1);
    CHECK_ERR(nb_op_run("embedding", NB_TENSORS_N(2, in), NB_NO_ATTRS, 1, &o), NB_ERR_ARG,
              "Ids value -1 at position [1, 0]");
    CHECK(o == NULL);
    release_all(w, ids, NULL);

    nb_var_info vi[] = {INFO(NB_F32, S(100, 8)), INFO(NB_I64, S(-1, 5))}, vo[1];
    CHECK_OK(infer_op("embedding", 2, vi, 0, NULL, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(-1, 5, 8)));
    nb_var_info vi2[] = {INFO(NB_F64, S(-1, -1)), INFO(NB_I32, S(3))};
    nb_attr pad[] = {NB_ATTR_INT("padding_idx", 7)};
    CHECK_OK(infer_op("embedding", 2, vi2, 1, pad, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F64, S(3, -1)));
    nb_attr pad100[] = {NB_ATTR_INT("padding_idx", 100)}, padm2[] = {NB_ATTR_INT("padding_idx", -2)};
    CHECK_ERR(infer_op("embedding", 2, vi, 1, pad100, 1, vo), NB_ERR_ARG, "embedding: padding_idx 100 is out of range");
    CHECK_ERR(infer_op("embedding", 2, vi, 1, padm2, 1, vo), NB_ERR_ARG, "embedding: padding_idx -2 is out of range");
    nb_var_info vi3[] = {INFO(NB_F32, S(100)), INFO(NB_I64, S(3))};
    CHECK_ERR(infer_op("embedding", 2, vi3, 0, NULL, 1, vo), NB_ERR_SHAPE,
              "embedding: W must be a [V, D] table, got shape [100]");
    nb_var_info vi4[] = {INFO(NB_F32, S(100, 8)), INFO(NB_F32, S(3))};
    CHECK_ERR(infer_op("embedding", 2, vi4, 0, NULL, 1, vo), NB_ERR_DTYPE,
              "embedding: Ids must be int32 or int64, got float32");
}

/* ---- embedding_grad ------------------------------------------------------------------- */

static void test_embedding_grad_values(void)
{
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = FLOATS[k];
        nb_tensor *ids = T(NB_I32, S(4), 0, 2, 0, 3), *w = NEW(dt, S(4, 2));
        nb_tensor *dout = T(dt, S(4, 2), 1, 2, 3, 4, 5, 6, 7, 8);
        nb_tensor *in[] = {ids, dout, w};
        nb_tensor *dw = RUN1_NOATTR("embedding_grad", in);
        CHECK_TENSOR(dw, S(4, 2), 0, 6, 8, 0, 0, 3, 4, 7, 8);
        CHECK(dw && dw->dtype == dt);
        nb_attr pad[] = {NB_ATTR_INT("padding_idx", 0)};
        nb_tensor *dwp = RUN1("embedding_grad", in, pad);
        CHECK_TENSOR(dwp, S(4, 2), 0, 0, 0, 0, 0, 3, 4, 7, 8);
        /* Written into a caller's non-zero buffer, it still starts from zero. */
        nb_tensor *buf = T(dt, S(4, 2), 9, 9, 9, 9, 9, 9, 9, 9), *outs[] = {buf};
        CHECK_OK(nb_op_run("embedding_grad", NB_TENSORS_N(3, in), NB_NO_ATTRS, 1, outs));
        CHECK_TENSOR(buf, S(4, 2), 0, 6, 8, 0, 0, 3, 4, 7, 8);
        release_all(ids, w, dout, dw, dwp, buf, NULL);
    }
}

static void test_embedding_grad_finite_differences(void)
{
    const int64_t pads[] = {-1, 4, 1};
    for (int p = 0; p < 3; p++) {
        nb_tensor *w = NEW(NB_F64, S(5, 3)), *ids = T(NB_I64, S(3, 2), 1, 4, 1, 1, 0, 2);
        nb_tensor *g = NEW(NB_F64, S(3, 2, 3));
        fill_pattern(w, -1, 1, 42);
        fill_pattern(g, -2, 2, 43);
        nb_attr a[] = {NB_ATTR_INT("padding_idx", pads[p])};
        nb_tensor *in[] = {w, ids};
        nb_tensor *num = numeric_grad("embedding", 2, in, 1, a, 1, 0, g, 0);
        nb_tensor *gin[] = {ids, g, w};
        nb_tensor *dw = RUN1("embedding_grad", gin, a);
        CHECK_CLOSE(dw, num, 1e-7, 1e-8);
        release_all(w, ids, g, num, dw, NULL);
    }
}

static void test_embedding_grad_big(void)
{
    /* Enough work for the parallel column bands; D = 100 leaves a partial band. */
    nb_tensor *ids = NEW(NB_I64, S(2000)), *w = NEW(NB_F64, S(50, 100)), *dout = NEW(NB_F64, S(2000, 100));
    for (int i = 0; i < 2000; i++) nb_tensor_set(ids, i, (i * 31) % 50);
    fill_pattern(dout, -1, 1, 44);
    double *want = calloc(5000, sizeof *want);
    for (int i = 0; i < 2000; i++)
        for (int j = 0; j < 100; j++)
            want[(int64_t)nb_tensor_get(ids, i) * 100 + j] += nb_tensor_get(dout, i * 100 + j);
    nb_tensor *in[] = {ids, dout, w};
    nb_tensor *dw = RUN1_NOATTR("embedding_grad", in);
    check_tensor_(__FILE__, __LINE__, dw, 2, S(50, 100), want, 1e-12);
    free(want);
    release_all(ids, w, dout, dw, NULL);
}

static void test_embedding_grad_errors_and_infer(void)
{
    nb_tensor *ids = T(NB_I64, S(2), 0, 9), *w = NEW(NB_F32, S(4, 2)), *dout = NEW(NB_F32, S(2, 2)), *o = NULL;
    nb_tensor *in[] = {ids, dout, w};
    CHECK_ERR(nb_op_run("embedding_grad", NB_TENSORS_N(3, in), NB_NO_ATTRS, 1, &o), NB_ERR_ARG,
              "embedding_grad: Ids value 9 at position [1] is out of range: W has V = 4 rows");
    release_all(ids, w, dout, NULL);

    nb_var_info vi[] = {INFO(NB_I64, S(-1, 5)), INFO(NB_F32, S(-1, 5, 8)), INFO(NB_F32, S(100, 8))}, vo[1];
    CHECK_OK(infer_op("embedding_grad", 3, vi, 0, NULL, 1, vo));
    CHECK(INFO_IS(vo[0], NB_F32, S(100, 8)));
    nb_var_info vi2[] = {INFO(NB_I64, S(-1, 5)), INFO(NB_F32, S(-1, 5, 7)), INFO(NB_F32, S(100, 8))};
    CHECK_ERR(infer_op("embedding_grad", 3, vi2, 0, NULL, 1, vo), NB_ERR_SHAPE,
              "embedding_grad: DOut has shape [-1, 5, 7] but Ids has shape [-1, 5] and W [100, 8]");
    nb_var_info vi3[] = {INFO(NB_I64, S(5)), INFO(NB_F64, S(5, 8)), INFO(NB_F32, S(100, 8))};
    CHECK_ERR(infer_op("embedding_grad", 3, vi3, 0, NULL, 1, vo), NB_ERR_DTYPE,
              "embedding_grad: DOut is float64 but W is float32");
}

/* ---- accuracy ----------------------------------------------------------------------- */

static void check_accuracy(nb_tensor *x, nb_tensor *lab, int64_t k, double acc, int64_t correct, int64_t total)
{
    nb_tensor *in[] = {x, lab}, *o[3];
    nb_attr a[] = {NB_ATTR_INT("k", k)};
    CHECK_OK(run_op("accuracy", 2, in, 1, a, 3, o));
    if (!o[0]) return;
    CHECK(o[0]->dtype == NB_F32 && o[0]->ndim == 0 && o[1]->dtype == NB_I64 && o[1]->ndim == 0 &&
          o[2]->dtype == NB_I64 && o[2]->ndim == 0);
    CHECK_NEAR(nb_tensor_get(o[0], 0), acc, 1e-7);
    CHECK(nb_tensor_get(o[1], 0) == correct && nb_tensor_get(o[2], 0) == total);
    release_all(o[0], o[1], o[2], NULL);
}

static void test_accuracy_top1_top2(void)
{
    for (int k = 0; k < 2; k++) {
        /* Row 3 ties classes 0 and 1: the lower index ranks first. */
        nb_tensor *x = T(FLOATS[k], S(4, 3), 0.1, 0.7, 0.2, 0.5, 0.3, 0.2, 0.2, 0.3, 0.5, 0.3, 0.3, 0.4);
        nb_tensor *l1 = T(NB_I64, S(4), 1, 1, 2, 0), *l2 = T(NB_I32, S(4, 1), 1, 1, 2, 0);
        nb_tensor *l3 = T(NB_I64, S(4), 1, 2, 2, 1);
        check_accuracy(x, l1, 1, 0.5, 2, 4);
        check_accuracy(x, l2, 1, 0.5, 2, 4);
        check_accuracy(x, l1, 2, 1.0, 4, 4);
        check_accuracy(x, l3, 2, 0.5, 2, 4);
        check_accuracy(x, l3, 3, 1.0, 4, 4);
        release_all(x, l1, l2, l3, NULL);
    }
}

static void test_accuracy_big(void)
{
    nb_tensor *x = NEW(NB_F32, S(1000, 50)), *lab = NEW(NB_I64, S(1000));
    fill_pattern(x, 0, 1, 51);
    int64_t correct = 0;
    for (int r = 0; r < 1000; r++) {
        int best = 0;
        for (int c = 1; c < 50; c++)
            if (nb_tensor_get(x, r * 50 + c) > nb_tensor_get(x, r * 50 + best)) best = c;
        int l = r % 3 ? best : (best + 1) % 50;
        nb_tensor_set(lab, r, l);
        correct += l == best;
    }
    check_accuracy(x, lab, 1, (double)correct / 1000, correct, 1000);
    release_all(x, lab, NULL);
}

static void test_accuracy_errors_and_infer(void)
{
    nb_tensor *x = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6), *lab = T(NB_I64, S(2), 0, 3), *o[3];
    nb_tensor *in[] = {x, lab};
    CHECK_ERR(run_op("accuracy", 2, in, 0, NULL, 3, o), NB_ERR_ARG,
              "accuracy: Label value 3 at position [1] is out of range: labels must be in [0, 3)");
    release_all(x, lab, NULL);

    nb_var_info vi[] = {INFO(NB_F32, S(-1, 10)), INFO(NB_I64, S(-1, 1))}, vo[3];
    CHECK_OK(infer_op("accuracy", 2, vi, 0, NULL, 3, vo));
    CHECK(vo[0].ndim == 0 && vo[0].dtype == NB_F32 && vo[1].ndim == 0 && vo[1].dtype == NB_I64 &&
          vo[2].dtype == NB_I64);
    nb_attr k11[] = {NB_ATTR_INT("k", 11)}, k0[] = {NB_ATTR_INT("k", 0)};
    CHECK_ERR(infer_op("accuracy", 2, vi, 1, k11, 3, vo), NB_ERR_ARG, "accuracy: k = 11 must be in 1..C");
    CHECK_ERR(infer_op("accuracy", 2, vi, 1, k0, 3, vo), NB_ERR_ARG, "accuracy: k = 0");
    nb_var_info vi2[] = {INFO(NB_F32, S(8, 10)), INFO(NB_I64, S(8, 2))};
    CHECK_ERR(infer_op("accuracy", 2, vi2, 0, NULL, 3, vo), NB_ERR_SHAPE,
              "accuracy: Label has shape [8, 2] but Out has shape [8, 10]");
    nb_var_info vi3[] = {INFO(NB_F32, S(10)), INFO(NB_I64, S(8))};
    CHECK_ERR(infer_op("accuracy", 2, vi3, 0, NULL, 3, vo), NB_ERR_SHAPE, "accuracy: Out must be [N, C] scores");
    const nb_op_def *def = nb_op_find("accuracy");
    CHECK(def && (def->flags & NB_OP_NOT_DIFFERENTIABLE));
}

int main(void)
{
    RUN(test_dropout_seed_and_rate);
    RUN(test_dropout_draws_from_ctx_rng);
    RUN(test_dropout_modes);
    RUN(test_dropout_errors_and_infer);
    RUN(test_embedding_values);
    RUN(test_embedding_scalar_id_and_big);
    RUN(test_embedding_errors_and_infer);
    RUN(test_embedding_grad_values);
    RUN(test_embedding_grad_finite_differences);
    RUN(test_embedding_grad_big);
    RUN(test_embedding_grad_errors_and_infer);
    RUN(test_accuracy_top1_top2);
    RUN(test_accuracy_big);
    RUN(test_accuracy_errors_and_infer);
    return test_report();
}
