/* The shard reader (data-parallel training): for every number of ranks and
 * epoch size, over a random-access reader and over sequential ones, shuffled
 * below or not, the ranks' shards of each epoch are disjoint, hold the epoch
 * exactly once, and are rank, rank + size, ... of the unsharded order; the
 * k-th batches of all ranks are the k-th batch of the unsharded reader; skip
 * lands where reading would. Then the sharded MNIST reader over a small data
 * set written here. */
#include <stdlib.h>
#include "data/reader_internal.h"
#include "data_test_util.h"
#include "nabla/data.h"
#include "nabla/reader.h"
#include "test.h"

#define MAX_N 23   /* the largest epoch below */
#define MAX_SIZE 5 /* the most ranks below */
#define EPOCHS 3
#define SEED 99

static const int64_t epoch_sizes[] = {0, 1, 7, 10, 23};

/* ---- sequential readers -------------------------------------------------------
 *
 * A reader written with nb_reader_new, without size and gather, over
 * another; it counts the records asked of it, so that the tests can see
 * what the shard reads. One kind has skip (passed to the inner reader,
 * which reads nothing), the other not (nb_reader_skip then reads). */

typedef struct {
    nb_reader *inner;
    int64_t nexts;
} seq_reader;

static nb_status seq_next(void *self, nb_tensor **rec, bool *end)
{
    seq_reader *s = self;
    s->nexts++;
    return nb_reader_next(s->inner, rec, end);
}

static nb_status seq_reset(void *self, uint64_t epoch) { return nb_reader_reset(((seq_reader *)self)->inner, epoch); }

static nb_status seq_skip(void *self, int64_t n) { return nb_reader_skip(((seq_reader *)self)->inner, n); }

static void seq_free(void *self)
{
    nb_reader_free(((seq_reader *)self)->inner);
    free(self);
}

static const nb_reader_ops seq_skipping_ops = {
    .name = "seq", .next = seq_next, .reset = seq_reset, .skip = seq_skip, .free = seq_free};
static const nb_reader_ops seq_reading_ops = {.name = "seq", .next = seq_next, .reset = seq_reset, .free = seq_free};

static nb_reader *sequential(nb_reader *inner, const nb_reader_ops *ops, seq_reader **view)
{
    seq_reader *s = calloc(1, sizeof *s);
    if (!s) exit(2);
    s->inner = inner;
    nb_reader *r = NULL;
    if (nb_reader_new(&r, 2, ops, s)) exit(2);
    if (view) *view = s;
    return r;
}

/* What the shard sits on. */
enum {
    INDEXED,  /* from_tensors [-> shuffle]: random access */
    SEQ_SKIP, /* from_tensors [-> shuffle] -> seq with skip: the shard reads only its records */
    SEQ_READ, /* from_tensors -> seq without skip [-> shuffle, which then holds the epoch] */
    N_KINDS
};
static const char *kind_names[] = {"random access", "sequential with skip", "sequential without skip"};

/* The reader under the shard; *view, when asked for, is the seq reader
 * right under it (SEQ_SKIP only, else NULL). */
static nb_reader *chain(int kind, bool shuffled, int64_t n, seq_reader **view)
{
    nb_reader *r = numbered_source(n);
    if (view) *view = NULL;
    if (kind == SEQ_READ) r = sequential(r, &seq_reading_ops, NULL);
    if (shuffled && nb_reader_shuffle(&r, r, SEED)) exit(2);
    if (kind == SEQ_SKIP) r = sequential(r, &seq_skipping_ops, view);
    return r;
}

static nb_reader *shard(nb_reader *inner, int rank, int size)
{
    nb_reader *r = NULL;
    if (nb_reader_shard(&r, inner, rank, size)) {
        fprintf(stderr, "shard: %s\n", nb_last_error());
        exit(2);
    }
    return r;
}

static nb_reader *batched(nb_reader *inner, int b)
{
    nb_reader *r = NULL;
    if (nb_reader_batch(&r, inner, b, false)) exit(2);
    return r;
}

/* The y values of the rest of the epoch (rows of batches in turn), checking
 * that each x row goes with its y; batch_of[i], when given, receives the
 * number of the record or batch that row i came in. Returns how many rows,
 * or -1 on an error. */
