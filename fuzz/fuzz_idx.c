/* libFuzzer harness for IDX files (nb_idx_load), plain and gzip'ed.
 * Build and run: `make fuzz` (fuzz/README). One run by hand:
 *     build-fuzz/fuzz/fuzz_idx -max_total_time=60 build-fuzz/corpus/idx build-fuzz/seeds/idx
 *
 * A gzip'ed file is loaded twice: straight into the tensor, as nb_idx_load
 * does for payloads up to 64 MB, and through the buffer that grows with
 * what the file holds (the path of larger payloads); both must agree. */
#include <stdint.h>
#include "data/data_internal.h"
#include "fuzz_util.h"
#include "nabla/data.h"
#include "nabla/status.h"

static bool same_tensor(const nb_tensor *a, const nb_tensor *b)
{
    if (a->dtype != b->dtype || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    return !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size);
    nb_tensor *t = NULL;
    nb_clear_error();
    nb_status st = nb_idx_load(&t, path);
    FUZZ_CHECK(st ? t == NULL && *nb_last_error() : t != NULL);
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        nb_tensor *u = NULL;
        nb_status su = nb_idx_load_with(path, &u, 0);
        FUZZ_CHECK(su == st);
        FUZZ_CHECK(!st == !!u);
        if (t && u) FUZZ_CHECK(same_tensor(t, u));
        nb_tensor_release(u);
    }
    if (t) {
        /* Every element is readable. */
        int64_t n = nb_tensor_numel(t);
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += nb_tensor_get(t, i);
        (void)sum;
    }
    nb_tensor_release(t);
    return 0;
}
