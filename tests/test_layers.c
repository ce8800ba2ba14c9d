/* Layers: the ops and parameters each one builds (names, shapes, flags,
 * startup initialisers), the values they compute on small inputs, batch
 * norm's in-place running statistics and evaluation copies, and a small
 * MLP made only of layers that learns a separable toy problem. */
#include "layer_test_util.h"

#define FEED(nm, t) ((nb_feed){(nm), (t)})

/* Feeds one tensor into main (or p) and fetches `out` (a new reference). */
static nb_tensor *run_one(model *m, nb_program *p, const char *in_name, nb_tensor *in, const char *out)
{
    nb_feed f = FEED(in_name, in);
    return model_fetch(m, p, in ? 1 : 0, &f, out);
}

/* ---- fc --------------------------------------------------------------------------- */

static void test_fc_builds(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F32, 2, S(-1, 784));
    nb_value h = nb_layer_fc(m.b, x, 128, "relu", NULL);
    nb_value y = nb_layer_fc(m.b, h, 10, "softmax", NULL);
    REQUIRE_OK(nb_builder_status(m.b));
    /* Names, as Paddle gives them: layers fc_0 and fc_1 (op outputs count
     * apart, fc_0.tmp_0, ...). */
    CHECK_PARAM(&m, "fc_0.w_0", S(784, 128));
    CHECK_PARAM(&m, "fc_0.b_0", S(128));
    CHECK_PARAM(&m, "fc_1.w_0", S(128, 10));
    CHECK_PARAM(&m, "fc_1.b_0", S(10));
    CHECK(main_var(&m, "fc_0.w_0")->dtype == NB_F32);
    nb_var_info hi = nb_value_info(m.b, h), yi = nb_value_info(m.b, y);
    CHECK(nb_shape_equal(hi.ndim, hi.shape, 2, S(-1, 128)));
    CHECK(nb_shape_equal(yi.ndim, yi.shape, 2, S(-1, 10)));
    /* relu is fused into the fc op; softmax follows as its own op. */
    nb_op *fc0 = op_at(m.main, find_op_from(m.main, "fc", 0));
    CHECK_STR(op_string(fc0, "activation"), "relu");
    CHECK(op_int(fc0, "in_num_col_dims") == 1);
    CHECK_STR(nb_op_in_name(fc0, 1, 0), "fc_0.w_0");
    CHECK_STR(nb_op_in_name(fc0, 2, 0), "fc_0.b_0");
    nb_op *fc1 = op_at(m.main, find_op_from(m.main, "fc", find_op_from(m.main, "fc", 0) + 1));
    CHECK_STR(op_string(fc1, "activation"), "");
    CHECK(count_ops_of(m.main, "softmax") == 1);
    CHECK(nb_program_global_block(m.main)->n_ops == 3);
    /* torch's nn.Linear init: W and b both U(+-1/sqrt(in)), drawn by startup. */
    CHECK(nb_program_global_block(m.startup)->n_ops == 4);
    const char *names[] = {"fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"};
    const double bounds[] = {1 / sqrt(784.0), 1 / sqrt(784.0), 1 / sqrt(128.0), 1 / sqrt(128.0)};
    for (int i = 0; i < 4; i++) {
        nb_op *op = init_op_of(m.startup, names[i]);
        CHECK(op && !strcmp(op->def->name, "uniform_random"));
        CHECK_NEAR(op_float(op, "max"), bounds[i], 1e-12);
        CHECK_NEAR(op_float(op, "min"), -bounds[i], 1e-12);
        CHECK(op_int(op, "seed") == 0);
    }
    model_free(&m);
}

static void test_fc_values(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(2, 3));
    nb_fc_opts o = {.name = "lin", .w_init = nb_init_constant(0.5), .b_init = nb_init_constant(0.1)};
    nb_value y = nb_layer_fc(m.b, x, 2, NULL, &o);
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_PARAM(&m, "lin.w_0", S(3, 2));
    CHECK_PARAM(&m, "lin.b_0", S(2));
    CHECK(main_var(&m, "lin.w_0")->dtype == NB_F64);
    REQUIRE_OK(model_startup(&m));
    nb_tensor *xt = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6);
    nb_tensor *out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    if (out) CHECK_TENSOR(out, S(2, 2), 1e-12, 3.1, 3.1, 7.6, 7.6);
    nb_tensor_release(out);
    /* W is [in, out]: column j of W makes output feature j. */
    nb_tensor *w = nb_scope_find(m.scope, "lin.w_0");
    const double wv[] = {1, -1, 0, 2, 0.5, 0};
    for (int i = 0; i < 6; i++) nb_tensor_set(w, i, wv[i]);
    out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    if (out) CHECK_TENSOR(out, S(2, 2), 1e-12, 2.6, 3.1, 7.1, 6.1);
    release_all(out, xt, NULL);
    model_free(&m);
}

