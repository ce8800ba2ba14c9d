/* Readers: each decorator alone, their compositions, and the prefetch
 * thread (same sequence as without it, reset, skip, errors, shutdown). */
#include <stdlib.h>
#include <time.h>
#include "nabla/reader.h"
#include "data_test_util.h"
#include "test.h"

#define N 100

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static nb_status identity(void *ctx, int n_fields, nb_tensor **rec) { return NB_OK; }

/* A source without random access (map hides it), for the generic paths. */
static nb_reader *sequential_source(int64_t n)
{
    nb_reader *r = NULL;
    if (nb_reader_map(&r, numbered_source(n), identity, NULL)) exit(2);
    return r;
}

/* The y values (field 1) of the rest of the epoch, checking on the way that
 * each x row matches its y; returns how many, or -1 on an error. */
static int64_t drain(nb_reader *r, int64_t *ys, int64_t cap, int *batches)
{
    nb_tensor *rec[2];
    bool end = false;
    int64_t n = 0;
    if (batches) *batches = 0;
    for (;;) {
        nb_status st = nb_reader_next(r, rec, &end);
        if (st) return -1;
        if (end) return n;
        if (batches) (*batches)++;
        int64_t rows = rec[1]->ndim ? rec[1]->shape[0] : 1;
        for (int64_t i = 0; i < rows && n < cap; i++, n++) {
            ys[n] = (int64_t)nb_tensor_get(rec[1], i);
            if (nb_tensor_get(rec[0], 2 * i) != (double)ys[n] ||
                nb_tensor_get(rec[0], 2 * i + 1) != 1000.0 + (double)ys[n]) {
                fprintf(stderr, "  record with y = %lld has the wrong x\n", (long long)ys[n]);
                CHECK(0);
            }
        }
        release_all(rec[0], rec[1], NULL);
    }
}

/* Reads k records (or batches) and drops them. */
static void read_some(nb_reader *r, int k)
{
    nb_tensor *rec[2] = {NULL, NULL};
    bool end;
    for (int i = 0; i < k; i++) {
        CHECK_OK(nb_reader_next(r, rec, &end));
        CHECK(!end);
        release_all(rec[0], rec[1], NULL);
    }
}

static bool is_permutation(const int64_t *ys, int64_t n)
{
    char seen[N] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (ys[i] < 0 || ys[i] >= n || seen[ys[i]]) return false;
        seen[ys[i]] = 1;
    }
    return true;
}

static void test_from_tensors(void)
{
    nb_reader *r = numbered_source(3);
    CHECK(nb_reader_fields(r) == 2);
    nb_tensor *rec[2];
    bool end;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(nb_reader_next(r, rec, &end));
        CHECK(!end);
        CHECK_TENSOR(rec[0], S(2), 0, i, 1000 + i);
        if (rec[1]) CHECK(rec[1]->ndim == 0 && rec[1]->dtype == NB_I64 && nb_tensor_get(rec[1], 0) == i);
        release_all(rec[0], rec[1], NULL);
    }
    for (int i = 0; i < 2; i++) { /* the end stays the end until reset */
        CHECK_OK(nb_reader_next(r, rec, &end));
        CHECK(end && rec[0] == NULL && rec[1] == NULL);
    }
    CHECK_OK(nb_reader_reset(r, 7));
    int64_t ys[3];
    CHECK(drain(r, ys, 3, NULL) == 3 && ys[0] == 0 && ys[2] == 2);
    nb_reader_free(r);

    /* a non-contiguous field is read in its logical order */
    nb_tensor *t = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *tt_;
    REQUIRE_OK(nb_tensor_transpose(&tt_, t, 0, 1)); /* [3, 2]: rows (1,4) (2,5) (3,6) */
    REQUIRE_OK(nb_reader_from_tensors(&r, 1, &tt_));
    release_all(t, tt_, NULL);
    CHECK_OK(nb_reader_skip(r, 1));
    CHECK_OK(nb_reader_next(r, rec, &end));
    CHECK_TENSOR(rec[0], S(2), 0, 2, 5);
    nb_tensor_release(rec[0]);
    nb_reader_free(r);
}

