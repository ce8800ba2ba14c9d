/* The data-parallel checks that need several processes, run by
 * tests/test_mpi.sh under `mpirun -np N`:
 *
 *   mpi_check equal      N ranks with batch B/N train as one process with
 *                        batch B (SGD and Adam; static and eager), every rank
 *                        holding the same parameters after every step, with
 *                        any bucket size;
 *   mpi_check shard      nb_reader_shard covers each epoch exactly once;
 *   mpi_check mismatch   a rank whose model differs makes every rank fail,
 *                        naming it (static and eager);
 *   mpi_check timeout    a rank that never joins an all-reduce makes the
 *                        others fail after the timeout instead of hanging;
 *   mpi_check train DIR  nb_train with a communicator: the same epoch
 *                        figures on every rank, only rank 0 writes the CSV and
 *                        the checkpoint, and a run stopped after one epoch and
 *                        resumed (on every rank) ends where an uninterrupted
 *                        run does;
 *   mpi_check lost DIR V nb_train with checkpoints in DIR, where rank V is
 *                        lost in the second epoch: V > 0 kills itself
 *                        (SIGKILL) in the middle of it; V = 0 stops itself
 *                        (SIGSTOP, through NABLA_TEST_STOP_AFTER_BYTES) in the
 *                        middle of writing its checkpoint, for the script to
 *                        kill. Every other rank fails within the timeout
 *                        (NABLA_COMM_TIMEOUT) naming rank V. Each rank writes
 *                        its pid to DIR/pid.R;
 *   mpi_check resume DIR N  resumes from DIR's checkpoint of epoch 1, written
 *                        by N ranks and found on rank 0 only (the others
 *                        are given a path that does not exist): the end of
 *                        training equals the
 *                        uninterrupted run on these ranks (exactly, when they
 *                        are N; to rounding otherwise, the global batch being
 *                        the same) and one process's with the whole batch.
 *
 * Each rank prints "rank R: ok NAME" per passed check and "rank R: FAIL
 * ..." per failure; the script counts them. */
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "dp_test_util.h"
#include "comm/comm_internal.h"

#define B 12 /* the global batch: divisible by 1, 2, 3, 4, 6 */
#define STEPS 6
#define MAXP 512
#define RECORDS 120 /* of nb_train's runs: 10 batches an epoch */

static int rank, size, failures;
static nb_comm *comm;

#define EXPECT(cond, ...)                                      \
    do {                                                       \
        if (!(cond)) {                                         \
            printf("rank %d: FAIL line %d: ", rank, __LINE__); \
            printf(__VA_ARGS__);                               \
            printf("\n");                                      \
            failures++;                                        \
        }                                                      \
    } while (0)

static void die_on(nb_status st, const char *what)
{
    if (!st) return;
    printf("rank %d: FAIL %s: %s\n", rank, what, nb_last_error());
    fflush(stdout);
    exit(1);
}

static void ok(const char *what)
{
    printf("rank %d: ok %s\n", rank, what);
    fflush(stdout);
}

/* Whether every rank holds exactly these values. */
static bool same_everywhere(const double *p, int n)
{
    return nb_comm_check_same(comm, "parameters", nb_hash_bytes(NB_HASH_INIT, p, (size_t)n * sizeof *p)) == NB_OK;
}

/* STEPS steps of the static or eager model: data-parallel on this rank's
 * shard with batch B/size (static: its all-reduces open across backward,
 * or each completed where it stands when `sync`), or alone with batch B.
 * Checks after every data-parallel step that all ranks hold the same
 * parameters. */