static void test_fc_options(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 3, S(-1, 3, 4));
    /* in_num_col_dims 2: rows are dims 0-1, features dim 2. */
    nb_fc_opts o = {.in_num_col_dims = 2, .no_bias = true, .w_init = nb_init_constant(0.25)};
    nb_value y = nb_layer_fc(m.b, x, 5, "tanh", &o);
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_PARAM(&m, "fc_0.w_0", S(4, 5));
    CHECK(main_var(&m, "fc_0.b_0") == NULL);
    nb_var_info yi = nb_value_info(m.b, y);
    CHECK(nb_shape_equal(yi.ndim, yi.shape, 3, S(-1, 3, 5)));
    nb_op *fc = op_at(m.main, find_op_from(m.main, "fc", 0));
    CHECK(fc && nb_op_in_count(fc, 2) == 0);
    CHECK(op_int(fc, "in_num_col_dims") == 2);
    CHECK_STR(op_string(fc, "activation"), "tanh");
    REQUIRE_OK(model_startup(&m));
    nb_tensor *xt;
    REQUIRE_OK(nb_tensor_full(&xt, NB_F64, 3, S(1, 3, 4), 1.0));
    nb_tensor *out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    if (out) {
        CHECK(nb_shape_equal(out->ndim, out->shape, 3, S(1, 3, 5)));
        for (int i = 0; i < 15; i++) CHECK_NEAR(nb_tensor_get(out, i), tanh(1.0), 1e-12);
    }
    release_all(out, xt, NULL);
    model_free(&m);
}

static void test_fc_errors(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F32, 2, S(-1, 8));
    int ops = nb_program_global_block(m.main)->n_ops;
    nb_layer_fc(m.b, x, 4, "swish", NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG);
    CHECK(strstr(nb_builder_error(m.b), "unknown activation \"swish\"") &&
          strstr(nb_builder_error(m.b), "leaky_relu") && strstr(nb_builder_error(m.b), "log_softmax"));
    /* The activation was checked before anything was created. */
    CHECK(main_var(&m, "fc_0.w_0") == NULL);
    CHECK(nb_program_global_block(m.main)->n_ops == ops);
    CHECK(nb_program_global_block(m.startup)->n_ops == 0);
    nb_builder_clear_error(m.b);

    nb_value u = nb_layer_data(m.b, "u", NB_F32, 2, S(4, -1));
    nb_layer_fc(m.b, u, 4, NULL, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "unknown feature dims"));
    nb_builder_clear_error(m.b);
    nb_value ids = nb_layer_data(m.b, "ids", NB_I64, 2, S(4, 3));
    nb_layer_fc(m.b, ids, 4, NULL, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_DTYPE && strstr(nb_builder_error(m.b), "int64"));
    nb_builder_clear_error(m.b);
    nb_layer_fc(m.b, x, 0, NULL, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "size"));
    nb_builder_clear_error(m.b);
    nb_layer_fc(m.b, x, 3, NULL, &(nb_fc_opts){.in_num_col_dims = 2});
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "in_num_col_dims"));
    nb_builder_clear_error(m.b);
    nb_layer_fc(m.b, NB_NONE, 3, NULL, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "NB_NONE"));
    /* A builder that failed makes layers do nothing. */
    ops = nb_program_global_block(m.main)->n_ops;
    CHECK(nb_is_none(nb_layer_fc(m.b, x, 3, NULL, NULL)));
    CHECK(nb_program_global_block(m.main)->n_ops == ops);
    CHECK(nb_is_none(nb_layer_fc(NULL, x, 3, NULL, NULL)));
    model_free(&m);
}

/* ---- activations -------------------------------------------------------------------- */

static void test_activations(void)
{
    static const struct {
        const char *name, *op;
        double v[2];
    } cases[] = {
        {"relu", "relu", {0, 0.5}},
        {"sigmoid", "sigmoid", {0.2689414213699951, 0.6224593312018546}},
        {"tanh", "tanh", {-0.7615941559557649, 0.46211715726000974}},
        {"gelu", "gelu", {-0.15865525393145707, 0.34573123063700656}},
        {"silu", "silu", {-0.2689414213699951, 0.3112296656009273}},
        {"leaky_relu", "leaky_relu", {-0.01, 0.5}},
        {"elu", "elu", {-0.6321205588285577, 0.5}},
        {"softplus", "softplus", {0.31326168751822286, 0.9740769841801067}},
        {"softmax", "softmax", {0.18242552380635635, 0.8175744761936437}},
        {"log_softmax", "log_softmax", {-1.7014132779827524, -0.2014132779827524}},
    };
    nb_tensor *xt = T(NB_F64, S(1, 2), -1, 0.5);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        model m;
        model_init(&m);
        nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(1, 2));
        nb_value y = nb_layer_activation(m.b, x, cases[i].name);
        CHECK_OK(nb_builder_status(m.b));
        CHECK(nb_program_global_block(m.main)->n_ops == 1 && find_op_from(m.main, cases[i].op, 0) == 0);
        nb_tensor *out = nb_builder_status(m.b) ? NULL : run_one(&m, NULL, "x", xt, nb_value_name(y));
        if (out) {
            CHECK_NEAR(nb_tensor_get(out, 0), cases[i].v[0], 1e-9);
            CHECK_NEAR(nb_tensor_get(out, 1), cases[i].v[1], 1e-9);
        } else {
            fprintf(stderr, "  activation %s failed\n", cases[i].name);
        }
        nb_tensor_release(out);
        model_free(&m);
    }
    nb_tensor_release(xt);

    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(1, 2));
    /* "" and NULL are the identity, with no op. */
    CHECK(nb_layer_activation(m.b, x, "").p == x.p);
    CHECK(nb_layer_activation(m.b, x, NULL).p == x.p);
    CHECK(nb_program_global_block(m.main)->n_ops == 0);
    CHECK(nb_is_none(nb_layer_activation(m.b, x, "Relu")));
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "known: \"\" for none, relu, sigmoid"));
    model_free(&m);
}

