/* nb_minimize on the seed program's shape, a linear regression
 * (x = data; y = fc(x); cost = mse(y, label); minimize(cost)): it
 * converges; every optimiser kind follows torch.optim's algorithm step by
 * step (a reference written here in C from torch's documented update
 * equations); frozen parameters stay put; L2, weight decay, clipping and
 * schedules act as their formulas say; the state is persistable, listed and
 * enough to resume; ops carry their roles. */
#include <stdlib.h>
#include "nabla/optimizer.h"
#include "test.h"
#include "program/record.h"

#define N 8   /* samples */
#define D 3   /* features */
#define NP 4  /* parameter elements: fc.w [3, 1], then fc.b [1] */

typedef struct model {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
    nb_dtype dt;
    char loss[64];
    nb_var *w, *bias;
    double x[N][D], y[N];
    nb_tensor *fx, *fy; /* the feeds */
} model;

/* y = x . (1, -2, 0.5) + 0.3, scaled by `scale`, with x in [-1, 1]. */
static void make_data(model *m, double scale)
{
    static const double w_true[D] = {1, -2, 0.5};
    for (int i = 0; i < N; i++) {
        m->y[i] = 0.3;
        for (int j = 0; j < D; j++) {
            m->x[i][j] = sin(1.3 * (i + 1) * (j + 2) + j);
            m->y[i] += m->x[i][j] * w_true[j];
        }
        m->y[i] *= scale;
    }
    CHECK_OK(nb_tensor_new(&m->fx, m->dt, 2, S(N, D)));
    CHECK_OK(nb_tensor_new(&m->fy, m->dt, 2, S(N, 1)));
    for (int i = 0; i < N; i++) {
        nb_tensor_set(m->fy, i, m->y[i]);
        for (int j = 0; j < D; j++) nb_tensor_set(m->fx, i * D + j, m->x[i][j]);
    }
}

/* Builds the program; parameters start from uniform_random values in
 * [-0.5, 0.5) (seeded), which the reference reads back from the scope. */
static void model_init(model *m, nb_dtype dt, double scale)
{
    memset(m, 0, sizeof *m);
    m->dt = dt;
    CHECK_OK(nb_program_new(&m->main));
    CHECK_OK(nb_program_new(&m->startup));
    CHECK_OK(nb_builder_new_record(&m->b, m->main, m->startup));
    CHECK_OK(nb_scope_new(&m->scope, NULL));
    CHECK_OK(nb_executor_new(&m->ex));
    make_data(m, scale);
    nb_builder *b = m->b;
    nb_value x = nb_data(b, "x", dt, 2, S(-1, D)), label = nb_data(b, "label", dt, 2, S(-1, 1));
    nb_attr init[] = {NB_ATTR_FLOAT("min", -0.5), NB_ATTR_FLOAT("max", 0.5), NB_ATTR_INT("seed", 7)};
    nb_value w = nb_create_parameter(b, "fc.w", dt, 2, S(D, 1), "uniform_random", 3, init);
    init[2] = NB_ATTR_INT("seed", 8);
    nb_value bias = nb_create_parameter(b, "fc.b", dt, 1, S(1), "uniform_random", 3, init);
    nb_value cost = nb_mse_loss(b, nb_fc(b, x, w, bias, 1), label, "mean");
    CHECK_OK(nb_builder_status(b));
    if (!nb_builder_status(b)) {
        snprintf(m->loss, sizeof m->loss, "%s", nb_value_name(cost));
        m->w = nb_value_var(w);
        m->bias = nb_value_var(bias);
    }
}

static void model_free(model *m)
{
    release_all(m->fx, m->fy, NULL);
    nb_executor_free(m->ex);
    nb_scope_free(m->scope);
    nb_builder_free(m->b);
    nb_program_free(m->startup);
    nb_program_free(m->main);
}

static nb_status run_startup(model *m)
{
    return nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
}

/* One training step; fetches the named vars (n of them) if asked. */
static nb_status step(model *m, int n, const char *const *fetch, nb_tensor **out)
{
    nb_feed feeds[2] = {{"x", m->fx}, {"label", m->fy}};
    return nb_executor_run(m->ex, m->main, m->scope, NB_FEEDS_N(2, feeds), NB_NAMES_N(n, fetch), out);
}

static double scalar_of(nb_tensor *t) { return t ? nb_tensor_get(t, 0) : NAN; }

/* The parameters as one vector: w0, w1, w2, b. */
static void read_params(const model *m, double *p)
{
    nb_tensor *w = nb_scope_find(m->scope, "fc.w"), *b = nb_scope_find(m->scope, "fc.b");
    for (int j = 0; j < D; j++) p[j] = w ? nb_tensor_get(w, j) : NAN;
    p[D] = b ? nb_tensor_get(b, 0) : NAN;
}

static const char *grad_of_pair(const nb_backward_result *r, const char *param)
{
    for (int i = 0; i < r->n_pairs; i++)
        if (!strcmp(r->pairs[i].param, param)) return r->pairs[i].grad;
    return NULL;
}

/* ---- the reference: torch.optim's update equations, in C --------------------------------- */