static void train(bool eager, nb_optimizer opt, bool parallel, size_t bucket, bool sync, double *out, int *n)
{
    nb_tensor *x, *y;
    dp_data(120, &x, &y);
    int s = parallel ? size : 1;
    nb_data_parallel_opts dp = {.nranks = size, .bucket_bytes = bucket, .synchronous = sync};
    nb_reader *rd;
    die_on(dp_reader(&rd, x, y, parallel ? rank : 0, s, B / s), "reader");
    dp_static ms;
    dp_eager me;
    if (eager) die_on(dp_eager_new(&me, &opt, 16, x, parallel ? comm : NULL, bucket), "eager model");
    else {
        if (parallel) opt.data_parallel = &dp;
        die_on(dp_static_new(&ms, &opt, 16), "static model");
    }
    for (int step = 0; step < STEPS; step++) {
        nb_tensor *rec[2];
        bool end;
        die_on(nb_reader_next(rd, rec, &end), "data");
        die_on(eager ? dp_eager_step(&me, rec) : dp_static_step(&ms, rec), "step");
        nb_tensor_release(rec[0]);
        nb_tensor_release(rec[1]);
        if (eager) dp_eager_params(&me, out, MAXP, n);
        else dp_static_params(&ms, out, MAXP, n);
        if (parallel) EXPECT(same_everywhere(out, *n), "step %d: the ranks' parameters differ", step + 1);
    }
    if (eager) dp_eager_free(&me);
    else dp_static_free(&ms);
    nb_reader_free(rd);
    nb_tensor_release(x);
    nb_tensor_release(y);
}

static void check_equal(void)
{
    static const char *const names[] = {"sgd", "adam"};
    nb_optimizer kinds[] = {nb_sgd(0.2), nb_adam(0.02)};
    for (int mode = 0; mode < 2; mode++)
        for (int k = 0; k < 2; k++) {
            double alone[MAXP], together[MAXP], small[MAXP], synced[MAXP];
            int n1, n2, n3, n4;
            train(mode, kinds[k], false, 0, false, alone, &n1);
            train(mode, kinds[k], true, 0, false, together, &n2);
            train(mode, kinds[k], true, 48, false, small, &n3);
            /* one bucket of every parameter, summed by c_allreduce_sum (static) */
            train(mode, kinds[k], true, 0, true, synced, &n4);
            /* The tolerance is rounding, relative to the parameters' size. */
            double scale = 0, d = dp_max_diff(alone, together, n1), db = dp_max_diff(together, small, n2);
            double ds = dp_max_diff(together, synced, n2);
            for (int i = 0; i < n1; i++) scale = fmax(scale, fabs(alone[i]));
            double tol = 1e-12 * fmax(scale, 1);
            char what[200];
            snprintf(what, sizeof what,
                     "%s %s: %d ranks with batch %d = 1 with batch %d (max diff %.1e), buckets of "
                     "48 bytes (diff %.1e), synchronous (diff %.1e)",
                     mode ? "eager" : "static", names[k], size, B / size, B, d, db, ds);
            EXPECT(n1 == n2 && n2 == n3 && n3 == n4 && n1 == 8 * 16 + 16 + 16 * 3 + 3, "parameter counts %d %d %d %d",
                   n1, n2, n3, n4);
            EXPECT(d <= tol && db <= tol && ds <= tol, "%s", what);
            if (d <= tol && db <= tol && ds <= tol) ok(what);
        }
}

/* Each rank marks the records of its shard; the sum over ranks must be
 * one everywhere, in each of three shuffled epochs of 23 records. */
