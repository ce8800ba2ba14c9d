/* libFuzzer harness for safetensors files (nb_safetensors_load).
 * Build and run: `make fuzz` (fuzz/README). One run by hand:
 *     build-fuzz/fuzz/fuzz_safetensors -max_total_time=60 build-fuzz/corpus/safetensors build-fuzz/seeds/safetensors
 *
 * A file that loads is read through every accessor and must survive a round
 * trip: saved again and loaded, it gives the same names, tensors and
 * metadata. */
#include <stdint.h>
#include "fuzz_util.h"
#include "nabla/safetensors.h"
#include "nabla/status.h"

static bool same_tensor(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    return !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
}

static void check_round_trip(const nb_safetensors *f, const char *path)
{
    int n = nb_safetensors_count(f), m = nb_safetensors_meta_count(f);
    const char **names = nb_malloc(sizeof *names * (size_t)(n + 1));
    nb_tensor **tensors = nb_malloc(sizeof *tensors * (size_t)(n + 1));
    const char **keys = nb_malloc(sizeof *keys * (size_t)(m + 1));
    const char **values = nb_malloc(sizeof *values * (size_t)(m + 1));
    FUZZ_CHECK(names && tensors && keys && values);
    for (int i = 0; i < n; i++) {
        names[i] = nb_safetensors_name(f, i);
        tensors[i] = nb_safetensors_tensor(f, i);
        FUZZ_CHECK(names[i] && tensors[i] && nb_safetensors_find(f, names[i]) == tensors[i]);
    }
    for (int i = 0; i < m; i++) {
        keys[i] = nb_safetensors_meta_key(f, i);
        values[i] = nb_safetensors_meta(f, keys[i]);
        FUZZ_CHECK(keys[i] && values[i]);
    }
    FUZZ_CHECK(!nb_safetensors_name(f, n) && !nb_safetensors_tensor(f, -1) && !nb_safetensors_meta_key(f, m));
    nb_meta meta = {m, keys, values};
    /* The input file is the harness's own: overwrite it. */
    nb_status st = nb_safetensors_save(path, n, names, tensors, &meta);
    FUZZ_CHECK(!st);
    nb_safetensors *g = NULL;
    FUZZ_CHECK(!nb_safetensors_load(&g, path));
    FUZZ_CHECK(nb_safetensors_count(g) == n && nb_safetensors_meta_count(g) == m);
    for (int i = 0; i < n; i++) FUZZ_CHECK(same_tensor(nb_safetensors_find(g, names[i]), tensors[i]));
    for (int i = 0; i < m; i++) FUZZ_CHECK(!strcmp(nb_safetensors_meta(g, keys[i]), values[i]));
    nb_safetensors_free(g);
    nb_free(names);
    nb_free(tensors);
    nb_free(keys);
    nb_free(values);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size);
    nb_safetensors *f = NULL;
    nb_clear_error();
    nb_status st = nb_safetensors_load(&f, path);
    FUZZ_CHECK(st ? f == NULL && *nb_last_error() : f != NULL);
    if (f) check_round_trip(f, path);
    nb_safetensors_free(f);
    return 0;
}