static void test_from_tensors_refuses(void)
{
    nb_tensor *a = T(NB_F32, S(3, 2), 0, 0, 0, 0, 0, 0), *b = T(NB_F32, S(4), 0, 0, 0, 0), *s = tscalar(NB_F32, 1);
    nb_reader *r = NULL;
    CHECK_ERR(nb_reader_from_tensors(&r, 2, (nb_tensor *[]){a, b}), NB_ERR_SHAPE,
              "field 1 has shape [4] but field 0 has [3, 2]");
    CHECK_ERR(nb_reader_from_tensors(&r, 1, &s), NB_ERR_SHAPE, "field 0 is a scalar");
    CHECK_ERR(nb_reader_from_tensors(&r, 0, &a), NB_ERR_ARG, "0 fields");
    CHECK_ERR(nb_reader_from_tensors(&r, 2, (nb_tensor *[]){a, NULL}), NB_ERR_ARG, "field 1 is NULL");
    CHECK(r == NULL);
    release_all(a, b, s, NULL);
}

static void check_batches(nb_reader *r, bool drop_last)
{
    nb_tensor *rec[2];
    bool end;
    for (int b = 0; b < 3; b++) {
        CHECK_OK(nb_reader_next(r, rec, &end));
        if (b == 2 && drop_last) {
            CHECK(end);
            break;
        }
        if (end) {
            CHECK(!"batch missing");
            return;
        }
        if (b < 2) {
            CHECK_TENSOR(rec[0], S(2, 2), 0, 2 * b, 1000 + 2 * b, 2 * b + 1, 1001 + 2 * b);
            CHECK_TENSOR(rec[1], S(2), 0, 2 * b, 2 * b + 1);
        } else {
            CHECK_TENSOR(rec[0], S(1, 2), 0, 4, 1004);
            CHECK_TENSOR(rec[1], S(1), 0, 4);
        }
        release_all(rec[0], rec[1], NULL);
    }
    CHECK_OK(nb_reader_next(r, rec, &end));
    CHECK(end);
}

/* Five records in batches of two: [2] [2] [1], or [2] [2] with drop_last;
 * through the gather path (from_tensors) and the record-by-record one. */
static void test_batch(void)
{
    for (int seq = 0; seq <= 1; seq++)
        for (int drop = 0; drop <= 1; drop++) {
            nb_reader *r = NULL;
            REQUIRE_OK(nb_reader_batch(&r, seq ? sequential_source(5) : numbered_source(5), 2, drop));
            check_batches(r, drop);
            CHECK_OK(nb_reader_reset(r, 1));
            check_batches(r, drop);
            nb_reader_free(r);
        }
    nb_reader *r = NULL;
    CHECK_ERR(nb_reader_batch(&r, numbered_source(5), 0, false), NB_ERR_ARG, "batch size 0"); /* frees its inner */
    CHECK_ERR(nb_reader_batch(&r, NULL, 2, false), NB_ERR_ARG, "inner is NULL");
}

/* A reader written by a user: counts 0, 1, 2, ... as int64 [k] tensors
 * filled with the count, k = shape_at(i); no skip, no random access. */
typedef struct {
    int64_t i, n;
    int odd_at; /* the record that gets shape [2] instead of [1] */
    int fail_at;
} counter;

static nb_status counter_next(void *self, nb_tensor **rec, bool *end)
{
    counter *c = self;
    if (c->i == c->fail_at) return nb_error(NB_ERR_IO, "counter: record %lld is unreadable", (long long)c->i);
    if (c->i >= c->n) {
        *end = true;
        return NB_OK;
    }
    nb_status st = nb_tensor_full(&rec[0], NB_I64, 1, S(c->i == c->odd_at ? 2 : 1), (double)c->i);
    c->i++;
    return st;
}

static nb_status counter_reset(void *self, uint64_t epoch)
{
    ((counter *)self)->i = 0;
    return NB_OK;
}

static const nb_reader_ops counter_ops = {
    .name = "counter", .next = counter_next, .reset = counter_reset, .free = free};

static nb_reader *counter_reader(int64_t n, int odd_at, int fail_at)
{
    counter *c = calloc(1, sizeof *c);
    c->n = n;
    c->odd_at = odd_at;
    c->fail_at = fail_at;
    nb_reader *r = NULL;
    if (nb_reader_new(&r, 1, &counter_ops, c)) exit(2);
    return r;
}

