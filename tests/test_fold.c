/* Update folding (src/exec/fold.c): an sgd whose gradient one matmul makes
 * runs as one matmul_sgd step. Each case trains the same program prepared
 * with folding and with NABLA_FOLD=0 from the same start, compares the
 * weights, and checks how many updates were folded; and the cases where
 * folding would be seen (a fetched gradient, a weight used twice, an
 * optimiser with state) fold nothing there. */
#include <stdlib.h>
#include "nabla/init.h"
#include "nabla/optimizer.h"
#include "test.h"

#define STEPS 5

typedef struct model {
    nb_program *main_p, *startup;
    char cost[64], grad_w1[64];
} model;

/* x [-1, 20] -> fc 30 tanh -> fc 3 -> mse. With `tied`, the second layer
 * is x @ w1 again (w1 is [20, 20]), so w1's gradient is a sum of two. */
static void build(model *m, nb_dtype dt, nb_optimizer opt, bool tied)
{
    nb_builder *b;
    memset(m, 0, sizeof *m);
    REQUIRE_OK(nb_program_new(&m->main_p));
    REQUIRE_OK(nb_program_new(&m->startup));
    nb_program_set_seed(m->startup, 7);
    REQUIRE_OK(nb_builder_new_record(&b, m->main_p, m->startup));
    int64_t hidden = tied ? 20 : 30;
    nb_value x = nb_data(b, "x", dt, 2, S(-1, 20)), label = nb_data(b, "label", dt, 2, S(-1, 3));
    nb_value w1 = nb_param(b, "w1", dt, 2, S(20, hidden), nb_init_uniform(-0.5, 0.5));
    nb_value b1 = nb_param(b, "b1", dt, 1, S(hidden), nb_init_uniform(-0.1, 0.1));
    nb_value w2 = nb_param(b, "w2", dt, 2, S(hidden, 3), nb_init_uniform(-0.5, 0.5));
    nb_value h = nb_tanh(b, nb_fc(b, x, w1, b1, 1));
    if (tied) h = nb_tanh(b, nb_matmul(b, h, w1, 0));
    nb_value cost = nb_mse_loss(b, nb_matmul(b, h, w2, 0), label, "mean");
    REQUIRE_OK(nb_builder_status(b));
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&opt, m->main_p, m->startup, nb_value_name(cost), NULL, &r));
    snprintf(m->cost, sizeof m->cost, "%s", nb_value_name(cost));
    const char *g = nb_backward_grad_of(&r, "w1");
    snprintf(m->grad_w1, sizeof m->grad_w1, "%s", g ? g : "");
    nb_backward_result_free(&r);
    nb_builder_free(b);
}

static void model_free(model *m)
{
    nb_program_free(m->main_p);
    nb_program_free(m->startup);
}

static nb_tensor *filled(nb_dtype dt, int64_t rows, int64_t cols, double phase)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, 2, S(rows, cols))) return NULL;
    for (int64_t i = 0; i < rows * cols; i++) nb_tensor_set(t, i, sin(0.37 * (double)i + phase));
    return t;
}

/* Trains m for STEPS steps of batch 16 (folding allowed or not), fetching
 * the cost and, with fetch_grad, w1's gradient; leaves the final weights
 * in *scope and the last gradient in *grad. Returns the folded count. */
static int train(const model *m, nb_dtype dt, bool fold, bool fetch_grad, nb_scope **scope, nb_tensor **grad)
{
    nb_prepared *init_pp, *pp;
    if (nb_scope_new(scope, NULL)) return -1;
    nb_status st = nb_prepare(&init_pp, m->startup, 0, NB_NO_NAMES, NB_NO_NAMES);
    if (!st) st = nb_prepared_run(init_pp, *scope, NULL, NULL);
    nb_prepared_free(init_pp);
    CHECK_OK(st);
    if (!fold) setenv("NABLA_FOLD", "0", 1);
    st = nb_prepare(&pp, m->main_p, 0, NB_NAMES("x", "label"),
                    fetch_grad ? NB_NAMES(m->cost, m->grad_w1) : NB_NAMES(m->cost));
    unsetenv("NABLA_FOLD");
    CHECK_OK(st);
    if (st) return -1;
    nb_tensor *xs = filled(dt, 16, 20, 0), *ys = filled(dt, 16, 3, 2);
    double first = 0, last = 0;
    for (int s = 0; s < STEPS; s++) {
        nb_tensor *feeds[2] = {xs, ys}, *out[2] = {0};
        CHECK_OK(nb_prepared_run(pp, *scope, feeds, out));
        last = out[0] ? nb_tensor_get(out[0], 0) : NAN;
        if (s == 0) first = last;
        nb_tensor_release(out[0]);
        if (grad) {
            nb_tensor_release(*grad);
            *grad = out[1];
        } else {
            nb_tensor_release(out[1]);
        }
    }
    CHECK(last < first); /* it trains */
    int folded = nb_prepared_folded_updates(pp);
    release_all(xs, ys, NULL);
    nb_prepared_free(pp);
    return folded;
}

