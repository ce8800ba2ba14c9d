/* Eager mode and its backward engine, with PyTorch's autograd semantics as
 * the reference: accumulation, diamonds, retain/create graph, allow_unused,
 * hooks, the in-place error, no-grad, detach, retain_grad, anomaly mode,
 * deep graphs, and gradients equal to the static program's. */
#include <stdlib.h>
#include "test.h"

static nb_builder *eager(void)
{
    nb_builder *b = NULL;
    if (nb_builder_new_eager(&b)) return NULL;
    return b;
}

static nb_tensor *leaf(nb_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    nb_tensor *t = tt(dt, ndim, shape, v);
    nb_tensor_set_requires_grad(t, true);
    return t;
}
#define LEAF(dt, shape, ...) leaf((dt), NDIM_OF(shape), (shape), (const double[]){__VA_ARGS__})

static nb_tensor *T_(nb_value v) { return nb_eager_tensor(v); }

/* d/dx sum(sin(x) * x) = cos(x) x + sin(x), accumulated over two calls. */
static void test_backward_and_accumulation(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(3), 0.5, -1, 2);
    nb_value x = nb_eager_value(b, xt);
    nb_value loss = nb_reduce_sum(b, nb_mul(b, nb_sin(b, x), x), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(b));
    CHECK(nb_tensor_requires_grad(T_(loss)) && !nb_tensor_is_leaf(T_(loss)));
    CHECK_STR(nb_node_op(nb_tensor_grad_fn(T_(loss))), "reduce_sum");
    nb_tensor *l = T_(loss);
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, NB_RETAIN_GRAPH));
    double want[3];
    for (int i = 0; i < 3; i++) {
        double v = nb_tensor_get(xt, i);
        want[i] = cos(v) * v + sin(v);
    }
    CHECK_TENSOR(nb_tensor_grad(xt), S(3), 1e-12, want[0], want[1], want[2]);
    /* A second backward (graph retained) adds to .grad. */
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    CHECK_TENSOR(nb_tensor_grad(xt), S(3), 1e-12, 2 * want[0], 2 * want[1], 2 * want[2]);
    /* The graph was freed: a third one fails clearly. */
    CHECK_ERR(nb_backward(NB_TENSORS(l), NULL, 0), NB_ERR_STATE, "backward through the graph a second time");
    nb_tensor_zero_grad(xt);
    CHECK(nb_tensor_grad(xt) == NULL);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

/* A tensor used many times: a = exp(x); loss = sum(a*a + a) -> (2a + 1) a. */
static void test_diamond(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 0.1, -0.3);
    nb_value x = nb_eager_value(b, xt), a = nb_exp(b, x);
    nb_value loss = nb_reduce_sum(b, nb_add(b, nb_mul(b, a, a), a), 0, NULL, false);
    nb_tensor *l = T_(loss);
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    double a0 = exp(0.1), a1 = exp(-0.3);
    CHECK_TENSOR(nb_tensor_grad(xt), S(2), 1e-12, (2 * a0 + 1) * a0, (2 * a1 + 1) * a1);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

/* Gradients are summed in place only where nothing else holds them: a root
 * gradient the caller passes twice, and a .grad the caller retained, keep
 * their values while the sums go on. */
