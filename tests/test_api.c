/* What new users tripped over, each kept from coming back: values of one
 * mode handed to the other, ... */
#include <stdlib.h>
#include "test.h"

/* An eager value given to a record builder (or the reverse) is an error that
 * names the call, not a tensor read as a var. */
static void test_values_know_their_mode(void)
{
    nb_program *p;
    nb_builder *rec, *eager;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&rec, p, NULL));
    REQUIRE_OK(nb_builder_new_eager(&eager));
    nb_tensor *t = T(NB_F32, S(2), 1, 2);
    nb_value ev = nb_eager_value(eager, t);
    nb_value rv = nb_layer_data(rec, "x", NB_F32, 1, S(2));
    CHECK(nb_is_none(nb_relu(rec, ev)));
    CHECK(nb_builder_status(rec) == NB_ERR_ARG);
    CHECK(strstr(nb_builder_error(rec),
                 "emit relu: input 0 is an eager tensor (an eager builder's value), but this is a "
                 "record builder"));
    CHECK(nb_is_none(nb_add(eager, rv, ev)));
    CHECK(strstr(nb_builder_error(eager),
                 "emit add: input 0 is a var of a program (a record builder's value), but this "
                 "is an eager builder"));
    CHECK(nb_value_name(ev) == NULL);
    CHECK(strstr(nb_last_error(), "nb_value_name: an eager tensor has no name"));
    CHECK(nb_value_var(NB_NONE) == NULL);
    CHECK(strstr(nb_last_error(), "nb_value_var: the value is NB_NONE"));
    CHECK(nb_eager_tensor(rv) == NULL);
    CHECK(strstr(nb_last_error(), "nb_eager_tensor: the value is a var of a program"));
    CHECK(nb_eager_tensor(ev) == t);
    CHECK_STR(nb_value_name(rv), "x");
    nb_tensor_release(t);
    nb_builder_free(rec);
    nb_builder_free(eager);
    nb_program_free(p);
}

/* A constant from host data lives in the program: nothing feeds it, it keeps
 * float64 and int64 values exactly, and it survives a program file. */
static void test_constants_from_host_data(void)
{
    nb_program *p, *q = NULL;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_tensor *w = T(NB_F64, S(3), 0.1, -2.5, 1e-300), *big = T(NB_I64, S(2), 0, 0);
    ((int64_t *)nb_tensor_data(big))[0] = ((int64_t)1 << 60) + 1;
    ((int64_t *)nb_tensor_data(big))[1] = -7;
    nb_value x = nb_layer_data(b, "x", NB_F64, 1, S(3));
    nb_value y = nb_mul(b, x, nb_constant(b, w));
    nb_value k = nb_constant(b, big);
    REQUIRE_OK(nb_builder_status(b));
    const char *fetch[2] = {nb_value_name(y), nb_value_name(k)};
    for (int round = 0; round < 2; round++) {
        nb_program *run = round ? q : p;
        nb_executor *ex;
        nb_scope *scope;
        REQUIRE_OK(nb_executor_new(&ex));
        REQUIRE_OK(nb_scope_new(&scope, NULL));
        nb_tensor *xs = T(NB_F64, S(3), 1, 1, 1), *out[2] = {NULL, NULL};
        CHECK_OK(nb_executor_run(ex, run, scope, NB_FEEDS({"x", xs}), NB_NAMES_N(2, fetch), out));
        if (out[0] && out[1]) {
            const double *yd = nb_tensor_data(out[0]);
            CHECK(yd[0] == 0.1 && yd[1] == -2.5 && yd[2] == 1e-300);
            CHECK(((const int64_t *)nb_tensor_data(out[1]))[0] == ((int64_t)1 << 60) + 1);
            CHECK(((const int64_t *)nb_tensor_data(out[1]))[1] == -7);
        }
        release_all(xs, out[0], out[1], NULL);
        nb_scope_free(scope);
        nb_executor_free(ex);
        if (!round) {
            uint8_t *buf;
            size_t len;
            REQUIRE_OK(nb_program_serialize(p, &buf, &len));
            CHECK_OK(nb_program_deserialize(&q, buf, len));
            nb_free(buf);
            if (!q) break;
        }
    }
    /* Eagerly, a copy. */
    nb_builder *e;
    REQUIRE_OK(nb_builder_new_eager(&e));
    nb_value c = nb_constant(e, w);
    CHECK_OK(nb_builder_status(e));
    CHECK(nb_eager_tensor(c) != w);
    CHECK_TENSOR(nb_eager_tensor(c), S(3), 0, 0.1, -2.5, 1e-300);
    /* Values that do not fit the shape are refused, naming the op. */
    nb_value bad =
        nb_emit1(e, "assign_value", NB_NO_VALUES, NB_ATTRS(NB_ATTR_INTS("shape", 2), NB_ATTR_FLOATS("fp_values", 1.0)));
    CHECK(nb_is_none(bad));
    CHECK(strstr(nb_builder_error(e),
                 "assign_value: a float32 constant of shape [2] has 2 elements, but fp_values holds 1"));
    release_all(w, big, NULL);
    nb_builder_free(e);
    nb_builder_free(b);
    nb_program_free(p);
    nb_program_free(q);
}

