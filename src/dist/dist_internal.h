/* What the static pass and the eager DDP share.
 *
 * Gradient buckets, as both form them:
 * items (gradients) in the order the backward pass finishes them, cut into
 * runs of one dtype whose bytes stay within the cap (an item bigger than the
 * cap gets a bucket of its own). The same items give the same buckets on
 * every rank, which is what keeps their all-reduces in step. */
#ifndef NABLA_DIST_INTERNAL_H
#define NABLA_DIST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "nabla/dtype.h"

/* bucket_of[i] (i < n) receives item i's bucket, counting from 0 in item
 * order; returns the number of buckets. cap 0 means NB_DEFAULT_BUCKET_BYTES. */
int nb_plan_buckets(int n, const size_t *bytes, const nb_dtype *dtypes, size_t cap, int *bucket_of);
/* The same with the first bucket capped at `first` (0: cap) and the rest
 * at `cap`. */
int nb_plan_buckets_first(int n, const size_t *bytes, const nb_dtype *dtypes, size_t first, size_t cap, int *bucket_of);

/* The caps for a model of `total` gradient bytes, when the user asked for
 * `cap` (0: choose). The first bucket is small (NB_FIRST_BUCKET_BYTES at
 * most), because its all-reduce can start only once it is full and every
 * later one waits behind it; the rest get about a quarter of the model
 * each (NB_MIN_BUCKET_BYTES at least), so that several all-reduces run
 * while later gradients are computed, yet few enough that their latency
 * does not add up. A cap the user chose bounds both. */
#define NB_FIRST_BUCKET_BYTES ((size_t)1 << 20)
#define NB_MIN_BUCKET_BYTES ((size_t)256 << 10)
void nb_bucket_caps(size_t total, size_t cap, size_t *first, size_t *rest);

/* The same-model check: h extended by one parameter's name, dtype and
 * shape (start from NB_HASH_INIT), so that ranks whose models differ in any
 * of them get different hashes. */
uint64_t nb_hash_param(uint64_t h, const char *name, nb_dtype dtype, int ndim, const int64_t *shape);

#endif