static int64_t ten(void *self) { return 10; }

static void test_custom_reader(void)
{
    nb_reader *r = counter_reader(10, -1, -1);
    nb_tensor *rec[1];
    bool end;
    CHECK_OK(nb_reader_skip(r, 4)); /* by calling next: the reader has no skip */
    CHECK_OK(nb_reader_next(r, rec, &end));
    CHECK_TENSOR(rec[0], S(1), 0, 4);
    nb_tensor_release(rec[0]);
    CHECK_OK(nb_reader_skip(r, 100));
    CHECK_OK(nb_reader_next(r, rec, &end));
    CHECK(end);
    CHECK_ERR(nb_reader_skip(r, -1), NB_ERR_ARG, "cannot skip -1 records");
    nb_reader_free(r);

    /* records of different shapes cannot share a batch */
    REQUIRE_OK(nb_reader_batch(&r, counter_reader(10, 3, -1), 4, false));
    CHECK_ERR(nb_reader_next(r, rec, &end), NB_ERR_SHAPE,
              "field 0 of record 3 of the batch is int64 [2], but the batch's first record has int64 [1]");
    CHECK(rec[0] == NULL);
    nb_reader_free(r);

    static const nb_reader_ops half = {.name = "half", .next = counter_next, .reset = counter_reset, .size = ten};
    CHECK_ERR(nb_reader_new(&r, 1, &half, NULL), NB_ERR_ARG, "reader half: give both size and gather");
    CHECK_ERR(nb_reader_new(&r, 0, &counter_ops, NULL), NB_ERR_ARG, "0 fields");
}

static void epoch_order(uint64_t seed, uint64_t epoch, bool sequential, int64_t *ys)
{
    nb_reader *r = NULL;
    if (nb_reader_shuffle(&r, sequential ? sequential_source(N) : numbered_source(N), seed)) exit(2);
    CHECK_OK(nb_reader_reset(r, epoch));
    CHECK(drain(r, ys, N, NULL) == N);
    nb_reader_free(r);
}

/* Every record once per epoch; the same order for the same (seed, epoch),
 * another for another epoch or seed; by index and through the buffer. */
static void test_shuffle(void)
{
    int64_t a[N], b[N], c[N], d[N], e[N];
    nb_reader *r = NULL;
    REQUIRE_OK(nb_reader_shuffle(&r, numbered_source(N), 5));
    CHECK(drain(r, a, N, NULL) == N); /* a new reader stands at epoch 0 */
    CHECK(is_permutation(a, N));
    CHECK_OK(nb_reader_reset(r, 1));
    CHECK(drain(r, b, N, NULL) == N);
    CHECK(is_permutation(b, N));
    CHECK(memcmp(a, b, sizeof a)); /* each epoch its own order */
    CHECK_OK(nb_reader_reset(r, 0));
    CHECK(drain(r, c, N, NULL) == N);
    CHECK(!memcmp(a, c, sizeof a)); /* replayed */
    nb_reader_free(r);

    epoch_order(5, 1, false, c);
    CHECK(!memcmp(b, c, sizeof b)); /* reproducible from a new reader */
    epoch_order(6, 1, false, d);
    CHECK(memcmp(b, d, sizeof b)); /* another seed, another order */
    epoch_order(5, 1, true, e);
    CHECK(!memcmp(b, e, sizeof b)); /* the buffered path draws the same order */
    CHECK(is_permutation(e, N));
    int64_t in_order = 0;
    for (int i = 0; i < N; i++) in_order += a[i] == i;
    CHECK(in_order < N / 4);
}