static void check_shard(void)
{
    enum { N = 23 };
    nb_tensor *ids;
    die_on(nb_tensor_new(&ids, NB_F64, 1, (const int64_t[]){N}), "ids");
    for (int i = 0; i < N; i++) nb_tensor_set(ids, i, i);
    nb_reader *r;
    die_on(nb_reader_from_tensors(&r, 1, &ids), "reader");
    die_on(nb_reader_shuffle(&r, r, 3), "shuffle");
    die_on(nb_reader_shard(&r, r, rank, size), "shard");
    for (uint64_t e = 0; e < 3; e++) {
        nb_tensor *count;
        die_on(nb_tensor_full(&count, NB_F64, 1, (const int64_t[]){N}, 0), "count");
        die_on(nb_reader_reset(r, e), "reset");
        int mine = 0;
        for (;;) {
            nb_tensor *rec;
            bool end;
            die_on(nb_reader_next(r, &rec, &end), "next");
            if (end) break;
            int id = (int)nb_tensor_get(rec, 0);
            nb_tensor_set(count, id, nb_tensor_get(count, id) + 1);
            nb_tensor_release(rec);
            mine++;
        }
        die_on(nb_comm_allreduce_sum(comm, count), "all-reduce");
        int wrong = 0;
        for (int i = 0; i < N; i++) wrong += nb_tensor_get(count, i) != 1;
        EXPECT(wrong == 0, "epoch %d: %d records not seen exactly once", (int)e, wrong);
        EXPECT(mine == N / size || mine == N / size + 1, "epoch %d: %d records on this rank", (int)e, mine);
        nb_tensor_release(count);
    }
    ok("the shards of 3 epochs of 23 records cover each exactly once");
    nb_reader_free(r);
    nb_tensor_release(ids);
}

/* Rank 1's hidden layer is one wider: the startup program's broadcast and
 * nb_ddp_new both refuse, on every rank, naming rank 1. */
static void check_mismatch(void)
{
    int hidden = rank == 1 ? 17 : 16;
    nb_optimizer opt = nb_sgd(0.1);
    nb_data_parallel_opts dp = {.nranks = size};
    opt.data_parallel = &dp;
    dp_static ms;
    nb_status st = dp_static_new(&ms, &opt, hidden);
    EXPECT(st != NB_OK && strstr(nb_last_error(), "rank 1 differs from rank 0"), "static: %s",
           st ? nb_last_error() : "no error");
    if (st && strstr(nb_last_error(), "rank 1 differs from rank 0")) {
        printf("rank %d: static error: %s\n", rank, nb_last_error());
        ok("static: a different model on rank 1 is named on every rank");
    }
    dp_static_free(&ms);
    nb_tensor *x, *y;
    dp_data(4, &x, &y);
    dp_eager me;
    st = dp_eager_new(&me, &opt, hidden, x, comm, 0);
    EXPECT(st != NB_OK && strstr(nb_last_error(), "rank 1 differs from rank 0"), "eager: %s",
           st ? nb_last_error() : "no error");
    if (st && strstr(nb_last_error(), "rank 1 differs from rank 0"))
        ok("eager: a different model on rank 1 is named on every rank");
    dp_eager_free(&me);
    nb_tensor_release(x);
    nb_tensor_release(y);
}

/* Rank 1 skips the all-reduce the others make: they give up after 1 s. */
static void check_timeout(void)
{
    nb_comm_set_timeout(comm, 1);
    if (rank != 1) {
        nb_tensor *t;
        die_on(nb_tensor_full(&t, NB_F32, 1, (const int64_t[]){4}, 1), "tensor");
        nb_status st = nb_comm_allreduce_sum(comm, t);
        EXPECT(st != NB_OK && strstr(nb_last_error(), "did not join"), "%s", st ? nb_last_error() : "no error");
        if (st) {
            printf("rank %d: timeout error: %s\n", rank, nb_last_error());
            ok("an all-reduce that rank 1 never joins fails after the timeout");
        }
        nb_tensor_release(t);
    } else {
        ok("rank 1 stays away");
        sleep(3); /* alive, but elsewhere, while the others time out */
    }
    /* The communicator is unusable now, and MPI cannot cancel a
     * collective: leave without finalising. */
    fflush(stdout);
    _exit(failures ? 1 : 0);
}

/* One nb_train run of the static model with Adam. */
typedef struct train_run {
    bool parallel;          /* over the ranks with batch B/size, or alone with batch B */
    const char *ckpt, *csv; /* or NULL */
    bool resume;
    int epochs, stop_after;
    nb_reader_map_fn hook; /* called on every batch, or NULL */
} train_run;

