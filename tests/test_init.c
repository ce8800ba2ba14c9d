/* Initialisers: fans and gains exactly as torch computes them, the draw
 * each initialiser resolves to, the statistics of large initialised
 * tensors, reproducibility under the program seed, and nb_param /
 * nb_persistable_var as programs see them. */
#include "layer_test_util.h"
#include "nabla/eager.h"

/* ---- fans, gains and draws ----------------------------------------------------- */

static void check_fans(int ndim, const int64_t *shape, int64_t want_in, int64_t want_out)
{
    int64_t fi = -1, fo = -1;
    CHECK_OK(nb_init_fans(ndim, shape, &fi, &fo));
    CHECK(fi == want_in);
    CHECK(fo == want_out);
}

static void test_fans(void)
{
    /* fc weight in nabla's layout [in, out]. */
    check_fans(2, S(784, 128), 784, 128);
    check_fans(2, S(3, 1), 3, 1);
    /* conv filter [out, in/groups, kh, kw]. */
    check_fans(4, S(64, 3, 5, 5), 3 * 25, 64 * 25);
    /* 16 input channels in 4 groups: the filter holds in/groups = 4. */
    check_fans(4, S(32, 4, 3, 3), 4 * 9, 32 * 9);
    check_fans(4, S(8, 2, 3, 1), 6, 24);
    check_fans(3, S(8, 4, 3), 12, 24);
    int64_t fi, fo;
    CHECK_ERR(nb_init_fans(1, S(5), &fi, &fo), NB_ERR_SHAPE, "at least 2 dimensions");
    CHECK_ERR(nb_init_fans(0, NULL, &fi, &fo), NB_ERR_SHAPE, "at least 2 dimensions");
    CHECK_ERR(nb_init_fans(2, S(-1, 4), &fi, &fo), NB_ERR_SHAPE, "unknown dimension");
}

static void test_gains(void)
{
    double g = 0;
    CHECK_OK(nb_init_gain("relu", 0, &g));
    CHECK_NEAR(g, sqrt(2.0), 1e-15);
    CHECK_OK(nb_init_gain("tanh", 0, &g));
    CHECK_NEAR(g, 5.0 / 3.0, 1e-15);
    CHECK_OK(nb_init_gain("conv2d", 0, &g));
    CHECK_NEAR(g, 1.0, 0);
    CHECK_OK(nb_init_gain("sigmoid", 0, &g));
    CHECK_NEAR(g, 1.0, 0);
    CHECK_OK(nb_init_gain("selu", 0, &g));
    CHECK_NEAR(g, 0.75, 0);
    CHECK_OK(nb_init_gain("leaky_relu", 0, &g)); /* torch's default slope 0.01 */
    CHECK_NEAR(g, sqrt(2.0 / (1 + 0.01 * 0.01)), 1e-15);
    CHECK_OK(nb_init_gain("leaky_relu", 0.2, &g));
    CHECK_NEAR(g, sqrt(2.0 / 1.04), 1e-15);
    CHECK_ERR(nb_init_gain("swish", 0, &g), NB_ERR_NOT_FOUND, "known: linear");
}

static void check_draw(nb_init init, int ndim, const int64_t *shape, nb_draw_kind kind, double p0, double p1)
{
    nb_init_draw d = {0};
    CHECK_OK(nb_init_resolve(init, ndim, shape, &d));
    CHECK(d.kind == kind);
    CHECK_NEAR(d.p0, p0, 1e-14);
    CHECK_NEAR(d.p1, p1, 1e-14);
}

