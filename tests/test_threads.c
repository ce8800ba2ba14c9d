/* nabla from several threads at once, each with objects of its own: two
 * eager builders training the same model, two static programs built by
 * nb_minimize and trained by their executors, and one shared program (its
 * startup already run) that two executors run at once, each with a scope of
 * its own above the shared parameters. Every thread must get what a run on
 * the main thread alone gets, bit for bit. `make test-tsan` runs this under
 * ThreadSanitizer, which is what finds races; the plain build checks the
 * results.
 *
 * The harness's CHECK counters are not thread-safe, so threads record their
 * status, error text and results in their own struct and only the main
 * thread checks them. */
#include <pthread.h>
#include <stdlib.h>
#include "test.h"
#include "nabla/eager.h"
#include "nabla/layers.h"
#include "nabla/optimizer.h"

#define THREADS 2
#define STEPS 5
#define BATCH 8
#define FEATURES 5

typedef struct job {
    int seed;                          /* what makes one thread's inputs differ from another's (case c) */
    const struct static_model *shared; /* case c: the shared program, its scope holding the parameters */
    nb_status st;                      /* the first failure, with its text */
    char err[512];
    double loss[STEPS]; /* per step (a, b) */
    double out[BATCH];  /* the model's output (c) */
} job;

static void job_fail(job *j, nb_status st)
{
    if (j->st) return;
    j->st = st;
    snprintf(j->err, sizeof j->err, "%s", nb_last_error());
}

/* Inputs that depend only on (i, k, seed). */
static nb_tensor *input(int cols, double k, int seed)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, NB_F32, 2, S(BATCH, cols))) return NULL;
    for (int i = 0; i < BATCH * cols; i++) nb_tensor_set(t, i, sin(k * (i + 1) + 0.37 * seed));
    return t;
}

static nb_value mlp(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, x, 6, "tanh", NULL);
    h = nb_layer_fc(b, h, 4, "relu", NULL);
    return nb_layer_fc(b, h, 1, NULL, NULL);
}

/* ---- (a) eager training ---------------------------------------------------------- */

static void *eager_train(void *arg)
{
    job *j = arg;
    nb_builder *b = NULL;
    nb_eager_optimizer *o = NULL;
    nb_tensor *x = input(FEATURES, 0.3, 0), *y = input(1, 1.1, 0);
    nb_optimizer opt = nb_adam(0.02);
    nb_status st = !x || !y ? NB_ERR_NOMEM : nb_builder_new_eager(&b);
    if (!st) st = nb_eager_optimizer_new(&o, &opt);
    if (!st) nb_eager_set_seed(b, 5);
    for (int step = 0; !st && step < STEPS; step++) {
        nb_value loss = nb_layer_mse(b, mlp(b, nb_eager_value(b, x)), nb_eager_value(b, y));
        if ((st = nb_builder_status(b))) break;
        nb_tensor *l = nb_eager_tensor(loss);
        if ((st = nb_backward(NB_TENSORS(l), NULL, 0))) break;
        if ((st = nb_eager_optimizer_step(o, b))) break;
        j->loss[step] = nb_tensor_get(l, 0);
        nb_eager_zero_grad(b);
        nb_eager_release_values(b);
    }
    if (st) job_fail(j, st);
    nb_eager_optimizer_free(o);
    nb_builder_free(b);
    nb_tensor_release(x);
    nb_tensor_release(y);
    return NULL;
}

/* ---- (b) static training ---------------------------------------------------------- */

typedef struct static_model {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
    char out[128], loss[128];
} static_model;

static void static_model_free(static_model *m)
{
    nb_executor_free(m->ex);
    nb_scope_free(m->scope);
    nb_builder_free(m->b);
    nb_program_free(m->startup);
    nb_program_free(m->main);
}

/* The program of mlp (its output and, with opt, the loss and nb_minimize's
 * parts), its scope and executor, and the startup run into the scope. */
static nb_status static_model_init(static_model *m, const nb_optimizer *opt)
{
    memset(m, 0, sizeof *m);
    nb_status st;
    if ((st = nb_program_new(&m->main)) || (st = nb_program_new(&m->startup))) return st;
    nb_program_set_seed(m->startup, 7);
    if ((st = nb_builder_new_record(&m->b, m->main, m->startup)) || (st = nb_scope_new(&m->scope, NULL)) ||
        (st = nb_executor_new(&m->ex)))
        return st;
    nb_value out = mlp(m->b, nb_layer_data(m->b, "x", NB_F32, 2, S(-1, FEATURES)));
    nb_value loss = opt ? nb_layer_mse(m->b, out, nb_layer_data(m->b, "label", NB_F32, 2, S(-1, 1))) : NB_NONE;
    if ((st = nb_builder_status(m->b))) return st;
    snprintf(m->out, sizeof m->out, "%s", nb_value_name(out));
    if (opt) {
        snprintf(m->loss, sizeof m->loss, "%s", nb_value_name(loss));
        nb_backward_result r;
        if ((st = nb_minimize(opt, m->main, m->startup, m->loss, NULL, &r))) return st;
        nb_backward_result_free(&r);
    }
    return nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
}

static void *static_train(void *arg)
{
    job *j = arg;
    static_model m = {0};
    nb_optimizer opt = nb_adam(0.02);
    nb_tensor *x = input(FEATURES, 0.3, 0), *y = input(1, 1.1, 0);
    nb_status st = !x || !y ? NB_ERR_NOMEM : static_model_init(&m, &opt);
    for (int step = 0; !st && step < STEPS; step++) {
        nb_tensor *l = NULL;
        st = nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS({"x", x}, {"label", y}), NB_NAMES(m.loss), &l);
        if (!st) j->loss[step] = nb_tensor_get(l, 0);
        nb_tensor_release(l);
    }
    if (st) job_fail(j, st);
    static_model_free(&m);
    nb_tensor_release(x);
    nb_tensor_release(y);
    return NULL;
}