typedef struct ref {
    nb_optimizer o;
    double p[NP];
    double buf[NP], m[NP], v[NP], sq[NP], ga[NP], acc[NP];
    int t;
} ref;

static void ref_init(ref *r, const nb_optimizer *o, const double *p0)
{
    memset(r, 0, sizeof *r);
    r->o = *o;
    memcpy(r->p, p0, sizeof r->p);
    for (int i = 0; i < NP; i++) r->acc[i] = o->initial_accumulator_value;
}

/* d(mean (x.w + b - y)^2) / d(w, b). */
static void ref_grad(const model *md, const double *p, double *g)
{
    memset(g, 0, NP * sizeof *g);
    for (int i = 0; i < N; i++) {
        double r = p[D] - md->y[i];
        for (int j = 0; j < D; j++) r += md->x[i][j] * p[j];
        for (int j = 0; j < D; j++) g[j] += 2.0 / N * r * md->x[i][j];
        g[D] += 2.0 / N * r;
    }
}

/* StepLR / ExponentialLR as torch computes them (scheduler.step() after
 * every optimizer.step(), so update t uses last_epoch t - 1). */
static double ref_lr(const ref *r)
{
    const nb_lr_schedule *s = &r->o.schedule;
    if (s->kind && !strcmp(s->kind, "step")) return r->o.lr * pow(s->gamma, (double)((r->t - 1) / s->step_size));
    if (s->kind && !strcmp(s->kind, "exponential")) return r->o.lr * pow(s->gamma, r->t - 1);
    return r->o.lr;
}

static void ref_step(ref *r, const model *md)
{
    const nb_optimizer *o = &r->o;
    double g[NP];
    ref_grad(md, r->p, g);
    r->t++;
    const double lr = ref_lr(r);
    for (int i = 0; i < NP; i++) g[i] += o->l2 * r->p[i]; /* torch's weight_decay of SGD/Adam/... */
    for (int i = 0; i < NP; i++) {
        double *p = &r->p[i];
        switch (o->kind) {
        case NB_SGD: *p -= lr * g[i]; break;
        case NB_MOMENTUM: /* torch.optim.SGD, dampening 0 */
            r->buf[i] = r->t == 1 ? g[i] : o->momentum * r->buf[i] + g[i];
            *p -= lr * (o->nesterov ? g[i] + o->momentum * r->buf[i] : r->buf[i]);
            break;
        case NB_ADAM:
        case NB_ADAMW: {
            *p *= 1 - lr * o->weight_decay;
            r->m[i] = o->beta1 * r->m[i] + (1 - o->beta1) * g[i];
            r->v[i] = o->beta2 * r->v[i] + (1 - o->beta2) * g[i] * g[i];
            double bc1 = 1 - pow(o->beta1, r->t), bc2 = 1 - pow(o->beta2, r->t);
            *p -= lr / bc1 * r->m[i] / (sqrt(r->v[i]) / sqrt(bc2) + o->epsilon);
            break;
        }
        case NB_RMSPROP: {
            r->sq[i] = o->rho * r->sq[i] + (1 - o->rho) * g[i] * g[i];
            double avg;
            if (o->centered) {
                r->ga[i] = o->rho * r->ga[i] + (1 - o->rho) * g[i];
                avg = sqrt(r->sq[i] - r->ga[i] * r->ga[i]) + o->epsilon;
            } else {
                avg = sqrt(r->sq[i]) + o->epsilon;
            }
            if (o->momentum > 0) {
                r->buf[i] = o->momentum * r->buf[i] + g[i] / avg;
                *p -= lr * r->buf[i];
            } else {
                *p -= lr * g[i] / avg;
            }
            break;
        }
        case NB_ADAGRAD:
            r->acc[i] += g[i] * g[i];
            *p -= lr * g[i] / (sqrt(r->acc[i]) + o->epsilon);
            break;
        }
    }
}

/* Runs `steps` steps of nabla and of the reference side by side; the
 * parameters must agree after each. */
static void compare_with_reference(const char *what, const nb_optimizer *o, nb_dtype dt, int steps, double tol)
{
    model m;
    model_init(&m, dt, 1.0);
    nb_backward_result r;
    CHECK_OK(nb_minimize(o, m.main, m.startup, m.loss, NULL, &r));
    CHECK_OK(run_startup(&m));
    double p[NP], p_init[NP];
    read_params(&m, p);
    memcpy(p_init, p, sizeof p);
    ref rf;
    ref_init(&rf, o, p);
    for (int s = 0; s < steps; s++) {
        CHECK_OK(step(&m, 0, NULL, NULL));
        ref_step(&rf, &m);
        read_params(&m, p);
        for (int i = 0; i < NP; i++)
            if (!(fabs(p[i] - rf.p[i]) <= tol * (1 + fabs(rf.p[i])))) {
                fprintf(stderr, "  %s (%s), step %d, element %d: %.15g, torch's algorithm gives %.15g\n", what,
                        nb_dtype_name(dt), s + 1, i, p[i], rf.p[i]);
                test_failures_in_current++;
                s = steps;
                break;
            }
    }
    /* They moved: a comparison of two frozen vectors would prove nothing. */
    for (int i = 0; i < NP; i++) CHECK(p[i] != p_init[i]);
    nb_backward_result_free(&r);
    model_free(&m);
}

