/* Cutting gradients into buckets (see bucket.h). */
#include "nabla/data_parallel.h"
#include "bucket.h"

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