static void test_resolve(void)
{
    check_draw(nb_init_constant(2.5), 1, S(3), NB_DRAW_FILL, 2.5, 0);
    check_draw(nb_init_zeros(), 0, NULL, NB_DRAW_FILL, 0, 0);
    check_draw(nb_init_uniform(-2, 3), 2, S(4, 4), NB_DRAW_UNIFORM, -2, 3);
    check_draw(nb_init_normal(1, 0.5), 1, S(7), NB_DRAW_NORMAL, 1, 0.5);
    check_draw(nb_init_truncated_normal(0, 0.02), 2, S(2, 2), NB_DRAW_TRUNCATED_NORMAL, 0, 0.02);
    /* xavier: gain * sqrt(6 / (fan_in + fan_out)), or sqrt(2 / ...) for normal. */
    double b = sqrt(6.0 / 50);
    check_draw(nb_init_xavier_uniform(), 2, S(20, 30), NB_DRAW_UNIFORM, -b, b);
    check_draw(nb_init_xavier_uniform_gain(2), 2, S(20, 30), NB_DRAW_UNIFORM, -2 * b, 2 * b);
    check_draw((nb_init){NB_INIT_XAVIER_UNIFORM, 0, 0}, 2, S(20, 30), NB_DRAW_UNIFORM, -b, b); /* gain 0 = 1 */
    check_draw(nb_init_xavier_normal(), 4, S(16, 8, 3, 3), NB_DRAW_NORMAL, 0, sqrt(2.0 / (72 + 144)));
    /* kaiming (fan_in): sqrt(2 / (1 + a^2)) / sqrt(fan_in); uniform bound sqrt(3) times that. */
    check_draw(nb_init_kaiming_normal(), 4, S(16, 8, 3, 3), NB_DRAW_NORMAL, 0, sqrt(2.0 / 72));
    check_draw(nb_init_kaiming_uniform(), 2, S(50, 10), NB_DRAW_UNIFORM, -sqrt(6.0 / 50), sqrt(6.0 / 50));
    check_draw(nb_init_kaiming_normal_slope(0.5), 2, S(50, 10), NB_DRAW_NORMAL, 0, sqrt(2.0 / 1.25 / 50));
    /* torch's nn.Linear default: a = sqrt(5) gives U(+-1/sqrt(fan_in)). */
    check_draw(nb_init_kaiming_uniform_slope(sqrt(5.0)), 2, S(100, 7), NB_DRAW_UNIFORM, -0.1, 0.1);
    /* Nothing to draw for an empty tensor, whose fans may be 0. */
    check_draw(nb_init_kaiming_uniform(), 2, S(0, 5), NB_DRAW_FILL, 0, 0);

    nb_init_draw d;
    CHECK_ERR(nb_init_resolve((nb_init){0}, 1, S(3), &d), NB_ERR_ARG, "NB_INIT_DEFAULT");
    CHECK_ERR(nb_init_resolve(nb_init_uniform(1, 0), 1, S(3), &d), NB_ERR_ARG, "above high");
    CHECK_ERR(nb_init_resolve(nb_init_normal(0, -1), 1, S(3), &d), NB_ERR_ARG, "negative");
    CHECK_ERR(nb_init_resolve(nb_init_normal(NAN, 1), 1, S(3), &d), NB_ERR_ARG, "finite");
    CHECK_ERR(nb_init_resolve(nb_init_constant(INFINITY), 1, S(3), &d), NB_ERR_ARG, "finite");
    CHECK_ERR(nb_init_resolve(nb_init_xavier_uniform(), 1, S(3), &d), NB_ERR_SHAPE, "xavier_uniform");
    CHECK_ERR(nb_init_resolve((nb_init){(nb_init_kind)99, 0, 0}, 1, S(3), &d), NB_ERR_ARG, "unknown");
    CHECK_STR(nb_init_draw_op(NB_DRAW_TRUNCATED_NORMAL), "truncated_gaussian_random");
    CHECK_STR(nb_init_kind_name(NB_INIT_KAIMING_NORMAL), "kaiming_normal");
}

/* ---- statistics of initialised tensors ------------------------------------------- */

typedef struct stats {
    double mean, std, min, max;
} stats;

static stats stats_of(const nb_tensor *t)
{
    int64_t n = nb_tensor_numel(t);
    stats s = {0, 0, INFINITY, -INFINITY};
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = nb_tensor_get(t, i);
        sum += v;
        sq += v * v;
        s.min = fmin(s.min, v);
        s.max = fmax(s.max, v);
    }
    s.mean = sum / (double)n;
    s.std = sqrt(fmax(sq / (double)n - s.mean * s.mean, 0));
    return s;
}

