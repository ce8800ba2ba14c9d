/* bench_ddp: data-parallel training speed, run by `bench/run.sh ddp` under
 * `mpirun -np P` (P = 1 and 2, one thread each). One training step (Adam)
 * of the 784-512-512-10 MLP at a global batch of 256 and of LeNet at 128
 * (the batch / P per rank), static (nb_data_parallel), eager (nb_ddp) and
 * eager with ZeRO-1 (nb_ddp_shard_optimizer), on synthetic images; a
 * second argument runs only the cases whose name holds it (`bench_ddp 1
 * mlp_static`). Rank 0 prints one line per case:
 *
 *     case mlp_static np 2 ms 1.23 samples_per_s 52000 comm_ms 0.1 overlap_ms 0.05 hidden_pct 50
 *
 * ms is the median over 7 timings of a step (all ranks start each timing
 * together); comm_ms is the time during which some all-reduce was open,
 * overlap_ms the part of it while the backward pass was still going,
 * hidden_pct their ratio and wait_ms the time blocked after backward, per
 * step (nb_ddp_stats for the eager cases, nb_comm_stats of the ring's
 * communicator for the static one, whose c_allreduce_start ops leave their
 * all-reduces open until the c_allreduce_wait after backward).
 *
 * The `apart` cases are the static one without any communication: each
 * rank steps its own one-process program on its share of the batch, the
 * ranks starting each timing together, and a timing is the slowest rank's.
 * Their speed-up is the most that any all-reduce could leave on this
 * machine, where two processes at once do not run as fast as one alone
 * (shared caches and memory, the host's other guests). */
#include <math.h>
#include <string.h>
#include "bench_util.h"

#define REPS 7
#define WARMUP 3

typedef nb_value (*model_fn)(nb_builder *b, nb_value x);

static nb_comm *comm;

/* The largest of the ranks' t. */
static double slowest(double t)
{
    nb_tensor *all;
    bench_die_on(nb_tensor_new(&all, NB_F64, 1, (int64_t[]){nb_comm_size(comm)}), "tensor");
    ((double *)nb_tensor_data(all))[nb_comm_rank(comm)] = t;
    bench_die_on(nb_comm_allreduce_sum(comm, all), "all-reduce");
    for (int r = 0; r < nb_comm_size(comm); r++) t = fmax(t, ((double *)nb_tensor_data(all))[r]);
    nb_tensor_release(all);
    return t;
}

/* The median ms of `steps` calls of step(ctx), the ranks starting each
 * timing together; a timing is the slowest rank's when `apart` (the ranks
 * do not wait for each other inside it). */
static double timed(void (*step)(void *), void *ctx, int steps, bool apart)
{
    double t[REPS];
    for (int i = 0; i < WARMUP; i++) step(ctx);
    for (int k = 0; k < REPS; k++) {
        bench_die_on(nb_comm_barrier(comm), "barrier");
        double t0 = bench_now();
        for (int s = 0; s < steps; s++) step(ctx);
        t[k] = (bench_now() - t0) * 1e3 / steps;
        if (apart) t[k] = slowest(t[k]);
    }
    qsort(t, REPS, sizeof *t, bench_cmp_double);
    return t[REPS / 2];
}