/* ---- conv2d and pooling -------------------------------------------------------------- */

static void test_conv2d_builds(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "img", NB_F32, 4, S(-1, 3, 8, 8));
    nb_value y = nb_layer_conv2d(m.b, x, 4, 3, &(nb_conv2d_opts){.stride = 2, .padding = 1, .act = "relu"});
    REQUIRE_OK(nb_builder_status(m.b));
    nb_var_info yi = nb_value_info(m.b, y);
    CHECK(nb_shape_equal(yi.ndim, yi.shape, 4, S(-1, 4, 4, 4)));
    CHECK_PARAM(&m, "conv2d_0.w_0", S(4, 3, 3, 3));
    CHECK_PARAM(&m, "conv2d_0.b_0", S(4));
    nb_op *conv = op_at(m.main, find_op_from(m.main, "conv2d", 0));
    CHECK(conv && nb_op_in_count(conv, 2) == 1);
    const nb_attr_value *st = conv ? nb_op_attr(conv, "strides") : NULL;
    CHECK(st && st->n == 2 && st->ints[0] == 2 && st->ints[1] == 2);
    CHECK(count_ops_of(m.main, "relu") == 1);
    /* torch's Conv2d: U(+-1/sqrt(fan_in)), fan_in = 3*3*3, for W and b. */
    for (int i = 0; i < 2; i++) {
        nb_op *op = init_op_of(m.startup, i ? "conv2d_0.b_0" : "conv2d_0.w_0");
        CHECK(op && !strcmp(op->def->name, "uniform_random"));
        CHECK_NEAR(op_float(op, "max"), 1 / sqrt(27.0), 1e-12);
    }
    /* Groups: the filter holds C/groups channels and fan_in counts those. */
    nb_value g = nb_layer_data(m.b, "g", NB_F32, 4, S(2, 4, 5, 5));
    nb_value gy = nb_layer_conv2d(m.b, g, 6, 3, &(nb_conv2d_opts){.groups = 2, .name = "grp", .no_bias = true});
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_PARAM(&m, "grp.w_0", S(6, 2, 3, 3));
    CHECK(main_var(&m, "grp.b_0") == NULL);
    CHECK_NEAR(op_float(init_op_of(m.startup, "grp.w_0"), "max"), 1 / sqrt(18.0), 1e-12);
    nb_var_info gi = nb_value_info(m.b, gy);
    CHECK(nb_shape_equal(gi.ndim, gi.shape, 4, S(2, 6, 3, 3)));

    nb_layer_conv2d(m.b, g, 5, 3, &(nb_conv2d_opts){.groups = 2});
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "groups 2 must divide"));
    nb_builder_clear_error(m.b);
    nb_layer_conv2d(m.b, nb_layer_data(m.b, "flat", NB_F32, 2, S(2, 4)), 5, 3, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "[N, C, H, W]"));
    model_free(&m);
}

static void test_conv2d_values(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 4, S(1, 1, 3, 3));
    nb_value y = nb_layer_conv2d(
        m.b, x, 1, 3, &(nb_conv2d_opts){.padding = 1, .w_init = nb_init_ones(), .b_init = nb_init_constant(0.5)});
    REQUIRE_OK(nb_builder_status(m.b));
    REQUIRE_OK(model_startup(&m));
    nb_tensor *xt;
    REQUIRE_OK(nb_tensor_full(&xt, NB_F64, 4, S(1, 1, 3, 3), 1.0));
    nb_tensor *out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    /* Each output sums the window's ones (4 at corners, 6 on edges, 9 inside) plus 0.5. */
    if (out) CHECK_TENSOR(out, S(1, 1, 3, 3), 1e-12, 4.5, 6.5, 4.5, 6.5, 9.5, 6.5, 4.5, 6.5, 4.5);
    release_all(out, xt, NULL);
    model_free(&m);
}

