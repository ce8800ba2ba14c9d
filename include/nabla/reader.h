/* nabla/reader.h: readers, composed as in PaddlePaddle.
 *
 * A reader yields records, one at a time, until the end of an epoch. A record
 * is an array of n_fields tensors (for MNIST: an image and its label). Readers
 * are built from a source and wrapped by decorators, each of which takes
 * ownership of the reader it wraps:
 *
 *     nb_reader *r;
 *     nb_reader_from_tensors(&r, 2, (nb_tensor *[]){images, labels});
 *     nb_reader_shuffle(&r, r, seed);           // a new order every epoch
 *     nb_reader_batch(&r, r, 64, false);        // fields become [64, ...]
 *     nb_reader_map(&r, r, to_float, NULL);     // u8 -> float32, ...
 *     nb_reader_prefetch(&r, r, 4);             // a thread fills a queue
 *     for (uint64_t epoch = 0; epoch < 10; epoch++) {
 *         nb_reader_reset(r, epoch);
 *         nb_tensor *rec[2]; bool end;
 *         while (!nb_reader_next(r, rec, &end) && !end) { ...; release rec[0], rec[1] }
 *     }
 *     nb_reader_free(r);
 *
 * A new reader stands at the start of epoch 0. After the end of an epoch,
 * next keeps answering end until reset. A decorator's constructor takes
 * ownership of `inner` even when it fails (it frees it then), so chains
 * like the one above leak nothing on error. Every record a reader gives out
 * holds new tensors that the caller owns; readers never hand out views of
 * memory they keep using, so records may cross threads. */
#ifndef NABLA_READER_H
#define NABLA_READER_H

#include "nabla/export.h"

#include <stdbool.h>
#include <stdint.h>
#include "nabla/tensor.h"

NB_BEGIN_DECLS

typedef struct nb_reader nb_reader;

/* The most fields a record may have. */
#define NB_READER_MAX_FIELDS 64

/* ---- sources and decorators ------------------------------------------------ */

/* Records from tensors: field k has shape [N, ...] (the same N for every k)
 * and record i is (fields[0][i], ..., fields[n-1][i]), each of shape [...].
 * The tensors are retained, not copied (a non-contiguous one is copied once),
 * so writing to them later changes what the reader yields. Random access:
 * shuffling and batching it costs one memcpy per row, and no record tensors. */
NB_API nb_status nb_reader_from_tensors(nb_reader **out, int n_fields, nb_tensor *const *fields);

/* Every record of `inner`, in a new random order each epoch: epoch e uses a
 * permutation drawn from (seed, e), so a run is reproducible and resuming at
 * epoch e replays it. Over a random-access inner (from_tensors, or a shuffle
 * of one) it permutes indices; over any other inner it reads the whole epoch
 * into memory first (on the first next after a reset). */
NB_API nb_status nb_reader_shuffle(nb_reader **out, nb_reader *inner, uint64_t seed);

/* Rank `rank` of `size` in data-parallel training: the records at positions
 * rank, rank + size, rank + 2*size, ... of each epoch of `inner` (PyTorch's
 * DistributedSampler, indices[rank::size], without its padding). With the
 * same inner reader on every rank (a shuffle with the same seed), the shards
 * of an epoch are disjoint and together hold each of its n records exactly
 * once; the first n % size ranks get ceil(n / size) records, the others
 * floor(n / size), so near the end of an epoch some ranks may have one
 * batch more than others. Strided rather than in blocks on purpose: with
 * batches of B/size on every rank, the k-th batches of all ranks together
 * are exactly the k-th batch of B of one process reading the unsharded
 * epoch. Over a random-access inner the shard is random access too
 * (batching or shuffling it gathers rows); over any other inner it takes
 * one record and skips size - 1, and skip passes over records with one skip
 * of inner. Reset passes the epoch to inner. size >= 1 and 0 <= rank < size,
 * else NB_ERR_ARG. */
NB_API nb_status nb_reader_shard(nb_reader **out, nb_reader *inner, int rank, int size);

/* Stacks batch_size records into one: field k of shape [...] becomes
 * [B, ...]. All records of a batch must agree on each field's dtype and
 * shape. The last batch of an epoch may be short (B < batch_size) unless
 * drop_last is set, in which case it is dropped. */
