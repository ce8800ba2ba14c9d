/* The scope and the executor: feeds and fetches over repeated runs, memory
 * planning, persistable state, and the errors a user meets. Uses test ops
 * registered here, so it depends on no op family. */
#include <stdlib.h>
#include "test.h"

/* test_addc: Out = X + c (any shape), and in-place friendly. */
static nb_status same_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = *nb_in_info(c, 0, 0);
    return NB_OK;
}

/* Counts its calls, to show that parameters are filled once per prepared op. */
static int addc_params_calls;

static nb_status addc_params(const nb_op_ctx *c, void *p)
{
    addc_params_calls++;
    *(double *)p = nb_attr_float(c, "c");
    return NB_OK;
}

static nb_status addc_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    double c = *(const double *)k->params;
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, nb_tensor_get(x, i) + c);
    return NB_OK;
}

static const nb_op_def addc_def = {
    .name = "test_addc",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("c", 1.0)},
    .infer = same_infer,
    .params_size = sizeof(double),
    .params = addc_params,
};

/* test_rand: Out = X + uniform noise from ctx->rng. */
static nb_status rand_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, nb_tensor_get(x, i) + nb_rng_uniform(k->rng));
    return NB_OK;
}

static const nb_op_def rand_def = {
    .name = "test_rand",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_INT("seed", 0)},
    .infer = same_infer,
    .flags = NB_OP_RANDOM,
};

/* test_sumall: Out = sum(X), 0-d. */
static nb_status sumall_infer(nb_op_ctx *c)
{
    *nb_out_info(c, 0, 0) = (nb_var_info){.dtype = nb_in_info(c, 0, 0)->dtype, .ndim = 0};
    return NB_OK;
}

static nb_status sumall_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0);
    double s = 0;
    for (int64_t i = 0; i < nb_tensor_numel(x); i++) s += nb_tensor_get(x, i);
    nb_tensor_set(nb_kout(k, 0, 0), 0, s);
    return NB_OK;
}

static const nb_op_def sumall_def = {
    .name = "test_sumall",
    .inputs = {{"X", 0}},
    .outputs = {{"Out", 0}},
    .infer = sumall_infer,
};

static const nb_kernel_def kernels[] = {
    {"test_addc", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, addc_cpu, NULL, NULL},
    {"test_rand", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, rand_cpu, NULL, NULL},
    {"test_sumall", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, sumall_cpu, NULL, NULL},
};

static void setup(void)
{
    static int done;
    if (done++) return;
    CHECK_OK(nb_op_register(&addc_def));
    CHECK_OK(nb_op_register(&rand_def));
    CHECK_OK(nb_op_register(&sumall_def));
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) CHECK_OK(nb_kernel_register(&kernels[i]));
}

static void append(nb_block *b, const char *type, const char *in, const char *out, double c)
{
    nb_attr a = NB_ATTR_FLOAT("c", c);
    bool has_c = !strcmp(type, "test_addc");
    CHECK_OK(nb_block_append_op(b, type, NB_NAMES_N(1, &in), NB_NAMES_N(1, &out), NB_ATTRS_N(has_c, has_c ? &a : NULL),
                                NULL));
}

static void test_scope(void)
{
    nb_scope *root, *child;
    CHECK_OK(nb_scope_new(&root, NULL));
    CHECK_OK(nb_scope_new(&child, root));
    nb_tensor *a = tscalar(NB_F32, 1), *b = tscalar(NB_F32, 2);
    CHECK_OK(nb_scope_set(root, "a", a));
    CHECK_OK(nb_scope_set(child, "b", b));
    CHECK(nb_scope_find(child, "a") == a && nb_scope_find(child, "b") == b);
    CHECK(nb_scope_find(root, "b") == NULL && nb_scope_find_local(child, "a") == NULL);
    CHECK(nb_scope_parent(child) == root);
    CHECK_OK(nb_scope_set(child, "a", b)); /* shadows the parent's */
    CHECK(nb_scope_find(child, "a") == b && nb_scope_find(root, "a") == a);
    CHECK(nb_scope_size(child) == 2);
    CHECK_STR(nb_scope_name_at(child, 0), "b");
    CHECK_OK(nb_scope_remove(child, "b"));
    CHECK(nb_scope_size(child) == 1 && !strcmp(nb_scope_name_at(child, 0), "a"));
    CHECK(nb_scope_tensor_at(child, 0) == b);
    CHECK_ERR(nb_scope_remove(child, "b"), NB_ERR_NOT_FOUND, "no var named 'b'");
    CHECK(a->refcount == 2 && b->refcount == 2);
    nb_scope_free(child);
    nb_scope_free(root);
    CHECK(a->refcount == 1 && b->refcount == 1);
    release_all(a, b, NULL);
}

