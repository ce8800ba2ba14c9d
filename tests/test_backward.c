/* nb_append_backward and nb_gradients: each case of the design documents
 * (seeds 000 and 002), checked on the program nabla writes and on the
 * numbers it computes; and whole-program gradient checks of an MLP and a
 * small CNN against finite differences. */
#include <stdlib.h>
#include "test.h"
#include "nabla/gradcheck.h"
#include "program/record.h"

typedef struct model {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
} model;

static void model_init(model *m)
{
    CHECK_OK(nb_program_new(&m->main));
    CHECK_OK(nb_program_new(&m->startup));
    CHECK_OK(nb_builder_new_record(&m->b, m->main, m->startup));
    CHECK_OK(nb_scope_new(&m->scope, NULL));
    CHECK_OK(nb_executor_new(&m->ex));
}

static void model_free(model *m)
{
    nb_executor_free(m->ex);
    nb_scope_free(m->scope);
    nb_builder_free(m->b);
    nb_program_free(m->startup);
    nb_program_free(m->main);
}

static nb_value param(model *m, const char *name, int ndim, const int64_t *shape, double value)
{
    return nb_create_parameter(m->b, name, NB_F64, ndim, shape, "fill_constant", 1,
                               (nb_attr[]){NB_ATTR_FLOAT("value", value)});
}

static nb_value param_random(model *m, const char *name, int ndim, const int64_t *shape, double scale, int seed)
{
    return nb_create_parameter(
        m->b, name, NB_F64, ndim, shape, "uniform_random", 3,
        (nb_attr[]){NB_ATTR_FLOAT("min", -scale), NB_ATTR_FLOAT("max", scale), NB_ATTR_INT("seed", seed)});
}

/* Index of the first op of `type` at or after `from`, or -1. */
static int find_op(const nb_block *b, const char *type, int from)
{
    for (int i = from; i < b->n_ops; i++)
        if (!strcmp(b->ops[i]->def->name, type)) return i;
    return -1;
}

static int count_ops(const nb_block *b, const char *type, int from)
{
    int n = 0;
    for (int i = from; i < b->n_ops; i++) n += !strcmp(b->ops[i]->def->name, type);
    return n;
}

static nb_tensor *fetch1(model *m, int n_feed, const nb_feed *feeds, const char *name)
{
    nb_tensor *t = NULL;
    CHECK_OK(nb_executor_run(m->ex, m->main, m->scope, NB_FEEDS_N(n_feed, feeds), NB_NAMES_N(1, &name), &t));
    return t;
}

/* A weight read by two ops gets one gradient per reader, renamed
 * w@GRAD@RENAME@k, and one sum op adds them (seed 000 fig. 1-2). */