static void test_each_kind_matches_torch(void)
{
    struct {
        const char *what;
        nb_optimizer o;
    } cases[16];
    int n = 0;
    cases[n].what = "sgd", cases[n++].o = nb_sgd(0.1);
    cases[n].what = "momentum", cases[n++].o = nb_momentum(0.05, 0.9, false);
    cases[n].what = "nesterov", cases[n++].o = nb_momentum(0.05, 0.9, true);
    cases[n].what = "adam", cases[n++].o = nb_adam(0.05);
    cases[n].what = "adamw", cases[n++].o = nb_adamw(0.05, 0.3);
    cases[n].what = "rmsprop", cases[n++].o = nb_rmsprop(0.01);
    cases[n].what = "rmsprop momentum", cases[n].o = nb_rmsprop(0.01), cases[n++].o.momentum = 0.5;
    cases[n].what = "rmsprop centered", cases[n].o = nb_rmsprop(0.01), cases[n++].o.centered = true;
    cases[n].what = "rmsprop centered momentum", cases[n].o = nb_rmsprop(0.01), cases[n].o.centered = true,
    cases[n++].o.momentum = 0.5;
    cases[n].what = "adagrad", cases[n++].o = nb_adagrad(0.1);
    cases[n].what = "adagrad initial 0.1", cases[n].o = nb_adagrad(0.1), cases[n++].o.initial_accumulator_value = 0.1;
    /* L2 (torch's weight_decay of SGD and Adam): gradient + l2 * param. */
    cases[n].what = "sgd l2", cases[n].o = nb_sgd(0.1), cases[n++].o.l2 = 0.5;
    cases[n].what = "adam l2", cases[n].o = nb_adam(0.05), cases[n++].o.l2 = 0.5;
    /* Schedules: torch's StepLR and ExponentialLR stepped after each update. */
    cases[n].what = "sgd steplr", cases[n].o = nb_sgd(0.1),
    cases[n++].o.schedule = (nb_lr_schedule){.kind = "step", .step_size = 3, .gamma = 0.5};
    cases[n].what = "momentum exponentiallr", cases[n].o = nb_momentum(0.05, 0.9, false),
    cases[n++].o.schedule = (nb_lr_schedule){.kind = "exponential", .gamma = 0.8};
    for (int i = 0; i < n; i++) compare_with_reference(cases[i].what, &cases[i].o, NB_F64, 10, 1e-12);
}

/* float32 programs: the same algorithm, float32 rounding. */
static void test_float32_matches_torch(void)
{
    nb_optimizer sgd = nb_sgd(0.1), adam = nb_adam(0.05), rms = nb_rmsprop(0.01);
    compare_with_reference("sgd", &sgd, NB_F32, 10, 2e-5);
    compare_with_reference("adam", &adam, NB_F32, 10, 2e-5);
    compare_with_reference("rmsprop", &rms, NB_F32, 10, 2e-5);
}

/* ---- training ----------------------------------------------------------------------------- */

static void test_sgd_converges_monotonically(void)
{
    for (int dt = NB_F32; dt <= NB_F64; dt++) {
        model m;
        model_init(&m, dt, 1.0);
        nb_optimizer o = nb_sgd(0.1);
        nb_backward_result r;
        REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
        CHECK(r.n_pairs == 2);
        REQUIRE_OK(run_startup(&m));
        const char *fetch = m.loss;
        double first = NAN, prev = INFINITY, last = NAN;
        bool monotonic = true;
        /* float32 reaches its rounding floor (loss ~1e-13) after ~200 steps. */
        const int steps = dt == NB_F32 ? 150 : 300;
        for (int s = 0; s < steps; s++) {
            nb_tensor *l = NULL;
            CHECK_OK(step(&m, 1, &fetch, &l));
            last = scalar_of(l);
            if (s == 0) first = last;
            monotonic &= last < prev;
            prev = last;
            nb_tensor_release(l);
        }
        CHECK(monotonic);
        CHECK(first > 0.5 && last < (dt == NB_F32 ? 1e-5 : 1e-10) * first);
        double p[NP];
        read_params(&m, p);
        CHECK_NEAR(p[0], 1.0, 1e-3);
        CHECK_NEAR(p[1], -2.0, 1e-3);
        CHECK_NEAR(p[2], 0.5, 1e-3);
        CHECK_NEAR(p[3], 0.3, 1e-3);
        nb_backward_result_free(&r);
        model_free(&m);
    }
}

