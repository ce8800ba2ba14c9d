/* Training in eager mode against the static program of the same model code:
 * nb_backward's gradients equal nb_append_backward's to rounding (fc, conv,
 * batch_norm, pooling, mse and softmax cross-entropy); forward, backward,
 * nb_eager_optimizer_step, zero_grad and release, step after step, keep the
 * parameters (and batch_norm's running statistics) equal to those a
 * program built by nb_minimize holds, for SGD and Adam; and a short eager
 * training run learns. */
#include "eager_twin.h"

static nb_value mlp(nb_builder *b, nb_value x, nb_value label)
{
    nb_value h = nb_layer_fc(b, x, 6, "tanh", NULL);
    h = nb_layer_fc(b, h, 4, "relu", NULL);
    return nb_layer_mse(b, nb_layer_fc(b, h, 1, NULL, NULL), label);
}

static nb_value convnet(nb_builder *b, nb_value x, nb_value label)
{
    nb_conv2d_opts co = {.padding = 1};
    nb_value h = nb_layer_conv2d(b, x, 3, 3, &co);
    h = nb_layer_batch_norm(b, h, &(nb_norm_opts){.act = "relu"});
    h = nb_layer_pool2d(b, h, "max", 2, NULL);
    h = nb_layer_fc(b, h, 5, "tanh", NULL);
    h = nb_layer_dropout(b, h, 0.0);
    return nb_layer_softmax_cross_entropy(b, nb_layer_fc(b, h, 3, NULL, NULL), label);
}

static nb_tensor *mlp_x(nb_dtype dt) { return twin_input(dt, 2, S(8, 5), 0.3); }
static nb_tensor *mlp_y(nb_dtype dt) { return twin_input(dt, 2, S(8, 1), 1.1); }
static nb_tensor *conv_x(nb_dtype dt) { return twin_input(dt, 4, S(4, 2, 6, 6), 0.7); }
static nb_tensor *conv_y(void) { return T(NB_I64, S(4, 1), 0, 2, 1, 2); }

/* The eager loss of the twin's inputs, then its backward. */
static nb_tensor *eager_loss_backward(twin *t, twin_model_fn fn)
{
    nb_value loss = fn(t->eager, nb_eager_value(t->eager, t->x), nb_eager_value(t->eager, t->label));
    CHECK_OK(nb_builder_status(t->eager));
    if (nb_is_none(loss)) return NULL;
    nb_tensor *l = nb_eager_tensor(loss);
    CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    return nb_tensor_retain(l);
}

/* The gradient of every parameter, both ways, and the loss. */
static void check_gradients(const char *what, twin_model_fn fn, nb_tensor *x, nb_tensor *label, double tol)
{
    twin t;
    nb_backward_result r;
    if (twin_init(&t, fn, x, label, NULL, &r)) {
        const int n = r.n_pairs;
        const char **names = calloc((size_t)n + 1, sizeof *names);
        nb_tensor **gs = calloc((size_t)n + 1, sizeof *gs);
        names[0] = t.out;
        for (int i = 0; i < n; i++) names[i + 1] = nb_backward_grad_of(&r, r.pairs[i].param);
        CHECK_OK(twin_run(&t, n + 1, names, gs));
        nb_tensor *le = eager_loss_backward(&t, fn);
        CHECK(le && gs[0] && max_rel_diff(le, gs[0]) <= tol);
        int params = 0;
        for (int i = 0; i < nb_eager_param_count(t.eager); i++)
            params += nb_tensor_requires_grad(nb_eager_param_at(t.eager, i));
        CHECK(params == n && n > 0);
        for (int i = 0; i < n; i++) {
            nb_tensor *p = nb_eager_find_param(t.eager, r.pairs[i].param);
            nb_tensor *ge = p ? nb_tensor_grad(p) : NULL;
            double d = max_rel_diff(ge, gs[i + 1]);
            if (!(d <= tol))
                fprintf(stderr, "  %s: gradient of %s differs by %g (tolerance %g)\n", what, r.pairs[i].param, d, tol);
            CHECK(d <= tol);
            /* Not trivially zero (but for conv's bias, which batch_norm's
             * mean subtraction makes 0 to rounding). */
            double norm = 0;
            for (int64_t k = 0; ge && k < nb_tensor_numel(ge); k++) norm += fabs(nb_tensor_get(ge, k));
            if (strcmp(r.pairs[i].param, "conv2d_0.b_0")) CHECK(norm > 1e-6);
        }
        for (int i = 0; i <= n; i++) nb_tensor_release(gs[i]);
        nb_tensor_release(le);
        free(gs);
        free(names);
        nb_backward_result_free(&r);
    }
    twin_free(&t);
}

