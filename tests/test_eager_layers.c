/* The layers in eager mode, against the same model built as a program: the
 * same parameter and state names, shapes and dtypes; with the static values
 * copied in, the same outputs in training mode (batch statistics) and in
 * test mode (running statistics, no dropout), and the same running
 * statistics afterwards; parameters found again on the next step's call;
 * dropout drawing from the builder's generator. */
#include "eager_twin.h"

static nb_value convnet(nb_builder *b, nb_value x, double p)
{
    nb_conv2d_opts co = {.padding = 1};
    nb_value h = nb_layer_conv2d(b, x, 3, 3, &co);
    h = nb_layer_batch_norm(b, h, &(nb_norm_opts){.act = "relu"});
    h = nb_layer_pool2d(b, h, "max", 2, NULL);
    h = nb_layer_fc(b, h, 5, "tanh", NULL);
    h = nb_layer_dropout(b, h, p);
    return nb_layer_fc(b, h, 3, NULL, NULL);
}

static nb_value convnet_nodrop(nb_builder *b, nb_value x, nb_value label)
{
    (void)label;
    return convnet(b, x, 0.0);
}

static nb_value convnet_drop(nb_builder *b, nb_value x, nb_value label)
{
    (void)label;
    return convnet(b, x, 0.5);
}

static nb_tensor *images(void) { return twin_input(NB_F64, 4, S(4, 2, 6, 6), 0.7); }

/* The eager output of the model on the twin's input, as a new reference. */
static nb_tensor *eager_out(twin *t, twin_model_fn fn)
{
    nb_value y = fn(t->eager, nb_eager_value(t->eager, t->x), NB_NONE);
    CHECK_OK(nb_builder_status(t->eager));
    return nb_is_none(y) ? NULL : nb_tensor_retain(nb_eager_tensor(y));
}

static nb_tensor *static_out(twin *t, nb_program *p)
{
    nb_tensor *y = NULL;
    const char *name = t->out;
    nb_feed feed = {"x", t->x};
    CHECK_OK(nb_executor_run(t->ex, p ? p : t->main, t->scope, NB_FEEDS_N(1, &feed), NB_NAMES_N(1, &name), &y));
    return y;
}

/* Every persistable var of the program is an eager tensor of that name,
 * dtype and shape, a parameter exactly when it requires grad, and nothing
 * else is in the builder. */
static void test_same_names_and_shapes(void)
{
    twin t;
    if (twin_init(&t, convnet_drop, images(), NULL, NULL, NULL)) {
        const nb_block *blk = t.main->blocks[0];
        int n = 0;
        for (int i = 0; i < blk->n_vars; i++) {
            const nb_var *v = blk->vars[i];
            if (!v->persistable) continue;
            n++;
            nb_tensor *e = nb_eager_find_param(t.eager, v->name);
            CHECK(e != NULL);
            if (!e) {
                fprintf(stderr, "  no eager tensor for %s\n", v->name);
                continue;
            }
            CHECK(e->dtype == v->dtype && nb_shape_equal(e->ndim, e->shape, v->ndim, v->shape));
            CHECK(nb_tensor_requires_grad(e) == v->is_parameter);
        }
        CHECK(n == 10 && nb_eager_param_count(t.eager) == n);
        CHECK(nb_eager_find_param(t.eager, "conv2d_0.w_0") && nb_eager_find_param(t.eager, "batch_norm_0.w_2") &&
              nb_eager_find_param(t.eager, "fc_1.b_0"));
    }
    twin_free(&t);
}

/* Training mode: batch statistics, the running ones updated alike. */
static void test_forward_training(void)
{
    twin t;
    if (twin_init(&t, convnet_nodrop, images(), NULL, NULL, NULL)) {
        nb_tensor *ys = static_out(&t, NULL), *ye = eager_out(&t, convnet_nodrop);
        CHECK(ys && ye && max_rel_diff(ye, ys) < 1e-12);
        /* The running statistics moved, and alike. */
        nb_tensor *mean = nb_eager_find_param(t.eager, "batch_norm_0.w_1");
        nb_tensor *var = nb_eager_find_param(t.eager, "batch_norm_0.w_2");
        CHECK(mean && var && fabs(nb_tensor_get(mean, 0)) > 1e-4 && fabs(nb_tensor_get(var, 0) - 1) > 1e-4);
        CHECK(twin_param_diff(&t) < 1e-12);
        /* In grad mode the output has history back to leaf parameters. */
        CHECK(ye && nb_tensor_grad_fn(ye) != NULL);
        CHECK(nb_tensor_requires_grad(nb_eager_find_param(t.eager, "conv2d_0.w_0")) &&
              nb_tensor_is_leaf(nb_eager_find_param(t.eager, "conv2d_0.w_0")));
        CHECK(!nb_tensor_requires_grad(mean) && !nb_tensor_grad_fn(mean));
        nb_tensor_release(ys);
        nb_tensor_release(ye);
    }
    twin_free(&t);
}