/* x -> +1 -> +2 -> ... -> +n, then sum: a chain whose temporaries die young. */
static nb_program *chain_program(int n)
{
    nb_program *p;
    CHECK_OK(nb_program_new(&p));
    nb_block *g = nb_program_global_block(p);
    CHECK_OK(nb_block_create_var(g, "x", NB_F64, 1, S(-1), NULL));
    char prev[32] = "x", cur[32];
    for (int i = 0; i < n; i++) {
        snprintf(cur, sizeof cur, "t%d", i);
        append(g, "test_addc", prev, cur, i + 1);
        strcpy(prev, cur);
    }
    append(g, "test_sumall", prev, "total", 0);
    return p;
}

static void test_feed_fetch_repeated(void)
{
    setup();
    nb_program *p = chain_program(10);
    nb_prepared *pp;
    int params_before = addc_params_calls;
    CHECK_OK(nb_prepare(&pp, p, 0, NB_NAMES("x"), NB_NAMES("total", "t9")));
    /* Each op's parameters are filled when the program is prepared, once. */
    CHECK(addc_params_calls == params_before + 10);
    nb_scope *scope;
    CHECK_OK(nb_scope_new(&scope, NULL));
    /* Temporaries share buffers: ten intermediates need two. */
    nb_tensor *x = T(NB_F64, S(3), 1, 2, 3);
    nb_tensor *out[2];
    CHECK_OK(nb_prepared_run(pp, scope, &x, out));
    CHECK_SCALAR(out[0], 6 + 3 * 55.0, 0);
    CHECK_TENSOR(out[1], S(3), 0, 56, 57, 58);
    nb_tensor_release(out[0]);
    nb_tensor_release(out[1]);
    size_t bytes = nb_prepared_buffer_bytes(pp);
    CHECK(bytes > 0 && bytes <= 2 * 3 * sizeof(double));
    uint64_t allocs = nb_prepared_alloc_count(pp);
    /* Same shapes again: no allocation at all. */
    for (int r = 0; r < 5; r++) {
        nb_tensor_set(x, 0, r);
        CHECK_OK(nb_prepared_run(pp, scope, &x, out));
        CHECK_NEAR(nb_tensor_get(out[1], 0), r + 55, 0);
        nb_tensor_release(out[0]);
        nb_tensor_release(out[1]);
    }
    CHECK(nb_prepared_alloc_count(pp) == allocs);
    /* A bigger batch grows the buffers, then runs allocate nothing again. */
    nb_tensor *x5 = T(NB_F64, S(5), 1, 1, 1, 1, 1);
    CHECK_OK(nb_prepared_run(pp, scope, &x5, out));
    CHECK_SCALAR(out[0], 5 * 56.0, 0);
    nb_tensor_release(out[0]);
    nb_tensor_release(out[1]);
    allocs = nb_prepared_alloc_count(pp);
    CHECK_OK(nb_prepared_run(pp, scope, &x, out));
    CHECK_TENSOR(out[1], S(3), 0, 55 + 4, 57, 58);
    nb_tensor_release(out[0]);
    nb_tensor_release(out[1]);
    CHECK(nb_prepared_alloc_count(pp) == allocs);
    CHECK(addc_params_calls == params_before + 10);
    /* A fetch the caller still holds is never overwritten by the next run. */
    nb_tensor *held[2];
    CHECK_OK(nb_prepared_run(pp, scope, &x, held));
    nb_tensor_set(x, 0, 100);
    CHECK_OK(nb_prepared_run(pp, scope, &x, out));
    CHECK_NEAR(nb_tensor_get(held[1], 0), 59, 0);
    CHECK_NEAR(nb_tensor_get(out[1], 0), 155, 0);
    release_all(held[0], held[1], out[0], out[1], x, x5, NULL);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    nb_program_free(p);
}