static void test_shared_weight_renamed_and_summed(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 2, S(2, 3));
    nb_value w = param(&m, "w", 1, S(3), 0.5);
    nb_value y = nb_add(m.b, nb_mul(m.b, x, w), w);
    nb_value loss = nb_reduce_sum(m.b, y, 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    int fwd = nb_program_global_block(m.main)->n_ops;
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    nb_block *g = nb_program_global_block(m.main);
    int s = find_op(g, "sum", fwd);
    CHECK(s >= 0 && count_ops(g, "sum", fwd) == 1);
    if (s >= 0) {
        const nb_op *op = g->ops[s];
        CHECK(nb_op_in_count(op, 0) == 2);
        CHECK_STR(nb_op_in_name(op, 0, 0), "w@GRAD@RENAME@0");
        CHECK_STR(nb_op_in_name(op, 0, 1), "w@GRAD@RENAME@1");
        CHECK_STR(nb_op_out_name(op, 0, 0), "w@GRAD");
        CHECK(op->role == NB_ROLE_BACKWARD);
        CHECK(op->role_var[0] && !strcmp(op->role_var[0], "w") && !strcmp(op->role_var[1], "w@GRAD"));
    }
    CHECK(r.n_pairs == 1 && !strcmp(r.pairs[0].param, "w") && !strcmp(r.pairs[0].grad, "w@GRAD"));
    CHECK_STR(nb_backward_grad_of(&r, "w"), "w@GRAD");
    CHECK(nb_backward_grad_of(&r, "x") == NULL); /* data: no gradient */
    CHECK(fwd > 0 && g->ops[fwd - 1]->role == NB_ROLE_LOSS);
    CHECK(g->n_ops > fwd && g->ops[fwd]->role == NB_ROLE_LOSS && !strcmp(g->ops[fwd]->def->name, "ones_like"));
    for (int i = fwd + 1; i < g->n_ops; i++) CHECK(g->ops[i]->role == NB_ROLE_BACKWARD);
    /* d/dw sum(x*w + w) = column sums of x + 2 rows. */
    CHECK_OK(nb_executor_run(m.ex, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xt = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6);
    nb_tensor *gw = fetch1(&m, 1, &(nb_feed){"x", xt}, "w@GRAD");
    CHECK_TENSOR(gw, S(3), 1e-12, 7, 9, 11);
    release_all(xt, gw, NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* Branches that cannot carry a gradient to a parameter emit nothing. */
static void test_no_gradient_branches_pruned(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 1, S(3));
    nb_value w = param(&m, "w", 1, S(3), 2.0);
    nb_value from_data = nb_sin(m.b, x); /* depends only on data */
    nb_value unused = nb_exp(m.b, w);    /* never reaches the loss */
    nb_value y = nb_mul(m.b, from_data, w);
    nb_value loss = nb_reduce_sum(m.b, y, 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    (void)unused;
    int fwd = nb_program_global_block(m.main)->n_ops;
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    nb_block *g = nb_program_global_block(m.main);
    /* Neither sin's rule (cos) nor exp's rule appears. */
    CHECK(find_op(g, "cos", fwd) < 0);
    CHECK(find_op(g, "exp", fwd) < 0);
    CHECK(find_op(g, "sin", fwd) < 0);
    CHECK(r.n_pairs == 1);
    CHECK(nb_backward_grad_of(&r, nb_value_name(from_data)) == NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* A gradient that a rule needs but no op produced becomes fill_zeros_like
 * (seed 000 case 5, seed 002 "No Gradient Variables"). */
static void test_fill_zeros_like_inserted(void)
{
    model m;
    model_init(&m);
    nb_value w = param(&m, "w", 1, S(4), 1.0);
    nb_value parts[2];
    CHECK_OK(nb_split(m.b, w, 0, 2, parts));
    nb_value loss = nb_reduce_sum(m.b, nb_square(m.b, parts[0]), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    int fwd = nb_program_global_block(m.main)->n_ops;
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    nb_block *g = nb_program_global_block(m.main);
    int z = find_op(g, "fill_zeros_like", fwd);
    CHECK(z >= 0);
    if (z >= 0) CHECK_STR(nb_op_in_name(g->ops[z], 0, 0), nb_value_name(parts[1]));
    CHECK_OK(nb_executor_run(m.ex, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *gw = fetch1(&m, 0, NULL, "w@GRAD");
    CHECK_TENSOR(gw, S(4), 1e-12, 2, 2, 0, 0);
    nb_tensor_release(gw);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* h = x*w1 ; loss = sum(h*w2): stop_gradient on h, or h in the no-grad set,
 * cuts w1 off. */
static void check_cut(bool use_stop_gradient)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 1, S(2));
    nb_value w1 = param(&m, "w1", 1, S(2), 3.0), w2 = param(&m, "w2", 1, S(2), 5.0);
    nb_value h = nb_mul(m.b, x, w1);
    nb_value loss = nb_reduce_sum(m.b, nb_mul(m.b, h, w2), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    if (use_stop_gradient) nb_value_var(h)->stop_gradient = true;
    const char *ng = nb_value_name(h);
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(
        m.main, nb_value_name(loss),
        &(nb_backward_opts){.no_grad = NB_NAMES_N(use_stop_gradient ? 0 : 1, use_stop_gradient ? NULL : &ng)}, &r));
    CHECK(r.n_pairs == 1 && !strcmp(r.pairs[0].param, "w2"));
    CHECK(nb_backward_grad_of(&r, "w1") == NULL);
    CHECK_OK(nb_executor_run(m.ex, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xt = T(NB_F64, S(2), 1, 2);
    nb_tensor *gw2 = fetch1(&m, 1, &(nb_feed){"x", xt}, r.pairs[0].grad);
    CHECK_TENSOR(gw2, S(2), 1e-12, 3, 6);
    release_all(xt, gw2, NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

static void test_stop_gradient_var(void) { check_cut(true); }
static void test_no_grad_set(void) { check_cut(false); }

/* An op on the path whose definition has no rule: a clear error naming it,
 * and the program is left as it was. */
static nb_status same_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}
static nb_status copy_cpu(const nb_kernel_ctx *k) { return nb_tensor_copy_into(nb_kout(k, 0, 0), nb_kin(k, 0, 0)); }
static const nb_op_def norule_def = {
    .name = "test_no_rule",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .infer = same_infer,
};
static const nb_kernel_def norule_kernel = {"test_no_rule", NB_DEVICE_CPU, NB_DT_ALL, "test", 0, copy_cpu, NULL, NULL};

static void test_op_without_rule_is_an_error(void)
{
    CHECK_OK(nb_op_register(&norule_def));
    CHECK_OK(nb_kernel_register(&norule_kernel));
    model m;
    model_init(&m);
    nb_value w = param(&m, "w", 1, S(2), 1.0);
    nb_value y = nb_emit1(m.b, "test_no_rule", NB_VALUES(w), NB_NO_ATTRS);
    nb_value loss = nb_reduce_sum(m.b, y, 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    int n = nb_program_global_block(m.main)->n_ops;
    nb_backward_result r;
    CHECK_ERR(
        nb_append_backward(m.main, nb_value_name(loss), NULL, &r), NB_ERR_UNSUPPORTED,
        "op test_no_rule (test_no_rule_0.tmp_0) lies on the path to the gradient but test_no_rule has no gradient rule");
    CHECK(nb_program_global_block(m.main)->n_ops == n);
    model_free(&m);
}

static void test_loss_must_be_scalar(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 2, S(-1, 3));
    nb_value w = param(&m, "w", 1, S(3), 1.0);
    nb_value y = nb_mul(m.b, x, w);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_backward_result r;
    CHECK_ERR(nb_append_backward(m.main, nb_value_name(y), NULL, &r), NB_ERR_SHAPE,
              "has shape [-1, 3]; it must be a scalar");
    CHECK_ERR(nb_append_backward(m.main, "nope", NULL, &r), NB_ERR_NOT_FOUND, "no loss var named 'nope'");
    model_free(&m);
}

/* nb_gradients twice: d/dx sum(x^3) = 3x^2, then d/dx sum(3x^2) = 6x, with
 * names that do not collide. */
static void test_second_derivative(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 1, S(3));
    nb_value y = nb_reduce_sum(m.b, nb_mul(m.b, nb_square(m.b, x), x), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    const char *yn = nb_value_name(y), *xn = "x";
    nb_backward_result r1, r2;
    REQUIRE_OK(nb_gradients(m.main, NB_NAMES_N(1, &yn), NB_NAMES_N(1, &xn), NULL, &r1));
    CHECK_STR(r1.grads[0], "x@GRAD");
    nb_value g = nb_value_by_name(m.b, r1.grads[0]);
    nb_value gs = nb_reduce_sum(m.b, g, 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    const char *gsn = nb_value_name(gs);
    REQUIRE_OK(nb_gradients(m.main, NB_NAMES_N(1, &gsn), NB_NAMES_N(1, &xn), NULL, &r2));
    CHECK(r2.grads[0] && strcmp(r2.grads[0], "x@GRAD") != 0);
    nb_tensor *xt = T(NB_F64, S(3), 1, -2, 0.5);
    nb_tensor *out[2];
    CHECK_OK(nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS({"x", xt}), NB_NAMES(r1.grads[0], r2.grads[0]), out));
    CHECK_TENSOR(out[0], S(3), 1e-12, 3, 12, 0.75);
    CHECK_TENSOR(out[1], S(3), 1e-12, 6, -12, 3);
    release_all(xt, out[0], out[1], NULL);
    /* An input that does not affect the target: none, or an error. */
    nb_value z = nb_data(m.b, "z", NB_F64, 1, S(3));
    (void)z;
    nb_backward_result r3;
    const char *two[] = {"x", "z"};
    REQUIRE_OK(nb_gradients(m.main, NB_NAMES_N(1, &yn), NB_NAMES_N(2, two),
                            &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r3));
    CHECK(r3.grads[0] != NULL && r3.grads[1] == NULL);
    nb_backward_result_free(&r3);
    CHECK_ERR(nb_gradients(m.main, NB_NAMES_N(1, &yn), NB_NAMES_N(2, two), NULL, &r3), NB_ERR_ARG,
              "'z' does not affect the targets");
    nb_backward_result_free(&r1);
    nb_backward_result_free(&r2);
    model_free(&m);
}

/* Given output gradients: d/dx <v, x*x> = 2 x v. */
static void test_given_target_gradient(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 1, S(2));
    nb_value v = nb_data(m.b, "v", NB_F64, 1, S(2));
    nb_value y = nb_mul(m.b, x, x);
    REQUIRE_OK(nb_builder_status(m.b));
    const char *yn = nb_value_name(y), *vn = nb_value_name(v), *xn = "x";
    nb_backward_result r;
    REQUIRE_OK(
        nb_gradients(m.main, NB_NAMES_N(1, &yn), NB_NAMES_N(1, &xn), &(nb_gradients_opts){.target_grads = &vn}, &r));
    nb_tensor *xt = T(NB_F64, S(2), 3, 4), *vt = T(NB_F64, S(2), 10, 100), *gx;
    CHECK_OK(nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS({"x", xt}, {"v", vt}), NB_NAMES(r.grads[0]), &gx));
    CHECK_TENSOR(gx, S(2), 1e-12, 60, 800);
    release_all(xt, vt, gx, NULL);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* Whole programs against finite differences. */
static void check_program(model *m, nb_value loss, int n_feed, const nb_feed *feeds)
{
    CHECK_OK(nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    const char *params[16];
    int n = 0;
    nb_block *g = nb_program_global_block(m->main);
    for (int i = 0; i < g->n_vars && n < 16; i++)
        if (g->vars[i]->is_parameter) params[n++] = g->vars[i]->name;
    nb_gradcheck_report rep;
    CHECK_OK(nb_gradcheck_program(m->main, nb_value_name(loss), NB_NAMES_N(n, params), m->scope,
                                  &(nb_gradcheck_opts){.feeds = NB_FEEDS_N(n_feed, feeds)}, &rep));
    CHECK(rep.checked > 0 && rep.failed == 0);
    if (rep.failed) fprintf(stderr, "  worst: %s\n", rep.worst);
}

static void test_mlp_gradients_match_finite_differences(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 2, S(-1, 5));
    nb_value label = nb_data(m.b, "label", NB_I64, 2, S(-1, 1));
    nb_value w1 = param_random(&m, "w1", 2, S(5, 6), 0.5, 1), b1 = param_random(&m, "b1", 1, S(6), 0.1, 2);
    nb_value w2 = param_random(&m, "w2", 2, S(6, 3), 0.5, 3), b2 = param_random(&m, "b2", 1, S(3), 0.1, 4);
    nb_value h = nb_tanh(m.b, nb_fc(m.b, x, w1, b1, 1));
    nb_value logits = nb_fc(m.b, h, w2, b2, 1);
    nb_value loss = nb_reduce_mean(m.b, nb_softmax_with_cross_entropy(m.b, logits, label, NULL), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_tensor *xt = T(NB_F64, S(4, 5), 0.1, -0.2, 0.3, 0.5, -1, 1, 0.2, 0.4, -0.3, 0.7, 0, 0.9, -0.8, 0.6, 0.1, -0.5,
                      0.25, 0.75, -0.1, 0.3);
    nb_tensor *lt = T(NB_I64, S(4, 1), 0, 2, 1, 2);
    check_program(&m, loss, 2, (nb_feed[]){{"x", xt}, {"label", lt}});
    release_all(xt, lt, NULL);
    model_free(&m);
}

static void test_cnn_gradients_match_finite_differences(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "img", NB_F64, 4, S(-1, 1, 6, 6));
    nb_value label = nb_data(m.b, "label", NB_I64, 1, S(-1));
    nb_value k = param_random(&m, "conv.w", 4, S(2, 1, 3, 3), 0.5, 5), kb = param_random(&m, "conv.b", 1, S(2), 0.1, 6);
    nb_value conv = nb_emit1(m.b, "conv2d", NB_VALUES(x, k, kb), NB_ATTRS(NB_ATTR_INTS("paddings", 1, 1)));
    nb_value pool = nb_emit1(m.b, "pool2d", NB_VALUES(nb_relu(m.b, conv)),
                             NB_ATTRS(NB_ATTR_STRING("pooling_type", "max"), NB_ATTR_INTS("ksize", 2, 2), ));
    nb_value flat = nb_flatten(m.b, pool, 1, -1);
    nb_value w = param_random(&m, "fc.w", 2, S(2 * 5 * 5, 3), 0.3, 7), b = param_random(&m, "fc.b", 1, S(3), 0.1, 8);
    nb_value loss =
        nb_reduce_mean(m.b, nb_softmax_with_cross_entropy(m.b, nb_fc(m.b, flat, w, b, 1), label, NULL), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    nb_tensor *xt;
    CHECK_OK(nb_tensor_new(&xt, NB_F64, 4, S(2, 1, 6, 6)));
    for (int i = 0; i < 72; i++) nb_tensor_set(xt, i, sin(0.7 * i) + 0.05 * (i % 7));
    nb_tensor *lt = T(NB_I64, S(2), 1, 2);
    check_program(&m, loss, 2, (nb_feed[]){{"img", xt}, {"label", lt}});
    release_all(xt, lt, NULL);
    model_free(&m);
}

/* The inference copy keeps the forward part, drops the gradient part and
 * switches dropout to test mode. */
static void test_clone_for_test(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 2, S(-1, 3));
    nb_value w = param(&m, "w", 1, S(3), 0.5);
    nb_value h = nb_dropout(m.b, nb_mul(m.b, x, w), 0.5, false, 3);
    nb_value loss = nb_reduce_mean(m.b, h, 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    int fwd = nb_program_global_block(m.main)->n_ops;
    nb_backward_result r;
    REQUIRE_OK(nb_append_backward(m.main, nb_value_name(loss), NULL, &r));
    nb_program *t;
    REQUIRE_OK(nb_program_clone_for_test(&t, m.main));
    nb_block *g = nb_program_global_block(t);
    CHECK(g->n_ops == fwd);
    int d = find_op(g, "dropout", 0);
    CHECK(d >= 0 && nb_op_attr(g->ops[d], "is_test")->b);
    CHECK(!nb_op_attr(nb_program_global_block(m.main)->ops[d], "is_test")->b);
    /* In test mode dropout is the identity: mean(x * w). */
    CHECK_OK(nb_executor_run(m.ex, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xt = T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6), *out = NULL;
    const char *ln = nb_value_name(loss);
    CHECK_OK(nb_executor_run(m.ex, t, m.scope, NB_FEEDS({"x", xt}), NB_NAMES_N(1, &ln), &out));
    CHECK_SCALAR(out, 21 * 0.5 / 6, 1e-12);
    release_all(xt, out, NULL);
    nb_program_free(t);
    nb_backward_result_free(&r);
    model_free(&m);
}

/* A compiled Hessian-vector product: the JVP of the gradient part along v
 * (forward over reverse) equals H v, and equals reverse over reverse. */
static void test_static_hvp_forward_over_reverse(void)
{
    model m;
    model_init(&m);
    nb_value x = nb_data(m.b, "x", NB_F64, 1, S(3)), v = nb_data(m.b, "v", NB_F64, 1, S(3));
    nb_value parts[3];
    REQUIRE_OK(nb_split(m.b, x, 0, 3, parts));
    nb_value loss = nb_add(m.b, nb_reduce_sum(m.b, nb_mul(m.b, nb_square(m.b, x), x), 0, NULL, false),
                           nb_reduce_sum(m.b, nb_mul(m.b, parts[0], parts[1]), 0, NULL, false));
    REQUIRE_OK(nb_builder_status(m.b));
    const char *ln = nb_value_name(loss), *xn = "x", *vn = "v";
    nb_backward_result g, gg;
    REQUIRE_OK(nb_gradients(m.main, NB_NAMES_N(1, &ln), NB_NAMES_N(1, &xn), NULL, &g));
    char *hv_fwd = NULL;
    REQUIRE_OK(nb_append_jvp(m.main, NB_NAMES_N(1, &xn), &vn, NB_NAMES(g.grads[0]), &hv_fwd));
    REQUIRE_OK(hv_fwd ? NB_OK : NB_ERR_STATE);
    /* Reverse over reverse: the gradient of <grad, v>. */
    nb_value s = nb_reduce_sum(m.b, nb_mul(m.b, nb_value_by_name(m.b, g.grads[0]), v), 0, NULL, false);
    REQUIRE_OK(nb_builder_status(m.b));
    const char *sn = nb_value_name(s);
    REQUIRE_OK(nb_gradients(m.main, NB_NAMES_N(1, &sn), NB_NAMES_N(1, &xn), NULL, &gg));
    nb_tensor *xt = T(NB_F64, S(3), 1, -2, 0.5), *vt = T(NB_F64, S(3), 1, 10, 100), *out[2];
    REQUIRE_OK(
        nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS({"x", xt}, {"v", vt}), NB_NAMES(hv_fwd, gg.grads[0]), out));
    CHECK_TENSOR(out[0], S(3), 1e-12, 6 + 10, 1 - 120, 300);
    CHECK(nb_tensor_allclose(out[0], out[1], 1e-12, 1e-12));
    release_all(xt, vt, out[0], out[1], NULL);
    free(hv_fwd);
    nb_backward_result_free(&g);
    nb_backward_result_free(&gg);
    model_free(&m);
}

int main(void)
{
    RUN(test_shared_weight_renamed_and_summed);
    RUN(test_no_gradient_branches_pruned);
    RUN(test_fill_zeros_like_inserted);
    RUN(test_stop_gradient_var);
    RUN(test_no_grad_set);
    RUN(test_op_without_rule_is_an_error);
    RUN(test_loss_must_be_scalar);
    RUN(test_second_derivative);
    RUN(test_given_target_gradient);
    RUN(test_mlp_gradients_match_finite_differences);
    RUN(test_cnn_gradients_match_finite_differences);
    RUN(test_clone_for_test);
    RUN(test_static_hvp_forward_over_reverse);
    return test_report();
}