static void test_frozen_parameter_unchanged(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    m.bias->trainable = false;
    nb_optimizer o = nb_adam(0.05);
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    CHECK(r.n_pairs == 1 && !strcmp(r.pairs[0].param, "fc.w"));
    REQUIRE_OK(run_startup(&m));
    double p0[NP], p[NP];
    read_params(&m, p0);
    for (int s = 0; s < 5; s++) CHECK_OK(step(&m, 0, NULL, NULL));
    read_params(&m, p);
    CHECK(p[D] == p0[D]);
    CHECK(p[0] != p0[0] && p[1] != p0[1] && p[2] != p0[2]);
    /* No state for it either. */
    int n;
    const char **names;
    CHECK_OK(nb_optimizer_state_vars(m.main, &n, &names));
    for (int i = 0; i < n; i++) CHECK(strncmp(names[i], "fc.b", 4) != 0);
    free(names);
    nb_backward_result_free(&r);
    /* Listing it explicitly leaves it out too. */
    model m2;
    model_init(&m2, NB_F64, 1.0);
    m2.bias->trainable = false;
    REQUIRE_OK(
        nb_minimize(&o, m2.main, m2.startup, m2.loss, &(nb_backward_opts){.params = NB_NAMES("fc.w", "fc.b")}, &r));
    CHECK(r.n_pairs == 1 && !strcmp(r.pairs[0].param, "fc.w"));
    nb_backward_result_free(&r);
    model_free(&m2);
    model_free(&m);
}

/* Only the listed parameters are updated. */
static void test_explicit_param_list(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    nb_optimizer o = nb_sgd(0.1);
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, &(nb_backward_opts){.params = NB_NAMES("fc.b")}, &r));
    CHECK(r.n_pairs == 1 && !strcmp(r.pairs[0].param, "fc.b"));
    REQUIRE_OK(run_startup(&m));
    double p0[NP], p[NP];
    read_params(&m, p0);
    CHECK_OK(step(&m, 0, NULL, NULL));
    read_params(&m, p);
    CHECK(p[0] == p0[0] && p[1] == p0[1] && p[2] == p0[2] && p[D] != p0[D]);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* Fetches, for one step, the raw and the applied gradients of both
 * parameters and the parameters before and after. g[0..3] raw, a[0..3]
 * applied (w then b). */
static void grads_of_step(model *m, const nb_backward_result *r, double *raw, double *applied, double *before,
                          double *after)
{
    const char *fetch[4] = {nb_backward_grad_of(r, "fc.w"), nb_backward_grad_of(r, "fc.b"), grad_of_pair(r, "fc.w"),
                            grad_of_pair(r, "fc.b")};
    nb_tensor *t[4] = {0};
    read_params(m, before);
    CHECK_OK(step(m, 4, fetch, t));
    read_params(m, after);
    for (int j = 0; j < NP; j++) {
        raw[j] = j < D ? nb_tensor_get(t[0], j) : nb_tensor_get(t[1], 0);
        applied[j] = j < D ? nb_tensor_get(t[2], j) : nb_tensor_get(t[3], 0);
    }
    release_all(t[0], t[1], t[2], t[3], NULL);
}

static double norm(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i] * v[i];
    return sqrt(s);
}

/* L2 adds l2 * param to the gradient the update reads; and the update is
 * lr times that gradient. */
static void test_l2_gradient(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    nb_optimizer o = nb_sgd(0.1);
    o.l2 = 0.5;
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    CHECK(strcmp(grad_of_pair(&r, "fc.w"), nb_backward_grad_of(&r, "fc.w")) != 0);
    REQUIRE_OK(run_startup(&m));
    for (int s = 0; s < 3; s++) {
        double raw[NP], g[NP], p0[NP], p1[NP];
        grads_of_step(&m, &r, raw, g, p0, p1);
        for (int j = 0; j < NP; j++) {
            CHECK_NEAR(g[j], raw[j] + 0.5 * p0[j], 1e-14);
            CHECK_NEAR(p1[j], p0[j] - 0.1 * g[j], 1e-14);
        }
    }
    nb_backward_result_free(&r);
    model_free(&m);
}

/* AdamW's decay and Adam's L2 both pull towards zero but differently:
 * AdamW scales the parameter by 1 - lr * wd before the step. One step from
 * the same start: adamw = (1 - lr wd) p0 + (adam step with no decay). */
static void test_weight_decay_decoupled(void)
{
    double p_plain[NP], p_w[NP], p0[NP];
    for (int k = 0; k < 2; k++) {
        model m;
        model_init(&m, NB_F64, 1.0);
        nb_optimizer o = k ? nb_adamw(0.05, 0.4) : nb_adam(0.05);
        nb_backward_result r;
        REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
        REQUIRE_OK(run_startup(&m));
        read_params(&m, p0);
        CHECK_OK(step(&m, 0, NULL, NULL));
        read_params(&m, k ? p_w : p_plain);
        nb_backward_result_free(&r);
        model_free(&m);
    }
    for (int j = 0; j < NP; j++) CHECK_NEAR(p_w[j], p_plain[j] - 0.05 * 0.4 * p0[j], 1e-14);
}

