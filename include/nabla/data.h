/* nabla/data.h: data sets on disk.
 *
 * IDX files (the format of MNIST and Fashion-MNIST), finding a data set's
 * folder, loading an MNIST-style data set, and a ready-made reader over one
 * for training loops. Readers themselves are in nabla/reader.h. */
#ifndef NABLA_DATA_H
#define NABLA_DATA_H

#include "nabla/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nabla/reader.h"
#include "nabla/tensor.h"

NB_BEGIN_DECLS

/* ---- IDX files ---------------------------------------------------------------
 *
 * An IDX file is a big-endian header, magic = 0x00000800 | type << 8 | ndims,
 * then ndims 32-bit sizes, then the elements in row-major order. */

/* Loads an IDX file, gzip-compressed (.gz) or not, into a new tensor whose
 * shape is the header's sizes. Types: 0x08 (unsigned byte) gives uint8,
 * 0x0C (int32) int32, 0x0D (float32) float32, 0x0E (float64) float64; 0x09
 * and 0x0B (int8, int16) are refused (NB_ERR_UNSUPPORTED). The file must
 * hold exactly the elements the header describes: a short file or bytes
 * after them are NB_ERR_FORMAT, saying how many bytes were expected and
 * found, as are a bad magic, 0 or more than 8 dimensions and corrupt gzip
 * data. A lying header costs nothing: nothing is allocated for more than the
 * file holds. */
NB_API nb_status nb_idx_load(nb_tensor **out, const char *path);

/* ---- finding a data set ---------------------------------------------------------
 *
 * A folder holds a data set when it has train-images-idx3-ubyte or
 * train-images-idx3-ubyte.gz. nb_data_find looks, in this order, in
 *   cli_dir and cli_dir/<dataset> (when cli_dir is not NULL),
 *   $NABLA_DATA and $NABLA_DATA/<dataset> (when set),
 *   ./data/<dataset> and ../data/<dataset> (from the current folder),
 *   then beside the running program (/proc/self/exe): for its folder and the
 *   three above it, <that>/data/<dataset> (so build/examples/x finds the
 *   source tree's data/ and a data/ folder next to the checkout),
 * and writes the first that qualifies to out_dir (size bytes). dataset is a
 * folder name such as "mnist" or "fashion-mnist". If none does, it returns
 * NB_ERR_NOT_FOUND with every place it looked and how to get the files. */
NB_API nb_status nb_data_find(const char *cli_dir, const char *dataset, char *out_dir, size_t size);

/* The same search for a data set that is one file, such as a text corpus
 * ("tinyshakespeare", "input.txt"): a folder holds it when it has `file`,
 * and the path of that file is written to out_path. `cli` may also name the
 * file itself (--data FILE), which is then taken as it is. */
NB_API nb_status nb_data_find_file(const char *cli, const char *dataset, const char *file, char *out_path, size_t size);

/* ---- MNIST-style data sets --------------------------------------------------------- */

/* Loads dir/train-* (train) or dir/t10k-* images and labels, each from the
 * raw IDX file when present, else from its .gz: images [N, rows, cols]
 * uint8 (N, 28, 28 for MNIST) and labels [N] uint8. Checks that both have
 * the same N and that every label is below 10. */
NB_API nb_status nb_mnist_load(nb_tensor **images, nb_tensor **labels, const char *dir, bool train);

/* nb_mnist_reader's flags. */
enum {
    NB_MNIST_TRAIN = 1 << 0,  /* the training set (else the test set) */
    NB_MNIST_SHUFFLE = 1 << 1 /* a new order every epoch */
};

/* A reader over an MNIST-style data set, for training and evaluation: each
 * record is (images float32 [B, rows*cols] with values in [0, 1] (pixel/255),
 * labels int64 [B, 1]). The last batch of an epoch is kept even when short
 * (60000 = 937*64 + 32 gives a last batch of 32), for training as well as
 * testing, so every example is seen once per epoch. With NB_MNIST_SHUFFLE,
 * each epoch has its own order drawn from (seed, epoch) (see
 * nb_reader_shuffle). With prefetch_depth > 0, batches are made on a
 * background thread, that many ahead.
 *
 *     nb_mnist_reader(&train, dir, NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, 64, seed, 2); */
NB_API nb_status nb_mnist_reader(nb_reader **out, const char *dir, unsigned flags, int batch_size, uint64_t seed,
                                 int prefetch_depth);

/* nb_mnist_reader for rank `rank` of `size` in data-parallel training
 * (nb_mnist_reader is rank 0 of 1): the same reader with nb_reader_shard
 * after the shuffle and before the batching, so that every rank, given the
 * same seed, batches its own share of the same shuffled order, batch_size
 * records at a time. The shards of an epoch are disjoint and hold every
 * example once; with batch_size = B/size, the k-th batches of all ranks
 * together are the k-th batch of nb_mnist_reader(..., B, seed, ...). Since
 * ranks' shares differ by at most one example, a rank may have one batch
 * more than another at the end of an epoch. size >= 1 and
 * 0 <= rank < size, else NB_ERR_ARG (checked before the files are read).
 *
 *     nb_mnist_shard_opts sh = {.rank = rank, .size = size, .prefetch_depth = 2};
 *     nb_mnist_reader_shard(&train, dir, NB_MNIST_TRAIN | NB_MNIST_SHUFFLE, 64 / size, seed, &sh); */
typedef struct nb_mnist_shard_opts {
    int rank, size;
    int prefetch_depth; /* as nb_mnist_reader's */
} nb_mnist_shard_opts;
NB_API nb_status nb_mnist_reader_shard(nb_reader **out, const char *dir, unsigned flags, int batch_size, uint64_t seed,
                                       const nb_mnist_shard_opts *shard);

NB_END_DECLS

#endif
