/* The shard decorator: rank r of `size` keeps the records at positions
 * r, r + size, r + 2*size, ... of each epoch of its inner reader.
 *
 * Over a random-access inner reader it is random access itself: position i
 * of the shard is position r + i*size of the inner, so a batch reader above
 * it gathers a whole batch at once and a shuffle above it permutes indices.
 * Over any other reader it reads one record in `size` and skips the others,
 * which reads nothing where the inner reader can skip without reading. */
#include <stdint.h>
#include "nabla/device.h"
#include "reader_internal.h"

typedef struct {
    nb_reader *inner;
    int n_fields;
    int64_t rank, size;
    int64_t pos; /* random access: the shard's next position */
    int64_t gap; /* sequential: inner records to pass over before the shard's next one */
} shard_reader;

/* The records of an epoch of n that fall to this rank: ceil((n - rank) / size),
 * that is floor(n / size), plus one for the first n % size ranks. */
static int64_t share(const shard_reader *s, int64_t n) { return n > s->rank ? (n - s->rank - 1) / s->size + 1 : 0; }

/* ---- over a random-access reader ------------------------------------------ */

static int64_t index_size(void *self)
{
    shard_reader *s = self;
    return share(s, nb_reader_size(s->inner));
}

/* Gathers the shard's positions idx[0..n-1], or first..first+n-1 when idx
 * is NULL, through the inner positions they stand for. */
static nb_status gather_positions(shard_reader *s, const int64_t *idx, int64_t first, int64_t n, nb_tensor **fields)
{
    int64_t size = index_size(s);
    int64_t one, *mapped = n == 1 ? &one : nb_malloc((size_t)(n > 0 ? n : 1) * sizeof *mapped);
    if (!mapped) return nb_error(NB_ERR_NOMEM, "reader shard: out of memory");
    nb_status st = NB_OK;
    for (int64_t i = 0; i < n && !st; i++) {
        int64_t p = idx ? idx[i] : first + i;
        if (p < 0 || p >= size)
            st = nb_error(NB_ERR_ARG, "reader shard: record %lld asked for, there are %lld", (long long)p,
                          (long long)size);
        else mapped[i] = s->rank + p * s->size; /* below the inner's size, since p < share */
    }
    if (!st) st = nb_reader_gather(s->inner, mapped, n, fields);
    if (mapped != &one) nb_free(mapped);
    return st;
}

static nb_status index_gather(void *self, const int64_t *idx, int64_t n, nb_tensor **fields)
{
    return gather_positions(self, idx, 0, n, fields);
}

static nb_status index_next(void *self, nb_tensor **record, bool *end)
{
    shard_reader *s = self;
    if (s->pos >= index_size(s)) {
        *end = true;
        return NB_OK;
    }
    nb_status st = gather_positions(s, NULL, s->pos, 1, record);
    if (st) return st;
    s->pos++;
    return nb_record_unstack1(s->n_fields, record);
}

static nb_status index_next_many(void *self, int64_t max, nb_tensor **fields, int64_t *got)
{
    shard_reader *s = self;
    int64_t left = index_size(s) - s->pos, n = left < max ? left : max;
    if (n <= 0) return NB_OK;
    nb_status st = gather_positions(s, NULL, s->pos, n, fields);
    if (st) return st;
    s->pos += n;
    *got = n;
    return NB_OK;
}

static nb_status index_skip(void *self, int64_t n)
{
    shard_reader *s = self;
    int64_t size = index_size(s);
    s->pos = n > size - s->pos ? size : s->pos + n;
    return NB_OK;
}

static nb_status index_reset(void *self, uint64_t epoch)
{
    shard_reader *s = self;
    s->pos = 0;
    return nb_reader_reset(s->inner, epoch);
}

/* ---- over any reader ------------------------------------------------------------ */

static nb_status seq_next(void *self, nb_tensor **record, bool *end)
{
    shard_reader *s = self;
    nb_status st = nb_reader_skip(s->inner, s->gap);
    if (st) return st;
    /* The size - 1 records after this one are passed over by the next call,
     * not now: after the shard's last record they need not be read at all. */
    s->gap = s->size - 1;
    return nb_reader_next(s->inner, record, end);
}

static nb_status seq_skip(void *self, int64_t n)
{
    shard_reader *s = self;
    /* The shard's next record is gap records ahead, the one after it gap + size,
     * ...: passing over n of them is one skip of the inner (clamped: past the
     * end is the end). */
    int64_t pass = n > (INT64_MAX - s->gap) / s->size ? INT64_MAX : s->gap + n * s->size;
    s->gap = 0;
    return nb_reader_skip(s->inner, pass);
}

static nb_status seq_reset(void *self, uint64_t epoch)
{
    shard_reader *s = self;
    s->gap = s->rank;
    return nb_reader_reset(s->inner, epoch);
}

/* ---- both ------------------------------------------------------------------------ */

static void shard_free(void *self)
{
    shard_reader *s = self;
    nb_reader_free(s->inner);
    nb_free(s);
}

static const nb_reader_ops index_ops = NB_INDEX_READER_OPS("shard", shard_free);

static const nb_reader_ops seq_ops = {
    .name = "shard",
    .next = seq_next,
    .reset = seq_reset,
    .skip = seq_skip,
    .free = shard_free,
};

nb_status nb_reader_shard(nb_reader **out, nb_reader *inner, int rank, int size)
{
    nb_status st = NB_OK;
    if (out) *out = NULL;
    if (!out || !inner) st = nb_error(NB_ERR_ARG, "reader shard: out or inner is NULL");
    else if (size < 1) st = nb_error(NB_ERR_ARG, "reader shard: rank %d, size %d: size must be at least 1", rank, size);
    else if (rank < 0 || rank >= size)
        st = nb_error(NB_ERR_ARG, "reader shard: rank %d, size %d: rank must be in [0, size)", rank, size);
    shard_reader *s = st ? NULL : nb_calloc(1, sizeof *s);
    if (!st && !s) st = nb_error(NB_ERR_NOMEM, "reader shard: out of memory");
    if (st) {
        nb_reader_free(inner);
        return st;
    }
    s->inner = inner;
    s->n_fields = nb_reader_fields(inner);
    s->rank = rank;
    s->size = size;
    s->gap = rank; /* a new reader stands at the start of epoch 0 */
    return nb_reader_new(out, s->n_fields, nb_reader_indexable(inner) ? &index_ops : &seq_ops, s);
}
