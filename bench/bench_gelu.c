/* bench_gelu: the cost of gelu, forward and backward, per element, on a
 * float32 [1024, 512] tensor (the MLP activation of a small transformer
 * block; `bench_gelu ROWS COLS` for another), through the static executor:
 *
 *     case gelu_fwd_ns_per_elem ...        (exact form: X * Phi(X))
 *     case gelu_fwd_bwd_ns_per_elem ...    (forward and the gradient of X)
 *     case gelu_bwd_ns_per_elem ...        (the difference: the backward alone)
 *     case gelu_tanh_...                   (the same for the tanh form)
 *
 * The backward is seeded with a fed DOut, so it is exactly gelu's VJP.
 * The fastest of 30 timings; run with OMP_NUM_THREADS=1 for one core's
 * cost. */
#include <stdio.h>
#include <stdlib.h>
#include "bench_util.h"

/* The shape: [1024, 512] unless given as arguments (rows, cols). */
static int64_t ROWS = 1024, COLS = 512;

/* A prepared program with its fetches, run as one step. */
typedef struct gelu_run {
    nb_scope *scope;
    nb_executor *ex;
    nb_prepared *pp;
    nb_tensor *const *in;
    int n_fetch;
} gelu_run;

static void gelu_step(void *ctx)
{
    gelu_run *g = ctx;
    nb_tensor *out[2];
    bench_die_on(nb_prepared_run(g->pp, g->scope, g->in, out), "run");
    for (int i = 0; i < g->n_fetch; i++) nb_tensor_release(out[i]);
}

/* The fastest of 30 timings of 10 runs, in ms per run, after 3 runs to
 * warm up: the machine this was written on is shared, and the minimum is
 * what other processes disturb least. */
static double fastest_ms(gelu_run *g)
{
    for (int i = 0; i < 3; i++) gelu_step(g);
    double best = 1e300;
    for (int k = 0; k < 30; k++) {
        double t0 = bench_now();
        for (int s = 0; s < 10; s++) gelu_step(g);
        double t = (bench_now() - t0) * 1e3 / 10;
        best = t < best ? t : best;
    }
    return best;
}

/* Milliseconds per run of a program computing y = gelu(x) and, if
 * `backward`, the gradient dx of x for the fed output gradient dy. The
 * program fetches their sums, so that it keeps both (the forward is not
 * pruned) while their buffers stay the executor's, reused from run to run:
 * a fetched [1024, 512] tensor would be fresh memory, page faults and all,
 * every run. The sums cost both programs the same. */
static double time_gelu(bool approximate, bool backward, nb_tensor *const *feeds)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    bench_die_on(nb_program_new(&main_p), "program");
    bench_die_on(nb_program_new(&startup), "program");
    bench_die_on(nb_builder_new_record(&b, main_p, startup), "builder");
    const int64_t shape[2] = {ROWS, COLS};
    nb_value x = nb_layer_data(b, "x", NB_F32, 2, shape);
    nb_value dy = nb_layer_data(b, "dy", NB_F32, 2, shape);
    nb_value y = nb_gelu(b, x, approximate);
    bench_die_on(nb_builder_status(b), nb_builder_error(b));
    const char *fetch[2] = {nb_value_name(nb_reduce_sum(b, y, 0, NULL, false)), NULL};
    nb_backward_result r = {0};
    if (backward) {
        const char *target = nb_value_name(y), *input = nb_value_name(x), *seed = nb_value_name(dy);
        bench_die_on(nb_gradients(main_p, NB_NAMES_N(1, &target), NB_NAMES_N(1, &input),
                                  &(nb_gradients_opts){.target_grads = &seed}, &r),
                     "gradients");
        fetch[1] = nb_value_name(nb_reduce_sum(b, nb_value_by_name(b, r.grads[0]), 0, NULL, false));
        bench_die_on(nb_builder_status(b), nb_builder_error(b));
    }
    const char *feed_names[2] = {"x", "dy"};
    gelu_run g = {.in = feeds, .n_fetch = backward ? 2 : 1};
    bench_die_on(nb_scope_new(&g.scope, NULL), "scope");
    bench_die_on(nb_executor_new(&g.ex), "executor");
    bench_die_on(nb_prepare(&g.pp, main_p, 0, NB_NAMES_N(2, feed_names), NB_NAMES_N(g.n_fetch, fetch)), "prepare");
    double ms = fastest_ms(&g);
    nb_prepared_free(g.pp);
    nb_executor_free(g.ex);
    nb_scope_free(g.scope);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
    return ms;
}

int main(int argc, char **argv)
{
    if (argc == 3) ROWS = atoll(argv[1]), COLS = atoll(argv[2]);
    nb_tensor *x, *dy;
    const int64_t shape[2] = {ROWS, COLS};
    bench_die_on(nb_tensor_new(&x, NB_F32, 2, shape), "tensor");
    bench_die_on(nb_tensor_new(&dy, NB_F32, 2, shape), "tensor");
    float *xp = nb_tensor_data(x), *dp = nb_tensor_data(dy);
    uint64_t s = 88172645463325252ull;
    for (int64_t i = 0; i < (int64_t)ROWS * COLS; i++) {
        /* xorshift: x roughly uniform on [-4, 4), dy on [-1, 1) */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        xp[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 8.0 - 4.0);
        dp[i] = (float)((double)(s & 0xffffff) / 16777216.0 * 2.0 - 1.0);
    }
    nb_tensor *feeds[2] = {x, dy};
    const double n = (double)ROWS * COLS;
    for (int a = 0; a < 2; a++) {
        const char *form = a ? "gelu_tanh" : "gelu";
        double fwd = time_gelu(a, false, feeds), both = time_gelu(a, true, feeds);
        printf("case %s_fwd_ns_per_elem %.3f\n", form, fwd * 1e6 / n);
        printf("case %s_fwd_bwd_ns_per_elem %.3f\n", form, both * 1e6 / n);
        printf("case %s_bwd_ns_per_elem %.3f\n", form, (both - fwd) * 1e6 / n);
    }
    nb_tensor_release(x);
    nb_tensor_release(dy);
    return 0;
}