static nb_status run_train(const train_run *t, double *out, int *n, double *loss)
{
    int s = t->parallel ? size : 1;
    nb_tensor *x, *y;
    dp_data(RECORDS, &x, &y);
    nb_reader *rd = NULL;
    dp_static m;
    memset(&m, 0, sizeof m);
    nb_optimizer opt = nb_adam(0.02);
    nb_data_parallel_opts dp = {.nranks = s};
    if (t->parallel) opt.data_parallel = &dp;
    nb_status st = dp_reader(&rd, x, y, t->parallel ? rank : 0, s, B / s);
    if (!st && t->hook) st = nb_reader_map(&rd, rd, t->hook, NULL);
    if (!st) st = dp_static_new(&m, &opt, 16);
    const char *feeds[] = {"x", "y"};
    nb_train_config cfg = {.epochs = t->epochs,
                           .n_feeds = 2,
                           .feeds = feeds,
                           .loss = m.loss,
                           .comm = t->parallel ? comm : NULL,
                           .progress = NB_PROGRESS_QUIET,
                           .checkpoint_path = t->ckpt,
                           .csv_path = t->csv,
                           .resume = t->resume,
                           .stop_after_epochs = t->stop_after};
    nb_train_result r;
    if (!st) st = nb_train(&cfg, m.main, m.startup, m.scope, rd, &r);
    if (!st) {
        *loss = r.last.train_loss;
        dp_static_params(&m, out, MAXP, n);
    }
    dp_static_free(&m);
    nb_reader_free(rd);
    nb_tensor_release(x);
    nb_tensor_release(y);
    return st;
}

/* Two epochs through nb_train: uninterrupted, or stopped after the first
 * and resumed from rank 0's checkpoint. */
static void train_epochs(const char *dir, bool resumed, double *out, int *n, double *loss)
{
    char ckpt[512], csv[512];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    for (int part = resumed ? 0 : 1; part < 2; part++) {
        train_run t = {.parallel = true,
                       .ckpt = resumed ? ckpt : NULL,
                       .csv = resumed ? csv : NULL,
                       .resume = resumed && part == 1,
                       .epochs = 2,
                       .stop_after = resumed && part == 0 ? 1 : 0};
        die_on(run_train(&t, out, n, loss), "train");
        /* Rank 0 has written the checkpoint the others resume from. */
        die_on(nb_comm_barrier(comm), "barrier");
    }
}

static void check_train(const char *dir)
{
    double straight[MAXP], resumed[MAXP], l1, l2;
    int n1, n2;
    train_epochs(dir, false, straight, &n1, &l1);
    train_epochs(dir, true, resumed, &n2, &l2);
    EXPECT(n1 == n2 && dp_max_diff(straight, resumed, n1) == 0, "resumed run differs by %.1e",
           dp_max_diff(straight, resumed, n1));
    EXPECT(l1 == l2, "epoch 2's loss: %.17g straight, %.17g resumed", l1, l2);
    EXPECT(same_everywhere(&l1, 1), "the ranks report different epoch losses");
    EXPECT(same_everywhere(straight, n1), "the ranks' parameters differ");
    if (rank == 0) {
        char csv[512], line[512];
        snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
        FILE *f = fopen(csv, "r");
        int lines = 0;
        while (f && fgets(line, sizeof line, f)) lines++;
        if (f) fclose(f);
        EXPECT(lines == 3, "metrics.csv has %d lines; a header and one per epoch, from rank 0 only, make 3", lines);
    }
    if (!failures) ok("nb_train over ranks: resumed on every rank = uninterrupted, rank 0 writes, same figures");
}

/* ---- a lost rank ----------------------------------------------------------------------------- */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int victim;
static double last_batch; /* when this rank last read a batch */

/* On every batch: the victim (not rank 0) kills itself at the 4th batch
 * of the second epoch. */
static nb_status lose_victim(void *ctx, int n_fields, nb_tensor **record)
{
    static int batches;
    last_batch = seconds_now();
    if (victim > 0 && rank == victim && ++batches == RECORDS / B + 4) {
        printf("rank %d: killing itself (SIGKILL) in the middle of epoch 2\n", rank);
        fflush(stdout);
        raise(SIGKILL);
    }
    return NB_OK;
}

