/* Control flow with gradients (issue 6): while, cond, recurrent (nb_scan)
 * and nested nets. Each model is one C function written against a builder;
 * its gradients in a static program (the control-flow ops and the grad
 * blocks nb_gradients writes for them) must equal those of the same function
 * run eagerly (where the helpers unroll on the tape), those of the loop
 * unrolled by hand, and central finite differences in float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "test.h"
#include "grad_compare.h"
#include "program/record.h"

#define MAXP 6

typedef nb_status (*model_fn)(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx);

typedef struct setup {
    model_fn f;
    void *ctx;
    int n; /* parameters, all float64 */
    nb_tensor *p[MAXP];
    const char *names[MAXP];
} setup;

/* ---- running a model three ways ------------------------------------------ */

typedef struct compiled {
    char loss[256];
    nb_program *prog;
    nb_prepared *loss_only, *with_grads;
    nb_scope *scope;
    nb_backward_result r;
} compiled;

static void compile(const setup *s, compiled *c, bool grads)
{
    memset(c, 0, sizeof *c);
    REQUIRE_OK(nb_program_new(&c->prog));
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_record(&b, c->prog, NULL));
    nb_value p[MAXP], loss = NB_NONE;
    for (int i = 0; i < s->n; i++) p[i] = nb_data(b, s->names[i], NB_F64, s->p[i]->ndim, s->p[i]->shape);
    CHECK_OK(s->f(b, p, &loss, s->ctx));
    CHECK_OK(nb_builder_status(b));
    if (nb_builder_status(b)) fprintf(stderr, "  %s\n", nb_builder_error(b));
    const char *ln = nb_value_name(loss);
    if (!ln) return;
    snprintf(c->loss, sizeof c->loss, "%s", ln);
    REQUIRE_OK(nb_prepare(&c->loss_only, c->prog, 0, NB_NAMES_N(s->n, s->names), NB_NAMES_N(1, &ln)));
    if (grads) {
        CHECK_OK(nb_gradients(c->prog, NB_NAMES_N(1, &ln), NB_NAMES_N(s->n, s->names),
                              &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &c->r));
        const char *fetch[MAXP + 1] = {ln};
        for (int i = 0; i < s->n; i++) fetch[1 + i] = c->r.grads[i] ? c->r.grads[i] : ln;
        REQUIRE_OK(nb_prepare(&c->with_grads, c->prog, 0, NB_NAMES_N(s->n, s->names), NB_NAMES_N(1 + s->n, fetch)));
    }
    REQUIRE_OK(nb_scope_new(&c->scope, NULL));
    nb_builder_free(b);
}

static void compiled_free(compiled *c)
{
    nb_prepared_free(c->loss_only);
    nb_prepared_free(c->with_grads);
    nb_scope_free(c->scope);
    nb_backward_result_free(&c->r);
    nb_program_free(c->prog);
}

static double run_loss(compiled *c, nb_tensor *const *p)
{
    nb_tensor *l = NULL;
    CHECK_OK(nb_prepared_run(c->loss_only, c->scope, p, &l));
    double v = l ? nb_tensor_get(l, 0) : NAN;
    nb_tensor_release(l);
    return v;
}

/* Loss and gradients (NULL where a parameter has none) of the static form. */
static double static_grads(const setup *s, compiled *c, nb_tensor **g)
{
    nb_tensor *out[MAXP + 1] = {0};
    CHECK_OK(nb_prepared_run(c->with_grads, c->scope, s->p, out));
    for (int i = 0; i < s->n; i++) g[i] = c->r.grads[i] ? out[1 + i] : (nb_tensor_release(out[1 + i]), NULL);
    double v = out[0] ? nb_tensor_get(out[0], 0) : NAN;
    nb_tensor_release(out[0]);
    return v;
}

/* Loss and gradients of the eager form (helpers unrolled on the tape). */
static double eager_grads(const setup *s, nb_tensor **g)
{
    nb_builder *b;
    CHECK_OK(nb_builder_new_eager(&b));
    nb_tensor *leaf[MAXP];
    nb_value p[MAXP], loss = NB_NONE;
    for (int i = 0; i < s->n; i++) {
        CHECK_OK(nb_tensor_clone(&leaf[i], s->p[i]));
        CHECK_OK(nb_tensor_set_requires_grad(leaf[i], true));
        p[i] = nb_eager_value(b, leaf[i]);
    }
    CHECK_OK(s->f(b, p, &loss, s->ctx));
    nb_tensor *l = nb_eager_tensor(loss);
    double v = l ? nb_tensor_get(l, 0) : NAN;
    if (l) CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    for (int i = 0; i < s->n; i++) {
        nb_tensor *gi = nb_tensor_grad(leaf[i]);
        g[i] = gi ? nb_tensor_retain(gi) : NULL;
        nb_tensor_release(leaf[i]);
    }
    nb_builder_free(b);
    return v;
}

/* Central differences of the static loss, element by element. */
static void fd_check(const setup *s, compiled *c, nb_tensor *const *g, double tol)
{
    const double eps = 1e-6;
    for (int i = 0; i < s->n; i++)
        for (int64_t e = 0; e < nb_tensor_numel(s->p[i]); e++) {
            double x0 = nb_tensor_get(s->p[i], e);
            nb_tensor_set(s->p[i], e, x0 + eps);
            double up = run_loss(c, s->p);
            nb_tensor_set(s->p[i], e, x0 - eps);
            double down = run_loss(c, s->p);
            nb_tensor_set(s->p[i], e, x0);
            double want = (up - down) / (2 * eps), got = g[i] ? nb_tensor_get(g[i], e) : 0;
            if (fabs(want - got) > tol * (1 + fabs(want)))
                fprintf(stderr, "  %s[%lld]: finite differences %.9g, gradient %.9g\n", s->names[i], (long long)e, want,
                        got);
            CHECK(fabs(want - got) <= tol * (1 + fabs(want)));
        }
}

/* Like gc_check_same, with NULL (no path to the loss) standing for zeros. */
static void check_same_grad(const char *name, int k, const nb_tensor *want, const nb_tensor *got, double tol)
{
    const nb_tensor *t = want ? want : got;
    if (!want != !got)
        for (int64_t e = 0; t && e < nb_tensor_numel(t); e++) CHECK(nb_tensor_get(t, e) == 0);
    else gc_check_same(name, k, want, got, tol, "");
}

/* Forward mode through the same program: the JVP rules of the control-flow
 * ops (blocks derived into tangent blocks) give <grad, t> for a direction t. */