static int64_t drain(nb_reader *r, int64_t *ys, int *batch_of)
{
    nb_tensor *rec[2];
    bool end = false;
    int64_t n = 0;
    for (int k = 0;; k++) {
        if (nb_reader_next(r, rec, &end)) {
            fprintf(stderr, "  drain: %s\n", nb_last_error());
            return -1;
        }
        if (end) return n;
        int64_t rows = rec[1]->ndim ? rec[1]->shape[0] : 1;
        for (int64_t i = 0; i < rows; i++, n++) {
            if (n >= MAX_N) {
                CHECK(!"more records than the epoch has");
                release_all(rec[0], rec[1], NULL);
                return -1;
            }
            ys[n] = (int64_t)nb_tensor_get(rec[1], i);
            if (batch_of) batch_of[n] = k;
            CHECK(nb_tensor_get(rec[0], 2 * i) == (double)ys[n]);
            CHECK(nb_tensor_get(rec[0], 2 * i + 1) == 1000.0 + (double)ys[n]);
        }
        release_all(rec[0], rec[1], NULL);
    }
}

/* The next record's y, or -1 at the end. */
static int64_t next_y(nb_reader *r)
{
    nb_tensor *rec[2];
    bool end;
    CHECK_OK(nb_reader_next(r, rec, &end));
    if (end || !rec[1]) return -1;
    int64_t y = (int64_t)nb_tensor_get(rec[1], 0);
    release_all(rec[0], rec[1], NULL);
    return y;
}

/* The unsharded order of an epoch, from a new reader. */
static int64_t epoch_order(int kind, bool shuffled, int64_t n, uint64_t epoch, int64_t *ys)
{
    nb_reader *r = chain(kind, shuffled, n, NULL);
    CHECK_OK(nb_reader_reset(r, epoch));
    int64_t got = drain(r, ys, NULL);
    nb_reader_free(r);
    return got;
}

/* floor(n / size), plus one for the first n % size ranks. */
static int64_t share(int64_t n, int rank, int size) { return n / size + (rank < n % size); }

/* One configuration, every rank, a few epochs: the shards are ref[rank::size],
 * so disjoint and, together, the epoch exactly once. A new reader stands at
 * epoch 0; later epochs come from reset. */
static void check_shards(int kind, bool shuffled, int64_t n, int size)
{
    nb_reader *r[MAX_SIZE];
    seq_reader *view[MAX_SIZE];
    for (int rank = 0; rank < size; rank++) {
        r[rank] = shard(chain(kind, shuffled, n, &view[rank]), rank, size);
        CHECK(nb_reader_indexable(r[rank]) == (kind == INDEXED));
    }
    for (uint64_t epoch = 0; epoch < EPOCHS; epoch++) {
        int64_t ref[MAX_N], ys[MAX_N];
        int seen[MAX_N] = {0};
        CHECK(epoch_order(kind, shuffled, n, epoch, ref) == n);
        for (int rank = 0; rank < size; rank++) {
            if (epoch > 0) CHECK_OK(nb_reader_reset(r[rank], epoch));
            int64_t nexts0 = view[rank] ? view[rank]->nexts : 0;
            int64_t got = drain(r[rank], ys, NULL);
            if (got != share(n, rank, size))
                fprintf(stderr, "  %s%s, n %lld, epoch %llu: rank %d of %d has %lld records\n", kind_names[kind],
                        shuffled ? ", shuffled" : "", (long long)n, (unsigned long long)epoch, rank, size,
                        (long long)got);
            CHECK(got == share(n, rank, size));
            for (int64_t j = 0; j < got; j++) {
                CHECK(ys[j] == ref[rank + j * size]);
                if (ys[j] >= 0 && ys[j] < n) seen[ys[j]]++;
            }
            /* One record asked of the inner reader per record of the shard,
             * and one more for the end: the others were skipped. */
            if (view[rank]) CHECK(view[rank]->nexts - nexts0 == got + 1);
            CHECK(next_y(r[rank]) == -1); /* the end stays the end */
        }
        for (int64_t i = 0; i < n; i++) CHECK(seen[i] == 1);
    }
    for (int rank = 0; rank < size; rank++) nb_reader_free(r[rank]);
}

