/* The eager optimiser against nb_minimize, with the engine left out: each
 * step, the static program runs (and updates its parameters), and the eager
 * parameters get the raw gradients that run fetched as their .grad; after
 * nb_eager_optimizer_step both must hold the same values, for every kind,
 * L2, every clipping and a schedule. Also: zero_grad, parameters without a
 * gradient and state left alone, version bumps, and errors that change
 * nothing. */
#include <string.h>
#include "eager_twin.h"
#include "eager/autograd.h"

#define STEPS 3

static nb_value mlp(nb_builder *b, nb_value x, nb_value label)
{
    nb_value h = nb_layer_fc(b, x, 4, "tanh", NULL);
    return nb_layer_mse(b, nb_layer_fc(b, h, 1, NULL, NULL), label);
}

/* Gives p this .grad (a copy), as backward would leave it. */
static void set_grad(nb_tensor *p, const nb_tensor *g)
{
    nb_tensor *c = NULL;
    nb_tensor_zero_grad(p);
    CHECK_OK(nb_tensor_clone(&c, g));
    nb_autograd *a = nb_autograd_of(p, true);
    if (a) a->grad = c;
    else nb_tensor_release(c);
}

/* STEPS steps both ways; the parameters must agree within tol after each. */
static void check_kind(const char *what, nb_optimizer opt, nb_dtype dt, double tol)
{
    twin t;
    nb_backward_result r;
    if (!twin_init(&t, mlp, twin_input(dt, 2, S(8, 5), 0.3), twin_input(dt, 2, S(8, 1), 1.1), &opt, &r)) {
        twin_free(&t);
        return;
    }
    CHECK(r.n_pairs == 4 && nb_eager_param_count(t.eager) == 4);
    nb_eager_optimizer *o;
    REQUIRE_OK(nb_eager_optimizer_new(&o, &opt));
    const char *names[4];
    const double w_start = nb_tensor_get(nb_scope_find(t.scope, "fc_0.w_0"), 0);
    for (int i = 0; i < r.n_pairs; i++) names[i] = nb_backward_grad_of(&r, r.pairs[i].param);
    for (int step = 1; step <= STEPS; step++) {
        nb_tensor *g[4] = {0};
        CHECK_OK(twin_run(&t, r.n_pairs, names, g));
        for (int i = 0; i < r.n_pairs && g[i]; i++) set_grad(nb_eager_find_param(t.eager, r.pairs[i].param), g[i]);
        CHECK_OK(nb_eager_optimizer_step(o, t.eager));
        double d = twin_param_diff(&t);
        if (!(d <= tol)) fprintf(stderr, "  %s, step %d: parameters differ by %g (tolerance %g)\n", what, step, d, tol);
        CHECK(d <= tol);
        CHECK(nb_eager_optimizer_steps(o) == step);
        double lr;
        CHECK_OK(nb_lr_at(&opt.schedule, opt.lr, step, &lr));
        CHECK(nb_eager_optimizer_lr(o) == lr);
        for (int i = 0; i < 4; i++) nb_tensor_release(g[i]);
    }
    /* The parameters moved (else agreement says little). */
    CHECK(fabs(nb_tensor_get(nb_eager_find_param(t.eager, "fc_0.w_0"), 0) - w_start) > 1e-4);
    nb_eager_optimizer_free(o);
    nb_backward_result_free(&r);
    twin_free(&t);
}

static void test_kinds_match_minimize(void)
{
    nb_optimizer o;
    check_kind("sgd f32", nb_sgd(0.1), NB_F32, 1e-6);
    check_kind("sgd f64", nb_sgd(0.1), NB_F64, 1e-14);
    check_kind("momentum", nb_momentum(0.05, 0.9, false), NB_F64, 1e-14);
    check_kind("nesterov", nb_momentum(0.05, 0.9, true), NB_F32, 1e-6);
    check_kind("adam f32", nb_adam(0.01), NB_F32, 1e-6);
    check_kind("adam f64", nb_adam(0.01), NB_F64, 1e-14);
    check_kind("adamw", nb_adamw(0.01, 0.1), NB_F64, 1e-14);
    check_kind("rmsprop", nb_rmsprop(0.01), NB_F64, 1e-14);
    o = nb_rmsprop(0.01);
    o.momentum = 0.5;
    o.centered = true;
    check_kind("rmsprop centered momentum", o, NB_F64, 1e-14);
    o = nb_rmsprop(0.01);
    o.momentum = 0.5;
    check_kind("rmsprop momentum", o, NB_F32, 1e-6);
    o = nb_adagrad(0.1);
    o.initial_accumulator_value = 0.25;
    check_kind("adagrad", o, NB_F64, 1e-14);
}