static void check_jvp(const char *name, const setup *s, nb_tensor *const *grads)
{
    nb_program *prog;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&prog));
    REQUIRE_OK(nb_builder_new_record(&b, prog, NULL));
    nb_value p[MAXP], loss = NB_NONE;
    char tn[MAXP][64];
    const char *feeds[2 * MAXP], *tnames[MAXP];
    nb_tensor *vals[2 * MAXP];
    double want = 0;
    for (int i = 0; i < s->n; i++) {
        p[i] = nb_data(b, s->names[i], NB_F64, s->p[i]->ndim, s->p[i]->shape);
        snprintf(tn[i], sizeof tn[i], "%s@t", s->names[i]);
        nb_data(b, tn[i], NB_F64, s->p[i]->ndim, s->p[i]->shape);
        feeds[i] = s->names[i];
        feeds[s->n + i] = tnames[i] = tn[i];
        vals[i] = s->p[i];
        vals[s->n + i] = gc_filled(NB_F64, s->p[i]->ndim, s->p[i]->shape, 20 + i, -1, 1);
        for (int64_t e = 0; grads[i] && e < nb_tensor_numel(grads[i]); e++)
            want += nb_tensor_get(grads[i], e) * nb_tensor_get(vals[s->n + i], e);
    }
    CHECK_OK(s->f(b, p, &loss, s->ctx));
    const char *ln = nb_value_name(loss);
    char *lt = NULL;
    nb_status st = nb_append_jvp(prog, NB_NAMES_N(s->n, s->names), tnames, NB_NAMES_N(1, &ln), &lt);
    CHECK_OK(st);
    if (!st && lt) {
        nb_prepared *pp;
        const char *fetch = lt;
        nb_tensor *got = NULL;
        CHECK_OK(nb_prepare(&pp, prog, 0, NB_NAMES_N(2 * s->n, feeds), NB_NAMES_N(1, &fetch)));
        nb_scope *scope;
        CHECK_OK(nb_scope_new(&scope, NULL));
        CHECK_OK(nb_prepared_run(pp, scope, vals, &got));
        if (got && fabs(nb_tensor_get(got, 0) - want) > 1e-9 * (1 + fabs(want)))
            fprintf(stderr, "  %s: JVP %.12g, <grad, t> %.12g\n", name, nb_tensor_get(got, 0), want);
        CHECK(got && fabs(nb_tensor_get(got, 0) - want) <= 1e-9 * (1 + fabs(want)));
        nb_tensor_release(got);
        nb_scope_free(scope);
        nb_prepared_free(pp);
    } else if (!st) {
        CHECK(want == 0);
    }
    free(lt);
    for (int i = 0; i < s->n; i++) nb_tensor_release(vals[s->n + i]);
    nb_builder_free(b);
    nb_program_free(prog);
}

/* The whole check: static == eager, static == finite differences, and
 * forward mode agrees with reverse. */
static void check_model(const char *name, setup *s)
{
    compiled c;
    compile(s, &c, true);
    nb_tensor *gs[MAXP] = {0}, *ge[MAXP] = {0};
    double ls = static_grads(s, &c, gs), le = eager_grads(s, ge);
    CHECK(fabs(ls - le) <= 1e-12 * (1 + fabs(le)));
    for (int i = 0; i < s->n; i++) check_same_grad(name, i, ge[i], gs[i], 1e-10);
    fd_check(s, &c, gs, 1e-6);
    check_jvp(name, s, gs);
    /* Inference (one scope reused per op run) computes the same loss. */
    nb_program *test_prog;
    REQUIRE_OK(nb_program_clone_for_test(&test_prog, c.prog));
    compiled ct = {.prog = test_prog, .scope = c.scope};
    const char *ln = c.loss;
    if (!nb_prepare(&ct.loss_only, test_prog, 0, NB_NAMES_N(s->n, s->names), NB_NAMES_N(1, &ln)))
        CHECK(run_loss(&ct, s->p) == ls);
    nb_prepared_free(ct.loss_only);
    nb_program_free(test_prog);
    for (int i = 0; i < s->n; i++) {
        nb_tensor_release(gs[i]);
        nb_tensor_release(ge[i]);
    }
    compiled_free(&c);
}

static void setup_free(setup *s)
{
    for (int i = 0; i < s->n; i++) nb_tensor_release(s->p[i]);
}

static nb_value scalar(nb_builder *b, nb_dtype dt, double v) { return nb_fill_constant(b, dt, 1, S(1), v); }

/* ---- while ---------------------------------------------------------------------- */

/* carry = (i, h); while i < n: h = tanh(h W + x), i += 1; loss = sum(h^2).
 * n is an int the caller sets (a trip count known only at run time in the
 * program: the loop reads it from a fed var). */
typedef struct loop_ctx {
    int64_t n;
    nb_value W, x, n_var;
    double limit; /* > 0: also stop once sum(h^2) reaches it (a data-dependent trip count) */
} loop_ctx;

static nb_status loop_cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    loop_ctx *l = ctx;
    nb_value go = nb_less(b, c[0], l->n_var);
    if (l->limit > 0) {
        nb_value e = nb_reduce_sum(b, nb_mul(b, c[1], c[1]), 0, NULL, false);
        go = nb_logical_and(b, go,
                            nb_reshape(b, nb_less(b, e, nb_fill_constant(b, NB_F64, 0, NULL, l->limit)), 1, S(1)));
    }
    *pred = go;
    return nb_builder_status(b);
}

static nb_status loop_body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    loop_ctx *l = ctx;
    next[0] = nb_add(b, c[0], scalar(b, NB_I64, 1));
    next[1] = nb_tanh(b, nb_add(b, nb_matmul(b, c[1], l->W, 0), l->x));
    return nb_builder_status(b);
}

static nb_status while_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    loop_ctx *l = ctx;
    l->W = p[0];
    l->x = p[1];
    l->n_var = scalar(b, NB_I64, (double)l->n);
    nb_value init[2] = {scalar(b, NB_I64, 0), p[2]}, fin[2];
    nb_status st = nb_while_loop(b, loop_cond, loop_body, l, NB_VALUES_N(2, init), fin);
    if (st) return st;
    *loss = nb_reduce_sum(b, nb_mul(b, fin[1], fin[1]), 0, NULL, false);
    return nb_builder_status(b);
}

/* The same loop unrolled by hand, n times. */
static nb_status unrolled_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    loop_ctx *l = ctx;
    nb_value h = p[2];
    for (int64_t i = 0; i < l->n; i++) h = nb_tanh(b, nb_add(b, nb_matmul(b, h, p[0], 0), p[1]));
    *loss = nb_reduce_sum(b, nb_mul(b, h, h), 0, NULL, false);
    return nb_builder_status(b);
}

static void loop_setup(setup *s, loop_ctx *l, model_fn f)
{
    *s = (setup){.f = f, .ctx = l, .n = 3, .names = {"W", "x", "h0"}};
    s->p[0] = gc_filled(NB_F64, 2, S(3, 3), 0, -0.8, 0.8);
    s->p[1] = gc_filled(NB_F64, 2, S(2, 3), 1, -0.5, 0.5);
    s->p[2] = gc_filled(NB_F64, 2, S(2, 3), 2, -1, 1);
}

/* The loop stopped once sum(h^2) passes 1.9, from a small start, so that it
 * grows past the limit after a few iterations, far enough from it that
 * finite differences do not change the count. */
static void data_dependent_setup(setup *s, loop_ctx *l)
{
    *l = (loop_ctx){.n = 50, .limit = 1.9};
    loop_setup(s, l, while_model);
    nb_tensor_release(s->p[2]);
    s->p[2] = gc_filled(NB_F64, 2, S(2, 3), 2, -0.5, 0.5);
}