/* With b records a batch on every rank, the k-th batches of all ranks
 * together are the k-th batch of b * size of the unsharded reader. */
static void check_batches(int kind, bool shuffled, int64_t n, int size, int b)
{
    nb_reader *whole = batched(chain(kind, shuffled, n, NULL), b * size), *r[MAX_SIZE];
    for (int rank = 0; rank < size; rank++) r[rank] = batched(shard(chain(kind, shuffled, n, NULL), rank, size), b);
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        int64_t ys[MAX_N];
        int batch_of[MAX_N], tally[MAX_N][MAX_N] = {{0}}; /* [batch][y] */
        CHECK_OK(nb_reader_reset(whole, epoch));
        int64_t got = drain(whole, ys, batch_of);
        CHECK(got == n);
        for (int64_t i = 0; i < got; i++) tally[batch_of[i]][ys[i]]++;
        for (int rank = 0; rank < size; rank++) {
            CHECK_OK(nb_reader_reset(r[rank], epoch));
            got = drain(r[rank], ys, batch_of);
            CHECK(got == share(n, rank, size));
            for (int64_t i = 0; i < got; i++) tally[batch_of[i]][ys[i]]--;
        }
        for (int k = 0; k < MAX_N; k++)
            for (int y = 0; y < MAX_N; y++) CHECK(tally[k][y] == 0);
    }
    nb_reader_free(whole);
    for (int rank = 0; rank < size; rank++) nb_reader_free(r[rank]);
}

/* Skipping j records then reading gives the record that reading j + 1 would,
 * from the start of an epoch and after a record already read; skipping
 * reads nothing where the inner reader can skip. */
static void check_skip(int kind, bool shuffled, int64_t n, int size)
{
    for (int rank = 0; rank < size; rank++) {
        seq_reader *view;
        nb_reader *r = shard(chain(kind, shuffled, n, &view), rank, size);
        int64_t ys[MAX_N], count = share(n, rank, size);
        CHECK_OK(nb_reader_reset(r, 1));
        CHECK(drain(r, ys, NULL) == count);
        for (int64_t j = 0; j <= count + 1; j++) {
            CHECK_OK(nb_reader_reset(r, 1));
            int64_t nexts0 = view ? view->nexts : 0;
            CHECK_OK(nb_reader_skip(r, j));
            if (view) CHECK(view->nexts == nexts0);
            CHECK(next_y(r) == (j < count ? ys[j] : -1));
            CHECK_OK(nb_reader_reset(r, 1));
            if (count > 0) CHECK(next_y(r) == ys[0]);
            CHECK_OK(nb_reader_skip(r, j));
            CHECK(next_y(r) == (1 + j < count ? ys[1 + j] : -1));
        }
        CHECK_OK(nb_reader_reset(r, 1));
        CHECK_OK(nb_reader_skip(r, INT64_MAX)); /* no overflow on the way */
        CHECK(next_y(r) == -1);
        nb_reader_free(r);
    }
}

static void test_shards(void)
{
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int shuffled = 0; shuffled <= 1; shuffled++)
            for (size_t i = 0; i < sizeof epoch_sizes / sizeof *epoch_sizes; i++)
                for (int size = 1; size <= MAX_SIZE; size++) check_shards(kind, shuffled, epoch_sizes[i], size);
}

static void test_batches_across_ranks(void)
{
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int shuffled = 0; shuffled <= 1; shuffled++)
            for (size_t i = 0; i < sizeof epoch_sizes / sizeof *epoch_sizes; i++)
                for (int size = 1; size <= MAX_SIZE; size++)
                    for (int b = 1; b <= 3; b++) check_batches(kind, shuffled, epoch_sizes[i], size, b);
}

static void test_skip(void)
{
    for (int kind = 0; kind < N_KINDS; kind++)
        for (int shuffled = 0; shuffled <= 1; shuffled++)
            for (size_t i = 0; i < sizeof epoch_sizes / sizeof *epoch_sizes; i++)
                for (int size = 1; size <= MAX_SIZE; size++) check_skip(kind, shuffled, epoch_sizes[i], size);
}

/* Over a random-access reader the shard is random access: position i is
 * inner position rank + i*size, and a shuffle above it permutes its records. */