static void test_accumulation_leaves_held_gradients_alone(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 1, 2), *wt = LEAF(NB_F64, S(2), 3, 5);
    nb_value x = nb_eager_value(b, xt), w = nb_eager_value(b, wt);
    /* w is used three times: its gradient x + x^2 + 2x arrives in three parts. */
    nb_value y = nb_add(b, nb_add(b, nb_mul(b, w, x), nb_mul(b, w, nb_mul(b, x, x))), nb_scale(b, w, 2, 0));
    nb_value h = nb_mul(b, y, x);
    REQUIRE_OK(nb_builder_status(b));
    nb_tensor *g1 = tt(NB_F64, 1, S(2), (const double[]){1, 1}), *g2 = tt(NB_F64, 1, S(2), (const double[]){2, 3});
    nb_tensor *roots[2] = {T_(h), T_(h)}, *grads[2] = {g1, g2};
    REQUIRE_OK(nb_backward(NB_TENSORS_N(2, roots), grads, NB_RETAIN_GRAPH));
    CHECK_TENSOR(g1, S(2), 0, 1, 1);
    CHECK_TENSOR(g2, S(2), 0, 2, 3);
    /* dh/dw = x (x + x^2 + 2), times the summed root gradient 3, 4. */
    CHECK_TENSOR(nb_tensor_grad(wt), S(2), 1e-12, 3 * 4.0, 4 * 16.0);
    nb_tensor *first = nb_tensor_retain(nb_tensor_grad(wt));
    REQUIRE_OK(nb_backward(NB_TENSORS_N(2, roots), grads, 0));
    CHECK_TENSOR(first, S(2), 1e-12, 12, 64);
    CHECK_TENSOR(nb_tensor_grad(wt), S(2), 1e-12, 24, 128);
    nb_tensor_release(first);
    nb_tensor_release(g1);
    nb_tensor_release(g2);
    nb_builder_free(b);
    nb_tensor_release(xt);
    nb_tensor_release(wt);
}

/* One root made from another: the node of the first (here x's accumulator,
 * which runs as soon as it is ready) must wait for the gradient the
 * second's node sends it, so the count of what it will receive includes
 * that edge, counted while the nodes are found although both roots were
 * found first. z = x * x: dx = gx + 2 x gz, for gx = 1 and gz = 2. */
static void test_root_that_feeds_another_root(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 0.5, -2);
    nb_value x = nb_eager_value(b, xt);
    nb_value z = nb_mul(b, x, x);
    REQUIRE_OK(nb_builder_status(b));
    nb_tensor *gx = tt(NB_F64, 1, S(2), (const double[]){1, 1}), *gz = tt(NB_F64, 1, S(2), (const double[]){2, 2});
    nb_tensor *roots[2] = {xt, T_(z)}, *grads[2] = {gx, gz};
    REQUIRE_OK(nb_backward(NB_TENSORS_N(2, roots), grads, NB_RETAIN_GRAPH));
    CHECK_TENSOR(nb_tensor_grad(xt), S(2), 1e-12, 1 + 4 * 0.5, 1 + 4 * -2.0);
    /* The other order of the roots, onto the same .grad. */
    nb_tensor *swapped[2] = {T_(z), xt}, *swapped_grads[2] = {gz, gx};
    REQUIRE_OK(nb_backward(NB_TENSORS_N(2, swapped), swapped_grads, 0));
    CHECK_TENSOR(nb_tensor_grad(xt), S(2), 1e-12, 2 * (1 + 4 * 0.5), 2 * (1 + 4 * -2.0));
    nb_tensor_release(gx);
    nb_tensor_release(gz);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

/* Gradients of gradients: d/dx sum(x^3) = 3x^2, then d/dx sum(3x^2) = 6x; and
 * through a rule that reads its output (tanh): tanh'' = -2 tanh (1 - tanh^2). */
static void test_create_graph(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(3), 1, -2, 0.5);
    nb_value x = nb_eager_value(b, xt);
    nb_value y = nb_reduce_sum(b, nb_mul(b, nb_square(b, x), x), 0, NULL, false);
    nb_tensor *yt = T_(y), *g = NULL, *gg = NULL;
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS_N(1, &yt), NULL, NB_TENSORS_N(1, &xt), NB_CREATE_GRAPH, &g));
    CHECK_TENSOR(g, S(3), 1e-12, 3, 12, 0.75);
    CHECK(nb_tensor_requires_grad(g));
    nb_value gs = nb_reduce_sum(b, nb_eager_value(b, g), 0, NULL, false);
    nb_tensor *gst = T_(gs);
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS_N(1, &gst), NULL, NB_TENSORS_N(1, &xt), 0, &gg));
    CHECK_TENSOR(gg, S(3), 1e-12, 6, -12, 3);
    release_all(g, gg, NULL);

    nb_value th = nb_reduce_sum(b, nb_tanh(b, x), 0, NULL, false);
    nb_tensor *tht = T_(th), *d1 = NULL, *d2 = NULL;
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS_N(1, &tht), NULL, NB_TENSORS_N(1, &xt), NB_CREATE_GRAPH, &d1));
    nb_tensor *d1s = T_(nb_reduce_sum(b, nb_eager_value(b, d1), 0, NULL, false));
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS_N(1, &d1s), NULL, NB_TENSORS_N(1, &xt), 0, &d2));
    double w[3];
    for (int i = 0; i < 3; i++) {
        double t = tanh(nb_tensor_get(xt, i));
        w[i] = -2 * t * (1 - t * t);
    }
    CHECK_TENSOR(d2, S(3), 1e-10, w[0], w[1], w[2]);
    CHECK(nb_tensor_grad(xt) == NULL); /* nb_autograd_grad leaves .grad alone */
    release_all(d1, d2, NULL);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