static void test_while_gradients(void)
{
    for (int64_t n = 0; n <= 4; n += 2) {
        loop_ctx l = {.n = n};
        setup s;
        loop_setup(&s, &l, while_model);
        check_model("while", &s);
        /* The same gradients as the loop unrolled by hand in a program. */
        compiled cw, cu;
        compile(&s, &cw, true);
        setup su = s;
        su.f = unrolled_model;
        compile(&su, &cu, true);
        nb_tensor *gw[MAXP] = {0}, *gu[MAXP] = {0};
        CHECK_NEAR(static_grads(&s, &cw, gw), static_grads(&su, &cu, gu), 1e-12);
        for (int i = 0; i < 3; i++) {
            check_same_grad("while vs unrolled", i, gu[i], gw[i], 1e-12);
            nb_tensor_release(gw[i]);
            nb_tensor_release(gu[i]);
        }
        compiled_free(&cw);
        compiled_free(&cu);
        setup_free(&s);
    }
}

/* The gradient of the loss with respect to parameter wrt, eagerly, at p + eps t
 * (a graph of it kept with create_graph when hvp_t is given: then hvp gets
 * the Hessian-vector product H t by a second reverse pass). */
static void eager_grad_of(const setup *s, int wrt, double eps, const nb_tensor *t, nb_tensor **g, nb_tensor **hvp)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *leaf[MAXP];
    nb_value p[MAXP], loss = NB_NONE;
    for (int i = 0; i < s->n; i++) {
        REQUIRE_OK(nb_tensor_clone(&leaf[i], s->p[i]));
        for (int64_t e = 0; i == wrt && e < nb_tensor_numel(leaf[i]); e++)
            nb_tensor_set(leaf[i], e, nb_tensor_get(leaf[i], e) + eps * nb_tensor_get(t, e));
        REQUIRE_OK(nb_tensor_set_requires_grad(leaf[i], true));
        p[i] = nb_eager_value(b, leaf[i]);
    }
    REQUIRE_OK(s->f(b, p, &loss, s->ctx));
    nb_tensor *l = nb_eager_tensor(loss);
    CHECK_OK(
        nb_autograd_grad(NB_TENSORS(l), NULL, NB_TENSORS(leaf[wrt]), (hvp ? NB_CREATE_GRAPH : 0) | NB_ALLOW_UNUSED, g));
    if (!*g) REQUIRE_OK(nb_tensor_new(g, NB_F64, t->ndim, t->shape)); /* unused: a zero gradient */
    if (hvp) *hvp = NULL;
    if (hvp && nb_tensor_requires_grad(*g)) {
        nb_value q =
            nb_reduce_sum(b, nb_mul(b, nb_eager_value(b, *g), nb_eager_value(b, (nb_tensor *)t)), 0, NULL, false);
        nb_tensor *qt = nb_eager_tensor(q);
        CHECK_OK(nb_autograd_grad(NB_TENSORS(qt), NULL, NB_TENSORS(leaf[wrt]), NB_ALLOW_UNUSED, hvp));
    }
    if (hvp && !*hvp) REQUIRE_OK(nb_tensor_new(hvp, NB_F64, t->ndim, t->shape));
    for (int i = 0; i < s->n; i++) nb_tensor_release(leaf[i]);
    nb_builder_free(b);
}

/* Eagerly the loop is unrolled on the tape, so second derivatives through it
 * are those of the unrolled graph: H t equals central differences of the
 * gradient along t. */
static void test_eager_second_order_through_loop(void)
{
    loop_ctx l;
    setup s;
    data_dependent_setup(&s, &l);
    nb_tensor *t = gc_filled(NB_F64, 2, S(3, 3), 9, -1, 1), *g = NULL, *hvp = NULL, *gp = NULL, *gm = NULL;
    eager_grad_of(&s, 0, 0, t, &g, &hvp);
    const double eps = 1e-5;
    eager_grad_of(&s, 0, eps, t, &gp, NULL);
    eager_grad_of(&s, 0, -eps, t, &gm, NULL);
    CHECK(hvp && gp && gm);
    double worst = 0, norm = 0;
    for (int64_t e = 0; hvp && gp && gm && e < 9; e++) {
        double fd = (nb_tensor_get(gp, e) - nb_tensor_get(gm, e)) / (2 * eps);
        worst = fmax(worst, fabs(fd - nb_tensor_get(hvp, e)));
        norm = fmax(norm, fabs(fd));
    }
    if (!(worst <= 1e-6 * (1 + norm))) fprintf(stderr, "  H t differs from differences by %g\n", worst);
    CHECK(norm > 1e-3 && worst <= 1e-6 * (1 + norm));
    nb_tensor_release(t), nb_tensor_release(g), nb_tensor_release(hvp), nb_tensor_release(gp), nb_tensor_release(gm);
    setup_free(&s);
}

/* The model in a program of its own: its parameters fed as data vars, then
 * data vars dirs[0..n_dirs) shaped like parameter wrt (directions). */
static nb_status model_program(const setup *s, int wrt, int n_dirs, const char *const *dirs, nb_program **prog,
                               nb_builder **b, const char **loss)
{
    nb_status st = nb_program_new(prog);
    if (!st) st = nb_builder_new_record(b, *prog, NULL);
    if (st) return st;
    nb_value p[MAXP], l = NB_NONE;
    for (int i = 0; i < s->n; i++) p[i] = nb_data(*b, s->names[i], NB_F64, s->p[i]->ndim, s->p[i]->shape);
    for (int i = 0; i < n_dirs; i++) nb_data(*b, dirs[i], NB_F64, s->p[wrt]->ndim, s->p[wrt]->shape);
    if (!(st = s->f(*b, p, &l, s->ctx))) st = nb_builder_status(*b);
    *loss = st ? NULL : nb_value_name(l);
    return st;
}

/* <the var named `grad`, the data var named `dir`>, a scalar of the program. */
static const char *inner(nb_builder *b, const char *grad, const char *dir)
{
    return nb_value_name(
        nb_reduce_sum(b, nb_mul(b, nb_value_by_name(b, grad), nb_value_by_name(b, dir)), 0, NULL, false));
}

/* Second derivatives of a static program through its control flow, with
 * respect to parameter wrt along a direction t: reverse over reverse
 * (nb_gradients of <grad, t>) and forward over reverse (nb_append_jvp of
 * the gradient) both equal the eager Hessian-vector product. */
