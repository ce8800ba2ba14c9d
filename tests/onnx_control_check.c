/* Checks an ONNX model of If and Loop (written by tests/test_onnx_control.sh)
 * imported into nabla, eagerly and as a static program:
 *
 *   y = Loop(M = 4, v = If(sum(x * w) > 0, tanh(x * w), x * x)),
 *   body: v' = v * w + x * i, continuing while sum(v'^2) < 22,
 *   (u, us) = Loop(M = 4, u = x), body: u' = u * w, scan output u' * x,
 *   (sf, sy) = Scan(s = x; m = x w^T along axis 1 reversed, x along axis 0),
 *   body: s' = s * m_col + x_t, stacked along axis 1; syw = sy * [1..9],
 *
 * against the same arithmetic written here, on two inputs: one takes the
 * then branch and runs all 4 iterations, the other takes the else branch
 * and stops after 3 on its condition. The gradients of the sum of every
 * output's sum with respect
 * to x (an input) and w (an initializer, so a parameter) go through both:
 * eagerly against central differences of eager imports, in the program by
 * nb_gradcheck_program.
 *
 * DEEP.onnx nests Ifs 70 deep, which must be refused, not recursed into.
 *
 *   onnx_control_check MODEL.onnx DEEP.onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/nabla.h"
#include "test.h"

#define N 3
#define TRIPS 4
#define LIMIT 22.0
#define N_OUT 5 /* y, u, us, sf, syw */

static const double w_init[N] = {0.5, -0.3, 0.8};
static const double inputs[2][N] = {{0.9, -0.4, 1.2}, {-1.5, 2.0, -0.7}};
static const int want_trips[2] = {4, 3};
static const char *model_path, *deep_path;

/* A step the rest of the check cannot do without. */
#define MUST(cond)                                                                       \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #cond, nb_last_error()); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* The counted loop's u and us, summed. */
static double counted_sum(const double *x, const double *w)
{
    double u[N], total = 0;
    for (int j = 0; j < N; j++) u[j] = x[j];
    for (int k = 0; k < TRIPS; k++)
        for (int j = 0; j < N; j++) u[j] *= w[j], total += u[j] * x[j];
    for (int j = 0; j < N; j++) total += u[j];
    return total;
}

/* The Scan's sf and syw, summed. */
static double scan_sum(const double *x, const double *w)
{
    double s[N], total = 0;
    for (int r = 0; r < N; r++) s[r] = x[r];
    for (int i = 0; i < N; i++)
        for (int r = 0; r < N; r++) {
            s[r] = s[r] * x[r] * w[N - 1 - i] + x[i];
            total += s[r] * (r * N + i + 1);
        }
    for (int r = 0; r < N; r++) total += s[r];
    return total;
}

/* The model's arithmetic for y; returns the number of iterations run. */
static int reference(const double *x, const double *w, double *y)
{
    double s = 0;
    for (int j = 0; j < N; j++) s += x[j] * w[j];
    for (int j = 0; j < N; j++) y[j] = s > 0 ? tanh(x[j] * w[j]) : x[j] * x[j];
    int i = 0;
    for (bool more = true; more && i < TRIPS; i++) {
        double sq = 0;
        for (int j = 0; j < N; j++) y[j] = y[j] * w[j] + x[j] * i, sq += y[j] * y[j];
        more = sq < LIMIT;
    }
    return i;
}

static nb_tensor *vector(const double *v)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F64, 1, (int64_t[]){N})) return NULL;
    for (int j = 0; j < N; j++) nb_tensor_set(t, j, v[j]);
    return t;
}

static nb_value total_loss(nb_builder *b, const nb_value *y)
{
    nb_value sums[N_OUT];
    for (int i = 0; i < N_OUT; i++) sums[i] = nb_reduce_sum(b, y[i], 0, NULL, false);
    return nb_sum(b, N_OUT, sums);
}

/* The loss of an eager import at x; with grads, also d/dx and d/dw. */
static double eager_loss(const char *path, const double *x, double *gx, double *gw)
{
    nb_builder *b;
    MUST(!nb_builder_new_eager(&b));
    nb_tensor *xt = vector(x);
    MUST(xt);
    if (gx) CHECK_OK(nb_tensor_set_requires_grad(xt, true));
    nb_value y[N_OUT];
    int n_out = 0;
    nb_status st = nb_onnx_import(path, b, NB_VALUES(nb_eager_value(b, xt)), N_OUT, y, &n_out);
    MUST(!st && n_out == N_OUT);
    nb_value loss = total_loss(b, y);
    MUST(!nb_builder_status(b));
    double l = nb_tensor_get(nb_eager_tensor(loss), 0);
    if (gx) {
        CHECK_OK(nb_backward(NB_TENSORS(nb_eager_tensor(loss)), NULL, 0));
        nb_tensor *w = nb_eager_find_param(b, "w");
        MUST(w && nb_tensor_grad(w) && nb_tensor_grad(xt));
        for (int j = 0; j < N; j++)
            gx[j] = nb_tensor_get(nb_tensor_grad(xt), j), gw[j] = nb_tensor_get(nb_tensor_grad(w), j);
    }
    nb_tensor_release(xt);
    nb_builder_free(b);
    return l;
}