static void check_lost(const char *dir, int v)
{
    victim = v;
    char path[512];
    snprintf(path, sizeof path, "%s/pid.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%d\n", (int)getpid());
    if (!f || fclose(f)) die_on(nb_error(NB_ERR_IO, "cannot write %s", path), "pid file");
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    double out[MAXP], loss;
    int n;
    train_run t = {.parallel = true, .ckpt = path, .epochs = 3, .hook = lose_victim};
    if (victim == 0) {
        /* The first epoch's checkpoint whole; rank 0 stops in the middle
         * of writing the second's. */
        t.stop_after = 1;
        die_on(run_train(&t, out, &n, &loss), "epoch 1");
        die_on(nb_comm_barrier(comm), "barrier");
        if (rank == 0) setenv("NABLA_TEST_STOP_AFTER_BYTES", "1000", 1);
        t.stop_after = 0;
        t.resume = true;
    }
    nb_status st = run_train(&t, out, &n, &loss);
    double waited = seconds_now() - last_batch, limit = nb_comm_timeout(comm);
    char named[64];
    snprintf(named, sizeof named, "rank %d is lost", victim);
    EXPECT(rank != victim, "rank %d was to be lost but trained on: %s", rank, st ? nb_last_error() : "no error");
    EXPECT(st && strstr(nb_last_error(), named), "the error does not say '%s': %s", named,
           st ? nb_last_error() : "no error");
    /* The timeout counts from the start of the all-reduce: a loaded
     * machine may take a while to get there from the last batch. */
    EXPECT(waited < limit + 5, "stopped %.1f s after its last batch; the timeout is %.1f s", waited, limit);
    if (!failures)
        printf("rank %d: ok stopped %.1f s after its last batch (timeout %.0f s) naming rank %d: %s\n", rank, waited,
               limit, victim, nb_last_error());
}

static void check_resume(const char *dir, int old_size)
{
    /* The checkpoint on rank 0's disk only, as on hosts without a shared
     * file system: nb_train sends it to the others. */
    char path[512];
    if (rank == 0) snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    else snprintf(path, sizeof path, "%s/not-on-rank-%d.safetensors", dir, rank);
    if (rank == 0) {
        nb_safetensors *meta = NULL;
        nb_status st = nb_safetensors_load(&meta, path);
        const char *epoch = st ? NULL : nb_safetensors_meta(meta, "epoch");
        EXPECT(epoch && !strcmp(epoch, "1"), "the last checkpoint, %s, is not epoch 1's: %s", path,
               st          ? nb_last_error()
                   : epoch ? epoch
                           : "no epoch");
        nb_safetensors_free(meta);
    }
    double alone[MAXP], straight[MAXP], resumed[MAXP], la, ls, lr;
    int na, ns, nr;
    die_on(run_train(&(train_run){.epochs = 3}, alone, &na, &la), "one process");
    die_on(run_train(&(train_run){.parallel = true, .epochs = 3}, straight, &ns, &ls), "uninterrupted");
    die_on(run_train(&(train_run){.parallel = true, .ckpt = path, .resume = true, .epochs = 3}, resumed, &nr, &lr),
           "resumed");
    double scale = 0;
    for (int i = 0; i < na; i++) scale = fmax(scale, fabs(alone[i]));
    double tol = 1e-12 * fmax(scale, 1), ds = dp_max_diff(resumed, straight, nr), da = dp_max_diff(resumed, alone, nr);
    EXPECT(na == ns && ns == nr, "parameter counts %d %d %d", na, ns, nr);
    if (size == old_size) EXPECT(ds == 0 && lr == ls, "resumed on the same %d ranks: differs by %.1e", size, ds);
    EXPECT(ds <= tol && da <= tol, "resumed: %.1e from the uninterrupted run, %.1e from one process (tolerance %.1e)",
           ds, da, tol);
    EXPECT(same_everywhere(resumed, nr), "the ranks' parameters differ");
    if (!failures)
        printf("rank %d: ok %d-rank checkpoint of epoch 1 resumed on %d ranks: %s the uninterrupted run (diff %.1e), "
               "one process to rounding (diff %.1e)\n",
               rank, old_size, size, ds == 0 ? "exactly" : "to rounding", ds, da);
}