static void check_second_order(const char *name, const setup *s, int wrt)
{
    nb_program *prog;
    nb_builder *b;
    const char *ln, *wn = s->names[wrt], *tn = "direction";
    REQUIRE_OK(model_program(s, wrt, 1, &tn, &prog, &b, &ln));
    nb_backward_result r1, r2;
    REQUIRE_OK(nb_gradients(prog, NB_NAMES_N(1, &ln), NB_NAMES_N(1, &wn), NULL, &r1));
    const char *qn = inner(b, r1.grads[0], tn);
    REQUIRE_OK(nb_builder_status(b));
    nb_status st = nb_gradients(prog, NB_NAMES_N(1, &qn), NB_NAMES_N(1, &wn), NULL, &r2);
    CHECK_OK(st);
    char *fr = NULL;
    CHECK_OK(nb_append_jvp(prog, NB_NAMES_N(1, &wn), &tn, NB_NAMES_N(1, (const char *const *)&r1.grads[0]), &fr));
    nb_tensor *t = gc_filled(NB_F64, s->p[wrt]->ndim, s->p[wrt]->shape, 31, -1, 1), *g = NULL, *want = NULL;
    eager_grad_of(s, wrt, 0, t, &g, &want);
    if (!st && fr && want) {
        const char *feeds[MAXP + 1], *fetch[2] = {r2.grads[0], fr};
        nb_tensor *vals[MAXP + 1], *got[2] = {0};
        for (int i = 0; i < s->n; i++) feeds[i] = s->names[i], vals[i] = s->p[i];
        feeds[s->n] = tn, vals[s->n] = t;
        nb_prepared *pp;
        nb_scope *scope;
        REQUIRE_OK(nb_prepare(&pp, prog, 0, NB_NAMES_N(s->n + 1, feeds), NB_NAMES_N(2, fetch)));
        REQUIRE_OK(nb_scope_new(&scope, NULL));
        CHECK_OK(nb_prepared_run(pp, scope, vals, got));
        for (int k = 0; k < 2; k++) {
            double worst = 0, norm = 0;
            for (int64_t e = 0; got[k] && e < nb_tensor_numel(want); e++) {
                worst = fmax(worst, fabs(nb_tensor_get(got[k], e) - nb_tensor_get(want, e)));
                norm = fmax(norm, fabs(nb_tensor_get(want, e)));
            }
            if (!got[k] || !(worst <= 1e-10 * (1 + norm)))
                fprintf(stderr, "  %s: %s differs from the eager H t by %g\n", name,
                        k ? "forward over reverse" : "reverse over reverse", worst);
            CHECK(got[k] && worst <= 1e-10 * (1 + norm));
            nb_tensor_release(got[k]);
        }
        nb_scope_free(scope);
        nb_prepared_free(pp);
    }
    free(fr);
    nb_tensor_release(t), nb_tensor_release(g), nb_tensor_release(want);
    nb_backward_result_free(&r1);
    if (!st) nb_backward_result_free(&r2);
    nb_builder_free(b);
    nb_program_free(prog);
}

/* A third derivative of a static program through its control flow:
 * T(p)[t, s, v], the gradient of <H t, s> (reverse over reverse over
 * reverse) along v, against central differences of <H t, s> itself, and
 * against forward mode over the two reverse passes. */
static void check_third_order(const char *name, const setup *s, int wrt)
{
    nb_program *prog;
    nb_builder *b;
    const int nd = s->p[wrt]->ndim;
    const int64_t *shape = s->p[wrt]->shape;
    const char *ln, *wn = s->names[wrt], *dirs[3] = {"dir_t", "dir_s", "dir_v"};
    REQUIRE_OK(model_program(s, wrt, 3, dirs, &prog, &b, &ln));
    nb_backward_result r1, r2, r3;
    REQUIRE_OK(nb_gradients(prog, NB_NAMES_N(1, &ln), NB_NAMES_N(1, &wn), NULL, &r1));
    const char *q2n = inner(b, r1.grads[0], dirs[0]);
    REQUIRE_OK(nb_gradients(prog, NB_NAMES_N(1, &q2n), NB_NAMES_N(1, &wn), NULL, &r2));
    const char *q3n = inner(b, r2.grads[0], dirs[1]);
    REQUIRE_OK(nb_gradients(prog, NB_NAMES_N(1, &q3n), NB_NAMES_N(1, &wn), NULL, &r3));
    char *q3t = NULL;
    const char *vn = dirs[2];
    REQUIRE_OK(nb_append_jvp(prog, NB_NAMES_N(1, &wn), &vn, NB_NAMES_N(1, &q3n), &q3t));
    REQUIRE_OK(nb_builder_status(b));
    nb_tensor *t = gc_filled(NB_F64, nd, shape, 41, -1, 1), *sd = gc_filled(NB_F64, nd, shape, 42, -1, 1);
    nb_tensor *v = gc_filled(NB_F64, nd, shape, 43, -1, 1), *w0 = s->p[wrt], *w = NULL;
    const char *feeds[MAXP + 3], *fetch[3] = {q3n, r3.grads[0], q3t};
    nb_tensor *vals[MAXP + 3];
    for (int i = 0; i < s->n; i++) feeds[i] = s->names[i], vals[i] = s->p[i];
    feeds[s->n] = "dir_t", vals[s->n] = t, feeds[s->n + 1] = "dir_s", vals[s->n + 1] = sd;
    feeds[s->n + 2] = "dir_v", vals[s->n + 2] = v;
    nb_prepared *pp;
    nb_scope *scope;
    REQUIRE_OK(nb_prepare(&pp, prog, 0, NB_NAMES_N(s->n + 3, feeds), NB_NAMES_N(3, fetch)));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    double at[2] = {0}, analytic = 0, fwd = NAN;
    const double eps = 1e-5;
    for (int run = 0; run < 3; run++) {
        nb_tensor *got[3] = {0};
        REQUIRE_OK(nb_tensor_clone(&w, w0));
        for (int64_t e = 0; run && e < nb_tensor_numel(w); e++)
            nb_tensor_set(w, e, nb_tensor_get(w, e) + (run == 1 ? eps : -eps) * nb_tensor_get(v, e));
        vals[wrt] = w;
        CHECK_OK(nb_prepared_run(pp, scope, vals, got));
        if (run == 0)
            for (int64_t e = 0; got[1] && e < nb_tensor_numel(v); e++)
                analytic += nb_tensor_get(got[1], e) * nb_tensor_get(v, e);
        else if (got[0]) at[run - 1] = nb_tensor_get(got[0], 0);
        if (run == 0 && got[2]) fwd = nb_tensor_get(got[2], 0);
        nb_tensor_release(got[2]);
        nb_tensor_release(got[0]), nb_tensor_release(got[1]), nb_tensor_release(w);
    }
    vals[wrt] = w0;
    double fd = (at[0] - at[1]) / (2 * eps);
    if (!(fabs(fd - analytic) <= 1e-6 * (1 + fabs(fd))))
        fprintf(stderr, "  %s: third derivative %.12g, differences %.12g\n", name, analytic, fd);
    CHECK(fabs(analytic) > 1e-6 && fabs(fd - analytic) <= 1e-6 * (1 + fabs(fd)));
    /* The same along v by forward mode over the two reverse passes. */
    if (!(fabs(fwd - analytic) <= 1e-9 * (1 + fabs(fd))))
        fprintf(stderr, "  %s: forward over reverse over reverse %.12g, reverse %.12g\n", name, fwd, analytic);
    CHECK(fabs(fwd - analytic) <= 1e-9 * (1 + fabs(fd)));
    nb_scope_free(scope);
    nb_prepared_free(pp);
    nb_tensor_release(t), nb_tensor_release(sd), nb_tensor_release(v);
    nb_backward_result_free(&r1), nb_backward_result_free(&r2), nb_backward_result_free(&r3);
    free(q3t);
    nb_builder_free(b);
    nb_program_free(prog);
}

/* Reverse over forward, the gradient of the JVP <grad, t>, is H t too; and
 * forward over forward, the JVP of that JVP along another direction t2, is
 * <t2, H t> (with one direction, tangents that the second pass confused with
 * the first's went unseen). */
