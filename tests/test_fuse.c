/* The executor's fusion pass (src/exec/fuse.c): runs of elementwise ops run
 * as one pass over slices. Every case runs the same program prepared with
 * fusion and with NABLA_FUSE=0 and compares the two, and checks that the
 * fused runs did run fused (nb_prepared_fused_steps). */
#include <stdlib.h>
#include "nabla/init.h"
#include "nabla/optimizer.h"
#include "test.h"

/* Prepares p (block 0) with fusion on or off. */
static nb_status prepare_as(nb_prepared **pp, nb_program *p, bool fuse, nb_names feeds, nb_names fetches)
{
    if (fuse) unsetenv("NABLA_FUSE");
    else setenv("NABLA_FUSE", "0", 1);
    nb_status st = nb_prepare(pp, p, 0, feeds, fetches);
    unsetenv("NABLA_FUSE");
    return st;
}

static nb_tensor *filled(nb_dtype dt, int64_t rows, int64_t cols, double phase)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, 2, S(rows, cols))) return NULL;
    for (int64_t i = 0; i < rows * cols; i++) nb_tensor_set(t, i, 2 * sin(0.37 * (double)i + phase));
    return t;
}

/* x [-1, W] -> a chain of ten elementwise ops, one of them taking a
 * one-element constant, then a sum. */
#define W 1000
#define CHAIN 10
typedef struct chain {
    nb_program *p;
    char out[64], mid[64], sum[64];
} chain;

static void chain_build(chain *c, nb_dtype dt)
{
    nb_builder *b;
    memset(c, 0, sizeof *c);
    CHECK_OK(nb_program_new(&c->p));
    CHECK_OK(nb_builder_new_record(&b, c->p, NULL));
    nb_value x = nb_data(b, "x", dt, 2, S(-1, W));
    nb_value k = nb_fill_constant(b, dt, 1, S(1), 0.75);
    nb_value a = nb_scale(b, x, 0.5, 0.1);
    nb_value t = nb_tanh(b, nb_exp(b, a));
    nb_value s = nb_mul(b, nb_sigmoid(b, t), k);
    nb_value r = nb_relu(b, nb_sub(b, s, nb_square(b, x)));
    nb_value out = nb_add(b, r, nb_gelu(b, x, true));
    nb_value sum = nb_reduce_sum(b, out, 0, NULL, false);
    CHECK_OK(nb_builder_status(b));
    snprintf(c->out, sizeof c->out, "%s", nb_value_name(out));
    snprintf(c->mid, sizeof c->mid, "%s", nb_value_name(t));
    snprintf(c->sum, sizeof c->sum, "%s", nb_value_name(sum));
    nb_builder_free(b);
}

/* Runs the fused and the unfused program on `rows` rows and compares
 * every fetch; returns the fused run's fused step count. */
static int compare_run(nb_prepared *fused, nb_prepared *plain, nb_scope *scope, nb_dtype dt, int64_t rows, int n_fetch,
                       double tol)
{
    nb_tensor *x = filled(dt, rows, W, 0.3), *got[3] = {0}, *want[3] = {0};
    CHECK_OK(nb_prepared_run(fused, scope, &x, got));
    CHECK_OK(nb_prepared_run(plain, scope, &x, want));
    CHECK(nb_prepared_fused_steps(plain) == 0);
    for (int i = 0; i < n_fetch; i++) {
        double d = max_rel_diff(got[i], want[i]);
        if (!(d <= tol)) fprintf(stderr, "  fetch %d of %lld rows differs by %g\n", i, (long long)rows, d);
        CHECK(d <= tol);
    }
    for (int i = 0; i < n_fetch; i++) release_all(got[i], want[i], NULL);
    nb_tensor_release(x);
    return nb_prepared_fused_steps(fused);
}