NB_API nb_status nb_reader_batch(nb_reader **out, nb_reader *inner, int batch_size, bool drop_last);

/* Transforms each record in place: fn receives the record's n_fields
 * references and replaces any of them with new ones (releasing those it
 * replaces). If fn fails, it reports with nb_error() and leaves every slot
 * holding a valid reference or NULL; the reader releases them and returns
 * its status. fn is not called for records passed over by skip. */
typedef nb_status (*nb_reader_map_fn)(void *ctx, int n_fields, nb_tensor **record);

/* fn(ctx, ...) on every record of inner. ctx is not owned: it must outlive
 * the reader, and be safe to use from the prefetch thread if a prefetch
 * reader wraps this one. */
NB_API nb_status nb_reader_map(nb_reader **out, nb_reader *inner, nb_reader_map_fn fn, void *ctx);

/* Reads ahead on a background thread into a queue of `depth` (>= 1)
 * records, so that loading overlaps with training. It yields exactly the
 * sequence of `inner`; an error inner returns is returned by next, in its
 * place in the sequence, and again by every later next and skip until
 * reset (a skip that passes over the failing record reports nothing, as
 * without prefetch). Reset, skip and free stop and join the thread.
 * Everything below the prefetch reader (inner's callbacks, map functions)
 * runs on that thread. */
NB_API nb_status nb_reader_prefetch(nb_reader **out, nb_reader *inner, int depth);

/* ---- using a reader ---------------------------------------------------------- */

/* The next record: record[0..n_fields-1] receive new references, or NULLs
 * with *end = true at the end of the epoch. On failure the slots are NULL. */
NB_API nb_status nb_reader_next(nb_reader *r, nb_tensor **record, bool *end);

/* The number of fields of each record. */
NB_API int nb_reader_fields(const nb_reader *r);

/* Starts epoch `epoch` from its first record (a shuffle draws its order from
 * the epoch number). */
NB_API nb_status nb_reader_reset(nb_reader *r, uint64_t epoch);

/* Passes over the next n (>= 0) records (batches, for a batch reader) of the
 * current epoch, without building them where the reader can avoid it: to
 * resume training in the middle of an epoch, reset to the epoch, then skip
 * the steps already done. Skipping past the end leaves the reader at the end. */
NB_API nb_status nb_reader_skip(nb_reader *r, int64_t n);

NB_API void nb_reader_free(nb_reader *r); /* NULL is fine */

/* ---- writing a reader ---------------------------------------------------------- */

/* The callbacks of a reader; `self` is the pointer given to nb_reader_new.
 * next, reset: required; they report errors with nb_error().
 * next fills record[0..n_fields-1] with new references, or sets *end.
 * skip: optional; without it skip calls next n times.
 * free: optional; frees self (and any inner reader self owns).
 * size, gather: optional random access, both or neither. size gives the
 * records per epoch; gather stacks the records at positions idx[0..n-1]
 * (in the current epoch's order, each in [0, size)) into fields[k] of shape
 * [n, ...]. A reader with them can be shuffled by index, and batched without
 * building one tensor per record.
 * next_many: optional; stacks the next min(max, records left) records into
 * fields[k] of shape [got, ...] (got = 0 at the end), for a batch reader. */
typedef struct nb_reader_ops {
    const char *name; /* names the reader in error messages */
    nb_status (*next)(void *self, nb_tensor **record, bool *end);
    nb_status (*reset)(void *self, uint64_t epoch);
    nb_status (*skip)(void *self, int64_t n);
    void (*free)(void *self);
    int64_t (*size)(void *self);
    nb_status (*gather)(void *self, const int64_t *idx, int64_t n, nb_tensor **fields);
    nb_status (*next_many)(void *self, int64_t max, nb_tensor **fields, int64_t *got);
} nb_reader_ops;

/* A reader over user callbacks. `ops` must outlive the reader (a static
 * table); `self` belongs to the reader from now on (ops->free frees it, also
 * when this call fails). */
NB_API nb_status nb_reader_new(nb_reader **out, int n_fields, const nb_reader_ops *ops, void *self);

NB_END_DECLS

#endif