static void test_pool2d(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 4, S(1, 1, 4, 4));
    nb_value mx = nb_layer_pool2d(m.b, x, "max", 2, NULL); /* stride 0 = kernel */
    nb_value av = nb_layer_pool2d(m.b, x, "avg", 2, &(nb_pool2d_opts){.stride = 2});
    nb_value gavg = nb_layer_pool2d(m.b, x, "avg", 0, &(nb_pool2d_opts){.global = true});
    nb_value gmax = nb_layer_pool2d(m.b, x, NULL, 0, &(nb_pool2d_opts){.global = true});
    nb_value ov = nb_layer_pool2d(m.b, x, "max", 3, &(nb_pool2d_opts){.stride = 1});
    REQUIRE_OK(nb_builder_status(m.b));
    nb_value o = nb_layer_data(m.b, "o", NB_F64, 4, S(1, 1, 2, 2));
    nb_value excl = nb_layer_pool2d(m.b, o, "avg", 2, &(nb_pool2d_opts){.stride = 2, .padding = 1});
    nb_value incl = nb_layer_pool2d(m.b, o, "avg", 2, &(nb_pool2d_opts){.padding = 1, .count_include_pad = true});
    REQUIRE_OK(nb_builder_status(m.b));
    nb_tensor *xt = T(NB_F64, S(1, 1, 4, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    nb_tensor *ot;
    REQUIRE_OK(nb_tensor_full(&ot, NB_F64, 4, S(1, 1, 2, 2), 1.0));
    const char *fetch[] = {nb_value_name(mx), nb_value_name(av),   nb_value_name(gavg), nb_value_name(gmax),
                           nb_value_name(ov), nb_value_name(excl), nb_value_name(incl)};
    nb_tensor *r[7] = {0};
    nb_feed feeds[] = {FEED("x", xt), FEED("o", ot)};
    CHECK_OK(nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(2, feeds), NB_NAMES_N(7, fetch), r));
    if (r[0]) {
        CHECK_TENSOR(r[0], S(1, 1, 2, 2), 0, 5, 7, 13, 15);
        CHECK_TENSOR(r[1], S(1, 1, 2, 2), 1e-12, 2.5, 4.5, 10.5, 12.5);
        CHECK_TENSOR(r[2], S(1, 1, 1, 1), 1e-12, 7.5);
        CHECK_TENSOR(r[3], S(1, 1, 1, 1), 0, 15);
        CHECK_TENSOR(r[4], S(1, 1, 2, 2), 0, 10, 11, 14, 15);
        /* Each padded window holds one real 1: exclusive averages it alone. */
        CHECK_TENSOR(r[5], S(1, 1, 2, 2), 1e-12, 1, 1, 1, 1);
        CHECK_TENSOR(r[6], S(1, 1, 2, 2), 1e-12, 0.25, 0.25, 0.25, 0.25);
    }
    for (int i = 0; i < 7; i++) nb_tensor_release(r[i]);
    release_all(xt, ot, NULL);

    nb_layer_pool2d(m.b, x, "min", 2, &(nb_pool2d_opts){.stride = 2});
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "\"min\""));
    nb_builder_clear_error(m.b);
    nb_layer_pool2d(m.b, x, "max", 0, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "kernel"));
    model_free(&m);
}

/* ---- normalisation -------------------------------------------------------------------- */

static void test_batch_norm_builds(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F32, 4, S(-1, 3, 5, 5));
    nb_value y = nb_layer_batch_norm(m.b, x, NULL);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_var_info yi = nb_value_info(m.b, y);
    CHECK(nb_shape_equal(yi.ndim, yi.shape, 4, S(-1, 3, 5, 5)));
    CHECK_PARAM(&m, "batch_norm_0.w_0", S(3));
    CHECK_PARAM(&m, "batch_norm_0.b_0", S(3));
    CHECK_STATE(&m, "batch_norm_0.w_1", S(3));
    CHECK_STATE(&m, "batch_norm_0.w_2", S(3));
    /* Initialised in startup: scale 1, bias 0, mean 0, variance 1. */
    const char *names[] = {"batch_norm_0.w_0", "batch_norm_0.b_0", "batch_norm_0.w_1", "batch_norm_0.w_2"};
    const double values[] = {1, 0, 0, 1};
    CHECK(nb_program_global_block(m.startup)->n_ops == 4);
    for (int i = 0; i < 4; i++) {
        nb_op *op = init_op_of(m.startup, names[i]);
        CHECK(op && !strcmp(op->def->name, "fill_constant") && op_float(op, "value") == values[i]);
        nb_var *sv = nb_block_find_var(nb_program_global_block(m.startup), names[i]);
        CHECK(sv && sv->persistable);
    }
    /* One batch_norm op whose MeanOut/VarianceOut are the running vars. */
    CHECK(nb_program_global_block(m.main)->n_ops == 1);
    nb_op *bn = op_at(m.main, find_op_from(m.main, "batch_norm", 0));
    REQUIRE_OK(bn ? NB_OK : NB_ERR_NOT_FOUND);
    CHECK_STR(nb_op_in_name(bn, 3, 0), "batch_norm_0.w_1");
    CHECK_STR(nb_op_out_name(bn, 1, 0), "batch_norm_0.w_1");
    CHECK_STR(nb_op_in_name(bn, 4, 0), "batch_norm_0.w_2");
    CHECK_STR(nb_op_out_name(bn, 2, 0), "batch_norm_0.w_2");
    CHECK_STR(nb_op_out_name(bn, 0, 0), nb_value_name(y));
    CHECK(!main_var(&m, nb_op_out_name(bn, 3, 0))->persistable);
    CHECK_NEAR(op_float(bn, "momentum"), 0.9, 0);
    CHECK_NEAR(op_float(bn, "epsilon"), 1e-5, 0);
    const nb_attr_value *t = nb_op_attr(bn, "is_test");
    CHECK(t && !t->b);
    CHECK(bn->role == NB_ROLE_FORWARD);

    nb_layer_batch_norm(m.b, nb_layer_data(m.b, "v", NB_F32, 1, S(4)), NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "[N, C, ...]"));
    model_free(&m);
}