/* One parameter initialised by `init`, run through a startup program. */
static nb_tensor *init_tensor(nb_dtype dt, int ndim, const int64_t *shape, nb_init init, uint64_t seed)
{
    model m;
    model_init(&m);
    nb_program_set_seed(m.startup, seed);
    nb_param(m.b, "p", dt, ndim, shape, init);
    CHECK_OK(nb_builder_status(m.b));
    nb_tensor *t = NULL;
    if (!model_startup(&m)) t = nb_tensor_retain(nb_scope_find(m.scope, "p"));
    CHECK(t != NULL);
    model_free(&m);
    return t;
}

/* Mean and std within 6 standard errors of n = 200000 draws; the extremes
 * inside [lo, hi] and, for bounded draws, near them. */
static void check_stats(nb_dtype dt, int ndim, const int64_t *shape, nb_init init, double mean, double std, double lo,
                        double hi, bool bounded)
{
    nb_tensor *t = init_tensor(dt, ndim, shape, init, 11);
    if (!t) return;
    CHECK(t->dtype == dt);
    CHECK(nb_shape_equal(t->ndim, t->shape, ndim, shape));
    stats s = stats_of(t);
    double n = (double)nb_tensor_numel(t);
    CHECK_NEAR(s.mean, mean, 6 * std / sqrt(n) + 1e-12);
    CHECK_NEAR(s.std, std, 6 * std / sqrt(2 * n) + 1e-12);
    CHECK(s.min >= lo);
    CHECK(s.max <= hi);
    if (bounded) {
        CHECK_NEAR(s.min, lo, (hi - lo) * 1e-3);
        CHECK_NEAR(s.max, hi, (hi - lo) * 1e-3);
    }
    nb_tensor_release(t);
}

static void test_statistics(void)
{
    const int64_t *fc = S(400, 500), *conv = S(64, 50, 8, 8); /* 200000 and 204800 values */
    /* uniform U(a, b): mean (a+b)/2, std (b-a)/sqrt(12). */
    check_stats(NB_F64, 2, fc, nb_init_uniform(-1, 3), 1, 4 / sqrt(12.0), -1, 3, true);
    check_stats(NB_F32, 2, fc, nb_init_uniform(0, 0.5), 0.25, 0.5 / sqrt(12.0), 0, 0.5, true);
    check_stats(NB_F64, 2, fc, nb_init_normal(2, 0.5), 2, 0.5, -INFINITY, INFINITY, false);
    check_stats(NB_F32, 2, fc, nb_init_normal(0, 1), 0, 1, -INFINITY, INFINITY, false);
    /* Truncated at 2 std: std of the standard normal cut at +-2 is 0.879596. */
    check_stats(NB_F64, 2, fc, nb_init_truncated_normal(1, 0.1), 1, 0.1 * 0.8795958, 0.8, 1.2, false);
    /* xavier uniform: bound sqrt(6/(400+500)); std = bound/sqrt(3). */
    double xb = sqrt(6.0 / 900);
    check_stats(NB_F64, 2, fc, nb_init_xavier_uniform(), 0, xb / sqrt(3.0), -xb, xb, true);
    check_stats(NB_F64, 2, fc, nb_init_xavier_normal(), 0, sqrt(2.0 / 900), -INFINITY, INFINITY, false);
    /* kaiming on a conv filter: fan_in = 50*8*8 = 3200. */
    double ks = sqrt(2.0 / 3200);
    check_stats(NB_F64, 4, conv, nb_init_kaiming_normal(), 0, ks, -INFINITY, INFINITY, false);
    check_stats(NB_F32, 4, conv, nb_init_kaiming_uniform(), 0, ks, -sqrt(3.0) * ks, sqrt(3.0) * ks, true);
    /* torch's Linear default. */
    check_stats(NB_F64, 2, fc, nb_init_kaiming_uniform_slope(sqrt(5.0)), 0, 0.05 / sqrt(3.0), -0.05, 0.05, true);

    nb_tensor *c = init_tensor(NB_I64, 2, S(3, 4), nb_init_constant(7), 1);
    if (c) {
        CHECK(c->dtype == NB_I64);
        stats s = stats_of(c);
        CHECK(s.min == 7 && s.max == 7);
        nb_tensor_release(c);
    }
}

/* ---- reproducibility -------------------------------------------------------------- */

/* Runs a fresh startup (new programs, scope and executor) with `seed` and
 * returns copies of parameters a and b. */
