/* The shuffle decorator: a full permutation of each epoch's records.
 *
 * Over a random-access inner reader it only permutes indices and gathers
 * rows through them (and is itself random access, so a batch reader above it
 * gathers a whole batch at once). Over any other reader it must hold the
 * whole epoch: it reads every record first and hands them out in order. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/rng.h"
#include "reader_internal.h"

typedef struct {
    nb_reader *inner;
    int n_fields;
    uint64_t seed, epoch;
    int64_t *perm; /* perm[i]: the inner position of record i of the epoch */
    int64_t n, cap, pos;
    /* buffered mode only: the epoch's records, n_fields per record */
    nb_tensor **buf;
    bool loaded;
} shuffle_reader;

/* Epoch e's permutation comes from a stream keyed by a hash of (seed, e), so
 * it can be computed for any epoch without replaying earlier ones. */
static void draw_permutation(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch)
{
    nb_rng r;
    nb_rng_seed(&r, seed);
    r.counter = epoch;
    nb_rng_seed(&r, nb_rng_u64(&r));
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        /* Modulo bias is below n / 2^64: far under anything measurable. */
        int64_t j = (int64_t)(nb_rng_u64(&r) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static nb_status ensure_perm(shuffle_reader *s, int64_t n)
{
    if (n > s->cap) {
        if ((uint64_t)n > SIZE_MAX / sizeof *s->perm)
            return nb_error(NB_ERR_NOMEM, "reader shuffle: %lld records are too many", (long long)n);
        int64_t *p = nb_realloc(s->perm, (size_t)n * sizeof *p);
        if (!p) return nb_error(NB_ERR_NOMEM, "reader shuffle: out of memory for %lld records", (long long)n);
        s->perm = p;
        s->cap = n;
    }
    s->n = n;
    return NB_OK;
}

/* ---- over a random-access reader ------------------------------------------ */

static nb_status index_reset(void *self, uint64_t epoch)
{
    shuffle_reader *s = self;
    nb_status st = nb_reader_reset(s->inner, epoch);
    if (st) return st;
    s->epoch = epoch;
    s->pos = 0;
    int64_t n = nb_reader_size(s->inner);
    if (n < 0) return nb_error(NB_ERR_STATE, "reader shuffle: inner reader reports %lld records", (long long)n);
    st = ensure_perm(s, n);
    if (st) return st;
    draw_permutation(s->perm, n, s->seed, epoch);
    return NB_OK;
}

static nb_status index_next(void *self, nb_tensor **record, bool *end)
{
    shuffle_reader *s = self;
    if (s->pos >= s->n) {
        *end = true;
        return NB_OK;
    }
    nb_status st = nb_reader_gather(s->inner, &s->perm[s->pos], 1, record);
    if (st) return st;
    s->pos++;
    return nb_record_unstack1(s->n_fields, record);
}

static nb_status index_next_many(void *self, int64_t max, nb_tensor **fields, int64_t *got)
{
    shuffle_reader *s = self;
    int64_t n = s->n - s->pos < max ? s->n - s->pos : max;
    if (n <= 0) return NB_OK;
    nb_status st = nb_reader_gather(s->inner, &s->perm[s->pos], n, fields);
    if (st) return st;
    s->pos += n;
    *got = n;
    return NB_OK;
}

static nb_status index_skip(void *self, int64_t n)
{
    shuffle_reader *s = self;
    s->pos = n > s->n - s->pos ? s->n : s->pos + n;
    return NB_OK;
}

static int64_t index_size(void *self) { return ((shuffle_reader *)self)->n; }

static nb_status index_gather(void *self, const int64_t *idx, int64_t n, nb_tensor **fields)
{
    shuffle_reader *s = self;
    int64_t one, *mapped = n == 1 ? &one : nb_malloc((size_t)(n > 0 ? n : 1) * sizeof *mapped);
    if (!mapped) return nb_error(NB_ERR_NOMEM, "reader shuffle: out of memory");
    nb_status st = NB_OK;
    for (int64_t i = 0; i < n && !st; i++) {
        if (idx[i] < 0 || idx[i] >= s->n)
            st = nb_error(NB_ERR_ARG, "reader shuffle: record %lld asked for, there are %lld", (long long)idx[i],
                          (long long)s->n);
        else mapped[i] = s->perm[idx[i]];
    }
    if (!st) st = nb_reader_gather(s->inner, mapped, n, fields);
    if (mapped != &one) nb_free(mapped);
    return st;
}

/* ---- over any reader: the epoch in memory --------------------------------------- */

static void drop_buffer(shuffle_reader *s)
{
    if (s->buf)
        for (int64_t i = 0; i < s->n * s->n_fields; i++) nb_tensor_release(s->buf[i]);
    nb_free(s->buf);
    s->buf = NULL;
    s->n = 0;
    s->pos = 0;
    s->loaded = false;
}

static nb_status load_epoch(shuffle_reader *s)
{
    int64_t cap = 0;
    s->n = 0;
    for (;;) {
        if (s->n == cap) {
            cap = cap ? 2 * cap : 256;
            nb_tensor **b = nb_realloc(s->buf, (size_t)(cap * s->n_fields) * sizeof *b);
            if (!b)
                return nb_error(NB_ERR_NOMEM, "reader shuffle: out of memory holding %lld records", (long long)s->n);
            s->buf = b;
        }
        bool end;
        nb_status st = nb_reader_next(s->inner, &s->buf[s->n * s->n_fields], &end);
        if (st) return nb_error_context(st, "reader shuffle: reading record %lld of the epoch", (long long)s->n);
        if (end) break;
        s->n++;
    }
    nb_status st = ensure_perm(s, s->n);
    if (st) return st;
    draw_permutation(s->perm, s->n, s->seed, s->epoch);
    s->loaded = true;
    return NB_OK;
}

static nb_status buffer_next(void *self, nb_tensor **record, bool *end)
{
    shuffle_reader *s = self;
    if (!s->loaded) {
        nb_status st = load_epoch(s);
        if (st) {
            drop_buffer(s);
            return st;
        }
    }
    if (s->pos >= s->n) {
        *end = true;
        return NB_OK;
    }
    nb_tensor **src = &s->buf[s->perm[s->pos++] * s->n_fields];
    for (int k = 0; k < s->n_fields; k++) {
        record[k] = src[k];
        src[k] = NULL;
    }
    return NB_OK;
}

static nb_status buffer_skip(void *self, int64_t n)
{
    shuffle_reader *s = self;
    nb_tensor *rec[NB_READER_MAX_FIELDS];
    for (int64_t i = 0; i < n; i++) {
        bool end = false;
        nb_status st = buffer_next(s, rec, &end);
        if (st || end) return st;
        nb_record_clear(s->n_fields, rec);
    }
    return NB_OK;
}

static nb_status buffer_reset(void *self, uint64_t epoch)
{
    shuffle_reader *s = self;
    drop_buffer(s);
    s->epoch = epoch;
    return nb_reader_reset(s->inner, epoch);
}

/* ---- both ------------------------------------------------------------------------ */

static void shuffle_free(void *self)
{
    shuffle_reader *s = self;
    drop_buffer(s);
    nb_reader_free(s->inner);
    nb_free(s->perm);
    nb_free(s);
}

static const nb_reader_ops index_ops = NB_INDEX_READER_OPS("shuffle", shuffle_free);

static const nb_reader_ops buffer_ops = {
    .name = "shuffle",
    .next = buffer_next,
    .reset = buffer_reset,
    .skip = buffer_skip,
    .free = shuffle_free,
};

nb_status nb_reader_shuffle(nb_reader **out, nb_reader *inner, uint64_t seed)
{
    if (!out || !inner) {
        nb_reader_free(inner);
        if (out) *out = NULL;
        return nb_error(NB_ERR_ARG, "reader shuffle: out or inner is NULL");
    }
    *out = NULL;
    shuffle_reader *s = nb_calloc(1, sizeof *s);
    if (!s) {
        nb_reader_free(inner);
        return nb_error(NB_ERR_NOMEM, "reader shuffle: out of memory");
    }
    s->inner = inner;
    s->n_fields = nb_reader_fields(inner);
    s->seed = seed;
    bool indexable = nb_reader_indexable(inner);
    /* A new reader stands at the start of epoch 0: draw its order now. */
    nb_status st = indexable ? index_reset(s, 0) : NB_OK;
    if (st) {
        shuffle_free(s);
        return st;
    }
    return nb_reader_new(out, s->n_fields, indexable ? &index_ops : &buffer_ops, s);
}
