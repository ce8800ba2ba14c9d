/* Forward over reverse on the eager tape: a backward run while a
 * forward-mode builder is pushed carries tangents through every VJP rule,
 * through the values the tape saved (inputs, and outputs kept as copies) and
 * through sums of gradients, so that each gradient has as tangent the
 * derivative of the gradient along the inputs' tangents; several sets of
 * tangents share one pass. */
#include "test.h"

/* y = sum(sin(x) x) + sum(tanh(x)): x is read three times, so its gradient
 * is a sum of three contributions; sin's rule reads x, tanh's its output.
 * dy/dx = x cos x + sin x + 1 - tanh^2 x, and its derivative is
 * 2 cos x - x sin x - 2 tanh x (1 - tanh^2 x). */
static double grad_of(double x) { return x * cos(x) + sin(x) + 1 - tanh(x) * tanh(x); }
static double hess_of(double x) { return 2 * cos(x) - x * sin(x) - 2 * tanh(x) * (1 - tanh(x) * tanh(x)); }

static nb_tensor *loss(nb_builder *b, nb_tensor *xt)
{
    nb_value x = nb_eager_value(b, xt);
    nb_value y = nb_add(b, nb_reduce_sum(b, nb_mul(b, nb_sin(b, x), x), 0, NULL, false),
                        nb_reduce_sum(b, nb_tanh(b, x), 0, NULL, false));
    return nb_builder_status(b) ? NULL : nb_eager_tensor(y);
}

static const double X[3] = {0.5, -1, 2}, V[3] = {1, 3, -2};

static void check_hvp(const nb_tensor *g, const nb_tensor *tg)
{
    CHECK(g && tg);
    if (!g || !tg) return;
    CHECK_TENSOR(g, S(3), 1e-12, grad_of(X[0]), grad_of(X[1]), grad_of(X[2]));
    CHECK_TENSOR(tg, S(3), 1e-12, hess_of(X[0]) * V[0], hess_of(X[1]) * V[1], hess_of(X[2]) * V[2]);
}

/* A builder in forward mode with `sets` sets of tangents, x (a leaf that
 * requires grad) and v, x's tangent in set 0. */
typedef struct fixture {
    nb_builder *b;
    nb_tensor *x, *v;
} fixture;

static nb_status setup(fixture *f, int sets)
{
    f->x = T(NB_F64, S(3), X[0], X[1], X[2]);
    f->v = T(NB_F64, S(3), V[0], V[1], V[2]);
    nb_status st = nb_builder_new_eager(&f->b);
    if (!st) st = nb_tensor_set_requires_grad(f->x, true);
    if (!st) st = nb_eager_forward_mode_sets(f->b, sets);
    if (!st) st = nb_eager_set_tangent_in(f->b, 0, f->x, f->v);
    return st;
}

static void teardown(fixture *f)
{
    release_all(f->x, f->v, NULL);
    nb_builder_free(f->b);
}

static void test_autograd_grad_carries_tangents(void)
{
    for (int create = 0; create < 2; create++) {
        fixture f;
        nb_tensor *g = NULL;
        REQUIRE_OK(setup(&f, 1));
        CHECK_OK(nb_eager_forward_push(f.b));
        nb_tensor *y = loss(f.b, f.x);
        CHECK_OK(
            nb_autograd_grad(NB_TENSORS_N(1, &y), NULL, NB_TENSORS_N(1, &f.x), (create ? NB_CREATE_GRAPH : 0), &g));
        nb_eager_forward_pop();
        check_hvp(g, nb_eager_tangent(f.b, nb_eager_value(f.b, g)));
        nb_tensor_release(g);
        teardown(&f);
    }
}

/* nb_backward accumulates into .grad: the accumulated gradient has the
 * tangent too. */
