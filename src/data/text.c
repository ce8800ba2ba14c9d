/* Character-level corpora: a file's bytes, their sorted vocabulary, the
 * corpus as ids, and a reader of [T, B] batches for truncated BPTT (see
 * nabla/text.h). */
#include <errno.h>
#include "nabla/device.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "nabla/text.h"
#include "../core/input_file.h"
#include "reader_internal.h"

nb_status nb_text_from_bytes(nb_text *out, const void *bytes, int64_t n)
{
    if (!out) return nb_error(NB_ERR_ARG, "text: NULL output");
    memset(out, 0, sizeof *out);
    if (n < 1 || !bytes) return nb_error(NB_ERR_FORMAT, "text: the corpus is empty");
    const unsigned char *s = bytes;
    bool seen[256] = {false};
    for (int64_t i = 0; i < n; i++) seen[s[i]] = true;
    for (int c = 0; c < 256; c++) {
        out->id_of[c] = seen[c] ? out->vocab_size : -1;
        if (seen[c]) out->vocab[out->vocab_size++] = (unsigned char)c;
    }
    nb_status st = nb_tensor_new(&out->ids, NB_U8, 1, &n);
    if (st) {
        memset(out, 0, sizeof *out);
        return st;
    }
    unsigned char *ids = nb_tensor_data(out->ids);
    for (int64_t i = 0; i < n; i++) ids[i] = (unsigned char)out->id_of[s[i]];
    out->length = n;
    return NB_OK;
}

nb_status nb_text_load(nb_text *out, const char *path)
{
    if (!out) return nb_error(NB_ERR_ARG, "text: NULL output");
    memset(out, 0, sizeof *out);
    FILE *f;
    uint64_t size;
    nb_status st = nb_input_file_open("text", path, &f, &size);
    if (st) return st;
    /* The size is only a first guess: read until the end, so a file that
     * grows or shrinks meanwhile is read as it is. */
    size_t cap = size > 0 && size < SIZE_MAX ? (size_t)size + 1 : 4096, len = 0;
    char *buf = nb_malloc(cap);
    st = buf ? NB_OK : nb_error(NB_ERR_NOMEM, "text: %s: out of memory for %zu bytes", path, cap);
    while (!st) {
        if (len == cap) {
            char *bigger = nb_realloc(buf, cap * 2);
            if (!bigger) {
                st = nb_error(NB_ERR_NOMEM, "text: %s: out of memory for %zu bytes", path, cap * 2);
                break;
            }
            buf = bigger, cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) st = nb_error(NB_ERR_IO, "text: %s: read error: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!st && len == 0) st = nb_error(NB_ERR_FORMAT, "text: %s is empty", path);
    if (!st) st = nb_text_from_bytes(out, buf, (int64_t)len);
    nb_free(buf);
    return st;
}

void nb_text_free(nb_text *t)
{
    if (!t) return;
    nb_tensor_release(t->ids);
    memset(t, 0, sizeof *t);
}

nb_status nb_text_encode(const nb_text *t, const char *s, int64_t n, int64_t *ids)
{
    if (!t || !t->ids || (n > 0 && (!s || !ids)) || n < 0) return nb_error(NB_ERR_ARG, "text encode: bad arguments");
    for (int64_t i = 0; i < n; i++) {
        int id = t->id_of[(unsigned char)s[i]];
        if (id < 0)
            return nb_error(NB_ERR_ARG, "text encode: byte %d ('%c') at position %lld is not in the vocabulary of %d",
                            (unsigned char)s[i], s[i] >= 32 && s[i] < 127 ? s[i] : '?', (long long)i, t->vocab_size);
        ids[i] = id;
    }
    return NB_OK;
}

nb_status nb_text_decode(const nb_text *t, const int64_t *ids, int64_t n, char *out)
{
    if (!t || !t->ids || (n > 0 && (!ids || !out)) || n < 0) return nb_error(NB_ERR_ARG, "text decode: bad arguments");
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return nb_error(NB_ERR_ARG, "text decode: id %lld at position %lld is outside the vocabulary of %d",
                            (long long)ids[i], (long long)i, t->vocab_size);
        out[i] = (char)t->vocab[ids[i]];
    }
    return NB_OK;
}

int64_t nb_text_split_point(const nb_text *t, double val_fraction)
{
    if (!t || !(val_fraction >= 0) || val_fraction >= 1) return t ? t->length : 0;
    return t->length - (int64_t)((double)t->length * val_fraction);
}

int64_t nb_text_batches(int64_t span, int seq_len, int batch)
{
    if (span < 1 || seq_len < 1 || batch < 1) return 0;
    int64_t stream = span / batch;
    return stream < 2 ? 0 : (stream - 1) / seq_len;
}

/* ---- the BPTT reader ------------------------------------------------------------------ */

typedef struct {
    nb_tensor *ids; /* uint8, the whole corpus */
    int64_t begin;  /* first id of the span */
    int64_t stream; /* ids per stream */
    int seq_len, batch;
    int64_t n, pos; /* batches per epoch, next batch */
} bptt_reader;

static void bptt_free(void *self)
{
    bptt_reader *r = self;
    nb_tensor_release(r->ids);
    nb_free(r);
}

/* Batch k of the epoch: its inputs into in and its targets into tg, both
 * [seq_len, batch] row-major. */
static void fill_batch(const bptt_reader *r, int64_t k, int64_t *in, int64_t *tg)
{
    const unsigned char *ids = nb_tensor_data(r->ids);
    for (int64_t s = 0; s < r->seq_len; s++)
        for (int64_t j = 0; j < r->batch; j++) {
            int64_t at = r->begin + j * r->stream + k * r->seq_len + s;
            in[s * r->batch + j] = ids[at];
            tg[s * r->batch + j] = ids[at + 1];
        }
}

/* Batches idx[0..n) as new tensors: inputs in fields[0] and targets in
 * fields[1], [n, seq_len, batch] when stacked, else [seq_len, batch] (n 1). */
static nb_status make_batches(bptt_reader *r, const int64_t *idx, int64_t n, bool stacked, nb_tensor **fields)
{
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= r->n)
            return nb_error(NB_ERR_ARG, "text reader: batch %lld asked for, an epoch has %lld", (long long)idx[i],
                            (long long)r->n);
    int64_t shape[3] = {n, r->seq_len, r->batch};
    fields[0] = fields[1] = NULL;
    nb_status st = nb_tensor_new(&fields[0], NB_I64, stacked ? 3 : 2, stacked ? shape : shape + 1);
    if (!st) st = nb_tensor_new(&fields[1], NB_I64, stacked ? 3 : 2, stacked ? shape : shape + 1);
    if (st) {
        nb_record_clear(2, fields);
        return st;
    }
    int64_t *in = nb_tensor_data(fields[0]), *tg = nb_tensor_data(fields[1]), per = (int64_t)r->seq_len * r->batch;
    for (int64_t i = 0; i < n; i++) fill_batch(r, idx[i], in + i * per, tg + i * per);
    return NB_OK;
}