static void chain_case(nb_dtype dt, double tol)
{
    chain c;
    chain_build(&c, dt);
    nb_scope *scope;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_prepared *fused, *plain;
    REQUIRE_OK(prepare_as(&fused, c.p, true, NB_NAMES("x"), NB_NAMES(c.out, c.sum)));
    REQUIRE_OK(prepare_as(&plain, c.p, false, NB_NAMES("x"), NB_NAMES(c.out, c.sum)));
    /* The first run goes step by step and learns the shapes; the next
     * fuse. 37 rows are 37000 elements: slices with a ragged end, split
     * across threads. A change of shape runs step by step once more. */
    CHECK(compare_run(fused, plain, scope, dt, 37, 2, tol) == 0);
    CHECK(compare_run(fused, plain, scope, dt, 37, 2, tol) == CHAIN);
    CHECK(compare_run(fused, plain, scope, dt, 37, 2, tol) == CHAIN);
    CHECK(compare_run(fused, plain, scope, dt, 1, 2, tol) == 0);
    CHECK(compare_run(fused, plain, scope, dt, 1, 2, tol) == CHAIN);
    CHECK(compare_run(fused, plain, scope, dt, 37, 2, tol) == 0);
    CHECK(compare_run(fused, plain, scope, dt, 37, 2, tol) == CHAIN);
    /* Steady runs allocate nothing, and the chain's own values take no
     * memory: only its output and the sum are held. */
    uint64_t allocs = nb_prepared_alloc_count(fused);
    compare_run(fused, plain, scope, dt, 37, 2, tol);
    CHECK(nb_prepared_alloc_count(fused) == allocs);
    nb_memory_report mf, mp;
    REQUIRE_OK(nb_prepared_memory(fused, scope, &mf));
    REQUIRE_OK(nb_prepared_memory(plain, scope, &mp));
    printf("  %s: peak %zu bytes fused, %zu one by one\n", nb_dtype_name(dt), mf.peak_bytes, mp.peak_bytes);
    CHECK(mf.peak_bytes < mp.peak_bytes);
    CHECK(mf.peak_bytes <= (size_t)37 * W * nb_dtype_size(dt) + 64);
    nb_prepared_free(fused);
    nb_prepared_free(plain);
    /* A fetched value in the middle is kept, and correct. */
    REQUIRE_OK(prepare_as(&fused, c.p, true, NB_NAMES("x"), NB_NAMES(c.out, c.mid, c.sum)));
    REQUIRE_OK(prepare_as(&plain, c.p, false, NB_NAMES("x"), NB_NAMES(c.out, c.mid, c.sum)));
    compare_run(fused, plain, scope, dt, 5, 3, tol);
    CHECK(compare_run(fused, plain, scope, dt, 5, 3, tol) == CHAIN);
    nb_prepared_free(fused);
    nb_prepared_free(plain);
    nb_scope_free(scope);
    nb_program_free(c.p);
}

static void test_chain_f32(void) { chain_case(NB_F32, 1e-6); }
static void test_chain_f64(void) { chain_case(NB_F64, 1e-14); }

/* Y declared [-1, 8] but fed [1, 8]: its broadcast only shows at run time,
 * and the group then runs step by step. */
static void test_undeclared_broadcast_runs_unfused(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 2, S(-1, 8)), y = nb_data(b, "y", NB_F64, 2, S(-1, 8));
    nb_value z = nb_relu(b, nb_add(b, x, y));
    nb_value out = nb_mul(b, z, z);
    REQUIRE_OK(nb_builder_status(b));
    int group[8];
    CHECK(nb_fusion_groups(p, 0, group) == 1);
    CHECK(group[0] == 0 && group[1] == 0 && group[2] == 0);
    nb_scope *scope;
    nb_prepared *pp;
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_prepare(&pp, p, 0, NB_NAMES("x", "y"), NB_NAMES(nb_value_name(out))));
    nb_tensor *xs = filled(NB_F64, 5, 8, 0), *ys = filled(NB_F64, 1, 8, 1);
    for (int run = 0; run < 3; run++) {
        nb_tensor *feeds[2] = {xs, ys}, *o = NULL;
        CHECK_OK(nb_prepared_run(pp, scope, feeds, &o));
        CHECK(nb_prepared_fused_steps(pp) == 0);
        for (int i = 0; o && i < 40; i++) {
            double v = nb_tensor_get(xs, i) + nb_tensor_get(ys, i % 8);
            v = v > 0 ? v : 0;
            CHECK_NEAR(nb_tensor_get(o, i), v * v, 1e-15);
        }
        nb_tensor_release(o);
    }
    release_all(xs, ys, NULL);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(p);
}

/* A small tanh MLP trained with SGD: the gradient program's activation
 * gradients fuse, and five steps give the losses and weights of the
 * unfused program. */