static void test_persistable_state_and_startup(void)
{
    setup();
    /* startup: w = 0 + 10 from scratch (reads "zero" from the scope);
     * main: w = w + 1 in place; fetch w and y = x + w? (test ops are unary,
     * so y = w + 0.5). */
    nb_program *startup, *main_p;
    CHECK_OK(nb_program_new(&startup));
    CHECK_OK(nb_program_new(&main_p));
    nb_block *sb = nb_program_global_block(startup), *mb = nb_program_global_block(main_p);
    nb_var *v;
    CHECK_OK(nb_block_create_var(sb, "zero", NB_F32, 1, S(2), NULL));
    CHECK_OK(nb_block_create_var(sb, "w", NB_F32, 1, S(2), &v));
    v->persistable = true;
    append(sb, "test_addc", "zero", "w", 10);
    CHECK_OK(nb_block_create_var(mb, "w", NB_F32, 1, S(2), &v));
    v->persistable = true;
    append(mb, "test_addc", "w", "w", 1);
    append(mb, "test_addc", "w", "y", 0.5);

    nb_executor *ex;
    nb_scope *scope;
    CHECK_OK(nb_executor_new(&ex));
    CHECK_OK(nb_scope_new(&scope, NULL));
    nb_tensor *y = NULL;
    /* Before the startup program, w is missing. */
    CHECK_ERR(nb_executor_run(ex, main_p, scope, NB_NO_FEEDS, NB_NAMES("y"), &y), NB_ERR_NOT_FOUND,
              "persistable var 'w' is not in the scope (was the startup program run?)");
    nb_tensor *zero = T(NB_F32, S(2), 0, 0);
    CHECK_OK(nb_scope_set(scope, "zero", zero));
    CHECK_OK(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    nb_tensor *w = nb_scope_find(scope, "w");
    CHECK_TENSOR(w, S(2), 0, 10, 10);
    for (int r = 1; r <= 3; r++) {
        CHECK_OK(nb_executor_run(ex, main_p, scope, NB_NO_FEEDS, NB_NAMES("y"), &y));
        CHECK_TENSOR(y, S(2), 0, 10 + r + 0.5, 10 + r + 0.5);
        nb_tensor_release(y);
    }
    /* Updated in place: the scope still holds the same tensor. */
    CHECK(nb_scope_find(scope, "w") == w);
    CHECK_TENSOR(w, S(2), 0, 13, 13);
    /* Fetching a persistable gives a copy that later runs leave alone. */
    nb_tensor *wc;
    CHECK_OK(nb_executor_run(ex, main_p, scope, NB_NO_FEEDS, NB_NAMES("w"), &wc));
    CHECK(wc != w);
    CHECK_OK(nb_executor_run(ex, main_p, scope, NB_NO_FEEDS, NB_NAMES("w"), &y));
    CHECK_NEAR(nb_tensor_get(wc, 0), 14, 0);
    CHECK_NEAR(nb_tensor_get(y, 0), 15, 0);
    release_all(wc, y, zero, NULL);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_program_free(startup);
    nb_program_free(main_p);
}

static void test_run_errors(void)
{
    setup();
    nb_program *p = chain_program(2);
    nb_var *xv = nb_block_find_var(nb_program_global_block(p), "x");
    xv->is_data = true;
    nb_executor *ex;
    nb_scope *scope;
    CHECK_OK(nb_executor_new(&ex));
    CHECK_OK(nb_scope_new(&scope, NULL));
    nb_tensor *out = NULL;
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_NO_FEEDS, NB_NAMES("total"), &out), NB_ERR_NOT_FOUND,
              "data var 'x' was not fed");
    nb_tensor *xf = T(NB_F32, S(2), 1, 2);
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"x", xf}), NB_NAMES("total"), &out), NB_ERR_DTYPE,
              "feed 'x' is float32 [2] but the var is declared float64 [-1]");
    nb_tensor *x2 = T(NB_F64, S(1, 2), 1, 2);
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x2}), NB_NAMES("total"), &out), NB_ERR_SHAPE,
              "feed 'x' is float64 [1, 2]");
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"x", NULL}), NB_NO_NAMES, NULL), NB_ERR_ARG, "feed 'x' is NULL");
    nb_tensor *x = T(NB_F64, S(2), 1, 2);
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}), NB_NAMES("nope"), &out), NB_ERR_NOT_FOUND,
              "fetch 'nope' is not a var");
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"t0", x}), NB_NO_NAMES, NULL), NB_ERR_ARG,
              "writes 't0', which is fed");
    CHECK(out == NULL);
    /* A view is accepted as a feed (copied to contiguous memory). */
    nb_tensor *big = T(NB_F64, S(4), 1, 100, 2, 100), *view;
    CHECK_OK(nb_tensor_slice(&view, big, 0, 0, 4, 2));
    CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", view}), NB_NAMES("total"), &out));
    CHECK_SCALAR(out, 1 + 2 + 2 * 3, 0);
    release_all(out, xf, x2, x, big, view, NULL);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_program_free(p);
}

/* Each unusable list is named: a fetch with nowhere to put it above all,
 * once a bare "bad feed or fetch lists". */
