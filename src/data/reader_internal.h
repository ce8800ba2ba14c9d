/* What the readers share; not part of the public API. */
#ifndef NABLA_READER_INTERNAL_H
#define NABLA_READER_INTERNAL_H

#include "nabla/reader.h"

struct nb_reader {
    const nb_reader_ops *ops;
    void *self;
    int n_fields;
};

/* Random access (ops->size and ops->gather), which shuffle and batch use to
 * avoid building one tensor per record. */
bool nb_reader_indexable(const nb_reader *r);
int64_t nb_reader_size(nb_reader *r);
nb_status nb_reader_gather(nb_reader *r, const int64_t *idx, int64_t n, nb_tensor **fields);
bool nb_reader_has_next_many(const nb_reader *r);
nb_status nb_reader_next_many(nb_reader *r, int64_t max, nb_tensor **fields, int64_t *got);

/* The ops of a reader that keeps random access over an inner reader with it
 * (shard, shuffle): the file defines static index_next, index_reset,
 * index_skip, index_size, index_gather and index_next_many, and its free. */
#define NB_INDEX_READER_OPS(reader_name, free_fn)                                                           \
    {                                                                                                       \
        .name = (reader_name), .next = index_next, .reset = index_reset, .skip = index_skip, .free = (free_fn), \
        .size = index_size, .gather = index_gather, .next_many = index_next_many                            \
    }

/* Releases rec[0..n-1] and sets them to NULL. */
void nb_record_clear(int n, nb_tensor **rec);
/* Turns stacked fields of shape [1, ...] into records of shape [...]. */
nb_status nb_record_unstack1(int n, nb_tensor **fields);
/* A new contiguous tensor [rows, shape[1:]...] with t's dtype, t being [r, ...]. */
nb_status nb_tensor_new_rows(nb_tensor **out, const nb_tensor *t, int64_t rows);

#endif