static void run_fresh(uint64_t seed, nb_tensor **a, nb_tensor **b)
{
    model m;
    model_init(&m);
    nb_program_set_seed(m.startup, seed);
    nb_param(m.b, "a", NB_F32, 2, S(30, 20), nb_init_xavier_uniform());
    nb_param(m.b, "b", NB_F32, 2, S(30, 20), nb_init_xavier_uniform());
    CHECK_OK(nb_builder_status(m.b));
    *a = *b = NULL;
    if (!model_startup(&m)) {
        CHECK_OK(nb_tensor_clone(a, nb_scope_find(m.scope, "a")));
        CHECK_OK(nb_tensor_clone(b, nb_scope_find(m.scope, "b")));
    }
    model_free(&m);
}

static void test_reproducible(void)
{
    nb_tensor *a1, *b1, *a2, *b2, *a3, *b3;
    run_fresh(42, &a1, &b1);
    run_fresh(42, &a2, &b2);
    run_fresh(43, &a3, &b3);
    if (a1 && a2 && a3) {
        CHECK(nb_tensor_allclose(a1, a2, 0, 0));
        CHECK(nb_tensor_allclose(b1, b2, 0, 0));
        CHECK(!nb_tensor_allclose(a1, a3, 0, 0));
        CHECK(!nb_tensor_allclose(b1, b3, 0, 0));
        /* Two parameters of one program draw different streams. */
        CHECK(!nb_tensor_allclose(a1, b1, 0, 0));
    }
    release_all(a1, b1, a2, b2, a3, b3, NULL);
}

/* Through one executor, a second run of the startup program is run 1 of
 * its prepared form and draws new values (as the header says); resetting
 * the run index replays run 0. */
static void test_rerun_same_executor(void)
{
    model m;
    model_init(&m);
    nb_program_set_seed(m.startup, 5);
    nb_param(m.b, "w", NB_F64, 1, S(50), nb_init_normal(0, 1));
    REQUIRE_OK(nb_builder_status(m.b));
    REQUIRE_OK(model_startup(&m));
    nb_tensor *first;
    REQUIRE_OK(nb_tensor_clone(&first, nb_scope_find(m.scope, "w")));
    REQUIRE_OK(model_startup(&m));
    CHECK(!nb_tensor_allclose(first, nb_scope_find(m.scope, "w"), 0, 0));
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, m.startup, 0, NB_NO_NAMES, NB_NO_NAMES));
    nb_prepared_set_run_index(pp, 0);
    CHECK_OK(nb_prepared_run(pp, m.scope, NULL, NULL));
    CHECK(nb_tensor_allclose(first, nb_scope_find(m.scope, "w"), 0, 0));
    nb_prepared_free(pp);
    nb_tensor_release(first);
    model_free(&m);
}

/* ---- nb_param and nb_persistable_var in programs ---------------------------------- */

static void test_param_program(void)
{
    model m;
    model_init(&m);
    nb_value w = nb_param(m.b, "w", NB_F32, 2, S(8, 4), nb_init_kaiming_uniform());
    nb_value t = nb_param(m.b, "t", NB_F64, 1, S(5), nb_init_truncated_normal(0, 0.02));
    nb_value c = nb_param(m.b, NULL, NB_F32, 0, NULL, nb_init_constant(3));
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_STR(nb_value_name(w), "w");
    CHECK_STR(nb_value_name(t), "t");
    CHECK_STR(nb_value_name(c), "param_0");
    CHECK_PARAM(&m, "w", S(8, 4));
    CHECK(main_var(&m, "w")->dtype == NB_F32);
    /* Initialisers go to startup only, one op each, seed 0 (the program's). */
    CHECK(nb_program_global_block(m.main)->n_ops == 0);
    CHECK(nb_program_global_block(m.startup)->n_ops == 3);
    nb_op *op = init_op_of(m.startup, "w");
    CHECK(op && !strcmp(op->def->name, "uniform_random"));
    CHECK_NEAR(op_float(op, "max"), sqrt(6.0 / 8), 1e-12);
    CHECK_NEAR(op_float(op, "min"), -sqrt(6.0 / 8), 1e-12);
    CHECK(op_int(op, "seed") == 0);
    CHECK(op_int(op, "dtype") == NB_F32);
    CHECK(op && op->role == NB_ROLE_STARTUP);
    op = init_op_of(m.startup, "t");
    CHECK(op && !strcmp(op->def->name, "truncated_gaussian_random"));
    CHECK_NEAR(op_float(op, "std"), 0.02, 0);
    op = init_op_of(m.startup, "param_0");
    CHECK(op && !strcmp(op->def->name, "fill_constant"));
    CHECK_NEAR(op_float(op, "value"), 3, 0);
    REQUIRE_OK(model_startup(&m));
    CHECK_SCALAR(nb_scope_find(m.scope, "param_0"), 3, 0);
    model_free(&m);
}

