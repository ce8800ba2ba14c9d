/* libFuzzer harness for NumPy files: each input is read both as a .npy file
 * (nb_npy_load) and as a .npz archive (nb_npz_load).
 * Build and run: `make fuzz` (fuzz/README). One run by hand:
 *     build-fuzz/fuzz/fuzz_npy -max_total_time=60 build-fuzz/corpus/npy build-fuzz/seeds/npy
 *
 * What loads must survive a round trip: saved again (an archive stored or
 * deflated, by the input's length) and loaded, it gives the same names and
 * tensors. */
#include <stdint.h>
#include "fuzz_util.h"
#include "nabla/npy.h"
#include "nabla/status.h"

static bool same_tensor(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    return !memcmp(nb_tensor_data(a), nb_tensor_data(b), (size_t)nb_tensor_numel(a) * nb_dtype_size(a->dtype));
}

static void npz_round_trip(const nb_npz *f, const char *path, unsigned flags)
{
    int n = nb_npz_count(f);
    const char **names = nb_malloc(sizeof *names * (size_t)(n + 1));
    nb_tensor **tensors = nb_malloc(sizeof *tensors * (size_t)(n + 1));
    FUZZ_CHECK(names && tensors);
    for (int i = 0; i < n; i++) {
        names[i] = nb_npz_name(f, i);
        tensors[i] = nb_npz_tensor(f, i);
        FUZZ_CHECK(names[i] && tensors[i] && nb_npz_find(f, names[i]) == tensors[i]);
    }
    FUZZ_CHECK(!nb_npz_name(f, n) && !nb_npz_tensor(f, -1));
    /* nabla refuses to write empty names or names that are not UTF-8, which
     * an archive may hold. */
    nb_status st = nb_npz_save(path, n, names, tensors, flags);
    if (!st) {
        nb_npz *g = NULL;
        FUZZ_CHECK(!nb_npz_load(&g, path));
        FUZZ_CHECK(nb_npz_count(g) == n);
        for (int i = 0; i < n; i++) {
            FUZZ_CHECK(!strcmp(nb_npz_name(g, i), names[i]));
            FUZZ_CHECK(same_tensor(nb_npz_tensor(g, i), tensors[i]));
        }
        nb_npz_free(g);
    } else {
        FUZZ_CHECK(st == NB_ERR_ARG);
    }
    nb_free(names);
    nb_free(tensors);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size);
    nb_tensor *t = NULL;
    nb_clear_error();
    nb_status st = nb_npy_load(&t, path);
    FUZZ_CHECK(st ? t == NULL && *nb_last_error() : t != NULL);
    nb_npz *f = NULL;
    nb_clear_error();
    st = nb_npz_load(&f, path);
    FUZZ_CHECK(st ? f == NULL && *nb_last_error() : f != NULL);
    /* The input file is the harness's own: overwrite it. */
    if (t) {
        FUZZ_CHECK(!nb_npy_save(path, t));
        nb_tensor *u = NULL;
        FUZZ_CHECK(!nb_npy_load(&u, path));
        FUZZ_CHECK(same_tensor(t, u));
        nb_tensor_release(u);
    }
    if (f) npz_round_trip(f, path, size & 1 ? NB_NPZ_COMPRESSED : 0);
    nb_tensor_release(t);
    nb_npz_free(f);
    return 0;
}