static void test_shuffle_buffered_reset_and_skip(void)
{
    int64_t a[N], b[N];
    nb_reader *r = NULL;
    REQUIRE_OK(nb_reader_shuffle(&r, sequential_source(N), 9));
    CHECK_OK(nb_reader_reset(r, 3));
    CHECK(drain(r, a, N, NULL) == N);
    CHECK_OK(nb_reader_reset(r, 3));
    CHECK(drain(r, b, N, NULL) == N && !memcmp(a, b, sizeof a));
    CHECK_OK(nb_reader_reset(r, 3));
    read_some(r, 5); /* a reset mid-epoch releases the records still held */
    CHECK_OK(nb_reader_reset(r, 3));
    CHECK_OK(nb_reader_skip(r, 40));
    CHECK(drain(r, b, N, NULL) == N - 40);
    CHECK(!memcmp(a + 40, b, (N - 40) * sizeof *a));
    CHECK_OK(nb_reader_reset(r, 3));
    nb_tensor *rec[2];
    bool end;
    CHECK_OK(nb_reader_next(r, rec, &end)); /* one taken, the rest freed by free */
    release_all(rec[0], rec[1], NULL);
    nb_reader_free(r);
    /* an inner error while reading the epoch in */
    REQUIRE_OK(nb_reader_shuffle(&r, counter_reader(10, -1, 6), 1));
    CHECK_ERR(nb_reader_next(r, rec, &end), NB_ERR_IO,
              "reader shuffle: reading record 6 of the epoch: counter: record 6 is unreadable");
    nb_reader_free(r);
}

/* Batching a shuffle gathers rows through the permutation: the batches
 * concatenate to the unbatched shuffled sequence. */
static void test_shuffle_then_batch(void)
{
    int64_t a[N], b[N];
    epoch_order(11, 2, false, a);
    nb_reader *r = NULL;
    REQUIRE_OK(nb_reader_shuffle(&r, numbered_source(N), 11));
    REQUIRE_OK(nb_reader_batch(&r, r, 32, false));
    CHECK_OK(nb_reader_reset(r, 2));
    int batches;
    CHECK(drain(r, b, N, &batches) == N && batches == 4);
    CHECK(!memcmp(a, b, sizeof a));
    CHECK_OK(nb_reader_reset(r, 2));
    CHECK_OK(nb_reader_skip(r, 2)); /* two batches: 64 records */
    CHECK(drain(r, b, N, &batches) == N - 64 && batches == 2);
    CHECK(!memcmp(a + 64, b, (N - 64) * sizeof *a));
    nb_reader_free(r);
    REQUIRE_OK(nb_reader_shuffle(&r, numbered_source(N), 11));
    REQUIRE_OK(nb_reader_batch(&r, r, 32, true));
    CHECK_OK(nb_reader_reset(r, 2));
    CHECK(drain(r, b, N, &batches) == 96 && batches == 3);
    nb_reader_free(r);
}

/* Doubles field 0 into a new tensor; fails at the record whose y is *ctx. */
static nb_status double_x(void *ctx, int n_fields, nb_tensor **rec)
{
    int64_t fail_y = ctx ? *(int64_t *)ctx : -1;
    int64_t rows = rec[1]->ndim ? rec[1]->shape[0] : 1;
    for (int64_t i = 0; i < rows; i++)
        if ((int64_t)nb_tensor_get(rec[1], i) == fail_y)
            return nb_error(NB_ERR_DTYPE, "double_x: refusing y = %lld", (long long)fail_y);
    nb_tensor *t;
    nb_status st = nb_tensor_clone(&t, rec[0]);
    if (st) return st;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, 2 * nb_tensor_get(t, i));
    nb_tensor_release(rec[0]);
    rec[0] = t;
    return NB_OK;
}

static void test_map(void)
{
    nb_reader *r = NULL;
    int64_t fail = 2;
    REQUIRE_OK(nb_reader_map(&r, numbered_source(4), double_x, &fail));
    nb_tensor *rec[2];
    bool end;
    for (int i = 0; i < 2; i++) {
        CHECK_OK(nb_reader_next(r, rec, &end));
        CHECK_TENSOR(rec[0], S(2), 0, 2 * i, 2000 + 2 * i);
        release_all(rec[0], rec[1], NULL);
    }
    CHECK_ERR(nb_reader_next(r, rec, &end), NB_ERR_DTYPE, "reader map: double_x: refusing y = 2");
    CHECK(rec[0] == NULL && rec[1] == NULL);
    CHECK_OK(nb_reader_next(r, rec, &end)); /* the failed record is consumed */
    CHECK(rec[1] && nb_tensor_get(rec[1], 0) == 3);
    release_all(rec[0], rec[1], NULL);
    CHECK_OK(nb_reader_reset(r, 0));
    CHECK_OK(nb_reader_skip(r, 3)); /* fn is not called for skipped records */
    CHECK_OK(nb_reader_next(r, rec, &end));
    CHECK_TENSOR(rec[0], S(2), 0, 6, 2006);
    release_all(rec[0], rec[1], NULL);
    nb_reader_free(r);
    CHECK_ERR(nb_reader_map(&r, numbered_source(4), NULL, NULL), NB_ERR_ARG, "fn is NULL");
}