static void test_clip_by_value(void)
{
    model m;
    model_init(&m, NB_F64, 10.0);
    nb_optimizer o = nb_sgd(0.01);
    o.clip = NB_CLIP_VALUE;
    o.clip_value = 0.5;
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    REQUIRE_OK(run_startup(&m));
    double raw[NP], g[NP], p0[NP], p1[NP];
    grads_of_step(&m, &r, raw, g, p0, p1);
    bool some_clipped = false;
    for (int j = 0; j < NP; j++) {
        some_clipped |= fabs(raw[j]) > 0.5;
        CHECK_NEAR(g[j], fmax(-0.5, fmin(0.5, raw[j])), 0);
        CHECK(fabs(p1[j] - p0[j]) <= 0.01 * 0.5 + 1e-15);
        CHECK_NEAR(p1[j], p0[j] - 0.01 * g[j], 1e-15);
    }
    CHECK(some_clipped);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* Each gradient separately: w's 3 elements to norm c, b's 1 element too. */
static void test_clip_by_norm(void)
{
    model m;
    model_init(&m, NB_F64, 10.0);
    nb_optimizer o = nb_sgd(0.01);
    o.clip = NB_CLIP_NORM;
    o.clip_value = 1.0;
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    REQUIRE_OK(run_startup(&m));
    double raw[NP], g[NP], p0[NP], p1[NP];
    grads_of_step(&m, &r, raw, g, p0, p1);
    double nw = norm(raw, D), nb = fabs(raw[D]);
    CHECK(nw > 1.0 && nb > 1.0); /* both are clipped */
    CHECK_NEAR(norm(g, D), 1.0, 1e-12);
    CHECK_NEAR(fabs(g[D]), 1.0, 1e-12);
    for (int j = 0; j < D; j++) CHECK_NEAR(g[j], raw[j] / nw, 1e-12); /* same direction */
    CHECK_NEAR(g[D], raw[D] / nb, 1e-12);
    double dp[NP];
    for (int j = 0; j < NP; j++) dp[j] = p1[j] - p0[j];
    CHECK(norm(dp, D) <= 0.01 + 1e-14);
    nb_backward_result_free(&r);
    /* A gradient within the bound passes unchanged. */
    model m2;
    model_init(&m2, NB_F64, 10.0);
    o.clip_value = 1e6;
    REQUIRE_OK(nb_minimize(&o, m2.main, m2.startup, m2.loss, NULL, &r));
    REQUIRE_OK(run_startup(&m2));
    grads_of_step(&m2, &r, raw, g, p0, p1);
    for (int j = 0; j < NP; j++) CHECK_NEAR(g[j], raw[j], 0);
    nb_backward_result_free(&r);
    model_free(&m2);
    model_free(&m);
}

/* One norm over all gradients, one factor for all. */
static void test_clip_by_global_norm(void)
{
    model m;
    model_init(&m, NB_F64, 10.0);
    nb_optimizer o = nb_sgd(0.01);
    o.clip = NB_CLIP_GLOBAL_NORM;
    o.clip_value = 2.0;
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    REQUIRE_OK(run_startup(&m));
    for (int s = 0; s < 3; s++) {
        double raw[NP], g[NP], p0[NP], p1[NP];
        grads_of_step(&m, &r, raw, g, p0, p1);
        double n = norm(raw, NP);
        CHECK(n > 2.0);
        CHECK_NEAR(norm(g, NP), 2.0, 1e-12);
        for (int j = 0; j < NP; j++) CHECK_NEAR(g[j], raw[j] * 2.0 / n, 1e-12);
        double dp[NP];
        for (int j = 0; j < NP; j++) dp[j] = p1[j] - p0[j];
        CHECK(norm(dp, NP) <= 0.01 * 2.0 + 1e-14);
    }
    nb_backward_result_free(&r);
    model_free(&m);
}

/* The learning-rate var follows the schedule, warm-up first, and the
 * update uses it. */
static void test_schedule_in_program(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    nb_optimizer o = nb_sgd(0.2);
    o.schedule = (nb_lr_schedule){.kind = "step", .step_size = 1, .gamma = 0.5, .warmup_steps = 2};
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    const char *lr_var = nb_optimizer_lr_var(m.main);
    CHECK(lr_var != NULL);
    REQUIRE_OK(run_startup(&m));
    const double want[] = {0.1, 0.2, 0.2, 0.1, 0.05};
    for (int s = 0; s < 5 && lr_var; s++) {
        double p0[NP], p1[NP], g[NP];
        read_params(&m, p0);
        ref_grad(&m, p0, g);
        nb_tensor *lr = NULL;
        CHECK_OK(step(&m, 1, &lr_var, &lr));
        CHECK_NEAR(scalar_of(lr), want[s], 1e-15);
        CHECK(lr && lr->dtype == NB_F64);
        read_params(&m, p1);
        for (int j = 0; j < NP; j++) CHECK_NEAR(p1[j], p0[j] - want[s] * g[j], 1e-13);
        nb_tensor_release(lr);
    }
    nb_backward_result_free(&r);
    model_free(&m);
}

/* A float32 and a float64 parameter in one program: the global norm is
 * summed in float64 and the learning rate is float64. loss = sum(a^2) +
 * sum(b^2), so the raw gradients are 2a and 2b. */
static void test_mixed_dtypes_global_norm(void)
{
    nb_program *main, *startup;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main, startup));
    nb_value a =
        nb_create_parameter(b, "a", NB_F32, 1, S(2), "fill_constant", 1, (nb_attr[]){NB_ATTR_FLOAT("value", 3.0)});
    nb_value c =
        nb_create_parameter(b, "c", NB_F64, 1, S(1), "fill_constant", 1, (nb_attr[]){NB_ATTR_FLOAT("value", 4.0)});
    nb_value loss = nb_add(b, nb_reduce_sum(b, nb_square(b, nb_cast(b, a, NB_F64)), 0, NULL, false),
                           nb_reduce_sum(b, nb_square(b, c), 0, NULL, false));
    nb_optimizer o = nb_sgd(0.1);
    o.clip = NB_CLIP_GLOBAL_NORM;
    o.clip_value = 1.0;
    nb_backward_result r;
    nb_scope *scope;
    nb_executor *ex;
    CHECK_OK(nb_scope_new(&scope, NULL));
    CHECK_OK(nb_executor_new(&ex));
    nb_status st = nb_builder_status(b);
    if (!st) st = nb_minimize(&o, main, startup, nb_value_name(loss), NULL, &r);
    CHECK_OK(st);
    if (!st) {
        const char *lr = nb_optimizer_lr_var(main);
        nb_var *lv = lr ? nb_block_find_var(nb_program_global_block(main), lr) : NULL;
        CHECK(lv && lv->dtype == NB_F64);
        CHECK_OK(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
        const char *fetch[2] = {grad_of_pair(&r, "a"), grad_of_pair(&r, "c")};
        nb_tensor *g[2] = {0};
        CHECK_OK(nb_executor_run(ex, main, scope, NB_NO_FEEDS, NB_NAMES_N(2, fetch), g));
        /* Raw gradients (6, 6) and (8): norm sqrt(36 + 36 + 64) = sqrt(136). */
        const double k = 1.0 / sqrt(136.0);
        CHECK(g[0] && g[0]->dtype == NB_F32 && g[1] && g[1]->dtype == NB_F64);
        CHECK_TENSOR(g[0], S(2), 1e-6, 6 * k, 6 * k);
        CHECK_TENSOR(g[1], S(1), 1e-12, 8 * k);
        CHECK_TENSOR(nb_scope_find(scope, "a"), S(2), 1e-6, 3 - 0.6 * k, 3 - 0.6 * k);
        CHECK_TENSOR(nb_scope_find(scope, "c"), S(1), 1e-12, 4 - 0.8 * k);
        release_all(g[0], g[1], NULL);
        nb_backward_result_free(&r);
    }
    nb_executor_free(ex);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main);
}