static void test_backward_accumulates_tangents(void)
{
    fixture f;
    REQUIRE_OK(setup(&f, 1));
    CHECK_OK(nb_eager_forward_push(f.b));
    nb_tensor *y = loss(f.b, f.x);
    CHECK_OK(nb_backward(NB_TENSORS(y), NULL, 0));
    nb_eager_forward_pop();
    check_hvp(nb_tensor_grad(f.x), nb_eager_tangent(f.b, nb_eager_value(f.b, nb_tensor_grad(f.x))));
    teardown(&f);
}

/* Outside the push the backward's builder knows no tangents: the gradient
 * has none (reads as zero), as in forward mode alone. */
static void test_backward_outside_the_push_has_no_tangents(void)
{
    fixture f;
    nb_tensor *g = NULL;
    REQUIRE_OK(setup(&f, 1));
    nb_tensor *y = loss(f.b, f.x);
    CHECK(nb_eager_tangent(f.b, nb_eager_value(f.b, y)) != NULL); /* the forward has its tangent */
    CHECK_OK(nb_autograd_grad(NB_TENSORS_N(1, &y), NULL, NB_TENSORS_N(1, &f.x), 0, &g));
    CHECK(g && nb_eager_tangent(f.b, nb_eager_value(f.b, g)) == NULL);
    nb_tensor_release(g);
    teardown(&f);
}

/* Two sets of tangents in one pass: the forward and the backward run once,
 * and each set's gradient tangent is H times its own direction. */
static void test_sets_of_tangents_share_one_pass(void)
{
    fixture f;
    nb_tensor *e1 = T(NB_F64, S(3), 0, 1, 0), *g = NULL;
    REQUIRE_OK(setup(&f, 2));
    CHECK_OK(nb_eager_set_tangent_in(f.b, 1, f.x, e1));
    CHECK_ERR(nb_eager_set_tangent_in(f.b, 2, f.x, f.v), NB_ERR_ARG, "no tangent set 2");
    CHECK_ERR(nb_eager_forward_mode_sets(f.b, 3), NB_ERR_STATE, "has 2 tangent sets already");
    CHECK_OK(nb_eager_forward_push(f.b));
    nb_tensor *y = loss(f.b, f.x);
    CHECK_OK(nb_autograd_grad(NB_TENSORS_N(1, &y), NULL, NB_TENSORS_N(1, &f.x), 0, &g));
    nb_eager_forward_pop();
    check_hvp(g, nb_eager_tangent_in(f.b, 0, nb_eager_value(f.b, g)));
    nb_tensor *t1 = nb_eager_tangent_in(f.b, 1, nb_eager_value(f.b, g));
    CHECK(t1 != NULL);
    if (t1) CHECK_TENSOR(t1, S(3), 1e-12, 0, hess_of(X[1]), 0);
    CHECK(nb_eager_tangent(f.b, nb_eager_value(f.b, g)) == nb_eager_tangent_in(f.b, 0, nb_eager_value(f.b, g)));
    release_all(g, e1, NULL);
    teardown(&f);
}

/* A detached view is a new tensor: it gets a tangent only when asked. */
static void test_alias_tangent_and_errors(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(2), 1, 2), *v = T(NB_F64, S(2), 3, 4), *d;
    CHECK_ERR(nb_eager_forward_push(b), NB_ERR_STATE, "not in forward mode");
    REQUIRE_OK(nb_eager_forward_mode(b));
    REQUIRE_OK(nb_eager_set_tangent(b, x, v));
    REQUIRE_OK(nb_tensor_detach(&d, x));
    CHECK(nb_eager_tangent(b, nb_eager_value(b, d)) == NULL);
    REQUIRE_OK(nb_eager_alias_tangent(b, x, d));
    CHECK(nb_eager_tangent(b, nb_eager_value(b, d)) == v);
    release_all(x, v, d, NULL);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_autograd_grad_carries_tangents);
    RUN(test_backward_accumulates_tangents);
    RUN(test_backward_outside_the_push_has_no_tangents);
    RUN(test_sets_of_tangents_share_one_pass);
    RUN(test_alias_tangent_and_errors);
    return test_report();
}