static void check_reverse_over_forward(const char *name, const setup *s, int wrt)
{
    nb_program *prog;
    nb_builder *b;
    const char *ln, *wn = s->names[wrt], *dirs[2] = {"direction", "direction2"}, *tn = dirs[0], *sn = dirs[1];
    REQUIRE_OK(model_program(s, wrt, 2, dirs, &prog, &b, &ln));
    char *lt = NULL;
    REQUIRE_OK(nb_append_jvp(prog, NB_NAMES_N(1, &wn), &tn, NB_NAMES_N(1, &ln), &lt));
    nb_backward_result r;
    const char *ltn = lt;
    char *ltt = NULL;
    REQUIRE_OK(nb_append_jvp(prog, NB_NAMES_N(1, &wn), &sn, NB_NAMES_N(1, &ltn), &ltt));
    REQUIRE_OK(nb_gradients(prog, NB_NAMES_N(1, &ltn), NB_NAMES_N(1, &wn), NULL, &r));
    nb_tensor *t = gc_filled(NB_F64, s->p[wrt]->ndim, s->p[wrt]->shape, 31, -1, 1), *g = NULL, *want = NULL;
    eager_grad_of(s, wrt, 0, t, &g, &want);
    nb_tensor *t2 = gc_filled(NB_F64, s->p[wrt]->ndim, s->p[wrt]->shape, 32, -1, 1);
    const char *feeds[MAXP + 2], *fetch[2] = {r.grads[0], ltt};
    nb_tensor *vals[MAXP + 2], *got = NULL, *gots[2] = {0};
    for (int i = 0; i < s->n; i++) feeds[i] = s->names[i], vals[i] = s->p[i];
    feeds[s->n] = tn, vals[s->n] = t, feeds[s->n + 1] = sn, vals[s->n + 1] = t2;
    nb_prepared *pp;
    nb_scope *scope;
    REQUIRE_OK(nb_prepare(&pp, prog, 0, NB_NAMES_N(s->n + 2, feeds), NB_NAMES_N(2, fetch)));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    CHECK_OK(nb_prepared_run(pp, scope, vals, gots));
    got = gots[0];
    double tht = 0;
    for (int64_t e = 0; e < nb_tensor_numel(want); e++) tht += nb_tensor_get(want, e) * nb_tensor_get(t2, e);
    double ff = gots[1] ? nb_tensor_get(gots[1], 0) : NAN;
    if (!(fabs(ff - tht) <= 1e-10 * (1 + fabs(tht))))
        fprintf(stderr, "  %s: forward over forward %.12g, eager t2.Ht %.12g\n", name, ff, tht);
    CHECK(fabs(ff - tht) <= 1e-10 * (1 + fabs(tht)));
    nb_tensor_release(gots[1]);
    free(ltt);
    double worst = 0;
    for (int64_t e = 0; got && e < nb_tensor_numel(want); e++)
        worst = fmax(worst, fabs(nb_tensor_get(got, e) - nb_tensor_get(want, e)));
    if (!(worst <= 1e-10))
        fprintf(stderr, "  %s: reverse over forward differs from the eager H t by %g\n", name, worst);
    CHECK(got && worst <= 1e-10);
    nb_tensor_release(got), nb_tensor_release(t), nb_tensor_release(t2), nb_tensor_release(g), nb_tensor_release(want);
    nb_scope_free(scope);
    nb_prepared_free(pp);
    nb_backward_result_free(&r);
    free(lt);
    nb_builder_free(b);
    nb_program_free(prog);
}

/* The trip count depends on the values: stop once sum(h^2) passes a limit. */
static void test_while_data_dependent(void)
{
    loop_ctx l;
    setup s;
    data_dependent_setup(&s, &l);
    check_model("while, data-dependent", &s);
    for (int wrt = 0; wrt < 3; wrt++) check_second_order("while, data-dependent", &s, wrt);
    check_third_order("while, data-dependent", &s, 0);
    for (int wrt = 0; wrt < 3; wrt++) check_reverse_over_forward("while, data-dependent", &s, wrt);
    /* How many iterations ran: the StepScopes var holds the count. */
    compiled c;
    compile(&s, &c, false);
    const nb_block *b0 = nb_program_global_block(c.prog);
    const char *steps = NULL;
    for (int i = 0; i < b0->n_ops; i++)
        if (!strcmp(b0->ops[i]->def->name, "while")) steps = b0->ops[i]->outputs[0];
    CHECK(steps != NULL);
    if (!steps) return;
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, c.prog, 0, NB_NAMES_N(s.n, s.names), NB_NAMES_N(1, &steps)));
    nb_tensor *k = NULL;
    CHECK_OK(nb_prepared_run(pp, c.scope, s.p, &k));
    if (k) printf("  the data-dependent loop ran %g times\n", nb_tensor_get(k, 0));
    CHECK(k && nb_tensor_get(k, 0) > 1 && nb_tensor_get(k, 0) < 50);
    nb_tensor_release(k);
    nb_prepared_free(pp);
    compiled_free(&c);
    setup_free(&s);
}

/* Nested loops: 3 outer iterations, each running an inner loop of 2 that
 * reads the outer loop's value; loss = sum(h^2). */
typedef struct nest_ctx {
    nb_value w, u;
} nest_ctx;

static nb_status count_cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    *pred = nb_less(b, c[0], scalar(b, NB_I64, (double)(intptr_t)ctx));
    return nb_builder_status(b);
}

static nb_status inner_body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    nest_ctx *n = ctx;
    next[0] = nb_add(b, c[0], scalar(b, NB_I64, 1));
    next[1] = nb_tanh(b, nb_mul(b, nb_add(b, c[1], c[2]), n->w));
    next[2] = c[2];
    return nb_builder_status(b);
}

static nb_status inner_cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    (void)ctx;
    return count_cond(b, c, pred, (void *)(intptr_t)2);
}

static nb_status outer_body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    nest_ctx *n = ctx;
    nb_value init[3] = {scalar(b, NB_I64, 0), c[1], nb_mul(b, c[1], n->u)}, fin[3];
    nb_status st = nb_while_loop(b, inner_cond, inner_body, n, NB_VALUES_N(3, init), fin);
    if (st) return st;
    next[0] = nb_add(b, c[0], scalar(b, NB_I64, 1));
    next[1] = fin[1];
    return nb_builder_status(b);
}

static nb_status outer_cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    (void)ctx;
    return count_cond(b, c, pred, (void *)(intptr_t)3);
}

static nb_status nested_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    nest_ctx *n = ctx;
    n->w = p[0];
    n->u = p[1];
    nb_value init[2] = {scalar(b, NB_I64, 0), p[2]}, fin[2];
    nb_status st = nb_while_loop(b, outer_cond, outer_body, n, NB_VALUES_N(2, init), fin);
    if (st) return st;
    *loss = nb_reduce_sum(b, nb_mul(b, fin[1], fin[1]), 0, NULL, false);
    return nb_builder_status(b);
}

static void test_nested_while(void)
{
    nest_ctx n;
    setup s = {.f = nested_model, .ctx = &n, .n = 3, .names = {"w", "u", "h0"}};
    s.p[0] = gc_filled(NB_F64, 1, S(4), 0, -1, 1);
    s.p[1] = gc_filled(NB_F64, 1, S(4), 1, -1, 1);
    s.p[2] = gc_filled(NB_F64, 2, S(2, 4), 2, -1, 1);
    check_model("nested while", &s);
    for (int wrt = 0; wrt < 3; wrt++) check_second_order("nested while", &s, wrt);
    setup_free(&s);
}

/* ---- cond ------------------------------------------------------------------------
 *
 * out = pred ? sum((x W)^2) : sum(x) * v, pred = sum(x) > threshold. The branch
 * not taken contributes nothing, and its gradient block does not run. */
typedef struct cond_ctx {
    double threshold;
    nb_value W, v;
} cond_ctx;