static void test_random_access(void)
{
    nb_reader *r = shard(numbered_source(10), 1, 3); /* 1, 4, 7 */
    CHECK(nb_reader_size(r) == 3);
    nb_tensor *f[2];
    CHECK_OK(nb_reader_gather(r, (int64_t[]){2, 0, 2}, 3, f));
    CHECK_TENSOR(f[1], S(3), 0, 7, 1, 7);
    CHECK_TENSOR(f[0], S(3, 2), 0, 7, 1007, 1, 1001, 7, 1007);
    release_all(f[0], f[1], NULL);
    CHECK_ERR(nb_reader_gather(r, (int64_t[]){3}, 1, f), NB_ERR_ARG, "reader shard: record 3 asked for, there are 3");
    CHECK_ERR(nb_reader_gather(r, (int64_t[]){-1}, 1, f), NB_ERR_ARG, "reader shard: record -1 asked for");
    CHECK(f[0] == NULL && f[1] == NULL);
    REQUIRE_OK(nb_reader_shuffle(&r, r, 3));
    CHECK(nb_reader_indexable(r));
    for (uint64_t epoch = 0; epoch < 4; epoch++) {
        int64_t ys[MAX_N];
        CHECK_OK(nb_reader_reset(r, epoch));
        CHECK(drain(r, ys, NULL) == 3);
        int sum = 0, prod = 1;
        for (int j = 0; j < 3; j++) sum += (int)ys[j], prod *= (int)ys[j];
        CHECK(sum == 12 && prod == 28);
    }
    nb_reader_free(r);
}

static void test_bad_arguments(void)
{
    nb_reader *r = NULL;
    /* the inner reader is freed in every case (the sanitizer build checks) */
    CHECK_ERR(nb_reader_shard(&r, numbered_source(3), 0, 0), NB_ERR_ARG,
              "reader shard: rank 0, size 0: size must be at least 1");
    CHECK_ERR(nb_reader_shard(&r, numbered_source(3), 0, -2), NB_ERR_ARG,
              "reader shard: rank 0, size -2: size must be at least 1");
    CHECK_ERR(nb_reader_shard(&r, numbered_source(3), 2, 2), NB_ERR_ARG,
              "reader shard: rank 2, size 2: rank must be in [0, size)");
    CHECK_ERR(nb_reader_shard(&r, numbered_source(3), -1, 4), NB_ERR_ARG,
              "reader shard: rank -1, size 4: rank must be in [0, size)");
    CHECK_ERR(nb_reader_shard(&r, NULL, 0, 1), NB_ERR_ARG, "reader shard: out or inner is NULL");
    CHECK(r == NULL);
    CHECK_ERR(nb_reader_shard(NULL, numbered_source(3), 0, 1), NB_ERR_ARG, "reader shard: out or inner is NULL");
}

/* ---- the sharded MNIST reader ---------------------------------------------------- */

#define MNIST_N 11

static char tmp[4096];

/* tmp/name */
static const char *at(const char *name)
{
    static char p[2][4200];
    static int i;
    i = !i;
    snprintf(p[i], sizeof p[i], "%s/%s", tmp, name);
    return p[i];
}

/* MNIST_N images of 2x3 pixels, pixel j of image i being 10*i + j, and
 * label i % 10: an image's number is its first pixel / 10. */
static void write_mnist(void)
{
    uint8_t px[MNIST_N * 6], labels[MNIST_N];
    for (int i = 0; i < MNIST_N * 6; i++) px[i] = (uint8_t)(10 * (i / 6) + i % 6);
    for (int i = 0; i < MNIST_N; i++) labels[i] = (uint8_t)(i % 10);
    write_idx(at("train-images-idx3-ubyte"), 0, 0x08, 3, (uint32_t[]){MNIST_N, 2, 3}, px, sizeof px, 0);
    write_idx(at("train-labels-idx1-ubyte.gz"), 1, 0x08, 1, (uint32_t[]){MNIST_N}, labels, sizeof labels, 0);
}

/* The image numbers of an epoch of an MNIST reader, and the batch of each;
 * checks each label against its image. Returns how many, -1 on an error. */