/* A tracked all-reduce moves on inside GEMMs alone: MPI progresses a
 * nonblocking collective only inside MPI calls, and after the start this
 * rank makes none, only products (eager matmuls of 256 x 256), until the
 * request is seen complete or 20 s have passed. */
static void check_progress(void)
{
    int64_t n = 1 << 18; /* 1 MiB of float32: well past the eager-send limit */
    nb_tensor *t, *a;
    die_on(nb_tensor_new(&t, NB_F32, 1, &n), "tensor");
    die_on(nb_tensor_new(&a, NB_F32, 2, (const int64_t[]){256, 256}), "tensor");
    float *v = nb_tensor_data(t), *av = nb_tensor_data(a);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(rank + 1);
    for (int64_t i = 0; i < 256 * 256; i++) av[i] = 1.0f / 256;
    nb_builder *b;
    die_on(nb_builder_new_eager(&b), "builder");
    die_on(nb_comm_barrier(comm), "barrier");
    nb_comm_request *r;
    die_on(nb_comm_allreduce_sum_async(comm, t, &r), "start");
    nb_comm_track(r);
    double t0 = nb_comm_clock();
    int products = 0;
    while (nb_comm_done_at(r) == 0 && nb_comm_clock() - t0 < 20) {
        nb_value x = nb_eager_value(b, a);
        nb_matmul(b, x, x, 0);
        die_on(nb_builder_status(b), "matmul");
        nb_eager_release_values(b);
        products++;
    }
    bool done = nb_comm_done_at(r) > 0;
    EXPECT(done, "a tracked all-reduce was not complete after %d products in 20 s", products);
    die_on(nb_comm_wait(r), "wait");
    float want = (float)(size * (size + 1) / 2);
    bool right = v[0] == want && v[n - 1] == want;
    EXPECT(right, "the sum is %g, not %g", v[0], want);
    if (done && right) ok("a tracked all-reduce completes inside GEMMs");
    nb_builder_free(b);
    nb_tensor_release(t);
    nb_tensor_release(a);
}

/* All-reduces larger than the shared-memory slot (4 MiB a rank), float32
 * and float64, three open at once and waited for in the reverse order:
 * every value exact on every rank (small integers, so any order of
 * addition gives the same sum), through the transport NABLA_COMM_SHM asks
 * for. */
static void check_big(void)
{
    const char *e = getenv("NABLA_COMM_SHM");
    const char *want_path = e && !strcmp(e, "0") ? "ring" : "shared memory";
    EXPECT(!strcmp(nb_comm_transport(comm), want_path), "the transport is '%s', not '%s'", nb_comm_transport(comm),
           want_path);
    int64_t n[3] = {(int64_t)5 << 19, (int64_t)3 << 18, 1000}; /* 10 MiB, 6 MiB, 8 KB */
    nb_dtype dt[3] = {NB_F32, NB_F64, NB_F64};
    nb_tensor *t[3];
    nb_comm_request *r[3];
    for (int k = 0; k < 3; k++) {
        die_on(nb_tensor_new(&t[k], dt[k], 1, &n[k]), "tensor");
        for (int64_t i = 0; i < n[k]; i++) {
            double v = (double)((i + k) % 1001) * (rank + 1);
            if (dt[k] == NB_F32) ((float *)nb_tensor_data(t[k]))[i] = (float)v;
            else ((double *)nb_tensor_data(t[k]))[i] = v;
        }
        die_on(nb_comm_allreduce_sum_async(comm, t[k], &r[k]), "start");
    }
    int64_t wrong = 0;
    for (int k = 2; k >= 0; k--) {
        die_on(nb_comm_wait(r[k]), "wait");
        for (int64_t i = 0; i < n[k]; i++) {
            double want = (double)((i + k) % 1001) * (size * (size + 1) / 2);
            double got = dt[k] == NB_F32 ? ((float *)nb_tensor_data(t[k]))[i] : ((double *)nb_tensor_data(t[k]))[i];
            wrong += got != want;
        }
        nb_tensor_release(t[k]);
    }
    EXPECT(wrong == 0, "%lld values of three large all-reduces are wrong", (long long)wrong);
    if (!wrong && !strcmp(nb_comm_transport(comm), want_path)) ok("large all-reduces, three open at once");
}