/* ---- the program nb_minimize writes --------------------------------------------------------- */

static void test_roles_and_role_vars(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    int fwd = nb_program_global_block(m.main)->n_ops;
    nb_optimizer o = nb_adam(0.01);
    o.clip = NB_CLIP_GLOBAL_NORM;
    o.clip_value = 1;
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    nb_block *b = nb_program_global_block(m.main);
    int n_update = 0, n_inc = 0, n_sched = 0, first_opt = -1, last_bwd = -1;
    for (int i = fwd; i < b->n_ops; i++) {
        nb_op *op = b->ops[i];
        if (op->role == NB_ROLE_BACKWARD || op->role == NB_ROLE_LOSS) last_bwd = i;
        if (op->role == NB_ROLE_OPTIMIZE && first_opt < 0) first_opt = i;
        if (!strcmp(op->def->name, "adam")) {
            n_update++;
            CHECK(op->role == NB_ROLE_OPTIMIZE);
            const char *p = nb_op_in_name(op, 0, 0), *g = nb_op_in_name(op, 1, 0);
            CHECK(op->role_var[0] && !strcmp(op->role_var[0], p));
            CHECK(op->role_var[1] && !strcmp(op->role_var[1], g));
            CHECK_STR(g, grad_of_pair(&r, p));
            /* In place: every output is the input it updates. */
            CHECK_STR(nb_op_out_name(op, 0, 0), p);
            CHECK_STR(nb_op_out_name(op, 1, 0), nb_op_in_name(op, 2, 0));
            CHECK_STR(nb_op_out_name(op, 2, 0), nb_op_in_name(op, 3, 0));
            CHECK_STR(nb_op_out_name(op, 3, 0), nb_op_in_name(op, 5, 0));
            CHECK_STR(nb_op_out_name(op, 4, 0), nb_op_in_name(op, 6, 0));
            CHECK_STR(nb_op_in_name(op, 4, 0), nb_optimizer_lr_var(m.main));
        } else if (!strcmp(op->def->name, "increment")) {
            n_inc++;
            CHECK(op->role == NB_ROLE_OPTIMIZE && !op->role_var[0]);
            CHECK_STR(nb_op_in_name(op, 0, 0), nb_op_out_name(op, 0, 0));
        } else if (!strcmp(op->def->name, "lr_schedule")) {
            n_sched++;
            CHECK(op->role == NB_ROLE_OPTIMIZE && !op->role_var[0]);
        }
    }
    CHECK(n_update == 2 && n_inc == 1 && n_sched == 1);
    CHECK(first_opt > last_bwd); /* the optimisation part follows the gradients */
    /* Every op after the gradients is an optimisation op; the per-parameter
     * clipping ops name their parameter. */
    int with_role_var = 0;
    for (int i = first_opt; i < b->n_ops; i++) {
        CHECK(b->ops[i]->role == NB_ROLE_OPTIMIZE);
        with_role_var += b->ops[i]->role_var[0] != NULL;
    }
    CHECK(with_role_var > 2);
    /* Startup initialisers have the startup role. */
    nb_block *sb = nb_program_global_block(m.startup);
    for (int i = 0; i < sb->n_ops; i++) CHECK(sb->ops[i]->role == NB_ROLE_STARTUP);
    /* An evaluation copy drops them. */
    nb_program *test;
    REQUIRE_OK(nb_program_clone_for_test(&test, m.main));
    nb_block *tb = nb_program_global_block(test);
    for (int i = 0; i < tb->n_ops; i++) CHECK(tb->ops[i]->role != NB_ROLE_OPTIMIZE);
    nb_program_free(test);
    nb_backward_result_free(&r);
    model_free(&m);
}