static void test_grad_allow_unused_and_pruning(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 1, 2), *zt = LEAF(NB_F64, S(2), 3, 4), *wt = LEAF(NB_F64, S(2), 5, 6);
    nb_value x = nb_eager_value(b, xt), w = nb_eager_value(b, wt);
    nb_eager_value(b, zt);
    /* w's branch goes through log of a negative: nb_autograd_grad for x alone must not run it. */
    nb_value y = nb_reduce_sum(b, nb_add(b, nb_mul(b, x, x), nb_log(b, nb_neg(b, w))), 0, NULL, false);
    nb_tensor *yt = T_(y), *gs[2] = {0};
    nb_set_anomaly_mode(true);
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS_N(1, &yt), NULL, NB_TENSORS_N(1, &xt), NB_RETAIN_GRAPH, gs));
    nb_set_anomaly_mode(false);
    CHECK_TENSOR(gs[0], S(2), 0, 2, 4);
    nb_tensor_release(gs[0]);
    CHECK_ERR(nb_autograd_grad(NB_TENSORS_N(1, &yt), NULL, NB_TENSORS(xt, zt), NB_RETAIN_GRAPH, gs), NB_ERR_ARG,
              "input 1 is not used");
    REQUIRE_OK(nb_autograd_grad(NB_TENSORS_N(1, &yt), NULL, NB_TENSORS(xt, zt), NB_RETAIN_GRAPH | NB_ALLOW_UNUSED, gs));
    CHECK(gs[0] != NULL && gs[1] == NULL);
    nb_tensor_release(gs[0]);
    nb_builder_free(b);
    release_all(xt, zt, wt, NULL);
}

static nb_status double_it(nb_tensor *grad, nb_tensor **replace, void *ctx)
{
    ++*(int *)ctx;
    return nb_op_run("scale", NB_TENSORS(grad), NB_ATTRS(NB_ATTR_FLOAT("scale", 2)), 1, replace);
}

static nb_status count_calls(nb_node *n, int count, nb_tensor **grads, void *ctx)
{
    ++*(int *)ctx;
    return NB_OK;
}

static void test_hooks(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 1, 2);
    nb_value x = nb_eager_value(b, xt), h = nb_scale(b, x, 3, 0);
    nb_value loss = nb_reduce_sum(b, h, 0, NULL, false);
    int tensor_calls = 0, leaf_calls = 0, pre = 0, post = 0;
    REQUIRE_OK(nb_tensor_register_hook(T_(h), double_it, &tensor_calls));
    REQUIRE_OK(nb_tensor_register_hook(xt, double_it, &leaf_calls));
    REQUIRE_OK(nb_tensor_retain_grad(T_(h)));
    REQUIRE_OK(nb_node_register_pre_hook(nb_tensor_grad_fn(T_(h)), count_calls, &pre));
    REQUIRE_OK(nb_node_register_post_hook(nb_tensor_grad_fn(T_(h)), count_calls, &post));
    nb_tensor *l = T_(loss);
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    /* dL/dh = 1, doubled by h's hook (and retained as such); times 3; doubled by x's hook. */
    CHECK_TENSOR(nb_tensor_grad(T_(h)), S(2), 0, 2, 2);
    CHECK_TENSOR(nb_tensor_grad(xt), S(2), 0, 12, 12);
    CHECK(tensor_calls == 1 && leaf_calls == 1 && pre == 1 && post == 1);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