static void test_batch_norm_running_stats(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(4, 2));
    nb_value y = nb_layer_batch_norm(m.b, x, &(nb_norm_opts){.name = "bn"});
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_STATE(&m, "bn.w_1", S(2));
    REQUIRE_OK(model_startup(&m));
    /* Columns (1,2,3,4): mean 2.5, variance 1.25 (biased), 5/3 (unbiased);
     * (0,0,2,2): mean 1, variance 1, 4/3. */
    nb_tensor *xt = T(NB_F64, S(4, 2), 1, 0, 2, 0, 3, 2, 4, 2);
    nb_tensor *out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    const double e = 1e-5, s0 = sqrt(1.25 + e), s1 = sqrt(1 + e);
    if (out)
        CHECK_TENSOR(out, S(4, 2), 1e-9, -1.5 / s0, -1 / s1, -0.5 / s0, -1 / s1, 0.5 / s0, 1 / s1, 1.5 / s0, 1 / s1);
    nb_tensor_release(out);
    /* running = 0.9 * running + 0.1 * batch, written into the scope's vars. */
    CHECK_TENSOR(nb_scope_find(m.scope, "bn.w_1"), S(2), 1e-12, 0.25, 0.1);
    CHECK_TENSOR(nb_scope_find(m.scope, "bn.w_2"), S(2), 1e-12, 0.9 + 0.5 / 3, 0.9 + 0.4 / 3);
    out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    nb_tensor_release(out);
    const double m0 = 0.475, m1 = 0.19, v0 = 0.9 * (0.9 + 0.5 / 3) + 0.5 / 3, v1 = 0.9 * (0.9 + 0.4 / 3) + 0.4 / 3;
    CHECK_TENSOR(nb_scope_find(m.scope, "bn.w_1"), S(2), 1e-12, m0, m1);
    CHECK_TENSOR(nb_scope_find(m.scope, "bn.w_2"), S(2), 1e-12, v0, v1);

    /* The evaluation copy normalises with the running statistics and leaves them alone. */
    nb_program *test;
    REQUIRE_OK(nb_program_clone_for_test(&test, m.main));
    out = run_one(&m, test, "x", xt, nb_value_name(y));
    const double r0 = sqrt(v0 + e), r1 = sqrt(v1 + e);
    if (out)
        CHECK_TENSOR(out, S(4, 2), 1e-9, (1 - m0) / r0, (0 - m1) / r1, (2 - m0) / r0, (0 - m1) / r1, (3 - m0) / r0,
                     (2 - m1) / r1, (4 - m0) / r0, (2 - m1) / r1);
    nb_tensor_release(out);
    CHECK_TENSOR(nb_scope_find(m.scope, "bn.w_1"), S(2), 1e-12, m0, m1);
    nb_program_free(test);
    nb_tensor_release(xt);
    model_free(&m);
}

/* Gradients flow to scale and bias, not to the running statistics, and a
 * training step with its backward part updates the statistics once. */
static void test_batch_norm_backward(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(4, 2));
    nb_value y = nb_layer_batch_norm(m.b, x, &(nb_norm_opts){.momentum = 0.5, .act = "sigmoid"});
    nb_value loss = nb_layer_mse(m.b, y, nb_layer_data(m.b, "t", NB_F64, 2, S(4, 2)));
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK(count_ops_of(m.main, "sigmoid") == 1);
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    CHECK(r.n_pairs == 2);
    CHECK(nb_backward_grad_of(&r, "batch_norm_0.w_0") != NULL);
    CHECK(nb_backward_grad_of(&r, "batch_norm_0.b_0") != NULL);
    CHECK(nb_backward_grad_of(&r, "batch_norm_0.w_1") == NULL);
    CHECK(nb_backward_grad_of(&r, "batch_norm_0.w_2") == NULL);
    REQUIRE_OK(model_startup(&m));
    /* Targets that are not symmetric about the batch mean: symmetric ones
     * give exactly zero bias gradients. */
    nb_tensor *xt = T(NB_F64, S(4, 2), 1, 0, 2, 0, 3, 2, 4, 2), *tt_ = T(NB_F64, S(4, 2), 0, 1, 1, 0, 1, 0, 1, 0);
    nb_feed feeds[] = {FEED("x", xt), FEED("t", tt_)};
    const char *fetch[] = {nb_backward_grad_of(&r, "batch_norm_0.w_0"), nb_backward_grad_of(&r, "batch_norm_0.b_0")};
    nb_tensor *g[2] = {0};
    CHECK_OK(nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(2, feeds), NB_NAMES_N(2, fetch), g));
    for (int i = 0; i < 4 && g[0]; i++) CHECK(fabs(nb_tensor_get(g[i / 2], i % 2)) > 1e-4);
    CHECK_TENSOR(nb_scope_find(m.scope, "batch_norm_0.w_1"), S(2), 1e-12, 1.25, 0.5);
    release_all(g[0], g[1], xt, tt_, NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

static void test_layer_norm(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(-1, 3));
    nb_value y = nb_layer_layer_norm(m.b, x, -1, 0);
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_PARAM(&m, "layer_norm_0.w_0", S(3));
    CHECK_PARAM(&m, "layer_norm_0.b_0", S(3));
    nb_op *ln = op_at(m.main, find_op_from(m.main, "layer_norm", 0));
    CHECK(op_int(ln, "begin_norm_axis") == 1);
    CHECK_NEAR(op_float(ln, "epsilon"), 1e-5, 0);
    CHECK_NEAR(op_float(init_op_of(m.startup, "layer_norm_0.w_0"), "value"), 1, 0);
    CHECK_NEAR(op_float(init_op_of(m.startup, "layer_norm_0.b_0"), "value"), 0, 0);
    REQUIRE_OK(model_startup(&m));
    nb_tensor *xt = T(NB_F64, S(2, 3), 1, 2, 3, 2, 4, 9);
    nb_tensor *out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    double want[6];
    const double rows[2][3] = {{1, 2, 3}, {2, 4, 9}};
    for (int r = 0; r < 2; r++) {
        double mu = (rows[r][0] + rows[r][1] + rows[r][2]) / 3, var = 0;
        for (int c = 0; c < 3; c++) var += (rows[r][c] - mu) * (rows[r][c] - mu) / 3;
        for (int c = 0; c < 3; c++) want[r * 3 + c] = (rows[r][c] - mu) / sqrt(var + 1e-5);
    }
    if (out) CHECK_TENSOR(out, S(2, 3), 1e-9, want[0], want[1], want[2], want[3], want[4], want[5]);
    release_all(out, xt, NULL);

    nb_layer_layer_norm(m.b, x, 0, 0);
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "unknown dims"));
    nb_builder_clear_error(m.b);
    nb_layer_layer_norm(m.b, x, 2, 0);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "out of range"));
    model_free(&m);
}