/* ZeRO-1's reduce-scatter of parts through shared memory: two parts of
 * float32, 6.4 MB in all (two chunks of the slot), each rank keeping a
 * range of its own that crosses the chunk's and the parts' boundaries:
 * its kept values are the exact sums, every other value of dst is as it
 * was. Over the ring, which all-reduces one buffer, the call is refused. */
static void check_scatter(void)
{
    const int64_t counts[2] = {1000003, 600011}, total = counts[0] + counts[1];
    const int64_t lo = total * rank / size + 7, hi = total * (rank + 1) / size - 3;
    float *src[2], *dst[2];
    for (int p = 0; p < 2; p++) {
        src[p] = nb_malloc((size_t)counts[p] * sizeof(float));
        dst[p] = nb_malloc((size_t)counts[p] * sizeof(float));
        if (!src[p] || !dst[p]) die_on(NB_ERR_NOMEM, "scatter buffers");
        for (int64_t i = 0; i < counts[p]; i++) {
            src[p][i] = (float)(((i + p) % 1001) * (rank + 1));
            dst[p][i] = -1;
        }
    }
    nb_comm_request *r = NULL;
    nb_status st =
        nb_comm_reduce_scatter_parts(comm, 2, (const void *const *)src, (void *const *)dst, counts, NB_F32, lo, hi, &r);
    if (!comm->reads_parts) {
        EXPECT(st == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "ring"), "the ring's reduce-scatter: %s",
               st ? nb_last_error() : "no error");
        if (st == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "ring"))
            ok("a reduce-scatter of parts is refused by the ring, naming it");
    } else {
        die_on(st, "reduce-scatter");
        die_on(nb_comm_finish(r), "reduce-scatter wait");
        int64_t wrong = 0, at = 0;
        for (int p = 0; p < 2; p++)
            for (int64_t i = 0; i < counts[p]; i++, at++) {
                float want = at >= lo && at < hi ? (float)(((i + p) % 1001) * (size * (size + 1) / 2)) : -1;
                wrong += dst[p][i] != want;
            }
        EXPECT(wrong == 0, "%lld values of the reduce-scatter are wrong (kept [%lld, %lld) of %lld)", (long long)wrong,
               (long long)lo, (long long)hi, (long long)total);
        if (!wrong) ok("a reduce-scatter of parts: each rank's range summed, the rest left as it was");
    }
    for (int p = 0; p < 2; p++) {
        nb_free(src[p]);
        nb_free(dst[p]);
    }
}

/* An all-reduce that every rank but 0 joins 30 ms late: rank 0's wait
 * naps (past 2 ms; through shared memory, on the window's doorbell) and
 * still ends with the exact sums, as do the late ranks. */
static void check_late(void)
{
    int64_t n = (int64_t)3 << 19; /* 6 MiB of float32: two chunks of the slot */
    nb_tensor *t;
    die_on(nb_tensor_new(&t, NB_F32, 1, &n), "tensor");
    float *v = nb_tensor_data(t);
    for (int64_t i = 0; i < n; i++) v[i] = (float)((i % 7) * (rank + 1));
    die_on(nb_comm_barrier(comm), "barrier");
    if (rank != 0) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    die_on(nb_comm_allreduce_sum(comm, t), "all-reduce");
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += v[i] != (float)((i % 7) * (size * (size + 1) / 2));
    EXPECT(wrong == 0, "%lld values of an all-reduce joined late are wrong", (long long)wrong);
    if (!wrong) ok("an all-reduce joined late, after the first rank napped");
    nb_tensor_release(t);
}

