/* The allocation-failure walk (`make test-oom`), as SQLite tests malloc
 * failure: a representative job (a static MLP minimised with Adam, recomputing
 * in two segments, for three
 * steps, a checkpoint saved and loaded, the same state as a deflated .npz,
 * a program file written and read back, the model exported to ONNX and
 * imported again (where the build has ONNX), eager training, eager training
 * through nb_checkpoint, a Hessian by forward over reverse and one by reverse
 * over reverse) is run once to count its
 * allocations, then once per k with the k-th allocation failing. Each run
 * happens in a child process so that a crash is counted, not fatal. For
 * every k the job must either
 *   - fail with an error status and a message, or
 *   - succeed with exactly the losses of the clean run (the failure was
 *     absorbed: counted, as the issue asks, as "swallowed");
 * free everything it allocated, and succeed with the clean losses when run
 * again with the failure gone. The walk prints the counts of each outcome and
 * the first few k of each bad kind, and exits non-zero if any k went wrong.
 *
 *   oom_walk [--every N] [--from K] [--verbose] [--trace]
 *
 * --verbose prints each k's error; --trace also the failing allocation's stack.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <execinfo.h>
#include <sys/wait.h>
#include <unistd.h>
#include "alloc_track.h"
#include "data_test_util.h"
#include "nabla/nabla.h"

static long fail_at = -1;
static bool trace;

/* Fails the fail_at-th allocation only: the ones after it succeed again. */
static bool should_fail(long k)
{
    if (k != fail_at) return false;
    if (trace) { /* --trace: where the failing allocation was asked for */
        void *frames[16];
        backtrace_symbols_fd(frames, backtrace(frames, 16), 2);
    }
    return true;
}

/* ---- the job: returns its status, the losses it saw in `losses` ---------- */

#define NLOSS 10
#define TRY(expr)                        \
    do {                                 \
        if ((st = (expr)) != NB_OK) goto done; \
    } while (0)

static nb_value predict(nb_builder *b, nb_value x)
{
    return nb_layer_fc(b, nb_layer_fc(b, x, 6, "tanh", NULL), 1, NULL, NULL);
}

static nb_value model(nb_builder *b, nb_value x, nb_value y) { return nb_layer_mse(b, predict(b, x), y); }

/* The model's prediction out to ONNX and back into a program of its own. */
static nb_status onnx_round_trip(const char *dir, nb_program *main_p, nb_scope *scope, const char *pred)
{
    if (!nb_onnx_available()) return NB_OK;
    char path[512];
    snprintf(path, sizeof path, "%s/job.onnx", dir);
    nb_status st = nb_onnx_export(main_p, scope, NB_NAMES(pred), path);
    nb_program *p = NULL;
    nb_builder *b = NULL;
    nb_value y;
    if (!st) st = nb_program_new(&p);
    if (!st) st = nb_builder_new_record(&b, p, NULL);
    if (!st) st = nb_onnx_import(path, b, NB_NO_VALUES, 1, &y, NULL);
    nb_builder_free(b);
    nb_program_free(p);
    return st;
}

static nb_status inputs(nb_tensor **t, int64_t rows, int64_t cols, double scale)
{
    int64_t shape[2] = {rows, cols};
    nb_status st = nb_tensor_new(t, NB_F32, 2, shape);
    for (int64_t i = 0; st == NB_OK && i < rows * cols; i++) nb_tensor_set(*t, i, scale * sin(0.7 * (double)i));
    return st;
}