static void test_persistable_var(void)
{
    model m;
    model_init(&m);
    nb_value v = nb_persistable_var(m.b, "running", NB_F64, 1, S(3), nb_init_constant(1.5));
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_STR(nb_value_name(v), "running");
    CHECK_STATE(&m, "running", S(3));
    nb_var *sv = nb_block_find_var(nb_program_global_block(m.startup), "running");
    CHECK(sv && sv->persistable && !sv->is_parameter && !sv->trainable);
    nb_op *op = init_op_of(m.startup, "running");
    CHECK(op && !strcmp(op->def->name, "fill_constant") && op->role == NB_ROLE_STARTUP);
    REQUIRE_OK(model_startup(&m));
    CHECK_TENSOR(nb_scope_find(m.scope, "running"), S(3), 0, 1.5, 1.5, 1.5);
    /* Taken names are refused. */
    nb_persistable_var(m.b, "running", NB_F64, 1, S(3), nb_init_zeros());
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "already exists"));
    model_free(&m);

    /* Without a startup program the initialiser goes to main itself. */
    nb_program *main;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main));
    REQUIRE_OK(nb_builder_new_record(&b, main, NULL));
    nb_persistable_var(b, "s", NB_F32, 1, S(2), nb_init_zeros());
    nb_param(b, "p", NB_F32, 1, S(2), nb_init_uniform(0, 1));
    CHECK_OK(nb_builder_status(b));
    CHECK(nb_program_global_block(main)->n_ops == 2);
    nb_var *s = nb_block_find_var(nb_program_global_block(main), "s");
    CHECK(s && s->persistable && s->stop_gradient && !s->is_parameter);
    nb_builder_free(b);
    nb_program_free(main);
}

/* nb_param_from and nb_persistable_from: values copied in, in both modes. */
static void test_vars_from_values(void)
{
    nb_tensor *w, *wt, *ids;
    REQUIRE_OK(nb_tensor_from_data(&w, NB_F32, 2, S(2, 3), (float[]){1, 2, 3, 4, 5, 6}));
    REQUIRE_OK(nb_tensor_transpose(&wt, w, 0, 1)); /* a view: [[1, 4], [2, 5], [3, 6]] */
    REQUIRE_OK(nb_tensor_from_data(&ids, NB_I64, 1, S(2), (int64_t[]){-7, 1LL << 60}));
    model m;
    model_init(&m);
    nb_value p = nb_param_from(m.b, "wt", wt), s = nb_persistable_from(m.b, "ids", ids);
    REQUIRE_OK(nb_builder_status(m.b));
    CHECK_PARAM(&m, "wt", S(3, 2));
    CHECK_STATE(&m, "ids", S(2));
    CHECK_STR(nb_value_name(p), "wt");
    CHECK_STR(nb_value_name(s), "ids");
    nb_op *op = init_op_of(m.startup, "wt");
    CHECK(op && !strcmp(op->def->name, "assign_value") && op->role == NB_ROLE_STARTUP);
    REQUIRE_OK(model_startup(&m));
    CHECK_TENSOR(nb_scope_find(m.scope, "wt"), S(3, 2), 0, 1, 4, 2, 5, 3, 6);
    nb_tensor *got = nb_scope_find(m.scope, "ids");
    CHECK(got && got->dtype == NB_I64 && ((int64_t *)nb_tensor_data(got))[1] == 1LL << 60); /* exact, not via double */
    nb_param_from(m.b, "wt", w);
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "already exists"));
    model_free(&m);

    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_value e = nb_param_from(b, "wt", wt);
    REQUIRE_OK(nb_builder_status(b));
    nb_tensor *et = nb_eager_tensor(e);
    CHECK(et != wt && nb_tensor_requires_grad(et) && nb_tensor_allclose(et, wt, 0, 0));
    nb_tensor_set(wt, 0, 100); /* a copy: the caller's tensor is not shared */
    CHECK(nb_tensor_get(et, 0) == 1);
    /* The next step of a loop finds the same parameter, values unchanged. */
    CHECK(nb_eager_tensor(nb_param_from(b, "wt", wt)) == et && nb_tensor_get(et, 0) == 1);
    nb_value es = nb_persistable_from(b, "ids", ids);
    CHECK(!nb_tensor_requires_grad(nb_eager_tensor(es)));
    nb_param_from(b, "ids", ids); /* a state var of that name, asked for as a parameter */
    CHECK(nb_builder_status(b) == NB_ERR_ARG && strstr(nb_builder_error(b), "already holds"));
    nb_builder_clear_error(b);
    nb_param_from(b, "x", NULL);
    CHECK(nb_builder_status(b) == NB_ERR_ARG && strstr(nb_builder_error(b), "parameter x: the tensor is NULL"));
    nb_builder_free(b);
    nb_tensor_release(w), nb_tensor_release(wt), nb_tensor_release(ids);
}

