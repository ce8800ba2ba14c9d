/* Recomputation in static programs (nb_backward_opts.checkpoints and
 * recompute_segments): gradients equal those without it bit for bit, with
 * dropout too, through an LSTM's recurrent op, and differentiated again by
 * nb_gradients; the copies are backward ops; the peak of the temporaries
 * falls; bad checkpoints are named. */
#include <stdlib.h>
#include "test.h"
#include "nabla/nabla.h"

#define B 256
#define W 64
#define LAYERS 12

typedef struct net {
    nb_program *main, *startup;
    nb_backward_result r;
    char loss[64];
    nb_scope *scope;
    nb_prepared *pp;
} net;

/* LAYERS fc+tanh layers of width W (dropout after the 4th when asked, an
 * LSTM over the features as a sequence when asked), mean of the output. */
static nb_status build(net *n, bool dropout, bool lstm, const nb_backward_opts *opts)
{
    memset(n, 0, sizeof *n);
    nb_builder *b;
    nb_status st = nb_program_new(&n->main);
    if (!st) st = nb_program_new(&n->startup);
    if (!st) st = nb_builder_new_record(&b, n->main, n->startup);
    if (st) return st;
    nb_program_set_seed(n->main, 3);
    nb_program_set_seed(n->startup, 3);
    nb_value h = nb_data(b, "x", NB_F64, 2, S(-1, W));
    for (int i = 0; i < LAYERS; i++) {
        h = nb_layer_fc(b, h, W, "tanh", NULL);
        if (dropout && i == 3) h = nb_layer_dropout(b, h, 0.3);
        if (lstm && i == 5) { /* [B, W] as 4 steps of [B, W/4] */
            nb_value seq = nb_transpose(b, nb_reshape(b, h, 3, S(-1, 4, W / 4)), 3, S(1, 0, 2));
            nb_value ys = nb_layer_lstm(b, seq, NULL, W / 4, NULL, NULL);
            h = nb_reshape(b, nb_transpose(b, ys, 3, S(1, 0, 2)), 2, S(-1, W));
        }
    }
    nb_value loss = nb_reduce_mean(b, nb_mul(b, h, h), 0, NULL, false);
    if ((st = nb_builder_status(b))) {
        st = nb_error(st, "%s", nb_builder_error(b));
        nb_builder_free(b);
        return st;
    }
    snprintf(n->loss, sizeof n->loss, "%s", nb_value_name(loss));
    nb_builder_free(b);
    if ((st = nb_append_backward(n->main, n->loss, opts, &n->r))) return st;
    nb_executor *ex = NULL;
    if (!st) st = nb_scope_new(&n->scope, NULL);
    if (!st) st = nb_executor_new(&ex);
    if (!st) st = nb_executor_run(ex, n->startup, n->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    nb_executor_free(ex);
    const char *fetch[64];
    for (int i = 0; i < n->r.n_pairs; i++) fetch[i] = n->r.pairs[i].grad;
    if (!st) st = nb_prepare(&n->pp, n->main, 0, NB_NAMES("x"), NB_NAMES_N(n->r.n_pairs, fetch));
    return st;
}

static void net_free(net *n)
{
    nb_prepared_free(n->pp);
    nb_scope_free(n->scope);
    nb_backward_result_free(&n->r);
    nb_program_free(n->startup);
    nb_program_free(n->main);
}

static nb_tensor *input(void)
{
    nb_tensor *x;
    if (nb_tensor_new(&x, NB_F64, 2, S(B, W))) exit(2);
    for (int i = 0; i < B * W; i++) nb_tensor_set(x, i, sin(0.37 * i));
    return x;
}

/* Runs step `step` of both (random ops draw by the run index) and checks
 * every gradient against `ref`'s, exactly. */
static void same_grads(net *ref, net *got, int step, const char *what)
{
    nb_tensor *x = input(), *g1[64], *g2[64];
    nb_prepared_set_run_index(ref->pp, (uint64_t)step);
    nb_prepared_set_run_index(got->pp, (uint64_t)step);
    REQUIRE_OK(nb_prepared_run(ref->pp, ref->scope, &x, g1));
    REQUIRE_OK(nb_prepared_run(got->pp, got->scope, &x, g2));
    CHECK(ref->r.n_pairs == got->r.n_pairs);
    int differ = 0;
    for (int i = 0; i < ref->r.n_pairs; i++) {
        CHECK(nb_tensor_numel(g1[i]) == nb_tensor_numel(g2[i]));
        bool d = memcmp(nb_tensor_data(g1[i]), nb_tensor_data(g2[i]), (size_t)nb_tensor_numel(g1[i]) * 8) != 0;
        if (d) {
            double m = 0;
            for (int64_t k = 0; k < nb_tensor_numel(g1[i]); k++)
                m = fmax(m, fabs(nb_tensor_get(g1[i], k) - nb_tensor_get(g2[i], k)));
            printf("  %s: %s differs by %.3g\n", what, ref->r.pairs[i].grad, m);
        }
        differ += d;
        release_all(g1[i], g2[i], NULL);
    }
    if (differ) printf("  %s: %d gradients differ\n", what, differ);
    CHECK(differ == 0);
    nb_tensor_release(x);
}

static int count_recomputed(nb_program *p)
{
    const nb_block *b = nb_program_global_block(p);
    int n = 0;
    for (int i = 0; i < b->n_ops; i++)
        if (nb_op_n_outputs(b->ops[i]) > 0 && strstr(b->ops[i]->outputs[0], "@RECOMPUTE")) {
            CHECK(b->ops[i]->role == NB_ROLE_BACKWARD);
            n++;
        }
    return n;
}

static void test_equal_gradients(void)
{
    for (int variant = 0; variant < 3; variant++) {
        bool dropout = variant >= 1, lstm = variant == 2;
        net plain, sq, ck, two;
        REQUIRE_OK(build(&plain, dropout, lstm, NULL));
        REQUIRE_OK(build(&sq, dropout, lstm, &(nb_backward_opts){.recompute_segments = NB_RECOMPUTE_SQRT}));
        /* Checkpoints by name: the outputs of the 3rd and 8th fc layers. */
        const char *cks[] = {"fc_2.tmp_0", "fc_7.tmp_0"};
        REQUIRE_OK(build(&ck, dropout, lstm, &(nb_backward_opts){.checkpoints = NB_NAMES_N(2, cks)}));
        REQUIRE_OK(build(&two, dropout, lstm, &(nb_backward_opts){.recompute_segments = 2}));
        CHECK(count_recomputed(plain.main) == 0);
        int c_sq = count_recomputed(sq.main), c_ck = count_recomputed(ck.main), c_two = count_recomputed(two.main);
        if (!(c_sq > 5 && c_ck > 5 && c_two > 4)) printf("  recomputed ops: %d %d %d\n", c_sq, c_ck, c_two);
        CHECK(c_sq > 5 && c_ck > 5 && c_two > 4);
        for (int step = 0; step < 2; step++) { /* the second step draws new dropout masks */
            same_grads(&plain, &sq, step, "sqrt");
            same_grads(&plain, &ck, step, "checkpoints");
            same_grads(&plain, &two, step, "two");
        }
        net_free(&plain);
        net_free(&sq);
        net_free(&ck);
        net_free(&two);
    }
}

/* The peak of the temporaries (nb_prepared_memory) with sqrt(n) segments
 * against none. */
static void test_memory_falls(void)
{
    net plain, sq;
    REQUIRE_OK(build(&plain, false, false, NULL));
    REQUIRE_OK(build(&sq, false, false, &(nb_backward_opts){.recompute_segments = NB_RECOMPUTE_SQRT}));
    nb_tensor *x = input(), *g[64];
    nb_memory_report a, b;
    REQUIRE_OK(nb_prepared_run(plain.pp, plain.scope, &x, g));
    for (int i = 0; i < plain.r.n_pairs; i++) nb_tensor_release(g[i]);
    REQUIRE_OK(nb_prepared_run(sq.pp, sq.scope, &x, g));
    for (int i = 0; i < sq.r.n_pairs; i++) nb_tensor_release(g[i]);
    REQUIRE_OK(nb_prepared_memory(plain.pp, plain.scope, &a));
    REQUIRE_OK(nb_prepared_memory(sq.pp, sq.scope, &b));
    printf("  peak of temporaries: %zu bytes plain, %zu with sqrt(n) segments; activations kept for backward: "
           "%zu and %zu\n",
           a.peak_bytes, b.peak_bytes, a.activation_bytes, b.activation_bytes);
    CHECK(b.peak_bytes < a.peak_bytes * 6 / 10);
    CHECK(b.activation_bytes < a.activation_bytes / 2 && b.activation_bytes > 0);
    nb_tensor_release(x);
    net_free(&plain);
    net_free(&sq);
}

/* Differentiating the recomputed program again: the gradient of the sum
 * of squared gradients equals the plain program's. */
static void test_second_order(void)
{
    nb_program *progs[2];
    nb_tensor *res[2][64];
    int n = 0;
    for (int v = 0; v < 2; v++) {
        net m;
        REQUIRE_OK(build(&m, false, false, v ? &(nb_backward_opts){.recompute_segments = 3} : NULL));
        nb_builder *b;
        REQUIRE_OK(nb_builder_new_record(&b, m.main, NULL));
        nb_value s = NB_NONE;
        for (int i = 0; i < m.r.n_pairs; i++) {
            nb_value g = nb_value_from_var(nb_block_find_var(nb_program_global_block(m.main), m.r.pairs[i].grad));
            nb_value t = nb_reduce_sum(b, nb_mul(b, g, g), 0, NULL, false);
            s = nb_is_none(s) ? t : nb_add(b, s, t);
        }
        REQUIRE_OK(nb_builder_status(b));
        const char *target = nb_value_name(s), *params[64];
        for (int i = 0; i < m.r.n_pairs; i++) params[i] = m.r.pairs[i].param;
        nb_builder_free(b);
        nb_backward_result r2;
        REQUIRE_OK(nb_gradients(m.main, NB_NAMES(target), NB_NAMES_N(m.r.n_pairs, params), NULL, &r2));
        nb_prepared *pp;
        REQUIRE_OK(nb_prepare(&pp, m.main, 0, NB_NAMES("x"), NB_NAMES_N(r2.n_grads, r2.grads)));
        nb_tensor *x = input();
        REQUIRE_OK(nb_prepared_run(pp, m.scope, &x, res[v]));
        n = r2.n_grads;
        nb_tensor_release(x);
        nb_prepared_free(pp);
        nb_backward_result_free(&r2);
        progs[v] = NULL;
        net_free(&m);
    }
    (void)progs;
    for (int i = 0; i < n; i++) {
        CHECK(nb_tensor_allclose(res[0][i], res[1][i], 1e-12, 1e-14));
        release_all(res[0][i], res[1][i], NULL);
    }
}

static void test_errors(void)
{
    net m;
    const char *bad[] = {"nowhere"};
    CHECK_ERR(build(&m, false, false, &(nb_backward_opts){.checkpoints = NB_NAMES_N(1, bad)}), NB_ERR_NOT_FOUND,
              "checkpoint 'nowhere' is not written by any op of the forward part");
    net_free(&m);
    CHECK_ERR(build(&m, false, false, &(nb_backward_opts){.recompute_segments = -5}), NB_ERR_ARG,
              "-5 segments; give a count >= 1 or NB_RECOMPUTE_SQRT");
    net_free(&m);
}

int main(void)
{
    RUN(test_equal_gradients);
    RUN(test_memory_falls);
    RUN(test_second_order);
    RUN(test_errors);
    return test_report();
}