static nb_status static_job(const char *dir, double *losses)
{
    nb_status st = NB_OK;
    nb_program *main_p = NULL, *startup = NULL, *lm = NULL, *ls = NULL;
    nb_builder *b = NULL;
    nb_executor *ex = NULL;
    nb_scope *scope = NULL, *other = NULL;
    nb_tensor *xs = NULL, *ys = NULL, *l = NULL;
    nb_backward_result r = {0};
    bool have_r = false;
    TRY(nb_program_new(&main_p));
    TRY(nb_program_new(&startup));
    TRY(nb_builder_new_record(&b, main_p, startup));
    int64_t sx[2] = {-1, 5}, sy[2] = {-1, 1};
    nb_value x = nb_layer_data(b, "x", NB_F32, 2, sx), y = nb_layer_data(b, "y", NB_F32, 2, sy);
    nb_value pred = predict(b, x), loss = nb_layer_mse(b, pred, y);
    TRY(nb_builder_status(b));
    nb_optimizer opt = nb_adam(0.01);
    TRY(nb_minimize(&opt, main_p, startup, nb_value_name(loss), &(nb_backward_opts){.recompute_segments = 2}, &r));
    have_r = true;
    TRY(nb_executor_new(&ex));
    TRY(nb_scope_new(&scope, NULL));
    TRY(nb_scope_new(&other, NULL));
    TRY(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    TRY(inputs(&xs, 8, 5, 0.5));
    TRY(inputs(&ys, 8, 1, 1.0));
    const char *fetch = nb_value_name(loss);
    for (int step = 0; step < 3; step++) {
        TRY(nb_executor_run(ex, main_p, scope, NB_FEEDS({"x", xs}, {"y", ys}), NB_NAMES_N(1, &fetch), &l));
        losses[step] = nb_tensor_get(l, 0);
        nb_tensor_release(l);
        l = NULL;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/job.safetensors", dir);
    TRY(nb_checkpoint_save(path, main_p, scope, NULL));
    TRY(nb_executor_run(ex, startup, other, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    TRY(nb_checkpoint_load(path, main_p, other, NULL));
    snprintf(path, sizeof path, "%s/job.npz", dir);
    TRY(nb_npz_save_state(path, main_p, scope, NB_NPZ_COMPRESSED));
    TRY(nb_npz_load_state(path, main_p, other));
    snprintf(path, sizeof path, "%s/job.nbprog", dir);
    TRY(nb_programs_save(path, main_p, startup));
    TRY(nb_programs_load(&lm, &ls, path));
    TRY(onnx_round_trip(dir, main_p, scope, nb_value_name(pred)));
done:
    nb_program_free(lm);
    nb_program_free(ls);
    nb_tensor_release(xs);
    nb_tensor_release(ys);
    if (have_r) nb_backward_result_free(&r);
    nb_scope_free(scope);
    nb_scope_free(other);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
    return st;
}

static nb_status eager_job(double *losses)
{
    nb_status st = NB_OK;
    nb_builder *b = NULL;
    nb_eager_optimizer *o = NULL;
    nb_tensor *xs = NULL, *ys = NULL;
    TRY(nb_builder_new_eager(&b));
    nb_optimizer opt = nb_adam(0.01);
    TRY(nb_eager_optimizer_new(&o, &opt));
    TRY(inputs(&xs, 8, 5, 0.5));
    TRY(inputs(&ys, 8, 1, 1.0));
    for (int step = 0; step < 3; step++) {
        nb_value loss = model(b, nb_eager_value(b, xs), nb_eager_value(b, ys));
        TRY(nb_builder_status(b));
        nb_tensor *l = nb_eager_tensor(loss);
        losses[step] = nb_tensor_get(l, 0);
        TRY(nb_backward(NB_TENSORS(l), NULL, 0));
        TRY(nb_eager_optimizer_step(o, b));
        nb_eager_zero_grad(b);
        nb_eager_release_values(b);
    }
done:
    nb_tensor_release(xs);
    nb_tensor_release(ys);
    nb_eager_optimizer_free(o);
    nb_builder_free(b);
    return st;
}

/* f(x) = sum(tanh(x) * x) */
static nb_status f_tanh_x(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_reduce_sum(b, nb_mul(b, nb_tanh(b, in[0]), in[0]), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status transforms_job(double *losses)
{
    nb_status st = NB_OK;
    nb_function f = {f_tanh_x, 1, 1, NULL};
    nb_tensor *x = NULL, *h = NULL, *hr = NULL;
    int64_t n = 4;
    TRY(nb_tensor_new(&x, NB_F64, 1, &n));
    for (int64_t i = 0; i < n; i++) nb_tensor_set(x, i, 0.8 * sin(0.7 * (double)i));
    TRY(nb_hessian(&f, &x, 0, &h));
    TRY(nb_hessian_by_reverse(&f, &x, 0, &hr));
    losses[0] = nb_tensor_get(h, 5);
    losses[1] = nb_tensor_get(hr, 5);
done:
    nb_tensor_release(x);
    nb_tensor_release(h);
    nb_tensor_release(hr);
    return st;
}

/* The prediction as a checkpointed function (recomputed in backward). */
static nb_status predict_fn(nb_builder *b, void *ctx, int n_in, const nb_value *in, int n_out, nb_value *out)
{
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = predict(b, in[0]);
    return nb_builder_status(b);
}

static nb_status checkpoint_job(double *losses)
{
    nb_status st = NB_OK;
    nb_builder *b = NULL;
    nb_tensor *xs = NULL, *ys = NULL;
    TRY(nb_builder_new_eager(&b));
    TRY(inputs(&xs, 8, 5, 0.5));
    TRY(inputs(&ys, 8, 1, 1.0));
    for (int step = 0; step < 2; step++) {
        nb_value x = nb_eager_value(b, xs), p;
        TRY(nb_checkpoint(b, predict_fn, NULL, NB_VALUES_N(1, &x), 1, &p));
        nb_value loss = nb_layer_mse(b, p, nb_eager_value(b, ys));
        TRY(nb_builder_status(b));
        nb_tensor *l = nb_eager_tensor(loss);
        TRY(nb_backward(NB_TENSORS(l), NULL, 0));
        losses[step] = nb_tensor_get(nb_tensor_grad(nb_eager_param_at(b, 0)), 0);
        nb_eager_zero_grad(b);
        nb_eager_release_values(b);
    }
done:
    nb_tensor_release(xs);
    nb_tensor_release(ys);
    nb_builder_free(b);
    return st;
}

static char dir[256];

static nb_status job(double *losses)
{
    nb_status st = static_job(dir, losses);
    if (st == NB_OK) st = eager_job(losses + 3);
    if (st == NB_OK) st = checkpoint_job(losses + 8);
    return st != NB_OK ? st : transforms_job(losses + 6);
}

/* ---- the walk -------------------------------------------------------------- */

#define EXIT_BASE 100
enum outcome { CLEAN_ERROR, SWALLOWED, SILENT_ERROR, WRONG_RESULT, LEAK, BROKEN_AFTER, CRASH, N_OUTCOMES };
static const char *outcome_names[N_OUTCOMES] = {
    "clean error", "swallowed", "error without message", "wrong result", "leak", "broken after", "crash"};

static bool same(const double *a, const double *b)
{
    for (int i = 0; i < NLOSS; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static enum outcome run_k(long k, const double *want, bool verbose)
{
    double got[NLOSS] = {0};
    n_allocs = 0;
    fail_at = k;
    nb_status st = job(got);
    fail_at = -1;
    enum outcome o;
    if (st != NB_OK) o = nb_last_error()[0] ? CLEAN_ERROR : SILENT_ERROR;
    else o = same(got, want) ? SWALLOWED : WRONG_RESULT;
    if (verbose && st != NB_OK) fprintf(stderr, "k=%ld: %s: %s\n", k, nb_status_name(st), nb_last_error());
    if (n_live && (o == CLEAN_ERROR || o == SWALLOWED)) o = LEAK;
    if (o == CLEAN_ERROR || o == SWALLOWED) {
        double again[NLOSS] = {0};
        if (job(again) != NB_OK || !same(again, want)) o = BROKEN_AFTER;
    }
    return o;
}

int main(int argc, char **argv)
{
    long every = 1, from = 0;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--every") && i + 1 < argc) every = atol(argv[++i]);
        else if (!strcmp(argv[i], "--from") && i + 1 < argc) from = atol(argv[++i]);
        else if (!strcmp(argv[i], "--verbose")) verbose = true;
        else if (!strcmp(argv[i], "--trace")) verbose = trace = true;
        else {
            fprintf(stderr, "usage: oom_walk [--every N] [--from K] [--verbose] [--trace]\n");
            return 2;
        }
    }
    if (every < 1) every = 1;
    make_temp_dir(dir, sizeof dir);
    double want[NLOSS];
    /* Once with the C library's allocator: process-lifetime tables (the op
     * and kernel registries) are built on first use, outside the walk. */
    if (job(want) != NB_OK) {
        fprintf(stderr, "oom_walk: the job fails without injected failures: %s\n", nb_last_error());
        return 1;
    }
    live = calloc(SLOTS, sizeof *live);
    if (!live) return 1;
    nb_set_allocator(&tracking);
    n_allocs = 0;
    double again[NLOSS];
    if (job(again) != NB_OK || !same(again, want)) {
        fprintf(stderr, "oom_walk: the job differs under the counting allocator\n");
        return 1;
    }
    long total = n_allocs;
    long counts[N_OUTCOMES] = {0}, shown[N_OUTCOMES] = {0}, walked = 0;
    for (long k = from; k < total; k += every) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) return 1;
        /* Outcomes travel as exit codes above the ones the sanitizers use
         * (1 for a report), so that any other exit reads as a crash. */
        if (pid == 0) _exit(EXIT_BASE + (int)run_k(k, want, verbose));
        int ws;
        waitpid(pid, &ws, 0);
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) - EXIT_BASE : -1;
        enum outcome o = code >= 0 && code < N_OUTCOMES ? (enum outcome)code : CRASH;
        counts[o]++;
        walked++;
        if (o != CLEAN_ERROR && shown[o]++ < 5) printf("  k=%ld: %s\n", k, outcome_names[o]);
    }
    nb_set_allocator(NULL);
    remove_tree(dir);
    printf("oom_walk: %ld allocations in the job, %ld walked (every %ld from %ld):", total, walked, every, from);
    for (int o = 0; o < N_OUTCOMES; o++) printf("%s %ld %s", o ? "," : "", counts[o], outcome_names[o]);
    printf("\n");
    long bad = walked - counts[CLEAN_ERROR];
    return bad ? 1 : 0;
}
