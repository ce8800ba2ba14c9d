/* Cutting gradients into buckets, and the hash of a model's parameters
 * (see dist_internal.h). */
#include <string.h>
#include "nabla/data_parallel.h"
#include "dist_internal.h"

int nb_plan_buckets(int n, const size_t *bytes, const nb_dtype *dtypes, size_t cap, int *bucket_of)
{
    if (cap == 0) cap = NB_DEFAULT_BUCKET_BYTES;
    int b = -1;
    size_t filled = 0;
    for (int i = 0; i < n; i++) {
        bool fits = b >= 0 && dtypes[i] == dtypes[i - 1] && filled + bytes[i] <= cap;
        if (!fits) {
            b++;
            filled = 0;
        }
        filled += bytes[i];
        bucket_of[i] = b;
    }
    return b + 1;
}

uint64_t nb_hash_param(uint64_t h, const char *name, nb_dtype dtype, int ndim, const int64_t *shape)
{
    int32_t dt = dtype, nd = ndim;
    h = nb_hash_bytes(h, name, strlen(name) + 1);
    h = nb_hash_bytes(h, &dt, sizeof dt);
    h = nb_hash_bytes(h, &nd, sizeof nd);
    return nb_hash_bytes(h, shape, (size_t)ndim * sizeof *shape);
}