static void test_gradients_match_static(void)
{
    check_gradients("mlp f64", mlp, mlp_x(NB_F64), mlp_y(NB_F64), 1e-12);
    check_gradients("mlp f32", mlp, mlp_x(NB_F32), mlp_y(NB_F32), 1e-6);
    check_gradients("convnet f64", convnet, conv_x(NB_F64), conv_y(), 1e-12);
    check_gradients("convnet f32", convnet, conv_x(NB_F32), conv_y(), 1e-5);
}

/* steps of training both ways: the parameters and state agree after each. */
static void check_training(const char *what, twin_model_fn fn, nb_tensor *x, nb_tensor *label, nb_optimizer opt,
                           int steps, double tol)
{
    twin t;
    nb_backward_result r;
    nb_eager_optimizer *o = NULL;
    if (twin_init(&t, fn, x, label, &opt, &r) && !nb_eager_optimizer_new(&o, &opt)) {
        double first = 0, last = 0;
        for (int step = 1; step <= steps; step++) {
            nb_tensor *ls = NULL;
            CHECK_OK(twin_run(&t, 1, (const char *[]){t.out}, &ls));
            nb_tensor *le = eager_loss_backward(&t, fn);
            CHECK(le && ls && max_rel_diff(le, ls) <= tol);
            CHECK_OK(nb_eager_optimizer_step(o, t.eager));
            nb_eager_zero_grad(t.eager);
            nb_eager_release_values(t.eager);
            double d = twin_param_diff(&t);
            if (!(d <= tol))
                fprintf(stderr, "  %s, step %d: parameters differ by %g (tolerance %g)\n", what, step, d, tol);
            CHECK(d <= tol);
            if (le) last = nb_tensor_get(le, 0);
            if (step == 1) first = last;
            nb_tensor_release(ls);
            nb_tensor_release(le);
        }
        CHECK(nb_eager_optimizer_steps(o) == steps);
        CHECK(last < first); /* it learns */
        nb_backward_result_free(&r);
    }
    nb_eager_optimizer_free(o);
    twin_free(&t);
}

static void test_training_matches_minimize(void)
{
    check_training("sgd mlp f64", mlp, mlp_x(NB_F64), mlp_y(NB_F64), nb_sgd(0.1), 3, 1e-12);
    check_training("sgd mlp f32", mlp, mlp_x(NB_F32), mlp_y(NB_F32), nb_sgd(0.1), 3, 1e-6);
    check_training("adam mlp f64", mlp, mlp_x(NB_F64), mlp_y(NB_F64), nb_adam(0.01), 3, 1e-12);
    check_training("adam mlp f32", mlp, mlp_x(NB_F32), mlp_y(NB_F32), nb_adam(0.01), 3, 1e-5);
    nb_optimizer o = nb_adam(0.01);
    o.schedule = (nb_lr_schedule){.kind = "cosine", .total_steps = 3};
    o.clip = NB_CLIP_GLOBAL_NORM;
    o.clip_value = 0.5;
    check_training("adam convnet f64", convnet, conv_x(NB_F64), conv_y(), o, 3, 1e-12);
    check_training("sgd convnet f64", convnet, conv_x(NB_F64), conv_y(), nb_sgd(0.05), 3, 1e-12);
}

/* Eager training on its own: 200 Adam steps fit a small linear regression. */
static void test_eager_learns(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_eager_set_seed(b, 3);
    /* y = x . w_true + 0.3: a function the model can fit. */
    static const double w_true[5] = {1, -2, 0.5, 0, 1};
    nb_tensor *x = mlp_x(NB_F32), *y = NULL;
    REQUIRE_OK(nb_tensor_new(&y, NB_F32, 2, S(8, 1)));
    for (int i = 0; i < 8; i++) {
        double v = 0.3;
        for (int j = 0; j < 5; j++) v += w_true[j] * nb_tensor_get(x, i * 5 + j);
        nb_tensor_set(y, i, v);
    }
    nb_eager_optimizer *o;
    nb_optimizer opt = nb_adam(0.02);
    REQUIRE_OK(nb_eager_optimizer_new(&o, &opt));
    double first = -1, last = -1;
    for (int step = 0; step < 200; step++) {
        nb_value loss = mlp(b, nb_eager_value(b, x), nb_eager_value(b, y));
        REQUIRE_OK(nb_builder_status(b));
        nb_tensor *l = nb_eager_tensor(loss);
        CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
        CHECK_OK(nb_eager_optimizer_step(o, b));
        nb_eager_zero_grad(b);
        last = nb_tensor_get(l, 0);
        if (step == 0) first = last;
        nb_eager_release_values(b);
    }
    CHECK(nb_eager_param_count(b) == 6);
    if (!(last < 0.05 * first)) fprintf(stderr, "  loss %g -> %g\n", first, last);
    CHECK(last < 0.05 * first);
    nb_eager_optimizer_free(o);
    nb_tensor_release(x);
    nb_tensor_release(y);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_gradients_match_static);
    RUN(test_training_matches_minimize);
    RUN(test_eager_learns);
    return test_report();
}