/* ---- dropout and embedding -------------------------------------------------------------- */

static void test_dropout(void)
{
    model m;
    model_init(&m);
    nb_program_set_seed(m.main, 9);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 1, S(2000));
    nb_value y = nb_layer_dropout(m.b, x, 0.5);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_op *d = op_at(m.main, find_op_from(m.main, "dropout", 0));
    CHECK(d && !nb_op_attr(d, "is_test")->b);
    CHECK_STR(op_string(d, "mode"), "upscale_in_train");
    CHECK(op_int(d, "seed") == 0);
    CHECK_NEAR(op_float(d, "dropout_prob"), 0.5, 0);
    nb_tensor *xt;
    REQUIRE_OK(nb_tensor_full(&xt, NB_F64, 1, S(2000), 1.0));
    nb_tensor *out = run_one(&m, NULL, "x", xt, nb_value_name(y));
    if (out) {
        int zeros = 0, twos = 0;
        for (int i = 0; i < 2000; i++) {
            double v = nb_tensor_get(out, i);
            zeros += v == 0;
            twos += v == 2;
        }
        CHECK(zeros + twos == 2000);
        CHECK(zeros > 900 && zeros < 1100);
    }
    nb_tensor_release(out);
    nb_program *test;
    REQUIRE_OK(nb_program_clone_for_test(&test, m.main));
    out = run_one(&m, test, "x", xt, nb_value_name(y));
    if (out) CHECK(nb_tensor_allclose(out, xt, 0, 0));
    release_all(out, xt, NULL);
    nb_program_free(test);

    nb_layer_dropout(m.b, x, 1.0);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "dropout_prob"));
    model_free(&m);
}

static void test_embedding(void)
{
    model m;
    model_init(&m);
    nb_value ids = nb_layer_data(m.b, "ids", NB_I64, 2, S(-1, 2));
    nb_value big = nb_layer_embedding(m.b, ids, 1000, 16, -1, NULL);
    nb_value e = nb_layer_embedding(m.b, ids, 4, 2, 0, &(nb_embedding_opts){.name = "tok", .dtype = NB_F64});
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_PARAM(&m, "embedding_0.w_0", S(1000, 16));
    CHECK(main_var(&m, "embedding_0.w_0")->dtype == NB_F32);
    nb_op *init = init_op_of(m.startup, "embedding_0.w_0");
    CHECK(init && !strcmp(init->def->name, "gaussian_random") && op_float(init, "mean") == 0 &&
          op_float(init, "std") == 1);
    nb_var_info bi = nb_value_info(m.b, big);
    CHECK(nb_shape_equal(bi.ndim, bi.shape, 3, S(-1, 2, 16)));
    CHECK_PARAM(&m, "tok.w_0", S(4, 2));
    CHECK(op_int(op_at(m.main, find_op_from(m.main, "embedding", 0)), "padding_idx") == -1);
    REQUIRE_OK(model_startup(&m));
    nb_tensor *w = nb_scope_find(m.scope, "tok.w_0");
    for (int i = 0; i < 8; i++) nb_tensor_set(w, i, (i / 2) * 10 + i % 2);
    nb_tensor *it = T(NB_I64, S(2, 2), 1, 3, 0, 2);
    nb_tensor *out = run_one(&m, NULL, "ids", it, nb_value_name(e));
    /* Row 0 is the padding row: zeros. */
    if (out) CHECK_TENSOR(out, S(2, 2, 2), 0, 10, 11, 30, 31, 0, 0, 20, 21);
    release_all(out, it, NULL);

    nb_layer_embedding(m.b, ids, 4, 2, 4, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "padding_idx 4"));
    nb_builder_clear_error(m.b);
    nb_layer_embedding(m.b, nb_layer_data(m.b, "f", NB_F32, 1, S(3)), 4, 2, -1, NULL);
    CHECK(nb_builder_status(m.b) == NB_ERR_DTYPE && strstr(nb_builder_error(m.b), "int64 or int32"));
    model_free(&m);
}