static nb_status then_branch(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    cond_ctx *c = ctx;
    nb_value y = nb_matmul(b, in[0], c->W, 0);
    out[0] = nb_reduce_sum(b, nb_mul(b, y, y), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status else_branch(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    cond_ctx *c = ctx;
    out[0] = nb_mul(b, nb_reduce_sum(b, in[0], 0, NULL, false), nb_reduce_sum(b, c->v, 0, NULL, false));
    return nb_builder_status(b);
}

static nb_status cond_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    cond_ctx *c = ctx;
    c->W = p[1];
    c->v = p[2];
    nb_value pred =
        nb_greater(b, nb_reduce_sum(b, p[0], 0, NULL, false), nb_fill_constant(b, NB_F64, 0, NULL, c->threshold));
    nb_status st = nb_cond(b, pred, &(nb_branches){then_branch, else_branch, c}, NB_VALUES_N(1, &p[0]), 1, loss);
    return st ? st : nb_builder_status(b);
}

static void test_cond(void)
{
    for (int taken = 0; taken < 2; taken++) {
        cond_ctx c = {.threshold = taken ? -100 : 100};
        setup s = {.f = cond_model, .ctx = &c, .n = 3, .names = {"x", "W", "v"}};
        s.p[0] = gc_filled(NB_F64, 2, S(2, 3), 0, -1, 1);
        s.p[1] = gc_filled(NB_F64, 2, S(3, 2), 1, -1, 1);
        s.p[2] = gc_filled(NB_F64, 1, S(2), 2, -1, 1);
        check_model(taken ? "cond, then" : "cond, else", &s);
        for (int wrt = 0; wrt < 3; wrt++) check_second_order(taken ? "cond, then" : "cond, else", &s, wrt);
        /* The parameter of the branch not taken gets a zero gradient. */
        compiled cc;
        compile(&s, &cc, true);
        nb_tensor *g[MAXP] = {0};
        static_grads(&s, &cc, g);
        nb_tensor *idle = taken ? g[2] : g[1];
        for (int64_t e = 0; idle && e < nb_tensor_numel(idle); e++) CHECK(nb_tensor_get(idle, e) == 0);
        for (int i = 0; i < 3; i++) nb_tensor_release(g[i]);
        compiled_free(&cc);
        setup_free(&s);
    }
}

/* ---- scan (the recurrent op) -------------------------------------------------------
 *
 * An Elman RNN over two sequences: h' = tanh(x_t U + z_t + h W), emitting
 * y_t = h' * a, e_t = sum(h') and h' itself; loss = sum(ys^2) + sum(es) +
 * sum(hs * xs) + sum(final^2). */
typedef struct rnn_ctx {
    nb_value U, W, a;
    bool reverse;
} rnn_ctx;

static nb_status rnn_step(nb_builder *b, const nb_value *c, const nb_value *x, nb_value *next, nb_value *y, void *ctx)
{
    rnn_ctx *r = ctx;
    nb_value h = nb_tanh(b, nb_add(b, nb_add(b, nb_matmul(b, x[0], r->U, 0), x[1]), nb_matmul(b, c[0], r->W, 0)));
    next[0] = h;
    y[0] = nb_mul(b, h, r->a);
    y[1] = nb_reduce_sum(b, h, 1, S(1), false);
    y[2] = h; /* one var as both the next memory and an output, as in an RNN */
    return nb_builder_status(b);
}

static nb_status rnn_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    rnn_ctx *r = ctx;
    r->U = p[2];
    r->W = p[3];
    r->a = p[4];
    nb_value fin, ys[3];
    nb_status st = nb_scan(b, rnn_step, r,
                           &(nb_scan_io){.init = NB_VALUES_N(1, &p[5]),
                                         .xs = NB_VALUES_N(2, p),
                                         .n_ys = 3,
                                         .ys = ys,
                                         .final = &fin,
                                         .reverse = r->reverse});
    if (st) return st;
    nb_value l =
        nb_add(b, nb_reduce_sum(b, nb_mul(b, ys[0], ys[0]), 0, NULL, false), nb_reduce_sum(b, ys[1], 0, NULL, false));
    l = nb_add(b, l, nb_reduce_sum(b, nb_mul(b, ys[2], p[0]), 0, NULL, false));
    *loss = nb_add(b, l, nb_reduce_sum(b, nb_mul(b, fin, fin), 0, NULL, false));
    return nb_builder_status(b);
}

static void test_scan(void)
{
    for (int reverse = 0; reverse < 2; reverse++) {
        rnn_ctx r = {.reverse = reverse};
        /* T = 4 steps, batch 2, input 3, hidden 3. */
        setup s = {.f = rnn_model, .ctx = &r, .n = 6, .names = {"xs", "zs", "U", "W", "a", "h0"}};
        s.p[0] = gc_filled(NB_F64, 3, S(4, 2, 3), 0, -1, 1);
        s.p[1] = gc_filled(NB_F64, 3, S(4, 2, 3), 1, -0.3, 0.3);
        s.p[2] = gc_filled(NB_F64, 2, S(3, 3), 2, -0.7, 0.7);
        s.p[3] = gc_filled(NB_F64, 2, S(3, 3), 3, -0.7, 0.7);
        s.p[4] = gc_filled(NB_F64, 1, S(3), 4, -1, 1);
        s.p[5] = gc_filled(NB_F64, 2, S(2, 3), 5, -1, 1);
        check_model(reverse ? "scan, reverse" : "scan", &s);
        for (int wrt = 0; wrt < 6; wrt++) check_second_order(reverse ? "scan, reverse" : "scan", &s, wrt);
        check_third_order(reverse ? "scan, reverse" : "scan", &s, 3);
        setup_free(&s);
    }
}

/* ---- net: a block used as one op ---------------------------------------------------- */

static nb_status mlp_block(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const nb_value *w = ctx;
    nb_value h = nb_tanh(b, nb_matmul(b, in[0], w[0], 0));
    out[0] = nb_matmul(b, h, w[1], 0);
    out[1] = h;
    return nb_builder_status(b);
}

static nb_status net_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    (void)ctx;
    nb_value out[2], w[2] = {p[1], p[2]};
    nb_status st = nb_net(b, mlp_block, w, NB_VALUES_N(1, p), 2, out);
    if (st) return st;
    *loss = nb_add(b, nb_reduce_sum(b, nb_mul(b, out[0], out[0]), 0, NULL, false),
                   nb_reduce_sum(b, out[1], 0, NULL, false));
    return nb_builder_status(b);
}

static void test_net(void)
{
    setup s = {.f = net_model, .n = 3, .names = {"x", "W1", "W2"}};
    s.p[0] = gc_filled(NB_F64, 2, S(2, 3), 0, -1, 1);
    s.p[1] = gc_filled(NB_F64, 2, S(3, 4), 1, -1, 1);
    s.p[2] = gc_filled(NB_F64, 2, S(4, 2), 2, -1, 1);
    check_model("net", &s);
    for (int wrt = 0; wrt < 3; wrt++) check_second_order("net", &s, wrt);
    check_third_order("net", &s, 1);
    setup_free(&s);
}

/* ---- tensor arrays ------------------------------------------------------------------
 *
 * A loop reads its inputs from one array and writes each step's state into
 * another: carry = (i, h, out); h = tanh(xs[i] U + h W); out[i] = h. */
typedef struct array_ctx {
    nb_value xs, U, W;
} array_ctx;