static nb_status square_sum(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_reduce_sum(b, nb_square(b, in[0]), 0, NULL, false);
    return nb_builder_status(b);
}

/* Messages read as English and name what was wrong. */
static void test_messages(void)
{
    /* nb_grad's errors name nb_grad, not the function it calls. */
    nb_function f = {square_sum, 1, 1, NULL};
    nb_tensor *g1 = NULL, *x1 = T(NB_F64, S(2), 1, 2);
    CHECK_ERR(nb_grad(&f, &x1, &(nb_grad_opts){.n_argnums = 1, .argnums = (int[]){3}}, &g1, NULL), NB_ERR_ARG,
              "grad: argnum 3 is not an input of a 1-input function");
    CHECK(strncmp(nb_last_error(), "grad:", 5) == 0);
    nb_tensor_release(x1);
    /* Program printing names dtypes, not their numbers. */
    {
        nb_program *pp_;
        nb_builder *pb;
        REQUIRE_OK(nb_program_new(&pp_));
        REQUIRE_OK(nb_builder_new_record(&pb, pp_, NULL));
        nb_cast(pb, nb_layer_data(pb, "x", NB_F32, 1, S(2)), NB_F64);
        char *text = NULL;
        size_t len = 0;
        FILE *mf = open_memstream(&text, &len);
        CHECK_OK(nb_program_print(pp_, mf));
        fclose(mf);
        CHECK(text && strstr(text, "dtype=float64") && !strstr(text, "dtype=1"));
        free(text);
        nb_builder_free(pb);
        nb_program_free(pp_);
    }
    /* An ordinal is "2nd", not "2-th". */
    nb_builder *e;
    REQUIRE_OK(nb_builder_new_eager(&e));
    nb_tensor *x = T(NB_F64, S(2), 0, 1);
    REQUIRE_OK(nb_tensor_set_requires_grad(x, true));
    nb_tensor *l = nb_eager_tensor(nb_reduce_sum(e, nb_sqrt(e, nb_eager_value(e, x)), 0, NULL, false));
    nb_set_anomaly_mode(true);
    CHECK(nb_backward(NB_TENSORS(l), NULL, 0) == NB_ERR_STATE);
    nb_set_anomaly_mode(false);
    const char *m = strstr(nb_last_error(), " op recorded)");
    CHECK(m && !strstr(nb_last_error(), "-th"));
    CHECK(
        m &&
        (!strncmp(m - 2, "st", 2) || !strncmp(m - 2, "nd", 2) || !strncmp(m - 2, "rd", 2) || !strncmp(m - 2, "th", 2)));
    nb_builder_free(e);
    nb_tensor_release(x);
    /* A NULL fetch is named as such, not as a var called "(null)". */
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_relu(b, nb_layer_data(b, "x", NB_F32, 1, S(2)));
    nb_prepared *pp;
    CHECK_ERR(nb_prepare(&pp, p, 0, NB_NO_NAMES, NB_NAMES(NULL)), NB_ERR_ARG,
              "prepare: fetch 0 is NULL; fetches are names of vars");
    CHECK(!strstr(nb_last_error(), "(null)"));
    nb_builder_free(b);
    nb_program_free(p);
}

/* A parameter made with no startup program is initialised once per scope
 * (a run-once op), so a hand-written update survives the next run. */