static void test_inplace_on_saved_value_is_an_error(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 1, 2);
    nb_value x = nb_eager_value(b, xt), a = nb_exp(b, x); /* exp saves its output; scale saves nothing */
    nb_value loss = nb_reduce_sum(b, nb_scale(b, a, 2, 0), 0, NULL, false);
    CHECK_ERR(nb_eager_inplace(b, "scale", NB_VALUES_N(1, &a), NB_ATTRS(NB_ATTR_FLOAT("scale", 2)), 0), NB_ERR_STATE,
              "only in no-grad mode");
    nb_grad_mode_push(false);
    CHECK_OK(nb_eager_inplace(b, "scale", NB_VALUES_N(1, &a), NB_ATTRS(NB_ATTR_FLOAT("scale", 2)), 0));
    nb_grad_mode_pop();
    CHECK(nb_tensor_version(T_(a)) == 1);
    nb_tensor *l = T_(loss);
    CHECK_ERR(nb_backward(NB_TENSORS(l), NULL, 0), NB_ERR_STATE, "exp (node #");
    CHECK(strstr(nb_last_error(), "modified by an in-place scale") != NULL);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

static void test_no_grad_detach_and_propagation(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 1, 2), *ct = T(NB_F64, S(2), 5, 6);
    nb_value x = nb_eager_value(b, xt), c = nb_eager_value(b, ct);
    CHECK(!nb_tensor_requires_grad(T_(nb_mul(b, c, c)))); /* no input requires grad */
    CHECK(nb_tensor_requires_grad(T_(nb_mul(b, c, x))));
    CHECK(!nb_tensor_requires_grad(T_(nb_greater(b, x, c)))); /* no gradient through comparisons */
    CHECK(nb_grad_mode_enabled());
    nb_grad_mode_push(false);
    nb_grad_mode_push(true);
    CHECK(nb_grad_mode_enabled());
    nb_grad_mode_pop();
    CHECK(!nb_grad_mode_enabled());
    nb_value y = nb_mul(b, x, x);
    CHECK(!nb_tensor_requires_grad(T_(y)) && nb_tensor_grad_fn(T_(y)) == NULL);
    nb_grad_mode_pop();
    CHECK(nb_grad_mode_enabled());
    nb_tensor *d;
    nb_value z = nb_mul(b, x, x);
    REQUIRE_OK(nb_tensor_detach(&d, T_(z)));
    CHECK(!nb_tensor_requires_grad(d) && nb_tensor_is_leaf(d) && d->storage == T_(z)->storage);
    CHECK_ERR(nb_tensor_set_requires_grad(T_(z), false), NB_ERR_ARG, "only leaves");
    nb_tensor *it = T(NB_I64, S(1), 1);
    CHECK_ERR(nb_tensor_set_requires_grad(it, true), NB_ERR_DTYPE, "floating-point");
    nb_tensor_release(it);
    nb_tensor *root = d;
    CHECK_ERR(nb_backward(NB_TENSORS(root), NULL, 0), NB_ERR_ARG, "does not require grad");
    nb_tensor *zt = T_(z);
    CHECK_ERR(nb_backward(NB_TENSORS(zt), NULL, 0), NB_ERR_SHAPE, "pass root_grads");
    nb_tensor_release(d);
    nb_builder_free(b);
    release_all(xt, ct, NULL);
}

static void test_anomaly_mode_names_the_op(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(2), 0, 1);
    nb_value loss = nb_reduce_sum(b, nb_sqrt(b, nb_eager_value(b, xt)), 0, NULL, false);
    nb_tensor *l = T_(loss);
    nb_set_anomaly_mode(true);
    CHECK_ERR(nb_backward(NB_TENSORS(l), NULL, 0), NB_ERR_STATE, "anomaly: the gradient that sqrt (node #");
    nb_set_anomaly_mode(false);
    nb_builder_free(b);
    nb_tensor_release(xt);
}