/* nb_ddp's gradients on every rank: the average over the ranks (to
 * rounding: the backward pass is seeded with 1/N), a
 * parameter the loss does not reach getting zeros, two parameters whose
 * gradients are one tensor (sum(w1 + w2) passes the same ones to both)
 * each their own, in buckets of one or two parameters. */
static void check_ddp_grads(void)
{
    nb_builder *b;
    die_on(nb_builder_new_eager(&b), "builder");
    int64_t three = 3, two = 2;
    nb_value w1 = nb_param(b, "w1", NB_F64, 1, &three, nb_init_constant(1));
    nb_value w2 = nb_param(b, "w2", NB_F64, 1, &three, nb_init_constant(2));
    nb_param(b, "unused", NB_F64, 1, &two, nb_init_constant(3));
    nb_ddp *d;
    die_on(nb_ddp_new(&d, comm, b, 24), "ddp");
    /* rank r: (r + 1) (sum(w1 (w2 + w1)) + sum(w1 + w2)) */
    nb_value loss = nb_add(b, nb_reduce_sum(b, nb_mul(b, w1, nb_add(b, w2, w1)), 0, NULL, false),
                           nb_reduce_sum(b, nb_add(b, w1, w2), 0, NULL, false));
    loss = nb_scale(b, loss, rank + 1, 0);
    die_on(nb_builder_status(b), "model");
    die_on(nb_ddp_backward(d, nb_eager_tensor(loss)), "backward");
    double mean = (size + 1) / 2.0; /* of rank + 1 */
    nb_tensor *g1 = nb_tensor_grad(nb_eager_tensor(w1)), *g2 = nb_tensor_grad(nb_eager_tensor(w2));
    nb_tensor *gu = nb_tensor_grad(nb_eager_find_param(b, "unused"));
    bool right = g1 && g2 && gu && g1 != g2;
    for (int i = 0; right && i < 3; i++)
        right = fabs(nb_tensor_get(g1, i) - 5 * mean) < 1e-12 && /* w2 + 2 w1 + 1 */
            fabs(nb_tensor_get(g2, i) - 2 * mean) < 1e-12;       /* w1 + 1; 1/N may round */
    for (int i = 0; right && i < 2; i++) right = nb_tensor_get(gu, i) == 0;
    EXPECT(right, "nb_ddp's gradients are not the averages (w1 %g, w2 %g, unused %g)", g1 ? nb_tensor_get(g1, 0) : -1,
           g2 ? nb_tensor_get(g2, 0) : -1, gu ? nb_tensor_get(gu, 0) : -1);
    if (right) ok("nb_ddp's gradients: averages, zeros for an unused parameter, shared ones apart");
    nb_ddp_free(d);
    nb_builder_free(b);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "equal";
    die_on(nb_comm_init_mpi(&comm, NULL), "init");
    rank = nb_comm_rank(comm);
    size = nb_comm_size(comm);
    die_on(nb_comm_set_ring(0, comm), "ring");
    if (!strcmp(what, "equal")) check_equal();
    else if (!strcmp(what, "shard")) check_shard();
    else if (!strcmp(what, "mismatch")) check_mismatch();
    else if (!strcmp(what, "timeout")) check_timeout();
    else if (!strcmp(what, "progress")) check_progress();
    else if (!strcmp(what, "big")) {
        check_big();
        check_scatter();
        check_late();
        check_ddp_grads();
    } else if (!strcmp(what, "train") && argc > 2) check_train(argv[2]);
    else if (!strcmp(what, "lost") && argc > 3) check_lost(argv[2], atoi(argv[3]));
    else if (!strcmp(what, "resume") && argc > 3) check_resume(argv[2], atoi(argv[3]));
    else {
        printf("rank %d: FAIL unknown check '%s'\n", rank, what);
        failures++;
    }
    nb_comm_set_ring(0, NULL);
    nb_comm_free(comm);
    return failures ? 1 : 0;
}