static void test_param_errors(void)
{
    model m;
    model_init(&m);
    nb_param(m.b, "i", NB_I64, 1, S(3), nb_init_normal(0, 1));
    CHECK(nb_builder_status(m.b) == NB_ERR_DTYPE && strstr(nb_builder_error(m.b), "float32 or float64"));
    /* Nothing was created by the failed call. */
    CHECK(main_var(&m, "i") == NULL);
    CHECK(nb_program_global_block(m.startup)->n_ops == 0);
    /* The first error sticks; later calls do nothing. */
    CHECK(nb_is_none(nb_param(m.b, "ok", NB_F32, 1, S(3), nb_init_zeros())));
    CHECK(main_var(&m, "ok") == NULL);
    nb_builder_clear_error(m.b);

    nb_param(m.b, "d", NB_F32, 1, S(3), (nb_init){0});
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "parameter d"));
    nb_builder_clear_error(m.b);
    nb_param(m.b, "u", NB_F32, 2, S(-1, 3), nb_init_zeros());
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "known sizes"));
    nb_builder_clear_error(m.b);
    nb_param(m.b, "x1", NB_F32, 1, S(4), nb_init_xavier_normal());
    CHECK(nb_builder_status(m.b) == NB_ERR_SHAPE && strstr(nb_builder_error(m.b), "parameter x1"));
    nb_builder_clear_error(m.b);
    nb_param(m.b, "w", NB_F32, 1, S(4), nb_init_zeros());
    nb_param(m.b, "w", NB_F32, 1, S(4), nb_init_zeros());
    CHECK(nb_builder_status(m.b) == NB_ERR_ARG && strstr(nb_builder_error(m.b), "already exists"));
    CHECK(nb_is_none(nb_param(NULL, "w", NB_F32, 1, S(4), nb_init_zeros())));
    model_free(&m);
}

/* In an eager builder nb_param draws the tensor at once from the builder's
 * generator (one seed, the same values), stores it by name and hands the
 * same tensor back for the same name; nb_persistable_var shares the store
 * with requires_grad off; a name reused with another dtype, shape or kind
 * is an error naming both. */
#define REQUIRE(c)      \
    do {                \
        CHECK(c);       \
        if (!(c)) return; \
    } while (0)

static nb_tensor *eager_param_of(nb_builder *b, const char *name, int64_t n, nb_init init)
{
    nb_value v = nb_param(b, name, NB_F32, 2, S(n, 4), init);
    return nb_is_none(v) ? NULL : nb_eager_tensor(v);
}