/* 100,000 ops in a chain: recording, backward and freeing keep a flat stack. */
static void test_deep_chain(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(1), 0.5);
    nb_value v = nb_eager_value(b, xt);
    for (int i = 0; i < 100000; i++) v = nb_scale(b, v, 1.0, 0.0);
    nb_value loss = nb_reduce_sum(b, nb_scale(b, v, 3.0, 0.0), 0, NULL, false);
    nb_tensor *l = nb_tensor_retain(T_(loss));
    nb_eager_release_values(b);
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    CHECK_TENSOR(nb_tensor_grad(xt), S(1), 0, 3);
    nb_tensor_release(l); /* frees the 100,002 nodes */
    nb_builder_free(b);
    nb_tensor_release(xt);
}

/* The same MLP loss, eagerly and as a static program: equal gradients. */
static void test_same_gradients_as_static_program(void)
{
    const double xv[] = {0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8};
    const double w1v[] = {0.2, -0.1, 0.4, 0.3, -0.5, 0.1, 0.25, -0.35, 0.15, 0.05, -0.2, 0.3};
    const double w2v[] = {0.3, -0.2, 0.1, 0.5, -0.4, 0.2};
    const double lv[] = {1, 0};
    /* eager */
    nb_builder *e = eager();
    nb_tensor *w1 = leaf(NB_F64, 2, S(4, 3), w1v), *w2 = leaf(NB_F64, 2, S(3, 2), w2v);
    nb_tensor *xt = tt(NB_F64, 2, S(2, 4), xv), *lt = tt(NB_I64, 2, S(2, 1), lv);
    nb_value h = nb_tanh(e, nb_matmul(e, nb_eager_value(e, xt), nb_eager_value(e, w1), 0));
    nb_value logits = nb_matmul(e, h, nb_eager_value(e, w2), 0);
    nb_value loss =
        nb_reduce_mean(e, nb_softmax_with_cross_entropy(e, logits, nb_eager_value(e, lt), NULL), 0, NULL, false);
    nb_tensor *l = T_(loss);
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    /* static */
    nb_program *p;
    nb_builder *s;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&s, p, NULL));
    nb_value sx = nb_data(s, "x", NB_F64, 2, S(-1, 4)), sl = nb_data(s, "l", NB_I64, 2, S(-1, 1));
    nb_value sw1 = nb_data(s, "w1", NB_F64, 2, S(4, 3)), sw2 = nb_data(s, "w2", NB_F64, 2, S(3, 2));
    nb_value sh = nb_tanh(s, nb_matmul(s, sx, sw1, 0));
    nb_value sloss =
        nb_reduce_mean(s, nb_softmax_with_cross_entropy(s, nb_matmul(s, sh, sw2, 0), sl, NULL), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(s));
    nb_backward_result r;
    const char *ln = nb_value_name(sloss), *ins[] = {"w1", "w2"};
    REQUIRE_OK(nb_gradients(p, NB_NAMES_N(1, &ln), NB_NAMES_N(2, ins), NULL, &r));
    nb_executor *ex;
    nb_scope *scope;
    REQUIRE_OK(nb_executor_new(&ex));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_tensor *got[2];
    REQUIRE_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", xt}, {"l", lt}, {"w1", w1}, {"w2", w2}),
                               NB_NAMES_N(2, r.grads), got));
    CHECK(nb_tensor_allclose(nb_tensor_grad(w1), got[0], 1e-12, 1e-15));
    CHECK(nb_tensor_allclose(nb_tensor_grad(w2), got[1], 1e-12, 1e-15));
    release_all(got[0], got[1], NULL);
    nb_backward_result_free(&r);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(s);
    nb_program_free(p);
    nb_builder_free(e);
    release_all(w1, w2, xt, lt, NULL);
}

/* A tensor's autograd state lives in the block made with it (nb_tensor_room)
 * and a view's in an allocation of its own; views keep the block, so either
 * may go first (ASan checks the frees). */