/* 784-512-512-10 with ReLUs: the model of issue 43's MPI figures. */
static nb_value mlp512(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, nb_layer_fc(b, x, 512, "relu", NULL), 512, "relu", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

typedef struct bench_case {
    const char *name;
    model_fn model;
    int batch; /* global */
    int steps; /* per timing, at SCALE 1 */
} bench_case;

/* open, overlap and wait are seconds over `steps` steps. */
static void report(const char *name, int batch, double ms, double open, double overlap, double wait, int64_t steps)
{
    if (nb_comm_rank(comm) != 0) return;
    double per = steps ? 1e3 / (double)steps : 0;
    printf("case %s np %d ms %.4f samples_per_s %.0f comm_ms %.4f overlap_ms %.4f hidden_pct %.1f wait_ms %.4f\n", name,
           nb_comm_size(comm), ms, batch / (ms * 1e-3), open * per, overlap * per, open > 0 ? 100 * overlap / open : 0,
           wait * per);
    fflush(stdout);
}

/* The static program, data parallel, or `apart`: one process's program
 * on each rank. */
static void static_case(const char *name, const bench_case *bc, int steps, bool apart)
{
    model_fn model = bc->model;
    int64_t batch = bc->batch / nb_comm_size(comm);
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_optimizer opt = nb_adam(1e-3);
    nb_data_parallel_opts dp = {.nranks = nb_comm_size(comm)};
    if (!apart) opt.data_parallel = &dp;
    nb_backward_result r;
    const char *loss = bench_mnist_program(model, &opt, NULL, &main_p, &startup, &b, &r);
    nb_tensor *xt, *lt;
    bench_mnist_batch(batch, nb_comm_rank(comm), &xt, &lt);
    nb_tensor *in[2] = {xt, lt};
    bench_program bp;
    bench_program_init(&bp, main_p, startup, 2, (const char *[]){"images", "label"}, loss, in);
    nb_comm_stats s0, s1;
    nb_comm_stats_get(comm, &s0);
    double ms = timed(bench_program_step, &bp, steps, apart);
    nb_comm_stats_get(comm, &s1);
    report(name, bc->batch, ms, s1.comm_seconds - s0.comm_seconds, s1.overlap_seconds - s0.overlap_seconds,
           s1.wait_seconds - s0.wait_seconds, WARMUP + REPS * steps);
    bench_program_free(&bp);
    nb_tensor_release(xt);
    nb_tensor_release(lt);
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
}

typedef struct eager_ctx {
    nb_builder *b;
    model_fn model;
    nb_eager_optimizer *o;
    nb_ddp *ddp;
    nb_tensor *x, *l;
} eager_ctx;

static void eager_step(void *p)
{
    eager_ctx *c = p;
    nb_value cost =
        nb_layer_softmax_cross_entropy(c->b, c->model(c->b, nb_eager_value(c->b, c->x)), nb_eager_value(c->b, c->l));
    bench_die_on(nb_builder_status(c->b), nb_builder_error(c->b));
    bench_die_on(nb_ddp_backward(c->ddp, nb_eager_tensor(cost)), "backward");
    bench_die_on(nb_ddp_step(c->ddp), "step");
    nb_eager_zero_grad(c->b);
    nb_eager_release_values(c->b);
}

/* nb_ddp stepping an eager optimiser bucket by bucket, or with ZeRO-1
 * when `zero`. */
static void eager_case(const char *name, const bench_case *bc, int steps, bool zero)
{
    model_fn model = bc->model;
    eager_ctx c = {.model = model};
    bench_die_on(nb_builder_new_eager(&c.b), "builder");
    nb_eager_set_seed(c.b, 1);
    bench_mnist_batch(bc->batch / nb_comm_size(comm), nb_comm_rank(comm), &c.x, &c.l);
    nb_grad_mode_push(false);
    model(c.b, nb_eager_value(c.b, c.x));
    nb_grad_mode_pop();
    nb_eager_release_values(c.b);
    nb_optimizer opt = nb_adam(1e-3);
    bench_die_on(nb_ddp_new(&c.ddp, comm, c.b, 0), "ddp");
    if (zero) bench_die_on(nb_ddp_shard_optimizer(c.ddp, &opt), "zero");
    else {
        bench_die_on(nb_eager_optimizer_new(&c.o, &opt), "optimizer");
        bench_die_on(nb_ddp_set_optimizer(c.ddp, c.o), "set optimizer");
    }
    double ms = timed(eager_step, &c, steps, false);
    nb_ddp_stats s;
    nb_ddp_stats_get(c.ddp, &s);
    report(name, bc->batch, ms, s.comm_seconds, s.overlap_seconds, s.wait_seconds, s.steps);
    nb_ddp_free(c.ddp);
    nb_eager_optimizer_free(c.o);
    nb_tensor_release(c.x);
    nb_tensor_release(c.l);
    nb_builder_free(c.b);
}

int main(int argc, char **argv)
{
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    const char *only = argc > 2 ? argv[2] : NULL; /* run only the cases whose name holds this */
    if (scale <= 0) scale = 1;
    bench_die_on(nb_comm_init_mpi(&comm, NULL), "MPI");
    bench_die_on(nb_comm_set_ring(0, comm), "ring");
    static const bench_case cases[] = {{"mlp", mlp512, 256, 30}, {"lenet", bench_lenet, 128, 6}};
    for (int k = 0; k < 2; k++) {
        const bench_case *bc = &cases[k];
        int steps = (int)(bc->steps * scale) + 1;
        char name[64];
        snprintf(name, sizeof name, "%s_static", bc->name);
        if (!only || strstr(name, only)) static_case(name, bc, steps, false);
        snprintf(name, sizeof name, "%s_eager", bc->name);
        if (!only || strstr(name, only)) eager_case(name, bc, steps, false);
        snprintf(name, sizeof name, "%s_zero", bc->name);
        if (!only || strstr(name, only)) eager_case(name, bc, steps, true);
        snprintf(name, sizeof name, "%s_apart", bc->name);
        if (!only || strstr(name, only)) static_case(name, bc, steps, true);
    }
    nb_comm_set_ring(0, NULL);
    nb_comm_free(comm);
    return 0;
}