/* Test mode against nb_program_clone_for_test, after a training step has
 * moved the running statistics: both normalise with them and drop no
 * unit, and the eager call leaves the statistics as they were. */
static void test_forward_test_mode(void)
{
    twin t;
    nb_program *test_p = NULL;
    if (twin_init(&t, convnet_drop, images(), NULL, NULL, NULL)) {
        nb_tensor *a = static_out(&t, NULL), *b = eager_out(&t, convnet_drop);
        nb_tensor_release(a);
        nb_tensor_release(b);
        nb_eager_release_values(t.eager);
        CHECK(twin_param_diff(&t) < 1e-12);
        nb_tensor *mean = nb_eager_find_param(t.eager, "batch_norm_0.w_1"), *mean0 = NULL;
        REQUIRE_OK(nb_tensor_clone(&mean0, mean));
        REQUIRE_OK(nb_program_clone_for_test(&test_p, t.main));
        nb_tensor *ys = static_out(&t, test_p);
        nb_eager_set_test_mode(t.eager, true);
        nb_grad_mode_push(false);
        nb_tensor *ye = eager_out(&t, convnet_drop);
        nb_eager_release_values(t.eager);
        nb_tensor *ye2 = eager_out(&t, convnet_drop);
        nb_grad_mode_pop();
        CHECK(ys && ye && max_rel_diff(ye, ys) < 1e-12);
        CHECK(ye2 && max_rel_diff(ye2, ye) == 0);
        CHECK(nb_tensor_allclose(mean, mean0, 0, 0));
        CHECK(ye && !nb_tensor_grad_fn(ye)); /* no-grad block: no history */
        /* Back in training mode the dropout draws again. */
        nb_eager_set_test_mode(t.eager, false);
        nb_tensor *yt = eager_out(&t, convnet_drop);
        CHECK(yt && max_rel_diff(yt, ye) > 1e-6);
        nb_tensor_release(yt);
        nb_tensor_release(ys);
        nb_tensor_release(ye);
        nb_tensor_release(ye2);
        nb_tensor_release(mean0);
    }
    nb_program_free(test_p);
    twin_free(&t);
}

/* A model called again after nb_eager_release_values finds its parameters;
 * called again without it, its layers take the next names and make new ones. */
static void test_reuse(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = images();
    convnet_drop(b, nb_eager_value(b, x), NB_NONE);
    REQUIRE_OK(nb_builder_status(b));
    const int n = nb_eager_param_count(b);
    nb_tensor *w = nb_eager_find_param(b, "fc_0.w_0");
    nb_eager_release_values(b);
    nb_value y = convnet_drop(b, nb_eager_value(b, x), NB_NONE);
    CHECK_OK(nb_builder_status(b));
    CHECK(!nb_is_none(y) && nb_eager_param_count(b) == n && nb_eager_find_param(b, "fc_0.w_0") == w);
    CHECK(!nb_eager_find_param(b, "fc_2.w_0"));
    convnet_drop(b, nb_eager_value(b, x), NB_NONE);
    CHECK(nb_eager_param_count(b) == 2 * n && nb_eager_find_param(b, "fc_2.w_0"));
    nb_tensor_release(x);
    nb_builder_free(b);
}

/* Layers given a name in their options find their parameters by it. */
static void test_named_layers(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = twin_input(NB_F32, 2, S(2, 3), 0);
    for (int step = 0; step < 3; step++) {
        nb_value h = nb_layer_fc(b, nb_eager_value(b, x), 4, NULL, &(nb_fc_opts){.name = "enc"});
        nb_layer_fc(b, h, 4, NULL, &(nb_fc_opts){.name = "dec", .no_bias = true});
        CHECK_OK(nb_builder_status(b));
        nb_eager_release_values(b);
    }
    CHECK(nb_eager_param_count(b) == 3 && nb_eager_find_param(b, "enc.w_0") && nb_eager_find_param(b, "enc.b_0") &&
          nb_eager_find_param(b, "dec.w_0"));
    nb_tensor_release(x);
    nb_builder_free(b);
}