static void test_autograd_state_of_tensors_and_views(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(4), 1, 2, 3, 4), *vt = NULL, *dt = NULL;
    REQUIRE_OK(nb_tensor_slice(&vt, xt, 0, 1, 3, 1)); /* [2, 3], sharing x's block */
    REQUIRE_OK(nb_tensor_set_requires_grad(vt, true));
    nb_value x = nb_eager_value(b, xt), v = nb_eager_value(b, vt);
    nb_value z = nb_mul(b, x, x); /* an op output: its state holds its node */
    REQUIRE_OK(nb_tensor_detach(&dt, T_(z)));
    nb_value loss = nb_add(b, nb_reduce_sum(b, z, 0, NULL, false), nb_reduce_sum(b, nb_mul(b, v, v), 0, NULL, false));
    nb_tensor *l = nb_tensor_retain(T_(loss));
    REQUIRE_OK(nb_builder_status(b));
    nb_eager_release_values(b);
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    CHECK_TENSOR(nb_tensor_grad(xt), S(4), 0, 2, 4, 6, 8);
    CHECK_TENSOR(nb_tensor_grad(vt), S(2), 0, 4, 6);
    nb_tensor_release(l);
    /* x and its state go first; its view and the detached output still work. */
    nb_tensor_release(xt);
    CHECK_TENSOR(dt, S(4), 0, 1, 4, 9, 16);
    nb_tensor_zero_grad(vt);
    l = nb_tensor_retain(T_(nb_reduce_sum(b, nb_exp(b, nb_eager_value(b, vt)), 0, NULL, false)));
    REQUIRE_OK(nb_builder_status(b));
    REQUIRE_OK(nb_backward(NB_TENSORS(l), NULL, 0));
    CHECK_TENSOR(nb_tensor_grad(vt), S(2), 1e-12, exp(2.0), exp(3.0));
    release_all(l, vt, dt, NULL);
    nb_builder_free(b);
}

/* The gradient a node receives is the engine's only until the node has run:
 * a hook that keeps y2's gradient finds, by the time y1's gradient is ready
 * (y2's node has run), that it holds the only reference; the engine does not
 * keep every gradient of a long chain until the pass ends. */
static nb_tensor *kept_grad;
static int kept_refs = -1;
static nb_status keep_grad(nb_tensor *grad, nb_tensor **replace, void *ctx)
{
    (void)replace, (void)ctx;
    kept_grad = nb_tensor_retain(grad);
    return NB_OK;
}
static nb_status look_at_kept(nb_tensor *grad, nb_tensor **replace, void *ctx)
{
    (void)grad, (void)replace, (void)ctx;
    kept_refs = kept_grad ? kept_grad->refcount : -1;
    return NB_OK;
}

static void test_spent_gradients_are_freed_during_the_pass(void)
{
    nb_builder *b = eager();
    nb_tensor *xt = LEAF(NB_F64, S(1), 0.5), *ct = T(NB_F64, S(1), 3.0);
    nb_value x = nb_eager_value(b, xt), c = nb_eager_value(b, ct);
    nb_value y1 = nb_mul(b, x, c), y2 = nb_mul(b, y1, c), y3 = nb_mul(b, y2, c);
    REQUIRE_OK(nb_builder_status(b));
    REQUIRE_OK(nb_tensor_register_hook(T_(y2), keep_grad, NULL));
    REQUIRE_OK(nb_tensor_register_hook(T_(y1), look_at_kept, NULL));
    nb_tensor *root = T_(y3);
    kept_grad = NULL;
    kept_refs = -1;
    CHECK_OK(nb_backward(NB_TENSORS(root), NULL, 0));
    CHECK(kept_refs == 1);
    CHECK_TENSOR(kept_grad, S(1), 1e-12, 3.0);
    CHECK_TENSOR(nb_tensor_grad(xt), S(1), 1e-12, 27.0);
    nb_tensor_release(kept_grad);
    nb_builder_free(b);
    nb_tensor_release(xt);
    nb_tensor_release(ct);
}

/* The eager builder remembers what inference made of each op's last plain
 * call (src/ops/op_memo.h). Every call here differs from the one before in
 * one thing the result depends on: a shape, a dtype, which input it is, or
 * attributes given; a memo that ignored it would give the wrong shape. */