/* ---- (c) one program, its startup run once, run by two executors at once -------- */

static void *shared_infer(void *arg)
{
    job *j = arg;
    const static_model *sp = j->shared;
    nb_executor *ex = NULL;
    nb_scope *scope = NULL;
    nb_tensor *x = input(FEATURES, 0.7, j->seed);
    /* The program is only read here: each thread has its own executor (its
     * prepared form and buffers) and its own scope, whose parent holds the
     * parameters. */
    nb_status st = !x ? NB_ERR_NOMEM : nb_executor_new(&ex);
    if (!st) st = nb_scope_new(&scope, sp->scope);
    for (int run = 0; !st && run < STEPS; run++) {
        nb_tensor *out = NULL;
        st = nb_executor_run(ex, sp->main, scope, NB_FEEDS({"x", x}), NB_NAMES(sp->out), &out);
        for (int i = 0; !st && i < BATCH; i++) {
            double v = nb_tensor_get(out, i);
            if (run > 0 && v != j->out[i]) {
                st = nb_error(NB_ERR_STATE, "run %d of the shared program gave %g at %d, run 0 gave %g", run, v, i,
                              j->out[i]);
                break;
            }
            j->out[i] = v;
        }
        nb_tensor_release(out);
    }
    if (st) job_fail(j, st);
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_tensor_release(x);
    return NULL;
}

/* ---- running them ----------------------------------------------------------------- */

/* The threads wait here for each other, so that their work overlaps. */
typedef struct start {
    pthread_barrier_t *barrier;
    void *(*fn)(void *);
    job *job;
} start;

static void *start_together(void *arg)
{
    start *s = arg;
    pthread_barrier_wait(s->barrier);
    return s->fn(s->job);
}

/* Runs fn on THREADS threads at once (jobs[1..THREADS]), then on the main
 * thread alone (jobs[0]). The threads come first, so that they are the first
 * to meet whatever the library sets up lazily (registries, hooks). */
static void run_jobs(void *(*fn)(void *), job *jobs)
{
    pthread_barrier_t barrier;
    pthread_t th[THREADS];
    start st[THREADS];
    int started[THREADS] = {0};
    CHECK(!pthread_barrier_init(&barrier, NULL, THREADS));
    for (int i = 0; i < THREADS; i++) {
        st[i] = (start){&barrier, fn, &jobs[i + 1]};
        started[i] = !pthread_create(&th[i], NULL, start_together, &st[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(started[i]);
        /* A thread that did not start: its job meets the others at the
         * barrier from here instead. */
        if (!started[i]) start_together(&st[i]);
    }
    for (int i = 0; i < THREADS; i++)
        if (started[i]) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    fn(&jobs[0]);
    for (int i = 0; i <= THREADS; i++) {
        if (jobs[i].st) fprintf(stderr, "  job %d: %s: %s\n", i, nb_status_name(jobs[i].st), jobs[i].err);
        CHECK(jobs[i].st == NB_OK);
    }
}

/* Every threaded job's losses equal the lone run's, which learns. */
static void check_losses(const job *jobs)
{
    CHECK(jobs[0].loss[STEPS - 1] < jobs[0].loss[0]);
    for (int i = 1; i <= THREADS; i++)
        for (int s = 0; s < STEPS; s++) {
            if (jobs[i].loss[s] != jobs[0].loss[s])
                fprintf(stderr, "  thread %d, step %d: loss %.9g, alone %.9g\n", i, s, jobs[i].loss[s],
                        jobs[0].loss[s]);
            CHECK(jobs[i].loss[s] == jobs[0].loss[s]);
        }
}

static void test_eager_builders_in_threads(void)
{
    job jobs[THREADS + 1] = {{0}};
    run_jobs(eager_train, jobs);
    check_losses(jobs);
}

static void test_static_programs_in_threads(void)
{
    job jobs[THREADS + 1] = {{0}};
    run_jobs(static_train, jobs);
    check_losses(jobs);
}

static void test_shared_program_in_threads(void)
{
    static_model sp = {0};
    nb_status st = static_model_init(&sp, NULL);
    CHECK_OK(st);
    if (!st) {
        /* Threads 1 and 2 feed different inputs; each is checked against a
         * lone run with the same seed on the main thread, afterwards (so that
         * the threads are the first to run the program). */
        job alone[THREADS + 1] = {{0}}, jobs[THREADS + 1] = {{0}};
        for (int i = 0; i <= THREADS; i++) jobs[i] = alone[i] = (job){.seed = i, .shared = &sp};
        run_jobs(shared_infer, jobs);
        for (int i = 0; i <= THREADS; i++) {
            shared_infer(&alone[i]);
            CHECK(alone[i].st == NB_OK);
        }
        for (int i = 0; i <= THREADS; i++)
            for (int k = 0; k < BATCH; k++) CHECK(jobs[i].out[k] == alone[i].out[k]);
        /* The inputs differ, and so do the outputs: the threads did not share buffers. */
        CHECK(alone[1].out[0] != alone[2].out[0]);
    }
    static_model_free(&sp);
}

int main(void)
{
    RUN(test_eager_builders_in_threads);
    RUN(test_static_programs_in_threads);
    RUN(test_shared_program_in_threads);
    return test_report();
}