/* Trains m both ways; checks the folded counts and that every parameter
 * ends within tol of the unfolded run's. */
static void compare(const model *m, nb_dtype dt, bool fetch_grad, int want_folded, double tol)
{
    nb_scope *sf, *sp;
    nb_tensor *gf = NULL, *gp = NULL;
    int folded = train(m, dt, true, fetch_grad, &sf, fetch_grad ? &gf : NULL);
    if (folded != want_folded) fprintf(stderr, "  %d updates folded, want %d\n", folded, want_folded);
    CHECK(folded == want_folded);
    CHECK(train(m, dt, false, fetch_grad, &sp, fetch_grad ? &gp : NULL) == 0);
    const char *params[] = {"w1", "b1", "w2"};
    for (int i = 0; i < 3; i++) {
        double d = max_rel_diff(nb_scope_find(sf, params[i]), nb_scope_find(sp, params[i]));
        if (!(d <= tol)) fprintf(stderr, "  %s differs by %g\n", params[i], d);
        CHECK(d <= tol);
    }
    if (fetch_grad) CHECK(max_rel_diff(gf, gp) <= tol);
    release_all(gf, gp, NULL);
    nb_scope_free(sf);
    nb_scope_free(sp);
}

/* Both weights' updates fold (the biases' gradients are sums, not
 * products), in float64 and float32. */
static void test_sgd_folds_and_matches(void)
{
    model m;
    build(&m, NB_F64, nb_sgd(0.1), false);
    compare(&m, NB_F64, false, 2, 1e-13);
    model_free(&m);
    build(&m, NB_F32, nb_sgd(0.1), false);
    compare(&m, NB_F32, false, 2, 1e-5);
    model_free(&m);
}

/* A fetched gradient must exist: w1's update stays apart, w2's folds. */
static void test_fetched_gradient_is_kept(void)
{
    model m;
    build(&m, NB_F64, nb_sgd(0.1), false);
    REQUIRE_OK(m.grad_w1[0] ? NB_OK : NB_ERR_NOT_FOUND);
    compare(&m, NB_F64, true, 1, 1e-13);
    model_free(&m);
}

/* w1 used twice: its gradient is the sum of two products, so only w2's
 * update folds. */
static void test_shared_weight_is_not_folded(void)
{
    model m;
    build(&m, NB_F64, nb_sgd(0.1), true);
    compare(&m, NB_F64, false, 1, 1e-13);
    model_free(&m);
}

/* Momentum keeps a velocity made from the gradient: nothing folds. */
static void test_momentum_is_not_folded(void)
{
    model m;
    build(&m, NB_F64, nb_momentum(0.1, 0.9, false), false);
    compare(&m, NB_F64, false, 0, 0);
    model_free(&m);
}

/* The op itself, run directly: the update, and errors that name it. */
static void test_matmul_sgd_op(void)
{
    nb_tensor *x = filled(NB_F64, 4, 2, 0), *y = filled(NB_F64, 4, 3, 1), *w = filled(NB_F64, 2, 3, 2), *lr;
    nb_tensor *want = filled(NB_F64, 2, 3, 2);
    REQUIRE_OK(nb_tensor_full(&lr, NB_F64, 1, S(1), 0.5));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double s = 0;
            for (int k = 0; k < 4; k++) s += nb_tensor_get(x, k * 2 + i) * nb_tensor_get(y, k * 3 + j);
            nb_tensor_set(want, i * 3 + j, nb_tensor_get(w, i * 3 + j) - 0.5 * 2.0 * s);
        }
    nb_attr a[] = {NB_ATTR_BOOL("transpose_x", true), NB_ATTR_FLOAT("alpha", 2.0)};
    nb_tensor *out[1] = {w};
    CHECK_OK(nb_op_run("matmul_sgd", NB_TENSORS(x, y, w, lr), NB_ATTRS_N(2, a), 1, out));
    CHECK(max_rel_diff(w, want) < 1e-15);
    nb_tensor *bad = filled(NB_F64, 3, 3, 0), *bout[1] = {bad};
    CHECK_ERR(nb_op_run("matmul_sgd", NB_TENSORS(x, y, bad, lr), NB_ATTRS_N(2, a), 1, bout), NB_ERR_SHAPE,
              "matmul_sgd: Param is float64 [3, 3] but the product is float64 [2, 3]");
    nb_tensor *nout[1] = {NULL};
    CHECK_ERR(nb_op_run("matmul_sgd", NB_TENSORS(x, y, w, lr), NB_ATTRS_N(2, a), 1, nout), NB_ERR_ARG,
              "updated in place");
    release_all(x, y, w, lr, want, bad, nout[0], NULL);
}

int main(void)
{
    RUN(test_sgd_folds_and_matches);
    RUN(test_fetched_gradient_is_kept);
    RUN(test_shared_weight_is_not_folded);
    RUN(test_momentum_is_not_folded);
    RUN(test_matmul_sgd_op);
    return test_report();
}
