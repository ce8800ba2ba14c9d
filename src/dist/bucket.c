/* Cutting gradients into buckets, and the hash of a model's parameters
 * (see dist_internal.h). */
#include <string.h>
#include "nabla/data_parallel.h"
#include "dist_internal.h"

int nb_plan_buckets(int n, const size_t *bytes, const nb_dtype *dtypes, size_t cap, int *bucket_of)
{
    return nb_plan_buckets_first(n, bytes, dtypes, cap, cap, bucket_of);
}

int nb_plan_buckets_first(int n, const size_t *bytes, const nb_dtype *dtypes, size_t first, size_t cap, int *bucket_of)
{
    if (cap == 0) cap = NB_DEFAULT_BUCKET_BYTES;
    if (first == 0) first = cap;
    int b = -1;
    size_t filled = 0;
    for (int i = 0; i < n; i++) {
        bool fits = b >= 0 && dtypes[i] == dtypes[i - 1] && filled + bytes[i] <= (b == 0 ? first : cap);
        if (!fits) {
            b++;
            filled = 0;
        }
        filled += bytes[i];
        bucket_of[i] = b;
    }
    return b + 1;
}

void nb_bucket_caps(size_t total, size_t cap, size_t *first, size_t *rest)
{
    if (cap > 0) {
        *first = cap < NB_FIRST_BUCKET_BYTES ? cap : NB_FIRST_BUCKET_BYTES;
        *rest = cap;
        return;
    }
    size_t quarter = total / 4;
    *first = NB_FIRST_BUCKET_BYTES;
    *rest = quarter < NB_MIN_BUCKET_BYTES   ? NB_MIN_BUCKET_BYTES
        : quarter > NB_DEFAULT_BUCKET_BYTES ? NB_DEFAULT_BUCKET_BYTES
                                            : quarter;
}

uint64_t nb_hash_param(uint64_t h, const char *name, nb_dtype dtype, int ndim, const int64_t *shape)
{
    int32_t dt = dtype, nd = ndim;
    h = nb_hash_bytes(h, name, strlen(name) + 1);
    h = nb_hash_bytes(h, &dt, sizeof dt);
    h = nb_hash_bytes(h, &nd, sizeof nd);
    return nb_hash_bytes(h, shape, (size_t)ndim * sizeof *shape);
}