static void train(bool fuse, double *losses, double *w_sum, int *fused_steps)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_scope *scope;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    nb_value x = nb_data(b, "x", NB_F32, 2, S(-1, 20)), label = nb_data(b, "label", NB_F32, 2, S(-1, 1));
    nb_value w1 = nb_param(b, "w1", NB_F32, 2, S(20, 300), nb_init_uniform(-0.5, 0.5));
    nb_value b1 = nb_param(b, "b1", NB_F32, 1, S(300), nb_init_zeros());
    nb_value w2 = nb_param(b, "w2", NB_F32, 2, S(300, 1), nb_init_uniform(-0.5, 0.5));
    nb_value h = nb_tanh(b, nb_fc(b, x, w1, b1, 1));
    nb_value h2 = nb_sigmoid(b, nb_scale(b, h, 2.0, 0.5));
    nb_value cost = nb_mse_loss(b, nb_fc(b, h2, w2, NB_NONE, 1), label, "mean");
    REQUIRE_OK(nb_builder_status(b));
    nb_optimizer o = nb_sgd(0.01);
    nb_backward_result r;
    REQUIRE_OK(nb_minimize(&o, main_p, startup, nb_value_name(cost), NULL, &r));
    nb_backward_result_free(&r);
    int *group = calloc((size_t)nb_program_block(main_p, 0)->n_ops, sizeof *group);
    CHECK(group && nb_fusion_groups(main_p, 0, group) >= 1);
    free(group);
    nb_prepared *init_pp, *pp;
    REQUIRE_OK(nb_prepare(&init_pp, startup, 0, NB_NO_NAMES, NB_NO_NAMES));
    REQUIRE_OK(nb_prepared_run(init_pp, scope, NULL, NULL));
    nb_prepared_free(init_pp);
    REQUIRE_OK(prepare_as(&pp, main_p, fuse, NB_NAMES("x", "label"), NB_NAMES(nb_value_name(cost))));
    nb_tensor *xs = filled(NB_F32, 64, 20, 0), *ys = filled(NB_F32, 64, 1, 2);
    for (int step = 0; step < 5; step++) {
        nb_tensor *feeds[2] = {xs, ys}, *l = NULL;
        CHECK_OK(nb_prepared_run(pp, scope, feeds, &l));
        losses[step] = l ? nb_tensor_get(l, 0) : NAN;
        nb_tensor_release(l);
    }
    *fused_steps = nb_prepared_fused_steps(pp);
    nb_tensor *w = nb_scope_find(scope, "w1");
    *w_sum = 0;
    for (int64_t i = 0; w && i < nb_tensor_numel(w); i++) *w_sum += fabs(nb_tensor_get(w, i));
    release_all(xs, ys, NULL);
    nb_prepared_free(pp);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
}

static void test_training_matches_unfused(void)
{
    double lf[5], lp[5], wf, wp;
    int nf, np;
    train(true, lf, &wf, &nf);
    train(false, lp, &wp, &np);
    printf("  losses %.6f -> %.6f; %d steps fused per run\n", lf[0], lf[4], nf);
    CHECK(nf >= 4); /* tanh's gradient (3 ops), sigmoid's (3), scale and its gradient */
    CHECK(np == 0);
    CHECK(lf[4] < lf[0]);
    for (int i = 0; i < 5; i++) CHECK_NEAR(lf[i], lp[i], 1e-6 * fabs(lp[i]));
    CHECK_NEAR(wf, wp, 1e-6 * wp);
}

/* nb_fusion_groups and the drawing of the groups. */
static void test_groups_and_drawing(void)
{
    chain c;
    chain_build(&c, NB_F32);
    const nb_block *blk = nb_program_block(c.p, 0);
    int group[32];
    REQUIRE_OK(blk->n_ops <= 32 ? NB_OK : NB_ERR_ARG);
    CHECK(nb_fusion_groups(c.p, 0, group) == 1);
    int in_group = 0;
    for (int i = 0; i < blk->n_ops; i++) {
        const char *op = blk->ops[i]->def->name;
        bool elementwise = strcmp(op, "fill_constant") && strcmp(op, "reduce_sum") && strcmp(op, "data");
        CHECK(group[i] == (elementwise ? 0 : -1));
        in_group += group[i] == 0;
    }
    CHECK(in_group == CHAIN);
    setenv("NABLA_FUSE", "0", 1);
    CHECK(nb_fusion_groups(c.p, 0, group) == 0);
    unsetenv("NABLA_FUSE");
    CHECK(nb_fusion_groups(c.p, 5, group) == -1 && strstr(nb_last_error(), "no block 5"));
    FILE *f = tmpfile();
    REQUIRE_OK(f ? NB_OK : NB_ERR_IO);
    CHECK_OK(nb_program_to_dot_fused(c.p, f));
    char text[20000] = {0};
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    CHECK(n > 0 && strstr(text, "subgraph cluster_fused0") && strstr(text, "label=\"fused 0\""));
    CHECK(!strstr(text, "cluster_fused1"));
    nb_program_free(c.p);
}

int main(void)
{
    RUN(test_chain_f32);
    RUN(test_chain_f64);
    RUN(test_undeclared_broadcast_runs_unfused);
    RUN(test_training_matches_unfused);
    RUN(test_groups_and_drawing);
    return test_report();
}
