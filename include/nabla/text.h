/* nabla/text.h: character-level text corpora, for language models.
 *
 *     char path[4096];
 *     nb_data_find_file(flag, "tinyshakespeare", "input.txt", path, sizeof path);
 *     nb_text text;
 *     nb_text_load(&text, path);                    // its bytes, vocabulary and ids
 *     int64_t cut = nb_text_split_point(&text, 0.1); // the last 10% for validation
 *     nb_reader *train;                             // [T, B] inputs and next-character targets
 *     nb_text_reader(&train, &text, 0, cut, 64, 32);
 *     ...
 *     nb_text_free(&text);
 *
 * Characters are bytes: the vocabulary is the sorted set of distinct bytes
 * of the file (65 for tiny shakespeare), so an ASCII file has one id per
 * character and a UTF-8 file one per byte of each character (a model learns
 * to emit the sequences; decoding its ids gives the bytes back). */
#ifndef NABLA_TEXT_H
#define NABLA_TEXT_H

#include "nabla/export.h"

#include <stdint.h>
#include "nabla/reader.h"
#include "nabla/tensor.h"

NB_BEGIN_DECLS

typedef struct nb_text {
    int64_t length;           /* bytes in the corpus */
    int vocab_size;           /* distinct bytes, 1..256 */
    unsigned char vocab[256]; /* vocab[id]: the byte of id, in ascending order */
    int id_of[256];           /* id_of[byte]: its id, or -1 for a byte the corpus lacks */
    nb_tensor *ids;           /* uint8 [length]: the corpus, each byte replaced by its id */
} nb_text;

/* Reads the whole file at `path` and builds *out (on failure *out is
 * empty and needs no free). NB_ERR_NOT_FOUND for a missing file and NB_ERR_IO
 * for one that cannot be read, naming it and the reason;
 * NB_ERR_FORMAT for an empty file. */
NB_API nb_status nb_text_load(nb_text *out, const char *path);
/* The same from bytes in memory. */
NB_API nb_status nb_text_from_bytes(nb_text *out, const void *bytes, int64_t n);
NB_API void nb_text_free(nb_text *t); /* releases t->ids and empties *t; an empty one is fine */

/* ids[i] = the id of s[i] for i < n; NB_ERR_ARG naming the first byte the
 * vocabulary lacks (and its position). */
NB_API nb_status nb_text_encode(const nb_text *t, const char *s, int64_t n, int64_t *ids);
/* out[i] = the byte of ids[i]; NB_ERR_ARG for an id outside the vocabulary. */
NB_API nb_status nb_text_decode(const nb_text *t, const int64_t *ids, int64_t n, char *out);

/* Where validation data begins when the last val_fraction (in [0, 1)) of
 * the corpus is kept for it: length - floor(length * val_fraction). Ids
 * [0, cut) are then the training part and [cut, length) the validation
 * part. */
NB_API int64_t nb_text_split_point(const nb_text *t, double val_fraction);

/* How many batches nb_text_reader gives per epoch over `span` ids:
 * (span / batch - 1) / seq_len, 0 if the span is too short for one. */
NB_API int64_t nb_text_batches(int64_t span, int seq_len, int batch);

/* Batches for truncated backpropagation through time over ids [begin, end)
 * of t. The span is cut into `batch` contiguous streams of L = (end -
 * begin) / batch ids each (what is left over at the end is not used), and
 * batch k of an epoch holds, for stream j and step s < seq_len,
 *
 *     inputs[s][j]  = stream_j[k * seq_len + s]
 *     targets[s][j] = stream_j[k * seq_len + s + 1]
 *
 * both int64 [seq_len, batch], time-major as the recurrent layers take
 * them. So batch k + 1 continues every stream where batch k stopped, and a
 * model may carry its state from one batch to the next. An epoch has
 * nb_text_batches(end - begin, seq_len, batch) batches, the same in every
 * epoch; NB_ERR_ARG when that is 0 (a span too short) or the bounds are
 * bad. The reader keeps a reference to t->ids, not to t. It has random
 * access, so nb_reader_shuffle can reorder the batches (which breaks the
 * continuity between them). */
NB_API nb_status nb_text_reader(nb_reader **out, const nb_text *t, int64_t begin, int64_t end, int seq_len, int batch);

NB_END_DECLS

#endif
