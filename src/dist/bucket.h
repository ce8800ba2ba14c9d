/* Gradient buckets, as the static pass and the eager DDP both form them:
 * items (gradients) in the order the backward pass finishes them, cut into
 * runs of one dtype whose bytes stay within the cap (an item bigger than the
 * cap gets a bucket of its own). The same items give the same buckets on
 * every rank, which is what keeps their all-reduces in step. */
#ifndef NABLA_DIST_BUCKET_H
#define NABLA_DIST_BUCKET_H

#include <stddef.h>
#include "nabla/dtype.h"

/* bucket_of[i] (i < n) receives item i's bucket, counting from 0 in item
 * order; returns the number of buckets. cap 0 means NB_DEFAULT_BUCKET_BYTES. */
int nb_plan_buckets(int n, const size_t *bytes, const nb_dtype *dtypes, size_t cap, int *bucket_of);

#endif
