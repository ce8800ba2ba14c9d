/* MNIST-style data sets: the four IDX files of a folder, checked against
 * each other, and the reader the examples train from. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "data_internal.h"

/* dir/name when present, else dir/name.gz. */
static nb_status pick_file(const char *dir, const char *name, char *path, size_t size)
{
    int n = snprintf(path, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n + 3 >= size) return nb_error(NB_ERR_ARG, "mnist: the path %s/%s is too long", dir, name);
    if (access(path, F_OK) == 0) return NB_OK;
    strcat(path, ".gz");
    if (access(path, F_OK) == 0) return NB_OK;
    return nb_error(NB_ERR_NOT_FOUND, "mnist: %s has neither %s nor %s.gz", dir, name, name);
}

nb_status nb_mnist_load(nb_tensor **images, nb_tensor **labels, const char *dir, bool train)
{
    if (!images || !labels) return nb_error(NB_ERR_ARG, "mnist: images or labels is NULL");
    *images = *labels = NULL;
    if (!dir) return nb_error(NB_ERR_ARG, "mnist: dir is NULL");
    const char *split = train ? "train" : "t10k";
    char name[64], ipath[4096], lpath[4096], s[NB_SHAPE_STR_MAX];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
    nb_status st = pick_file(dir, name, ipath, sizeof ipath);
    if (st) return st;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
    st = pick_file(dir, name, lpath, sizeof lpath);
    if (st) return st;
    nb_tensor *im = NULL, *lb = NULL;
    st = nb_idx_load(&im, ipath);
    if (!st && (im->dtype != NB_U8 || im->ndim != 3))
        st = nb_error(NB_ERR_FORMAT, "mnist: %s holds %s %s; images are uint8 [N, rows, cols]", ipath,
                      nb_dtype_name(im->dtype), nb_shape_str(s, sizeof s, im->ndim, im->shape));
    if (!st) st = nb_idx_load(&lb, lpath);
    if (!st && (lb->dtype != NB_U8 || lb->ndim != 1))
        st = nb_error(NB_ERR_FORMAT, "mnist: %s holds %s %s; labels are uint8 [N]", lpath, nb_dtype_name(lb->dtype),
                      nb_shape_str(s, sizeof s, lb->ndim, lb->shape));
    if (!st && im->shape[0] != lb->shape[0])
        st = nb_error(NB_ERR_FORMAT, "mnist: %s has %lld images but %s has %lld labels", ipath, (long long)im->shape[0],
                      lpath, (long long)lb->shape[0]);
    if (!st) {
        const uint8_t *l = nb_tensor_data(lb);
        for (int64_t i = 0; i < lb->shape[0]; i++)
            if (l[i] >= 10) {
                st = nb_error(NB_ERR_FORMAT, "mnist: %s: label %d at index %lld (labels are 0 to 9)", lpath, l[i],
                              (long long)i);
                break;
            }
    }
    if (st) {
        nb_tensor_release(im);
        nb_tensor_release(lb);
        return st;
    }
    *images = im;
    *labels = lb;
    return NB_OK;
}

/* uint8 images [B, rows, cols] -> float32 [B, rows*cols] / 255 and uint8
 * labels [B] -> int64 [B, 1], each in one pass. */
static nb_status to_training_batch(void *ctx, int n_fields, nb_tensor **rec)
{
    nb_tensor *im = rec[0], *lb = rec[1];
    if (n_fields != 2 || im->dtype != NB_U8 || im->ndim != 3 || lb->dtype != NB_U8 || lb->ndim != 1)
        return nb_error(NB_ERR_STATE, "mnist reader: expected a batch of uint8 images and labels");
    int64_t b = im->shape[0], pixels = im->shape[1] * im->shape[2];
    nb_tensor *x, *y;
    nb_status st = nb_tensor_new(&x, NB_F32, 2, (int64_t[]){b, pixels});
    if (st) return st;
    st = nb_tensor_new(&y, NB_I64, 2, (int64_t[]){b, 1});
    if (st) {
        nb_tensor_release(x);
        return st;
    }
    const uint8_t *src = nb_tensor_data(im);
    float *dst = nb_tensor_data(x);
    for (int64_t i = 0, n = b * pixels; i < n; i++) dst[i] = (float)src[i] / 255.0f;
    const uint8_t *ls = nb_tensor_data(lb);
    int64_t *ld = nb_tensor_data(y);
    for (int64_t i = 0; i < b; i++) ld[i] = ls[i];
    nb_tensor_release(im);
    nb_tensor_release(lb);
    rec[0] = x;
    rec[1] = y;
    return NB_OK;
}

nb_status nb_mnist_reader_shard(nb_reader **out, const char *dir, unsigned flags, int batch_size, uint64_t seed,
                                const nb_mnist_shard_opts *shard)
{
    if (!shard) return nb_error(NB_ERR_ARG, "mnist reader: no shard options");
    const int rank = shard->rank, size = shard->size, prefetch_depth = shard->prefetch_depth;
    bool train = flags & NB_MNIST_TRAIN, shuffle = flags & NB_MNIST_SHUFFLE;
    if (!out) return nb_error(NB_ERR_ARG, "mnist reader: out is NULL");
    *out = NULL;
    if (batch_size < 1) return nb_error(NB_ERR_ARG, "mnist reader: batch size %d (must be at least 1)", batch_size);
    if (prefetch_depth < 0) return nb_error(NB_ERR_ARG, "mnist reader: prefetch depth %d (0 for none)", prefetch_depth);
    /* Checked before the files are read, which is the slow part. */
    if (size < 1 || rank < 0 || rank >= size)
        return nb_error(NB_ERR_ARG, "mnist reader: rank %d, size %d: %s", rank, size,
                        size < 1 ? "size must be at least 1" : "rank must be in [0, size)");
    nb_tensor *images, *labels;
    nb_status st = nb_mnist_load(&images, &labels, dir, train);
    if (st) return st;
    nb_reader *r;
    st = nb_reader_from_tensors(&r, 2, (nb_tensor *[]){images, labels});
    nb_tensor_release(images);
    nb_tensor_release(labels);
    /* Each decorator frees its inner reader when it fails. The shard comes
     * after the shuffle, so every rank takes its part of the same order, and
     * before the batching, so every rank batches its own part. */
    if (!st && shuffle) st = nb_reader_shuffle(&r, r, seed);
    if (!st && size > 1) st = nb_reader_shard(&r, r, rank, size);
    if (!st) st = nb_reader_batch(&r, r, batch_size, false);
    if (!st) st = nb_reader_map(&r, r, to_training_batch, NULL);
    if (!st && prefetch_depth > 0) st = nb_reader_prefetch(&r, r, prefetch_depth);
    if (!st) *out = r;
    return st;
}

nb_status nb_mnist_reader(nb_reader **out, const char *dir, unsigned flags, int batch_size, uint64_t seed,
                          int prefetch_depth)
{
    return nb_mnist_reader_shard(out, dir, flags, batch_size, seed,
                                 &(nb_mnist_shard_opts){.rank = 0, .size = 1, .prefetch_depth = prefetch_depth});
}