static void test_initialisers_run_once(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_layer_data(b, "x", NB_F64, 1, S(2));
    nb_value w = nb_param(b, "w", NB_F64, 1, S(2), nb_init_constant(3.0));
    nb_value y = nb_mul(b, x, w);
    REQUIRE_OK(nb_builder_status(b));
    nb_executor *ex;
    nb_scope *scope;
    REQUIRE_OK(nb_executor_new(&ex));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_tensor *xs = T(NB_F64, S(2), 1, 2), *out = NULL;
    const char *fetch = nb_value_name(y);
    CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", xs}), NB_NAMES_N(1, &fetch), &out));
    CHECK_TENSOR(out, S(2), 0, 3, 6);
    nb_tensor_release(out);
    /* The user's own update: w = w - 1. */
    nb_tensor *wt = nb_scope_find(scope, "w");
    REQUIRE_OK(wt ? NB_OK : NB_ERR_NOT_FOUND);
    for (int i = 0; i < 2; i++) nb_tensor_set(wt, i, nb_tensor_get(wt, i) - 1);
    CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", xs}), NB_NAMES_N(1, &fetch), &out));
    CHECK_TENSOR(out, S(2), 0, 2, 4);
    nb_tensor_release(out);
    /* A fresh scope gets it initialised again. */
    nb_scope *fresh;
    REQUIRE_OK(nb_scope_new(&fresh, NULL));
    CHECK_OK(nb_executor_run(ex, p, fresh, NB_FEEDS({"x", xs}), NB_NAMES_N(1, &fetch), &out));
    CHECK_TENSOR(out, S(2), 0, 3, 6);
    release_all(out, xs, NULL);
    nb_scope_free(fresh);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(p);
}

/* A run does only what its fetches and the program's lasting updates need:
 * a test clone's logits need no label; a feed that is no var is an error. */
static void test_runs_prune_by_fetch(void)
{
    nb_program *main_p, *startup, *test_p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    nb_value x = nb_layer_data(b, "x", NB_F32, 2, S(-1, 4));
    nb_value label = nb_layer_data(b, "label", NB_I64, 2, S(-1, 1));
    nb_value logits = nb_layer_fc(b, x, 3, NULL, NULL);
    nb_value loss = nb_layer_softmax_cross_entropy(b, logits, label);
    REQUIRE_OK(nb_builder_status(b));
    const char *logits_name = nb_value_name(logits);
    nb_optimizer opt = nb_sgd(0.1);
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&opt, main_p, startup, nb_value_name(loss), NULL, &r));
    REQUIRE_OK(nb_program_clone_for_test(&test_p, main_p));
    nb_executor *ex;
    nb_scope *scope;
    REQUIRE_OK(nb_executor_new(&ex));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    CHECK_OK(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *xs = T(NB_F32, S(2, 4), 1, 2, 3, 4, 5, 6, 7, 8), *out = NULL;
    CHECK_OK(nb_executor_run(ex, test_p, scope, NB_FEEDS({"x", xs}), NB_NAMES_N(1, &logits_name), &out));
    CHECK(out && out->ndim == 2 && out->shape[0] == 2 && out->shape[1] == 3);
    nb_tensor_release(out);
    out = NULL;
    /* Training still needs the label: the update of the parameters does. */
    CHECK_ERR(nb_executor_run(ex, main_p, scope, NB_FEEDS({"x", xs}), NB_NO_NAMES, NULL), NB_ERR_NOT_FOUND,
              "data var 'label' was not fed");
    CHECK_ERR(nb_executor_run(ex, test_p, scope, NB_FEEDS({"images", xs}), NB_NAMES_N(1, &logits_name), &out),
              NB_ERR_NOT_FOUND, "prepare: feed 'images' is not a var of block 0");
    release_all(xs, NULL);
    nb_backward_result_free(&r);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
    nb_program_free(test_p);
}

/* A shape with a 0 dim and huge ones holds no element, but its strides
 * would overflow: refused, naming the shape, wherever a shape comes in. */
static void test_empty_but_huge_shapes(void)
{
    const int64_t huge[4] = {0, (int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    nb_tensor *t = NULL;
    CHECK_ERR(nb_tensor_new(&t, NB_F32, 4, huge), NB_ERR_SHAPE,
              "shape [0, 2147483648, 2147483648, 2147483648] is too large");
    nb_tensor *out = NULL;
    CHECK_ERR(nb_op_run("fill_constant", NB_NO_TENSORS, NB_ATTRS(NB_ATTR_INTS_N("shape", 4, huge)), 1, &out),
              NB_ERR_SHAPE, "too large");
    CHECK(out == NULL);
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    CHECK(nb_is_none(nb_fill_constant(b, NB_F32, 4, huge, 1.0)));
    CHECK(nb_builder_status(b) == NB_ERR_SHAPE && strstr(nb_builder_error(b), "too large"));
    nb_builder_free(b);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_values_know_their_mode);
    RUN(test_constants_from_host_data);
    RUN(test_messages);
    RUN(test_initialisers_run_once);
    RUN(test_runs_prune_by_fetch);
    RUN(test_empty_but_huge_shapes);
    return test_report();
}