static void test_l2_clip_schedule_match(void)
{
    nb_optimizer o = nb_adam(0.02);
    o.l2 = 0.1;
    o.clip = NB_CLIP_VALUE;
    o.clip_value = 0.05;
    check_kind("adam l2 clip-value", o, NB_F64, 1e-14);
    o = nb_sgd(0.3);
    o.clip = NB_CLIP_NORM;
    o.clip_value = 0.1;
    check_kind("sgd clip-norm", o, NB_F32, 1e-6);
    o = nb_momentum(0.3, 0.9, false);
    o.l2 = 0.01;
    o.clip = NB_CLIP_GLOBAL_NORM;
    o.clip_value = 0.2;
    o.schedule = (nb_lr_schedule){.kind = "cosine", .total_steps = 4, .warmup_steps = 1, .min_lr = 0.01};
    check_kind("momentum l2 global-norm cosine", o, NB_F64, 1e-14);
    o = nb_adam(0.05);
    o.clip = NB_CLIP_GLOBAL_NORM;
    o.clip_value = 0.1;
    o.schedule = (nb_lr_schedule){.kind = "step", .step_size = 2, .gamma = 0.5};
    check_kind("adam global-norm step f32", o, NB_F32, 1e-6);
}

/* Only parameters with a gradient move; state never does; versions bump;
 * zero_grad drops every .grad; a step without gradients is not counted. */
static void test_what_moves(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *w = nb_eager_tensor(nb_param(b, "w", NB_F32, 1, S(3), nb_init_constant(1)));
    nb_tensor *v = nb_eager_tensor(nb_param(b, "v", NB_F32, 1, S(3), nb_init_constant(1)));
    nb_tensor *s = nb_eager_tensor(nb_persistable_var(b, "s", NB_F32, 1, S(3), nb_init_constant(1)));
    REQUIRE_OK(nb_builder_status(b));
    nb_eager_optimizer *o;
    REQUIRE_OK(nb_eager_optimizer_new(&o, &(nb_optimizer){.kind = NB_SGD, .lr = 0.5}));
    CHECK_OK(nb_eager_optimizer_step(o, b));
    CHECK(nb_eager_optimizer_steps(o) == 0 && nb_eager_optimizer_lr(o) == 0);
    nb_tensor *g = T(NB_F32, S(3), 1, 2, 4);
    set_grad(w, g);
    uint64_t vw = nb_tensor_version(w), vv = nb_tensor_version(v);
    CHECK_OK(nb_eager_optimizer_step(o, b));
    CHECK_TENSOR(w, S(3), 0, 0.5, 0, -1);
    CHECK_TENSOR(v, S(3), 0, 1, 1, 1);
    CHECK_TENSOR(s, S(3), 0, 1, 1, 1);
    CHECK(nb_tensor_version(w) == vw + 1 && nb_tensor_version(v) == vv);
    CHECK(nb_eager_optimizer_steps(o) == 1 && nb_eager_optimizer_lr(o) == 0.5);
    /* .grad is read, not changed. */
    CHECK(nb_tensor_allclose(nb_tensor_grad(w), g, 0, 0));
    nb_eager_zero_grad(b);
    CHECK(!nb_tensor_grad(w) && !nb_tensor_grad(v));
    CHECK_OK(nb_eager_optimizer_step(o, b));
    CHECK(nb_eager_optimizer_steps(o) == 1);
    CHECK_TENSOR(w, S(3), 0, 0.5, 0, -1);
    nb_eager_zero_grad(NULL);
    nb_tensor_release(g);
    nb_eager_optimizer_free(o);
    nb_builder_free(b);
}