static nb_status array_cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    array_ctx *a = ctx;
    *pred = nb_less(b, c[0], nb_array_length(b, a->xs));
    return nb_builder_status(b);
}

static nb_status array_body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    array_ctx *a = ctx;
    nb_value x = nb_array_read(b, a->xs, c[0]);
    nb_value h = nb_tanh(b, nb_add(b, nb_matmul(b, x, a->U, 0), nb_matmul(b, c[1], a->W, 0)));
    next[0] = nb_add(b, c[0], scalar(b, NB_I64, 1));
    next[1] = h;
    next[2] = nb_array_write(b, c[2], c[0], h);
    return nb_builder_status(b);
}

static nb_status array_model(nb_builder *b, const nb_value *p, nb_value *loss, void *ctx)
{
    array_ctx *a = ctx;
    a->xs = p[0];
    a->U = p[1];
    a->W = p[2];
    nb_value init[3] = {scalar(b, NB_I64, 0), p[3], nb_array_new(b, 4, NB_F64, 2, S(2, 3))}, fin[3];
    nb_status st = nb_while_loop(b, array_cond, array_body, a, NB_VALUES_N(3, init), fin);
    if (st) return st;
    nb_value w = nb_array_read(b, fin[2], scalar(b, NB_I64, 2));
    *loss = nb_add(b, nb_reduce_sum(b, nb_mul(b, fin[2], fin[2]), 0, NULL, false), nb_reduce_sum(b, w, 0, NULL, false));
    return nb_builder_status(b);
}

static void test_tensor_array(void)
{
    array_ctx a;
    setup s = {.f = array_model, .ctx = &a, .n = 4, .names = {"xs", "U", "W", "h0"}};
    s.p[0] = gc_filled(NB_F64, 3, S(4, 2, 3), 0, -1, 1);
    s.p[1] = gc_filled(NB_F64, 2, S(3, 3), 1, -0.7, 0.7);
    s.p[2] = gc_filled(NB_F64, 2, S(3, 3), 2, -0.7, 0.7);
    s.p[3] = gc_filled(NB_F64, 2, S(2, 3), 3, -1, 1);
    check_model("tensor array", &s);
    for (int wrt = 0; wrt < 4; wrt++) check_second_order("tensor array", &s, wrt);
    setup_free(&s);
}

/* ---- the functional transforms see through the helpers ------------------------------- */

static nb_status as_function(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const setup *s = ctx;
    return s->f(b, in, &out[0], s->ctx);
}

/* nb_jvp of a loop equals <grad, t>; nb_hessian of a scan's loss equals
 * central differences of its gradient. */
static void test_transforms(void)
{
    rnn_ctx r = {0};
    setup s = {.f = rnn_model, .ctx = &r, .n = 6, .names = {"xs", "zs", "U", "W", "a", "h0"}};
    s.p[0] = gc_filled(NB_F64, 3, S(3, 2, 3), 0, -1, 1);
    s.p[1] = gc_filled(NB_F64, 3, S(3, 2, 3), 1, -0.3, 0.3);
    s.p[2] = gc_filled(NB_F64, 2, S(3, 3), 2, -0.7, 0.7);
    s.p[3] = gc_filled(NB_F64, 2, S(3, 3), 3, -0.7, 0.7);
    s.p[4] = gc_filled(NB_F64, 1, S(3), 4, -1, 1);
    s.p[5] = gc_filled(NB_F64, 2, S(2, 3), 5, -1, 1);
    nb_function f = {as_function, s.n, 1, &s};
    nb_tensor *out = NULL, *g[MAXP] = {0}, *t[MAXP], *tout = NULL, *jout = NULL;
    REQUIRE_OK(nb_value_and_grad(&f, s.p, NULL, &out, g));
    double want = 0;
    for (int i = 0; i < s.n; i++) {
        t[i] = gc_filled(NB_F64, s.p[i]->ndim, s.p[i]->shape, 30 + i, -1, 1);
        for (int64_t e = 0; g[i] && e < nb_tensor_numel(g[i]); e++)
            want += nb_tensor_get(g[i], e) * nb_tensor_get(t[i], e);
    }
    CHECK_OK(nb_jvp(&f, s.p, t, &jout, &tout));
    CHECK(tout && fabs(nb_tensor_get(tout, 0) - want) <= 1e-10 * (1 + fabs(want)));

    nb_tensor *h = NULL;
    CHECK_OK(nb_hessian(&f, s.p, 3, &h));
    const double eps = 1e-5;
    for (int64_t col = 0; h && col < 9; col++) {
        double w0 = nb_tensor_get(s.p[3], col);
        nb_tensor *gp[MAXP] = {0}, *gm[MAXP] = {0}, *o1 = NULL, *o2 = NULL;
        nb_tensor_set(s.p[3], col, w0 + eps);
        CHECK_OK(nb_value_and_grad(&f, s.p, &(nb_grad_opts){.n_argnums = 1, .argnums = (int[]){3}}, &o1, gp));
        nb_tensor_set(s.p[3], col, w0 - eps);
        CHECK_OK(nb_value_and_grad(&f, s.p, &(nb_grad_opts){.n_argnums = 1, .argnums = (int[]){3}}, &o2, gm));
        nb_tensor_set(s.p[3], col, w0);
        for (int64_t row = 0; gp[0] && gm[0] && row < 9; row++) {
            double fd = (nb_tensor_get(gp[0], row) - nb_tensor_get(gm[0], row)) / (2 * eps);
            CHECK(fabs(nb_tensor_get(h, row * 9 + col) - fd) <= 1e-6 * (1 + fabs(fd)));
        }
        nb_tensor_release(gp[0]);
        nb_tensor_release(gm[0]);
        nb_tensor_release(o1);
        nb_tensor_release(o2);
    }
    nb_tensor_release(h);
    for (int i = 0; i < s.n; i++) {
        nb_tensor_release(g[i]);
        nb_tensor_release(t[i]);
    }
    nb_tensor_release(out);
    nb_tensor_release(jout);
    nb_tensor_release(tout);
    setup_free(&s);
}

/* ---- programs holding control flow: inference, files, drawings, training ------------ */

/* The inference clone (is_test: one scope reused, none kept) computes what
 * the training program computes; a program file round-trip keeps the
 * sub-blocks and their string-list attributes, bit for bit. */