static void test_param_eager(void)
{
    nb_builder *b, *b2;
    REQUIRE_OK(nb_builder_new_eager(&b));
    REQUIRE_OK(nb_builder_new_eager(&b2));
    nb_eager_set_seed(b, 7);
    nb_eager_set_seed(b2, 7);
    nb_tensor *w = eager_param_of(b, "w", 50, nb_init_uniform(-0.25, 0.5));
    nb_tensor *w2 = eager_param_of(b2, "w", 50, nb_init_uniform(-0.25, 0.5));
    REQUIRE(w && w2);
    CHECK(w->dtype == NB_F32 && w->ndim == 2 && w->shape[0] == 50 && w->shape[1] == 4);
    CHECK(nb_tensor_requires_grad(w) && nb_tensor_is_leaf(w));
    double lo = 1, hi = -1;
    for (int64_t i = 0; i < 200; i++) {
        double x = nb_tensor_get(w, i);
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    CHECK(lo >= -0.25 && hi < 0.5 && hi - lo > 0.5); /* drawn, within the bounds */
    CHECK(nb_tensor_allclose(w, w2, 0, 0));          /* one seed, one draw */
    /* The same name gives the same tensor, and no second parameter. */
    CHECK(eager_param_of(b, "w", 50, nb_init_zeros()) == w);
    CHECK(nb_eager_param_count(b) == 1 && !strcmp(nb_eager_param_name(b, 0), "w") && nb_eager_param_at(b, 0) == w);
    /* A second parameter draws further along the stream. */
    nb_tensor *v = eager_param_of(b, "v", 50, nb_init_uniform(-0.25, 0.5));
    REQUIRE(v);
    CHECK(!nb_tensor_allclose(v, w, 0, 0));
    /* Constant and normal draws. */
    nb_tensor *c = eager_param_of(b, "c", 2, nb_init_constant(0.75));
    REQUIRE(c);
    for (int i = 0; i < 8; i++) CHECK(nb_tensor_get(c, i) == 0.75);
    /* State: same store, no grad. */
    nb_value s = nb_persistable_var(b, "s", NB_F64, 1, S(3), nb_init_ones());
    REQUIRE(!nb_is_none(s));
    CHECK(!nb_tensor_requires_grad(nb_eager_tensor(s)) && nb_eager_tensor(s)->dtype == NB_F64);
    CHECK(nb_eager_find_param(b, "s") == nb_eager_tensor(s) && nb_eager_param_count(b) == 4);
    CHECK(nb_eager_tensor(nb_persistable_var(b, "s", NB_F64, 1, S(3), nb_init_ones())) == nb_eager_tensor(s));
    /* Reuse with another shape, dtype or kind. */
    CHECK(!eager_param_of(b, "w", 51, nb_init_zeros()));
    CHECK(nb_builder_status(b) == NB_ERR_ARG && strstr(nb_builder_error(b), "parameter w") &&
          strstr(nb_builder_error(b), "[50, 4]") && strstr(nb_builder_error(b), "[51, 4]"));
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_param(b, "s", NB_F64, 1, S(3), nb_init_ones())));
    CHECK(nb_builder_status(b) == NB_ERR_ARG && strstr(nb_builder_error(b), "state var"));
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_param(b, "bad", NB_F32, 1, S(-1), nb_init_ones())));
    CHECK(nb_builder_status(b) == NB_ERR_SHAPE && strstr(nb_builder_error(b), "parameter bad"));
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_param(b, "i", NB_I64, 1, S(3), nb_init_normal(0, 1))));
    CHECK(nb_builder_status(b) == NB_ERR_DTYPE);
    nb_builder_clear_error(b);
    CHECK(nb_eager_param_count(b) == 4);
    /* Fresh names restart with each step's release. */
    nb_value p0 = nb_param(b, NULL, NB_F32, 1, S(2), nb_init_zeros());
    nb_eager_release_values(b);
    nb_value p1 = nb_param(b, NULL, NB_F32, 1, S(2), nb_init_zeros());
    CHECK(!nb_is_none(p0) && p0.p == p1.p && nb_eager_find_param(b, "param_0") == p1.p);
    nb_builder_free(b2);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_fans);
    RUN(test_gains);
    RUN(test_resolve);
    RUN(test_statistics);
    RUN(test_reproducible);
    RUN(test_rerun_same_executor);
    RUN(test_param_program);
    RUN(test_persistable_var);
    RUN(test_vars_from_values);
    RUN(test_param_errors);
    RUN(test_param_eager);
    return test_report();
}