static int64_t mnist_epoch(nb_reader *r, uint64_t epoch, int64_t *ids, int *batch_of)
{
    nb_tensor *rec[2];
    bool end;
    int64_t n = 0;
    CHECK_OK(nb_reader_reset(r, epoch));
    for (int k = 0;; k++) {
        if (nb_reader_next(r, rec, &end)) return -1;
        if (end) return n;
        for (int64_t i = 0; i < rec[0]->shape[0] && n < MNIST_N; i++, n++) {
            ids[n] = lround(nb_tensor_get(rec[0], i * 6) * 255.0) / 10;
            batch_of[n] = k;
            CHECK(nb_tensor_get(rec[1], i) == (double)(ids[n] % 10));
        }
        release_all(rec[0], rec[1], NULL);
    }
}

static void test_mnist_reader_shard(void)
{
    write_mnist();
    unsigned flags = NB_MNIST_TRAIN | NB_MNIST_SHUFFLE;
    for (int size = 1; size <= 4; size++)
        for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
            const int b = 2;
            nb_reader *whole = NULL, *r[4] = {NULL};
            REQUIRE_OK(nb_mnist_reader(&whole, tmp, flags, b * size, 7, 0));
            for (int rank = 0; rank < size; rank++)
                CHECK_OK(nb_mnist_reader_shard(
                    &r[rank], tmp, flags, b, 7,
                    &(nb_mnist_shard_opts){.rank = rank, .size = size, .prefetch_depth = prefetch}));
            for (uint64_t epoch = 0; epoch < 3; epoch++) {
                int64_t ids[MNIST_N], whole_ids[MNIST_N];
                int batch_of[MNIST_N], tally[MNIST_N][MNIST_N] = {{0}}, seen[MNIST_N] = {0};
                CHECK(mnist_epoch(whole, epoch, whole_ids, batch_of) == MNIST_N);
                for (int i = 0; i < MNIST_N; i++) tally[batch_of[i]][whole_ids[i]]++;
                for (int rank = 0; rank < size && r[rank]; rank++) {
                    int64_t got = mnist_epoch(r[rank], epoch, ids, batch_of);
                    CHECK(got == share(MNIST_N, rank, size));
                    for (int64_t i = 0; i < got; i++) {
                        tally[batch_of[i]][ids[i]]--;
                        seen[ids[i]]++;
                        CHECK(ids[i] == whole_ids[rank + i * size]);
                    }
                }
                for (int k = 0; k < MNIST_N; k++) {
                    CHECK(seen[k] == 1);
                    for (int i = 0; i < MNIST_N; i++) CHECK(tally[k][i] == 0);
                }
            }
            nb_reader_free(whole);
            for (int rank = 0; rank < size; rank++) nb_reader_free(r[rank]);
        }
    /* refused before the files are looked for */
    nb_reader *r = NULL;
    CHECK_ERR(nb_mnist_reader_shard(&r, at("nowhere"), NB_MNIST_TRAIN, 2, 0,
                                    &(nb_mnist_shard_opts){.rank = 3, .size = 3, .prefetch_depth = 0}),
              NB_ERR_ARG, "mnist reader: rank 3, size 3: rank must be in [0, size)");
    CHECK_ERR(nb_mnist_reader_shard(&r, at("nowhere"), NB_MNIST_TRAIN, 2, 0,
                                    &(nb_mnist_shard_opts){.rank = 0, .size = 0, .prefetch_depth = 0}),
              NB_ERR_ARG, "mnist reader: rank 0, size 0: size must be at least 1");
    CHECK_ERR(nb_mnist_reader_shard(&r, at("nowhere"), NB_MNIST_TRAIN, 2, 0,
                                    &(nb_mnist_shard_opts){.rank = 1, .size = 2, .prefetch_depth = 0}),
              NB_ERR_NOT_FOUND, "has neither");
    CHECK(r == NULL);
}

int main(void)
{
    make_temp_dir(tmp, sizeof tmp);
    RUN(test_shards);
    RUN(test_batches_across_ranks);
    RUN(test_skip);
    RUN(test_random_access);
    RUN(test_bad_arguments);
    RUN(test_mnist_reader_shard);
    remove_tree(tmp);
    return test_report();
}