/* shuffle -> batch(7) -> map(double_x) [-> prefetch(depth)] over N records. */
static nb_reader *pipeline(int depth, int64_t *fail)
{
    nb_reader *r = NULL;
    nb_status st = nb_reader_shuffle(&r, numbered_source(N), 77);
    if (!st) st = nb_reader_batch(&r, r, 7, false);
    if (!st) st = nb_reader_map(&r, r, double_x, fail);
    if (!st && depth) st = nb_reader_prefetch(&r, r, depth);
    if (st) {
        fprintf(stderr, "pipeline: %s\n", nb_last_error());
        exit(2);
    }
    return r;
}

/* The y values of an epoch through a pipeline, checking the doubled x. */
static int64_t drain_doubled(nb_reader *r, int64_t *ys, int64_t cap)
{
    nb_tensor *rec[2];
    bool end = false;
    int64_t n = 0;
    for (;;) {
        if (nb_reader_next(r, rec, &end)) return -1;
        if (end) return n;
        for (int64_t i = 0; i < rec[1]->shape[0] && n < cap; i++, n++) {
            ys[n] = (int64_t)nb_tensor_get(rec[1], i);
            CHECK(nb_tensor_get(rec[0], 2 * i) == 2.0 * (double)ys[n]);
        }
        release_all(rec[0], rec[1], NULL);
    }
}

static void test_prefetch_same_sequence(void)
{
    for (int depth = 1; depth <= 5; depth += 4) {
        nb_reader *plain = pipeline(0, NULL), *pre = pipeline(depth, NULL);
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            int64_t a[N], b[N];
            CHECK_OK(nb_reader_reset(plain, epoch));
            CHECK_OK(nb_reader_reset(pre, epoch));
            CHECK(drain_doubled(plain, a, N) == N);
            CHECK(drain_doubled(pre, b, N) == N);
            CHECK(!memcmp(a, b, sizeof a));
            CHECK(is_permutation(b, N));
            nb_tensor *rec[2];
            bool end;
            CHECK_OK(nb_reader_next(pre, rec, &end)); /* still the end */
            CHECK(end);
        }
        nb_reader_free(plain);
        nb_reader_free(pre);
    }
}

static void test_prefetch_reset_and_skip(void)
{
    int64_t a[N], b[N];
    nb_reader *plain = pipeline(0, NULL), *pre = pipeline(3, NULL);
    CHECK_OK(nb_reader_reset(plain, 4));
    CHECK(drain_doubled(plain, a, N) == N);
    /* reset in the middle of an epoch, while the queue is full */
    read_some(pre, 2);
    CHECK_OK(nb_reader_reset(pre, 1));
    read_some(pre, 1);
    sleep_ms(20); /* let the thread fill the queue */
    CHECK_OK(nb_reader_reset(pre, 4));
    CHECK(drain_doubled(pre, b, N) == N);
    CHECK(!memcmp(a, b, sizeof a));
    /* skip: fewer than queued, more than queued, past the end */
    int64_t skips[] = {1, 2, 9, 0};
    for (size_t k = 0; k < sizeof skips / sizeof *skips; k++) {
        CHECK_OK(nb_reader_reset(pre, 4));
        sleep_ms(10);
        CHECK_OK(nb_reader_skip(pre, skips[k]));
        int64_t n = drain_doubled(pre, b, N);
        CHECK(n == N - 7 * skips[k]);
        CHECK(!memcmp(a + 7 * skips[k], b, (size_t)n * sizeof *a));
    }
    CHECK_OK(nb_reader_reset(pre, 4));
    CHECK_OK(nb_reader_skip(pre, 1000));
    nb_tensor *rec[2];
    bool end;
    CHECK_OK(nb_reader_next(pre, rec, &end));
    CHECK(end);
    CHECK_OK(nb_reader_skip(pre, 1)); /* at the end already */
    /* skip after reading part of the epoch */
    CHECK_OK(nb_reader_reset(pre, 4));
    read_some(pre, 1);
    CHECK_OK(nb_reader_skip(pre, 2));
    CHECK(drain_doubled(pre, b, N) == N - 21);
    CHECK(!memcmp(a + 21, b, (N - 21) * sizeof *a));
    nb_reader_free(plain);
    nb_reader_free(pre);
}

