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

static void test_autograd_grad_carries_tangents(void)
{
    for (int create = 0; create < 2; create++) {
        nb_builder *b;
        REQUIRE_OK(nb_builder_new_eager(&b));
        nb_tensor *x = T(NB_F64, S(3), X[0], X[1], X[2]), *v = T(NB_F64, S(3), V[0], V[1], V[2]), *g = NULL;
        REQUIRE_OK(nb_tensor_set_requires_grad(x, true));
        REQUIRE_OK(nb_eager_forward_mode(b));
        REQUIRE_OK(nb_eager_set_tangent(b, x, v));
        REQUIRE_OK(nb_eager_forward_push(b));
        nb_tensor *y = loss(b, x);
        CHECK_OK(nb_autograd_grad(1, &y, NULL, 1, &x, false, create, false, &g));
        nb_eager_forward_pop();
        check_hvp(g, nb_eager_tangent(b, (nb_value){g}));
        release_all(g, x, v, NULL);
        nb_builder_free(b);
    }
}

/* nb_backward accumulates into .grad: the accumulated gradient has the
 * tangent too. */
static void test_backward_accumulates_tangents(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(3), X[0], X[1], X[2]), *v = T(NB_F64, S(3), V[0], V[1], V[2]);
    REQUIRE_OK(nb_tensor_set_requires_grad(x, true));
    REQUIRE_OK(nb_eager_forward_mode(b));
    REQUIRE_OK(nb_eager_set_tangent(b, x, v));
    REQUIRE_OK(nb_eager_forward_push(b));
    nb_tensor *y = loss(b, x);
    CHECK_OK(nb_backward(1, &y, NULL, false, false));
    nb_eager_forward_pop();
    check_hvp(nb_tensor_grad(x), nb_eager_tangent(b, (nb_value){nb_tensor_grad(x)}));
    release_all(x, v, NULL);
    nb_builder_free(b);
}

/* Outside the push the backward's builder knows no tangents: the gradient
 * has none (reads as zero), as in forward mode alone. */
static void test_backward_outside_the_push_has_no_tangents(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(3), X[0], X[1], X[2]), *v = T(NB_F64, S(3), V[0], V[1], V[2]), *g = NULL;
    REQUIRE_OK(nb_tensor_set_requires_grad(x, true));
    REQUIRE_OK(nb_eager_forward_mode(b));
    REQUIRE_OK(nb_eager_set_tangent(b, x, v));
    nb_tensor *y = loss(b, x);
    CHECK(nb_eager_tangent(b, (nb_value){y}) != NULL); /* the forward has its tangent */
    REQUIRE_OK(nb_autograd_grad(1, &y, NULL, 1, &x, false, false, false, &g));
    CHECK(nb_eager_tangent(b, (nb_value){g}) == NULL);
    release_all(g, x, v, NULL);
    nb_builder_free(b);
}

/* Two sets of tangents in one pass: the forward and the backward run once,
 * and each set's gradient tangent is H times its own direction. */
static void test_sets_of_tangents_share_one_pass(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = T(NB_F64, S(3), X[0], X[1], X[2]), *v = T(NB_F64, S(3), V[0], V[1], V[2]);
    nb_tensor *e1 = T(NB_F64, S(3), 0, 1, 0), *g = NULL;
    REQUIRE_OK(nb_tensor_set_requires_grad(x, true));
    REQUIRE_OK(nb_eager_forward_mode_sets(b, 2));
    REQUIRE_OK(nb_eager_set_tangent_in(b, 0, x, v));
    REQUIRE_OK(nb_eager_set_tangent_in(b, 1, x, e1));
    CHECK_ERR(nb_eager_set_tangent_in(b, 2, x, v), NB_ERR_ARG, "no tangent set 2");
    CHECK_ERR(nb_eager_forward_mode_sets(b, 3), NB_ERR_STATE, "has 2 tangent sets already");
    REQUIRE_OK(nb_eager_forward_push(b));
    nb_tensor *y = loss(b, x);
    CHECK_OK(nb_autograd_grad(1, &y, NULL, 1, &x, false, false, false, &g));
    nb_eager_forward_pop();
    check_hvp(g, nb_eager_tangent_in(b, 0, (nb_value){g}));
    CHECK_TENSOR(nb_eager_tangent_in(b, 1, (nb_value){g}), S(3), 1e-12, 0, hess_of(X[1]), 0);
    CHECK(nb_eager_tangent(b, (nb_value){g}) == nb_eager_tangent_in(b, 0, (nb_value){g}));
    release_all(g, x, v, e1, NULL);
    nb_builder_free(b);
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
    CHECK(nb_eager_tangent(b, (nb_value){d}) == NULL);
    REQUIRE_OK(nb_eager_alias_tangent(b, x, d));
    CHECK(nb_eager_tangent(b, (nb_value){d}) == v);
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