/* Dropout in eager mode: the builder's generator decides the mask (one
 * seed, one mask; the next call another); kept units are scaled by
 * 1/(1-p); test mode passes x through. */
static nb_tensor *dropout_once(nb_builder *b, nb_tensor *x, double p)
{
    nb_value y = nb_layer_dropout(b, nb_eager_value(b, x), p);
    CHECK_OK(nb_builder_status(b));
    return nb_is_none(y) ? NULL : nb_tensor_retain(nb_eager_tensor(y));
}

static void test_dropout(void)
{
    nb_builder *b1, *b2;
    REQUIRE_OK(nb_builder_new_eager(&b1));
    REQUIRE_OK(nb_builder_new_eager(&b2));
    nb_eager_set_seed(b1, 5);
    nb_eager_set_seed(b2, 5);
    nb_tensor *x = NULL;
    REQUIRE_OK(nb_tensor_full(&x, NB_F32, 1, S(4000), 1.0));
    nb_tensor *y1 = dropout_once(b1, x, 0.25), *y2 = dropout_once(b2, x, 0.25), *y3 = dropout_once(b1, x, 0.25);
    REQUIRE(y1 && y2 && y3);
    int zeros = 0, bad = 0;
    for (int64_t i = 0; i < 4000; i++) {
        double v = nb_tensor_get(y1, i);
        zeros += v == 0;
        bad += v != 0 && fabs(v - 1 / 0.75) > 1e-6;
    }
    CHECK(zeros > 850 && zeros < 1150 && bad == 0);
    CHECK(nb_tensor_allclose(y1, y2, 0, 0));
    CHECK(!nb_tensor_allclose(y1, y3, 0, 0));
    nb_eager_set_test_mode(b1, true);
    nb_tensor *yt = dropout_once(b1, x, 0.25);
    CHECK(yt && nb_tensor_allclose(yt, x, 0, 0));
    nb_tensor_release(yt);
    nb_tensor_release(y1);
    nb_tensor_release(y2);
    nb_tensor_release(y3);
    nb_tensor_release(x);
    nb_builder_free(b1);
    nb_builder_free(b2);
}

/* Embedding and layer norm too: same parameters, same output. */
static nb_value embed_model(nb_builder *b, nb_value ids, nb_value label)
{
    (void)label;
    nb_value e = nb_layer_embedding(b, ids, 10, 6, 0, NULL);
    e = nb_layer_layer_norm(b, e, -1, 0);
    return nb_layer_fc(b, e, 2, "gelu", &(nb_fc_opts){.in_num_col_dims = 2});
}

static void test_embedding_layer_norm(void)
{
    nb_tensor *ids = T(NB_I64, S(2, 3), 1, 0, 9, 4, 4, 7);
    twin t;
    if (twin_init(&t, embed_model, ids, NULL, NULL, NULL)) {
        CHECK(nb_eager_param_count(t.eager) == 5);
        nb_tensor *ys = static_out(&t, NULL), *ye = eager_out(&t, embed_model);
        CHECK(ys && ye && ye->ndim == 3 && max_rel_diff(ye, ys) < 1e-6);
        nb_tensor_release(ys);
        nb_tensor_release(ye);
    }
    twin_free(&t);
}

/* A layer name reused with another shape is an error naming the parameter. */
static void test_eager_errors(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = twin_input(NB_F32, 2, S(2, 3), 0);
    nb_layer_fc(b, nb_eager_value(b, x), 4, NULL, &(nb_fc_opts){.name = "a"});
    CHECK_OK(nb_builder_status(b));
    nb_eager_release_values(b);
    /* The same name with another input width: the stored weight does not fit. */
    nb_tensor *x5 = twin_input(NB_F32, 2, S(2, 5), 0);
    CHECK(nb_is_none(nb_layer_fc(b, nb_eager_value(b, x5), 4, NULL, &(nb_fc_opts){.name = "a"})));
    CHECK(nb_builder_status(b) == NB_ERR_ARG && strstr(nb_builder_error(b), "a.w_0"));
    nb_tensor_release(x);
    nb_tensor_release(x5);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_same_names_and_shapes);
    RUN(test_forward_training);
    RUN(test_forward_test_mode);
    RUN(test_reuse);
    RUN(test_named_layers);
    RUN(test_dropout);
    RUN(test_embedding_layer_norm);
    RUN(test_eager_errors);
    return test_report();
}