/* An error inside the thread comes out of next in its place in the sequence,
 * with its text, and again until reset. */
static void test_prefetch_errors(void)
{
    int64_t order[N];
    nb_reader *plain = pipeline(0, NULL);
    CHECK(drain_doubled(plain, order, N) == N);
    nb_reader_free(plain);
    int64_t fail = order[7 * 5 + 3]; /* in the sixth batch */
    nb_reader *pre = pipeline(2, &fail);
    nb_tensor *rec[2];
    bool end;
    for (int b = 0; b < 5; b++) {
        CHECK_OK(nb_reader_next(pre, rec, &end));
        CHECK(!end);
        release_all(rec[0], rec[1], NULL);
    }
    char want[100];
    snprintf(want, sizeof want, "reader map: double_x: refusing y = %lld", (long long)fail);
    CHECK_ERR(nb_reader_next(pre, rec, &end), NB_ERR_DTYPE, want);
    CHECK(rec[0] == NULL && rec[1] == NULL);
    nb_clear_error();
    CHECK_ERR(nb_reader_next(pre, rec, &end), NB_ERR_DTYPE, want); /* sticky */
    CHECK_ERR(nb_reader_skip(pre, 1), NB_ERR_DTYPE, want);
    CHECK_OK(nb_reader_reset(pre, 0));
    CHECK_OK(nb_reader_skip(pre, 2));
    CHECK_OK(nb_reader_next(pre, rec, &end)); /* batch 2: fine again */
    release_all(rec[0], rec[1], NULL);
    sleep_ms(10);                     /* whether or not the thread has met the error yet, */
    CHECK_OK(nb_reader_skip(pre, 4)); /* skipping batches 3 to 6 passes over it */
    CHECK_OK(nb_reader_next(pre, rec, &end));
    CHECK(!end && rec[1] && nb_tensor_get(rec[1], 0) == order[7 * 7]);
    release_all(rec[0], rec[1], NULL);
    nb_reader_free(pre);

    /* an inner error before any record, and a custom reader's error */
    REQUIRE_OK(nb_reader_prefetch(&pre, counter_reader(10, -1, 0), 4));
    CHECK_ERR(nb_reader_next(pre, rec, &end), NB_ERR_IO, "counter: record 0 is unreadable");
    nb_reader_free(pre);
    CHECK_ERR(nb_reader_prefetch(&pre, numbered_source(3), 0), NB_ERR_ARG, "depth 0");
    CHECK(pre == NULL);
}

/* Free while the thread waits on a full queue, or is mid-epoch, or never
 * read: no hang, and (under the sanitizer) no leak. */
static void test_prefetch_free(void)
{
    nb_reader *pre = pipeline(2, NULL);
    sleep_ms(20);
    nb_reader_free(pre);
    pre = pipeline(1, NULL);
    nb_reader_free(pre);
    pre = pipeline(8, NULL);
    nb_tensor *rec[2];
    bool end;
    CHECK_OK(nb_reader_next(pre, rec, &end));
    release_all(rec[0], rec[1], NULL);
    nb_reader_free(pre);
    nb_reader_free(NULL);
}

int main(void)
{
    RUN(test_from_tensors);
    RUN(test_from_tensors_refuses);
    RUN(test_batch);
    RUN(test_custom_reader);
    RUN(test_shuffle);
    RUN(test_shuffle_buffered_reset_and_skip);
    RUN(test_shuffle_then_batch);
    RUN(test_map);
    RUN(test_prefetch_same_sequence);
    RUN(test_prefetch_reset_and_skip);
    RUN(test_prefetch_errors);
    RUN(test_prefetch_free);
    return test_report();
}