static void test_clone_and_file(void)
{
    rnn_ctx r = {0};
    setup s = {.f = rnn_model, .ctx = &r, .n = 6, .names = {"xs", "zs", "U", "W", "a", "h0"}};
    s.p[0] = gc_filled(NB_F64, 3, S(5, 2, 3), 0, -1, 1);
    s.p[1] = gc_filled(NB_F64, 3, S(5, 2, 3), 1, -0.3, 0.3);
    s.p[2] = gc_filled(NB_F64, 2, S(3, 3), 2, -0.7, 0.7);
    s.p[3] = gc_filled(NB_F64, 2, S(3, 3), 3, -0.7, 0.7);
    s.p[4] = gc_filled(NB_F64, 1, S(3), 4, -1, 1);
    s.p[5] = gc_filled(NB_F64, 2, S(2, 3), 5, -1, 1);
    compiled c;
    compile(&s, &c, true);
    nb_tensor *g[MAXP] = {0};
    double loss = static_grads(&s, &c, g);

    /* Inference. */
    nb_program *test_prog;
    REQUIRE_OK(nb_program_clone_for_test(&test_prog, c.prog));
    compiled ct = {.prog = test_prog, .scope = c.scope};
    const char *ln = c.loss;
    REQUIRE_OK(nb_prepare(&ct.loss_only, test_prog, 0, NB_NAMES_N(s.n, s.names), NB_NAMES_N(1, &ln)));
    CHECK(run_loss(&ct, s.p) == loss);
    nb_prepared_free(ct.loss_only);
    nb_program_free(test_prog);

    /* Through a program file. */
    uint8_t *buf;
    size_t len;
    REQUIRE_OK(nb_program_serialize(c.prog, &buf, &len));
    nb_program *back;
    nb_status st = nb_program_deserialize(&back, buf, len);
    free(buf);
    REQUIRE_OK(st);
    const char *fetch[MAXP + 1] = {ln};
    for (int i = 0; i < s.n; i++) fetch[1 + i] = c.r.grads[i] ? c.r.grads[i] : ln;
    nb_prepared *pp;
    REQUIRE_OK(nb_prepare(&pp, back, 0, NB_NAMES_N(s.n, s.names), NB_NAMES_N(1 + s.n, fetch)));
    nb_tensor *out[MAXP + 1] = {0};
    CHECK_OK(nb_prepared_run(pp, c.scope, s.p, out));
    CHECK(out[0] && nb_tensor_get(out[0], 0) == loss);
    for (int i = 0; i < s.n; i++) {
        if (g[i]) CHECK(out[1 + i] && nb_tensor_allclose(g[i], out[1 + i], 0, 0));
        nb_tensor_release(out[1 + i]);
        nb_tensor_release(g[i]);
    }
    nb_tensor_release(out[0]);
    nb_prepared_free(pp);
    nb_program_free(back);

    /* `nabla dot` draws the step block and its grad block as clusters. */
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    CHECK_OK(nb_program_to_dot(c.prog, f));
    fclose(f);
    CHECK(text && strstr(text, "cluster_block1") && strstr(text, "cluster_block2"));
    free(text);
    compiled_free(&c);
    setup_free(&s);
}

/* nb_minimize through a recurrent op: the parameters the step block
 * captures get (parameter, gradient) pairs and SGD lowers the loss. */
static void test_training(void)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    nb_value p[6];
    p[0] = nb_data(b, "xs", NB_F64, 3, S(-1, 2, 3));
    p[1] = nb_data(b, "zs", NB_F64, 3, S(-1, 2, 3));
    const char *pn[4] = {"U", "W", "a", "h0"};
    const int64_t *shapes[4] = {S(3, 3), S(3, 3), S(3), S(2, 3)};
    int ranks[4] = {2, 2, 1, 2};
    for (int i = 0; i < 4; i++)
        p[2 + i] = nb_create_parameter(
            b, pn[i], NB_F64, ranks[i], shapes[i], "uniform_random", 3,
            (nb_attr[]){NB_ATTR_FLOAT("min", -0.5), NB_ATTR_FLOAT("max", 0.5), NB_ATTR_INT("seed", 7 + i)});
    rnn_ctx r = {0};
    nb_value loss = NB_NONE;
    CHECK_OK(rnn_model(b, p, &loss, &r));
    nb_optimizer sgd = nb_sgd(0.02);
    nb_backward_result res;
    REQUIRE_OK(nb_minimize(&sgd, main_p, startup, nb_value_name(loss), NULL, &res));
    CHECK(res.n_pairs == 4);
    nb_scope *scope;
    nb_executor *ex;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_executor_new(&ex));
    CHECK_OK(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xs = gc_filled(NB_F64, 3, S(6, 2, 3), 0, -1, 1), *zs = gc_filled(NB_F64, 3, S(6, 2, 3), 1, -0.3, 0.3);
    nb_feed feeds[2] = {{"xs", xs}, {"zs", zs}};
    const char *ln = nb_value_name(loss);
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        nb_tensor *l = NULL;
        CHECK_OK(nb_executor_run(ex, main_p, scope, NB_FEEDS_N(2, feeds), NB_NAMES_N(1, &ln), &l));
        if (!l) break;
        if (step == 0) first = nb_tensor_get(l, 0);
        last = nb_tensor_get(l, 0);
        nb_tensor_release(l);
    }
    CHECK(last < 0.8 * first);
    nb_tensor_release(xs);
    nb_tensor_release(zs);
    nb_backward_result_free(&res);
    nb_executor_free(ex);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
}

/* Mistakes get errors that say what went wrong. */
static nb_status bad_body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    (void)ctx;
    next[0] = nb_add(b, c[0], scalar(b, NB_I64, 1));
    next[1] = nb_reshape(b, c[1], 1, S(6));
    return nb_builder_status(b);
}

static nb_status three_times(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    (void)ctx;
    return count_cond(b, c, pred, (void *)(intptr_t)3);
}

static void test_errors(void)
{
    nb_program *prog;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&prog));
    REQUIRE_OK(nb_builder_new_record(&b, prog, NULL));
    nb_value init[2] = {scalar(b, NB_I64, 0), nb_data(b, "h", NB_F64, 2, S(2, 3))}, fin[2];
    CHECK_ERR(nb_while_loop(b, three_times, bad_body, NULL, NB_VALUES_N(2, init), fin), NB_ERR_SHAPE,
              "carried value 1");
    nb_builder_free(b);
    nb_program_free(prog);

    /* Eagerly too, and a predicate that is not a bool. */
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *h = gc_filled(NB_F64, 2, S(2, 3), 0, -1, 1), *zero;
    REQUIRE_OK(nb_tensor_full(&zero, NB_I64, 1, S(1), 0));
    nb_value ev[2] = {nb_eager_value(b, zero), nb_eager_value(b, h)};
    CHECK_ERR(nb_while_loop(b, three_times, bad_body, NULL, NB_VALUES_N(2, ev), fin), NB_ERR_SHAPE, "carried value 1");
    nb_builder_clear_error(b);
    nb_value out;
    CHECK_ERR(nb_cond(b, ev[1], &(nb_branches){then_branch, else_branch, NULL}, NB_VALUES_N(1, &ev[1]), 1, &out),
              NB_ERR_DTYPE, "bool");
    nb_tensor_release(h);
    nb_tensor_release(zero);
    nb_builder_free(b);

    /* A control-flow op outside an executor. */
    nb_tensor *c, *x = gc_filled(NB_F64, 1, S(2), 0, -1, 1), *o[2] = {0};
    REQUIRE_OK(nb_tensor_full(&c, NB_BOOL, 1, S(1), 1));
    nb_attr a[] = {NB_ATTR_BLOCK("sub_block", 1), NB_ATTR_STRING("cond_out", "c")};
    CHECK_ERR(nb_op_run("while", NB_TENSORS(c, x), NB_ATTRS_N(2, a), 1, o), NB_ERR_UNSUPPORTED, "executor");
    nb_tensor_release(c);
    nb_tensor_release(x);
}

int main(void)
{
    RUN(test_transforms);
    RUN(test_tensor_array);
    RUN(test_training);
    RUN(test_errors);
    RUN(test_clone_and_file);
    RUN(test_cond);
    RUN(test_scan);
    RUN(test_net);
    RUN(test_while_gradients);
    RUN(test_while_data_dependent);
    RUN(test_eager_second_order_through_loop);
    RUN(test_nested_while);
    return test_report();
}