static void test_repeated_ops_follow_their_inputs(void)
{
    nb_builder *b = eager();
    nb_tensor *v3 = T(NB_F32, S(3), 1, 2, 3), *m23 = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6);
    nb_tensor *one = T(NB_F32, S(1), 10), *d3 = T(NB_F64, S(3), 1, 2, 3), *v4 = T(NB_F32, S(4), 1, 2, 3, 4);
    nb_value a = nb_eager_value(b, v3), m = nb_eager_value(b, m23), s = nb_eager_value(b, one);
    nb_value d = nb_eager_value(b, d3), w = nb_eager_value(b, v4);
    CHECK_TENSOR(T_(nb_mul(b, a, a)), S(3), 0, 1, 4, 9);
    CHECK_TENSOR(T_(nb_mul(b, a, a)), S(3), 0, 1, 4, 9);
    CHECK_TENSOR(T_(nb_mul(b, m, a)), S(2, 3), 0, 1, 4, 9, 4, 10, 18);
    CHECK_TENSOR(T_(nb_mul(b, a, m)), S(2, 3), 0, 1, 4, 9, 4, 10, 18);
    CHECK_TENSOR(T_(nb_mul(b, a, s)), S(3), 0, 10, 20, 30);
    CHECK_TENSOR(T_(nb_mul(b, s, a)), S(3), 0, 10, 20, 30);
    CHECK_TENSOR(T_(nb_mul(b, s, s)), S(1), 0, 100);
    nb_tensor *dd = T_(nb_mul(b, d, d));
    CHECK(dd && dd->dtype == NB_F64);
    CHECK_TENSOR(dd, S(3), 0, 1, 4, 9);
    REQUIRE_OK(nb_builder_status(b));
    /* Default attributes, then given ones: all axes, then axis 1. */
    CHECK_TENSOR(T_(nb_reduce_sum(b, m, 0, NULL, true)), S(1, 1), 0, 21);
    CHECK_TENSOR(T_(nb_reduce_sum(b, m, 1, S(1), true)), S(2, 1), 0, 6, 15);
    CHECK_TENSOR(T_(nb_reduce_sum(b, m, 0, NULL, true)), S(1, 1), 0, 21);
    /* An op with an attribute called plainly takes its default, recorded
     * for the backward too; given, the attribute wins. */
    nb_tensor *lt = LEAF(NB_F64, S(2), -1, 2);
    nb_value l = nb_eager_value(b, lt);
    for (int i = 0; i < 2; i++)
        CHECK_TENSOR(T_(nb_emit1(b, "leaky_relu", NB_VALUES(l), NB_NO_ATTRS)), S(2), 1e-15, -0.01, 2);
    CHECK_TENSOR(T_(nb_emit1(b, "leaky_relu", NB_VALUES(l), NB_ATTRS(NB_ATTR_FLOAT("alpha", 0.5)))), S(2), 0, -0.5, 2);
    nb_tensor *lr = T_(nb_reduce_sum(b, nb_emit1(b, "leaky_relu", NB_VALUES(l), NB_NO_ATTRS), 0, NULL, false));
    REQUIRE_OK(nb_backward(NB_TENSORS(lr), NULL, 0));
    CHECK_TENSOR(nb_tensor_grad(lt), S(2), 1e-15, 0.01, 1);
    nb_tensor_release(lt);
    /* Shapes that do not broadcast, right after a call that ran. */
    CHECK_TENSOR(T_(nb_mul(b, a, a)), S(3), 0, 1, 4, 9);
    nb_mul(b, a, w);
    CHECK_ERR(nb_builder_status(b), NB_ERR_SHAPE, "mul");
    nb_builder_free(b);
    nb_tensor_release(v3);
    nb_tensor_release(m23);
    nb_tensor_release(one);
    nb_tensor_release(d3);
    nb_tensor_release(v4);
}

int main(void)
{
    RUN(test_backward_and_accumulation);
    RUN(test_diamond);
    RUN(test_accumulation_leaves_held_gradients_alone);
    RUN(test_root_that_feeds_another_root);
    RUN(test_create_graph);
    RUN(test_spent_gradients_are_freed_during_the_pass);
    RUN(test_grad_allow_unused_and_pruning);
    RUN(test_hooks);
    RUN(test_inplace_on_saved_value_is_an_error);
    RUN(test_no_grad_detach_and_propagation);
    RUN(test_anomaly_mode_names_the_op);
    RUN(test_deep_chain);
    RUN(test_same_gradients_as_static_program);
    RUN(test_autograd_state_of_tensors_and_views);
    RUN(test_repeated_ops_follow_their_inputs);
    return test_report();
}