/* ---- losses and accuracy ------------------------------------------------------------------ */

static void test_losses(void)
{
    model m;
    model_init(&m);
    nb_value y = nb_layer_data(m.b, "y", NB_F64, 2, S(2, 2)), t = nb_layer_data(m.b, "t", NB_F64, 2, S(2, 2));
    nb_value logits = nb_layer_data(m.b, "logits", NB_F64, 2, S(2, 3));
    nb_value l1 = nb_layer_data(m.b, "l1", NB_I64, 1, S(2)), l2 = nb_layer_data(m.b, "l2", NB_I64, 2, S(2, 1));
    nb_value bx = nb_layer_data(m.b, "bx", NB_F64, 1, S(2)), bl = nb_layer_data(m.b, "bl", NB_F64, 1, S(2));
    nb_value sc = nb_layer_data(m.b, "sc", NB_F64, 2, S(3, 2)), lab = nb_layer_data(m.b, "lab", NB_I64, 1, S(3));
    nb_value mse = nb_layer_mse(m.b, y, t);
    nb_value ce1 = nb_layer_softmax_cross_entropy(m.b, logits, l1);
    nb_value ce2 = nb_layer_softmax_cross_entropy(m.b, logits, l2);
    nb_value bce = nb_layer_bce_with_logits(m.b, bx, bl);
    nb_value acc = nb_layer_accuracy(m.b, sc, lab, 1);
    nb_value acc2 = nb_layer_accuracy(m.b, sc, lab, 2);
    REQUIRE_OK(nb_builder_status(m.b));
    const nb_value outs[] = {mse, ce1, ce2, bce, acc, acc2};
    for (int i = 0; i < 6; i++) CHECK(nb_value_info(m.b, outs[i]).ndim == 0);
    nb_tensor *in[] = {T(NB_F64, S(2, 2), 1, 2, 3, 4),
                       T(NB_F64, S(2, 2), 1, 1, 1, 1),
                       T(NB_F64, S(2, 3), 1, 2, 3, 1, 1, 1),
                       T(NB_I64, S(2), 2, 0),
                       T(NB_I64, S(2, 1), 2, 0),
                       T(NB_F64, S(2), 0, 2),
                       T(NB_F64, S(2), 1, 0),
                       T(NB_F64, S(3, 2), 0.1, 0.9, 0.8, 0.2, 0.3, 0.7),
                       T(NB_I64, S(3), 1, 1, 1)};
    const char *feed_names[] = {"y", "t", "logits", "l1", "l2", "bx", "bl", "sc", "lab"};
    nb_feed feeds[9];
    for (int i = 0; i < 9; i++) feeds[i] = FEED(feed_names[i], in[i]);
    const char *fetch[6];
    for (int i = 0; i < 6; i++) fetch[i] = nb_value_name(outs[i]);
    nb_tensor *r[6] = {0};
    CHECK_OK(nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(9, feeds), NB_NAMES_N(6, fetch), r));
    if (r[0]) {
        CHECK_SCALAR(r[0], 3.5, 1e-12);
        CHECK_SCALAR(r[1], 0.753109126556245, 1e-12);
        CHECK_SCALAR(r[2], 0.753109126556245, 1e-12);
        CHECK_SCALAR(r[3], 1.410037595801459, 1e-12);
        CHECK_SCALAR(r[4], 2.0 / 3.0, 1e-6);
        CHECK_SCALAR(r[5], 1.0, 1e-6);
    }
    for (int i = 0; i < 6; i++) nb_tensor_release(r[i]);
    for (int i = 0; i < 9; i++) nb_tensor_release(in[i]);

    nb_layer_softmax_cross_entropy(m.b, nb_layer_data(m.b, "l3", NB_F64, 3, S(2, 3, 4)), l1);
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "[B, C]"));
    nb_builder_clear_error(m.b);
    nb_layer_mse(m.b, y, NB_NONE);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "mse"));
    model_free(&m);
}

/* ---- a small CNN and an MLP made of layers ------------------------------------------------- */

/* conv -> batch norm (relu) -> pool -> dropout -> fc: builds, runs, and
 * nb_append_backward finds every trainable parameter. */