static nb_status bptt_next(void *self, nb_tensor **record, bool *end)
{
    bptt_reader *r = self;
    if (r->pos >= r->n) {
        *end = true;
        return NB_OK;
    }
    nb_status st = make_batches(r, &r->pos, 1, false, record);
    if (!st) r->pos++;
    return st;
}

static nb_status bptt_reset(void *self, uint64_t epoch)
{
    ((bptt_reader *)self)->pos = 0;
    return NB_OK;
}

static nb_status bptt_skip(void *self, int64_t n)
{
    bptt_reader *r = self;
    r->pos = n > r->n - r->pos ? r->n : r->pos + n;
    return NB_OK;
}

static int64_t bptt_size(void *self) { return ((bptt_reader *)self)->n; }

static nb_status bptt_gather(void *self, const int64_t *idx, int64_t n, nb_tensor **fields)
{
    return make_batches(self, idx, n, true, fields);
}

static const nb_reader_ops bptt_ops = {
    .name = "text",
    .next = bptt_next,
    .reset = bptt_reset,
    .skip = bptt_skip,
    .free = bptt_free,
    .size = bptt_size,
    .gather = bptt_gather,
};

nb_status nb_text_reader(nb_reader **out, const nb_text *t, int64_t begin, int64_t end, int seq_len, int batch)
{
    if (!out) return nb_error(NB_ERR_ARG, "text reader: NULL output");
    *out = NULL;
    if (!t || !t->ids) return nb_error(NB_ERR_ARG, "text reader: no text (load one with nb_text_load)");
    if (begin < 0 || end > t->length || begin >= end)
        return nb_error(NB_ERR_ARG, "text reader: span [%lld, %lld) does not lie in the corpus of %lld ids",
                        (long long)begin, (long long)end, (long long)t->length);
    if (seq_len < 1 || batch < 1)
        return nb_error(NB_ERR_ARG, "text reader: sequence length %d and batch %d must both be at least 1", seq_len,
                        batch);
    int64_t n = nb_text_batches(end - begin, seq_len, batch);
    if (n < 1)
        return nb_error(NB_ERR_ARG,
                        "text reader: %lld ids cut into %d streams of %lld are too few for one batch of %d steps "
                        "(each stream needs %d ids: the inputs and one more for the last target)",
                        (long long)(end - begin), batch, (long long)((end - begin) / batch), seq_len, seq_len + 1);
    bptt_reader *r = nb_calloc(1, sizeof *r);
    if (!r) return nb_error(NB_ERR_NOMEM, "text reader: out of memory");
    *r = (bptt_reader){.ids = nb_tensor_retain(t->ids),
                       .begin = begin,
                       .stream = (end - begin) / batch,
                       .seq_len = seq_len,
                       .batch = batch,
                       .n = n};
    return nb_reader_new(out, 2, &bptt_ops, r);
}