static void test_run_list_errors(void)
{
    setup();
    nb_program *p = chain_program(2);
    nb_executor *ex;
    nb_scope *scope;
    CHECK_OK(nb_executor_new(&ex));
    CHECK_OK(nb_scope_new(&scope, NULL));
    nb_tensor *x = T(NB_F64, S(2), 1, 2);
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}), NB_NAMES("total"), NULL), NB_ERR_ARG,
              "1 fetch ('total') but nowhere to put the result: the output array is NULL");
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS_N(1, NULL), NB_NO_NAMES, NULL), NB_ERR_ARG,
              "1 feed but no array of them");
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_NO_FEEDS, NB_NAMES_N(2, NULL), NULL), NB_ERR_ARG,
              "2 fetches but no array of their names");
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS_N(-1, NULL), NB_NO_NAMES, NULL), NB_ERR_ARG,
              "a count cannot be negative");
    /* What nb_executor_run promises on failure: no fetched tensor, also
     * when the program fails before it runs. */
    nb_tensor *out = x;
    CHECK_ERR(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}), NB_NAMES("nope"), &out), NB_ERR_NOT_FOUND,
              "fetch 'nope' is not a var");
    CHECK(out == NULL);
    nb_tensor_release(x);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_program_free(p);
}

static void test_random_ops_reproducible(void)
{
    setup();
    double first[2][2];
    for (int trial = 0; trial < 2; trial++) {
        nb_program *p;
        CHECK_OK(nb_program_new(&p));
        nb_program_set_seed(p, 42);
        nb_block *g = nb_program_global_block(p);
        CHECK_OK(nb_block_create_var(g, "x", NB_F64, 1, S(1), NULL));
        append(g, "test_rand", "x", "y", 0);
        nb_executor *ex;
        nb_scope *scope;
        CHECK_OK(nb_executor_new(&ex));
        CHECK_OK(nb_scope_new(&scope, NULL));
        nb_tensor *x = T(NB_F64, S(1), 0), *y;
        for (int r = 0; r < 2; r++) {
            CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}), NB_NAMES("y"), &y));
            first[trial][r] = nb_tensor_get(y, 0);
            nb_tensor_release(y);
        }
        nb_tensor_release(x);
        nb_scope_free(scope);
        nb_executor_free(ex);
        nb_program_free(p);
    }
    /* The stream advances run to run, and a new process repeats it exactly. */
    CHECK(first[0][0] != first[0][1]);
    CHECK(first[0][0] == first[1][0] && first[0][1] == first[1][1]);
}

static void test_run_index_replays_random_ops(void)
{
    setup();
    nb_program *p;
    CHECK_OK(nb_program_new(&p));
    nb_program_set_seed(p, 7);
    nb_block *g = nb_program_global_block(p);
    CHECK_OK(nb_block_create_var(g, "x", NB_F64, 1, S(1), NULL));
    append(g, "test_rand", "x", "y", 0);
    nb_prepared *pp;
    nb_scope *scope;
    REQUIRE_OK(nb_prepare(&pp, p, 0, NB_NAMES("x"), NB_NAMES("y")));
    CHECK_OK(nb_scope_new(&scope, NULL));
    nb_tensor *x = T(NB_F64, S(1), 0), *y;
    double seen[3];
    for (int r = 0; r < 3; r++) {
        CHECK_OK(nb_prepared_run(pp, scope, &x, &y));
        seen[r] = nb_tensor_get(y, 0);
        nb_tensor_release(y);
    }
    CHECK(nb_prepared_run_index(pp) == 3);
    /* Back to run 1: the same number as the first time round. */
    nb_prepared_set_run_index(pp, 1);
    CHECK_OK(nb_prepared_run(pp, scope, &x, &y));
    CHECK(nb_tensor_get(y, 0) == seen[1] && seen[1] != seen[2] && seen[0] != seen[1]);
    nb_tensor_release(y);
    nb_tensor_release(x);
    nb_scope_free(scope);
    nb_prepared_free(pp);
    nb_program_free(p);
}

static void test_executor_cache_follows_program_changes(void)
{
    setup();
    nb_program *p = chain_program(1);
    nb_executor *ex;
    nb_scope *scope;
    CHECK_OK(nb_executor_new(&ex));
    CHECK_OK(nb_scope_new(&scope, NULL));
    nb_tensor *x = T(NB_F64, S(1), 0), *out;
    CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}), NB_NAMES("total"), &out));
    CHECK_SCALAR(out, 1, 0);
    nb_tensor_release(out);
    /* Appending an op changes the version; the executor re-prepares. */
    append(nb_program_global_block(p), "test_addc", "total", "total2", 5);
    CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}), NB_NAMES("total2"), &out));
    CHECK_SCALAR(out, 6, 0);
    release_all(out, x, NULL);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_scope);
    RUN(test_feed_fetch_repeated);
    RUN(test_persistable_state_and_startup);
    RUN(test_run_errors);
    RUN(test_run_list_errors);
    RUN(test_random_ops_reproducible);
    RUN(test_run_index_replays_random_ops);
    RUN(test_executor_cache_follows_program_changes);
    return test_report();
}