static void check_eager(int c)
{
    double y[N], gx[N], gw[N];
    CHECK(reference(inputs[c], w_init, y) == want_trips[c]);
    double want = y[0] + y[1] + y[2] + counted_sum(inputs[c], w_init) + scan_sum(inputs[c], w_init);
    double got = eager_loss(model_path, inputs[c], gx, gw);
    CHECK(fabs(got - want) < 1e-12);
    /* d/dx by central differences of the import; d/dw of the reference. */
    const double eps = 1e-6;
    for (int j = 0; j < N; j++) {
        double xp[N], xm[N], wp[N], wm[N], yp[N], ym[N];
        for (int k = 0; k < N; k++) xp[k] = xm[k] = inputs[c][k], wp[k] = wm[k] = w_init[k];
        xp[j] += eps, xm[j] -= eps, wp[j] += eps, wm[j] -= eps;
        double num_x = (eager_loss(model_path, xp, NULL, NULL) - eager_loss(model_path, xm, NULL, NULL)) / (2 * eps);
        reference(inputs[c], wp, yp);
        reference(inputs[c], wm, ym);
        double num_w = ((yp[0] + yp[1] + yp[2] + counted_sum(inputs[c], wp) + scan_sum(inputs[c], wp)) -
                        (ym[0] + ym[1] + ym[2] + counted_sum(inputs[c], wm) + scan_sum(inputs[c], wm))) /
            (2 * eps);
        if (fabs(gx[j] - num_x) > 1e-6 * (1 + fabs(num_x)) || fabs(gw[j] - num_w) > 1e-6 * (1 + fabs(num_w)))
            fprintf(stderr, "input %d, element %d: dx %.9g (numeric %.9g), dw %.9g (numeric %.9g)\n", c, j, gx[j],
                    num_x, gw[j], num_w);
        CHECK(fabs(gx[j] - num_x) <= 1e-6 * (1 + fabs(num_x)));
        CHECK(fabs(gw[j] - num_w) <= 1e-6 * (1 + fabs(num_w)));
    }
}

static void check_static(int c)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_executor_new(&e));
    nb_value y[N_OUT];
    nb_status st = nb_onnx_import(model_path, b, NB_NO_VALUES, N_OUT, y, NULL);
    REQUIRE_OK(st);
    nb_value loss = total_loss(b, y);
    REQUIRE_OK(nb_builder_status(b));
    CHECK_OK(nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xt = vector(inputs[c]), *got = NULL;
    double want[N];
    reference(inputs[c], w_init, want);
    CHECK_OK(nb_executor_run(e, main_p, scope, NB_FEEDS({"x", xt}), NB_NAMES(nb_value_name(y[0])), &got));
    MUST(got);
    for (int j = 0; j < N; j++) CHECK(fabs(nb_tensor_get(got, j) - want[j]) < 1e-12);
    nb_tensor_release(got);
    CHECK_OK(nb_executor_run(e, main_p, scope, NB_FEEDS({"x", xt}), NB_NAMES(nb_value_name(loss)), &got));
    MUST(got);
    CHECK(fabs(nb_tensor_get(got, 0) -
               (want[0] + want[1] + want[2] + counted_sum(inputs[c], w_init) + scan_sum(inputs[c], w_init))) < 1e-12);
    nb_gradcheck_report rep;
    CHECK_OK(nb_gradcheck_program(main_p, nb_value_name(loss), NB_NAMES("x", "w"), scope,
                                  &(nb_gradcheck_opts){.feeds = NB_FEEDS({"x", xt})}, &rep));
    if (rep.failed) fprintf(stderr, "input %d: worst %s\n", c, rep.worst);
    CHECK(rep.checked == 2 * N && rep.failed == 0);
    nb_tensor_release(got);
    nb_tensor_release(xt);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
}

static void test_eager_then_branch_all_trips(void) { check_eager(0); }
static void test_eager_else_branch_stops_early(void) { check_eager(1); }
static void test_static_then_branch_all_trips(void) { check_static(0); }
static void test_static_else_branch_stops_early(void) { check_static(1); }

static void test_nesting_too_deep_is_refused(void)
{
    nb_program *main_p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, NULL));
    nb_value y;
    CHECK_ERR(nb_onnx_import(deep_path, b, NB_NO_VALUES, 1, &y, NULL), NB_ERR_UNSUPPORTED, "more than 64 deep");
    nb_builder_free(b);
    nb_program_free(main_p);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: onnx_control_check MODEL.onnx DEEP.onnx\n");
        return 2;
    }
    model_path = argv[1], deep_path = argv[2];
    RUN(test_eager_then_branch_all_trips);
    RUN(test_eager_else_branch_stops_early);
    RUN(test_static_then_branch_all_trips);
    RUN(test_static_else_branch_stops_early);
    RUN(test_nesting_too_deep_is_refused);
    return test_report();
}
