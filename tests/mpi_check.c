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
 *                        run does.
 *
 * Each rank prints "rank R: ok NAME" per passed check and "rank R: FAIL
 * ..." per failure; the script counts them. */
#include <stdlib.h>
#include <unistd.h>
#include "dp_test_util.h"

#define B 12 /* the global batch: divisible by 1, 2, 3, 4, 6 */
#define STEPS 6
#define MAXP 512

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
 * shard with batch B/size, or alone with batch B. Checks after every
 * data-parallel step that all ranks hold the same parameters. */
static void train(bool eager, nb_optimizer opt, bool parallel, size_t bucket, double *out, int *n)
{
    nb_tensor *x, *y;
    dp_data(120, &x, &y);
    int s = parallel ? size : 1;
    nb_data_parallel_opts dp = {.nranks = size, .bucket_bytes = bucket};
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
            double alone[MAXP], together[MAXP], small[MAXP];
            int n1, n2, n3;
            train(mode, kinds[k], false, 0, alone, &n1);
            train(mode, kinds[k], true, 0, together, &n2);
            train(mode, kinds[k], true, 48, small, &n3);
            /* The tolerance is rounding, relative to the parameters' size. */
            double scale = 0, d = dp_max_diff(alone, together, n1), db = dp_max_diff(together, small, n2);
            for (int i = 0; i < n1; i++) scale = fmax(scale, fabs(alone[i]));
            double tol = 1e-12 * fmax(scale, 1);
            char what[160];
            snprintf(what, sizeof what, "%s %s: %d ranks with batch %d = 1 with batch %d (max diff %.1e), buckets of "
                     "48 bytes (diff %.1e)", mode ? "eager" : "static", names[k], size, B / size, B, d, db);
            EXPECT(n1 == n2 && n2 == n3 && n1 == 8 * 16 + 16 + 16 * 3 + 3, "parameter counts %d %d %d", n1, n2, n3);
            EXPECT(d <= tol && db <= tol, "%s", what);
            if (d <= tol && db <= tol) ok(what);
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
    if (st && strstr(nb_last_error(), "rank 1 differs from rank 0")) ok("eager: a different model on rank 1 is named on every rank");
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

/* Two epochs of the static model through nb_train: uninterrupted, or
 * stopped after the first and resumed from rank 0's checkpoint. */
static void train_epochs(const char *dir, bool resumed, double *out, int *n, double *loss)
{
    nb_tensor *x, *y;
    dp_data(120, &x, &y);
    nb_reader *rd;
    die_on(dp_reader(&rd, x, y, rank, size, B / size), "reader");
    char ckpt[512], csv[512];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    const char *feeds[] = {"x", "y"};
    for (int part = resumed ? 0 : 1; part < 2; part++) {
        nb_optimizer opt = nb_adam(0.02);
        nb_data_parallel_opts dp = {.nranks = size};
        opt.data_parallel = &dp;
        dp_static m;
        die_on(dp_static_new(&m, &opt, 16), "model");
        nb_train_config cfg = {.epochs = 2, .n_feeds = 2, .feeds = feeds, .loss = m.loss, .comm = comm,
                               .progress = NB_PROGRESS_QUIET, .checkpoint_path = resumed ? ckpt : NULL,
                               .csv_path = resumed ? csv : NULL, .resume = resumed && part == 1,
                               .stop_after_epochs = resumed && part == 0 ? 1 : 0};
        nb_train_result r;
        die_on(nb_train(&cfg, m.main, m.startup, m.scope, rd, &r), "train");
        /* Rank 0 has written the checkpoint the others resume from. */
        die_on(nb_comm_barrier(comm), "barrier");
        *loss = r.last.train_loss;
        dp_static_params(&m, out, MAXP, n);
        dp_static_free(&m);
    }
    nb_reader_free(rd);
    nb_tensor_release(x);
    nb_tensor_release(y);
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
    else if (!strcmp(what, "train") && argc > 2) check_train(argv[2]);
    else {
        printf("rank %d: FAIL unknown check '%s'\n", rank, what);
        failures++;
    }
    nb_comm_set_ring(0, NULL);
    nb_comm_free(comm);
    return failures ? 1 : 0;
}