static void test_cnn_builds_and_differentiates(void)
{
    model m;
    model_init(&m);
    nb_program_set_seed(m.startup, 3);
    nb_value x = nb_layer_data(m.b, "img", NB_F64, 4, S(-1, 1, 6, 6));
    nb_value label = nb_layer_data(m.b, "label", NB_I64, 2, S(-1, 1));
    nb_value h = nb_layer_conv2d(m.b, x, 4, 3, &(nb_conv2d_opts){.padding = 1});
    h = nb_layer_batch_norm(m.b, h, &(nb_norm_opts){.act = "relu"});
    h = nb_layer_pool2d(m.b, h, "max", 2, &(nb_pool2d_opts){.stride = 2});
    h = nb_layer_dropout(m.b, h, 0.25);
    nb_value logits = nb_layer_fc(m.b, h, 3, NULL, NULL);
    nb_value loss = nb_layer_softmax_cross_entropy(m.b, logits, label);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_var_info li = nb_value_info(m.b, logits);
    CHECK(nb_shape_equal(li.ndim, li.shape, 2, S(-1, 3)));
    CHECK_PARAM(&m, "fc_0.w_0", S(36, 3)); /* 4 channels * 3 * 3 */
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    CHECK(r.n_pairs == 6); /* conv w, b; bn scale, bias; fc w, b */
    REQUIRE_OK(model_startup(&m));
    nb_tensor *xt, *lt = T(NB_I64, S(2, 1), 0, 2);
    REQUIRE_OK(nb_tensor_full(&xt, NB_F64, 4, S(2, 1, 6, 6), 0.5));
    for (int i = 0; i < 72; i += 5) nb_tensor_set(xt, i, -1.0 + i / 36.0);
    nb_feed feeds[] = {FEED("img", xt), FEED("label", lt)};
    const char *fetch[7] = {nb_value_name(loss)};
    for (int i = 0; i < r.n_pairs && i < 6; i++) fetch[1 + i] = r.pairs[i].grad;
    nb_tensor *out[7] = {0};
    CHECK_OK(nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(2, feeds),
                             NB_NAMES_N(1 + (r.n_pairs < 6 ? r.n_pairs : 6), fetch), out));
    if (out[0]) CHECK(isfinite(nb_tensor_get(out[0], 0)) && nb_tensor_get(out[0], 0) > 0);
    for (int i = 0; i < 7; i++) nb_tensor_release(out[i]);
    release_all(xt, lt, NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* Two classes split by the line x0 + 0.5 x1 = 0. */
static void toy_data(nb_tensor **x, nb_tensor **y, int n)
{
    nb_tensor_new(x, NB_F64, 2, S(n, 2));
    nb_tensor_new(y, NB_I64, 2, S(n, 1));
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        double p[2];
        for (int k = 0; k < 2; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            p[k] = (double)(s >> 11) / 9007199254740992.0 * 2 - 1;
        }
        nb_tensor_set(*x, 2 * i, p[0]);
        nb_tensor_set(*x, 2 * i + 1, p[1]);
        nb_tensor_set(*y, i, p[0] + 0.5 * p[1] > 0);
    }
}

static void test_mlp_trains(void)
{
    model m;
    model_init(&m);
    nb_program_set_seed(m.startup, 2024);
    nb_value x = nb_layer_data(m.b, "x", NB_F64, 2, S(-1, 2));
    nb_value label = nb_layer_data(m.b, "label", NB_I64, 2, S(-1, 1));
    nb_value h = nb_layer_fc(m.b, x, 16, "relu", NULL);
    nb_value logits = nb_layer_fc(m.b, h, 2, NULL, NULL);
    nb_value loss = nb_layer_softmax_cross_entropy(m.b, logits, label);
    nb_value acc = nb_layer_accuracy(m.b, logits, label, 1);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    CHECK(r.n_pairs == 4);
    REQUIRE_OK(model_startup(&m));

    nb_tensor *xt, *yt;
    toy_data(&xt, &yt, 64);
    nb_feed feeds[] = {FEED("x", xt), FEED("label", yt)};
    const char *fetch[6] = {nb_value_name(loss), nb_value_name(acc)};
    for (int i = 0; i < 4; i++) fetch[2 + i] = r.pairs[i].grad;
    double first = NAN, last = NAN, last_acc = 0;
    /* Plain SGD, applied in C to the parameters in the scope. */
    for (int step = 0; step < 150; step++) {
        nb_tensor *out[6] = {0};
        nb_status st = nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(2, feeds), NB_NAMES_N(6, fetch), out);
        CHECK_OK(st);
        if (st) break;
        last = nb_tensor_get(out[0], 0);
        last_acc = nb_tensor_get(out[1], 0);
        if (step == 0) first = last;
        for (int i = 0; i < 4; i++) {
            nb_tensor *p = nb_scope_find(m.scope, r.pairs[i].param);
            for (int64_t k = 0; k < nb_tensor_numel(p); k++)
                nb_tensor_set(p, k, nb_tensor_get(p, k) - 0.5 * nb_tensor_get(out[2 + i], k));
        }
        for (int i = 0; i < 6; i++) nb_tensor_release(out[i]);
    }
    CHECK(first > 0.5); /* about log 2 at the start */
    CHECK(last < 0.25 * first);
    CHECK(last_acc >= 0.95);
    release_all(xt, yt, NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

int main(void)
{
    RUN(test_fc_builds);
    RUN(test_fc_values);
    RUN(test_fc_options);
    RUN(test_fc_errors);
    RUN(test_activations);
    RUN(test_conv2d_builds);
    RUN(test_conv2d_values);
    RUN(test_pool2d);
    RUN(test_batch_norm_builds);
    RUN(test_batch_norm_running_stats);
    RUN(test_batch_norm_backward);
    RUN(test_layer_norm);
    RUN(test_dropout);
    RUN(test_embedding);
    RUN(test_losses);
    RUN(test_cnn_builds_and_differentiates);
    RUN(test_mlp_trains);
    return test_report();
}