/* Global-norm clipping over more parameters than one eager op takes
 * inputs (64): 100 parameters, each gradient [3] of 0.5, so the global
 * norm is sqrt(100 * 3 * 0.25) = sqrt(75); clipped to 1, SGD with lr 1
 * moves each element by 0.5 / sqrt(75). */
static void test_clip_many_params(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *p[100], *g = T(NB_F32, S(3), 0.5, 0.5, 0.5);
    for (int i = 0; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        p[i] = nb_eager_tensor(nb_param(b, name, NB_F32, 1, S(3), nb_init_constant(1)));
        set_grad(p[i], g);
    }
    REQUIRE_OK(nb_builder_status(b));
    nb_eager_optimizer *o;
    nb_optimizer opt = {.kind = NB_SGD, .lr = 1, .clip = NB_CLIP_GLOBAL_NORM, .clip_value = 1};
    REQUIRE_OK(nb_eager_optimizer_new(&o, &opt));
    CHECK_OK(nb_eager_optimizer_step(o, b));
    const double moved = 0.5 / sqrt(75.0);
    CHECK_TENSOR(p[0], S(3), 1e-6, 1 - moved, 1 - moved, 1 - moved);
    CHECK_TENSOR(p[99], S(3), 1e-6, 1 - moved, 1 - moved, 1 - moved);
    nb_eager_zero_grad(b);
    nb_tensor_release(g);
    nb_eager_optimizer_free(o);
    nb_builder_free(b);
}

/* A gradient of the wrong shape fails the step before any parameter is
 * written; bad options and a bad schedule are refused up front. */
static void test_errors(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *w = nb_eager_tensor(nb_param(b, "w", NB_F32, 1, S(3), nb_init_constant(1)));
    nb_tensor *v = nb_eager_tensor(nb_param(b, "v", NB_F32, 1, S(2), nb_init_constant(1)));
    REQUIRE_OK(nb_builder_status(b));
    nb_eager_optimizer *o = NULL;
    REQUIRE_OK(nb_eager_optimizer_new(&o, &(nb_optimizer){.kind = NB_SGD, .lr = 0.5}));
    nb_tensor *g3 = T(NB_F32, S(3), 1, 1, 1), *g3b = T(NB_F32, S(3), 1, 1, 1);
    set_grad(w, g3);
    set_grad(v, g3b);
    CHECK_ERR(nb_eager_optimizer_step(o, b), NB_ERR_SHAPE, "'v'");
    CHECK_TENSOR(w, S(3), 0, 1, 1, 1);
    CHECK(nb_eager_optimizer_steps(o) == 0);
    CHECK_ERR(nb_eager_optimizer_step(o, NULL), NB_ERR_ARG, "eager builder");
    /* A record builder holds no eager parameters: an error, not a read of
     * the program's builder as an eager one. */
    nb_program *p;
    nb_builder *rb;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&rb, p, NULL));
    CHECK_ERR(nb_eager_optimizer_step(o, rb), NB_ERR_ARG, "eager builder");
    CHECK(nb_eager_param_count(rb) == -1);
    CHECK(strstr(nb_last_error(), "not an eager one"));
    nb_eager_zero_grad(rb);
    nb_builder_free(rb);
    nb_program_free(p);
    nb_eager_optimizer_free(o);
    nb_eager_optimizer *bad = (nb_eager_optimizer *)1;
    CHECK_ERR(nb_eager_optimizer_new(&bad, &(nb_optimizer){.kind = NB_SGD, .lr = -1}), NB_ERR_ARG, "lr");
    CHECK(bad == NULL);
    nb_optimizer cos = nb_sgd(0.1);
    cos.schedule.kind = "cosine"; /* without total_steps */
    CHECK_ERR(nb_eager_optimizer_new(&bad, &cos), NB_ERR_ARG, "total_steps");
    CHECK_ERR(nb_eager_optimizer_new(NULL, &cos), NB_ERR_ARG, "NULL");
    nb_eager_optimizer_free(NULL);
    nb_tensor_release(g3);
    nb_tensor_release(g3b);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_kinds_match_minimize);
    RUN(test_l2_clip_schedule_match);
    RUN(test_what_moves);
    RUN(test_clip_many_params);
    RUN(test_errors);
    return test_report();
}