static bool listed(int n, const char **names, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

static void test_state_vars_persistable_and_listed(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    nb_optimizer o = nb_adam(0.01);
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    int n;
    const char **names;
    REQUIRE_OK(nb_optimizer_state_vars(m.main, &n, &names));
    const char *want[] = {"@LR_STEP@_0",      "learning_rate_0",  "fc.w_moment1_0", "fc.w_moment2_0",
                          "fc.w_beta1_pow_0", "fc.w_beta2_pow_0", "fc.b_moment1_0", "fc.b_moment2_0",
                          "fc.b_beta1_pow_0", "fc.b_beta2_pow_0"};
    CHECK(n == 10);
    for (int i = 0; i < 10; i++) CHECK(listed(n, names, want[i]));
    nb_block *mb = nb_program_global_block(m.main), *sb = nb_program_global_block(m.startup);
    for (int i = 0; i < n; i++) {
        nb_var *v = nb_block_find_var(mb, names[i]);
        CHECK(v && v->persistable && !v->is_parameter);
        /* Initialised once, in startup. */
        int inits = 0;
        for (int k = 0; k < sb->n_ops; k++)
            inits += !strcmp(sb->ops[k]->def->name, "fill_constant") && !strcmp(sb->ops[k]->outputs[0], names[i]);
        CHECK(inits == 1);
        CHECK(nb_block_find_var(sb, names[i]) && nb_block_find_var(sb, names[i])->persistable);
    }
    /* Shaped and typed like the parameter. */
    nb_var *m1 = nb_block_find_var(mb, "fc.w_moment1_0"), *bp = nb_block_find_var(mb, "fc.w_beta1_pow_0");
    CHECK(m1 && m1->dtype == NB_F64 && m1->ndim == 2 && m1->shape[0] == D && m1->shape[1] == 1);
    CHECK(bp && bp->dtype == NB_F64 && bp->ndim == 1 && bp->shape[0] == 1);
    REQUIRE_OK(run_startup(&m));
    CHECK_TENSOR(nb_scope_find(m.scope, "fc.w_beta1_pow_0"), S(1), 0, 0.9);
    CHECK_TENSOR(nb_scope_find(m.scope, "fc.b_beta2_pow_0"), S(1), 0, 0.999);
    CHECK_TENSOR(nb_scope_find(m.scope, "fc.w_moment2_0"), S(D, 1), 0, 0, 0, 0);
    CHECK_TENSOR(nb_scope_find(m.scope, "@LR_STEP@_0"), S(1), 0, 0);
    CHECK_OK(step(&m, 0, NULL, NULL));
    CHECK_OK(step(&m, 0, NULL, NULL));
    nb_tensor *ctr = nb_scope_find(m.scope, "@LR_STEP@_0");
    CHECK(ctr && ctr->dtype == NB_I64);
    CHECK_TENSOR(ctr, S(1), 0, 2);
    CHECK_TENSOR(nb_scope_find(m.scope, "fc.w_beta1_pow_0"), S(1), 1e-15, 0.9 * 0.9 * 0.9);
    CHECK_TENSOR(nb_scope_find(m.scope, "learning_rate_0"), S(1), 0, 0.01);
    free(names);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* The persistable vars are all a run needs: a copy of them taken after
 * three steps continues exactly as the original. */
static void test_resume_from_persistables(void)
{
    nb_optimizer kinds[] = {nb_adam(0.05), nb_momentum(0.05, 0.9, true), nb_rmsprop(0.01), nb_adagrad(0.1)};
    kinds[2].centered = true;
    kinds[2].momentum = 0.3;
    kinds[0].schedule = (nb_lr_schedule){.kind = "exponential", .gamma = 0.9, .warmup_steps = 2};
    for (int k = 0; k < 4; k++) {
        model m;
        model_init(&m, NB_F64, 1.0);
        nb_backward_result r;
        REQUIRE_OK(nb_minimize(&kinds[k], m.main, m.startup, m.loss, NULL, &r));
        REQUIRE_OK(run_startup(&m));
        for (int s = 0; s < 3; s++) CHECK_OK(step(&m, 0, NULL, NULL));
        nb_scope *copy;
        REQUIRE_OK(nb_scope_new(&copy, NULL));
        nb_block *mb = nb_program_global_block(m.main);
        for (int i = 0; i < mb->n_vars; i++) {
            if (!mb->vars[i]->persistable) continue;
            nb_tensor *t = nb_scope_find(m.scope, mb->vars[i]->name), *c = NULL;
            CHECK(t != NULL);
            if (!t) continue;
            CHECK_OK(nb_tensor_clone(&c, t));
            CHECK_OK(nb_scope_set(copy, mb->vars[i]->name, c));
            nb_tensor_release(c);
        }
        nb_feed feeds[2] = {{"x", m.fx}, {"label", m.fy}};
        for (int s = 0; s < 3; s++) {
            CHECK_OK(step(&m, 0, NULL, NULL));
            CHECK_OK(nb_executor_run(m.ex, m.main, copy, NB_FEEDS_N(2, feeds), NB_NO_NAMES, NULL));
        }
        const char *params[2] = {"fc.w", "fc.b"};
        for (int i = 0; i < 2; i++) {
            nb_tensor *a = nb_scope_find(m.scope, params[i]), *b = nb_scope_find(copy, params[i]);
            CHECK(a && b && nb_tensor_allclose(a, b, 0, 0));
        }
        nb_scope_free(copy);
        nb_backward_result_free(&r);
        model_free(&m);
    }
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_errors_leave_programs_unchanged(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    nb_block *mb = nb_program_global_block(m.main), *sb = nb_program_global_block(m.startup);
    const int n_main = mb->n_ops, n_start = sb->n_ops;
    nb_backward_result r;
    nb_optimizer o = nb_adam(0.01);
    o.beta1 = 1.0;
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r), NB_ERR_ARG, "beta1 is 1");
    o = nb_sgd(0.1);
    o.weight_decay = 0.1;
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r), NB_ERR_ARG, "use l2");
    o = nb_sgd(0.1);
    o.clip = NB_CLIP_NORM;
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r), NB_ERR_ARG, "clip_value is 0");
    o = nb_sgd(0.1);
    o.schedule.kind = "cosine";
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r), NB_ERR_ARG, "total_steps");
    o = nb_sgd(-1);
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r), NB_ERR_ARG, "lr is -1");
    o = nb_sgd(0.1);
    CHECK_ERR(nb_minimize(&o, m.main, NULL, m.loss, NULL, &r), NB_ERR_ARG, "startup");
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, "nope", NULL, &r), NB_ERR_NOT_FOUND, "nope");
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, &(nb_backward_opts){.params = NB_NAMES("x")}, &r), NB_ERR_ARG,
              "not persistable");
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, &(nb_backward_opts){.params = NB_NAMES("fc.q")}, &r),
              NB_ERR_NOT_FOUND, "fc.q");
    m.bias->trainable = false;
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, m.loss, &(nb_backward_opts){.params = NB_NAMES("fc.b")}, &r),
              NB_ERR_ARG, "frozen");
    CHECK(r.n_pairs == 0 && !r.pairs);
    CHECK(mb->n_ops == n_main && sb->n_ops == n_start);
    /* It still works afterwards. */
    m.bias->trainable = true;
    CHECK_OK(nb_minimize(&o, m.main, m.startup, m.loss, NULL, &r));
    CHECK(mb->n_ops > n_main);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* A failure after the gradient part was appended takes it away again. */
static void test_late_failure_rolls_back(void)
{
    model m;
    model_init(&m, NB_F64, 1.0);
    char longname[600];
    memset(longname, 'p', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    nb_value w = nb_create_parameter(m.b, longname, NB_F64, 1, S(1), "fill_constant", 1,
                                     (nb_attr[]){NB_ATTR_FLOAT("value", 1.0)});
    nb_value cost = nb_add(m.b, nb_value_by_name(m.b, m.loss), nb_reduce_sum(m.b, w, 0, NULL, false));
    REQUIRE_OK(nb_builder_status(m.b));
    nb_block *mb = nb_program_global_block(m.main), *sb = nb_program_global_block(m.startup);
    const int n_main = mb->n_ops, n_start = sb->n_ops;
    nb_optimizer o = nb_momentum(0.1, 0.9, false);
    nb_backward_result r;
    CHECK_ERR(nb_minimize(&o, m.main, m.startup, nb_value_name(cost), NULL, &r), NB_ERR_ARG, "too long");
    CHECK(mb->n_ops == n_main && sb->n_ops == n_start);
    CHECK(r.n_pairs == 0 && !r.pairs);
    model_free(&m);
}

int main(void)
{
    RUN(test_each_kind_matches_torch);
    RUN(test_float32_matches_torch);
    RUN(test_sgd_converges_monotonically);
    RUN(test_frozen_parameter_unchanged);
    RUN(test_explicit_param_list);
    RUN(test_l2_gradient);
    RUN(test_weight_decay_decoupled);
    RUN(test_clip_by_value);
    RUN(test_clip_by_norm);
    RUN(test_clip_by_global_norm);
    RUN(test_schedule_in_program);
    RUN(test_mixed_dtypes_global_norm);
    RUN(test_roles_and_role_vars);
    RUN(test_state_vars_persistable_and_listed);
    RUN(test_resume_from_persistables);
    RUN(test_errors_leave_programs_unchanged);
    RUN(test_late_failure_rolls_back);
    return test_report();
}
