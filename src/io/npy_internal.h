/* What the .npy code (npy.c, npy_header.c) and the .npz code (npz.c) share:
 * a .npy array read from a stream of bytes (a file, or a zip member that may
 * be inflated on the way) and written to one (a file, or a zip member that
 * may be deflated on the way).
 *
 * Error texts set here name the problem, not the file: the caller knows
 * the file (and member) and adds them with nb_error_context. */
#ifndef NABLA_IO_NPY_INTERNAL_H
#define NABLA_IO_NPY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "nabla/npy.h"

/* Where a .npy array is read from: `size` bytes in all (the whole .npy),
 * handed out by `read`, which gives exactly n bytes or fails with an error
 * text of its own. */
typedef struct npy_source {
    nb_status (*read)(void *ctx, void *buf, size_t n);
    void *ctx;
    uint64_t size;
} npy_source;

/* Where a .npy array is written to. */
typedef struct npy_sink {
    nb_status (*write)(void *ctx, const void *p, size_t n);
    void *ctx;
} npy_sink;

/* ---- the header (npy_header.c) ---- */

/* The on-disk element type of an array, and the nabla dtype it loads as. */
typedef enum npy_kind {
    NPY_F4,
    NPY_F8,
    NPY_I4,
    NPY_I8,
    NPY_U1,
    NPY_B1, /* nabla's own */
    NPY_F2,
    NPY_I1,
    NPY_I2,
    NPY_U2,
    NPY_U4 /* converted when read */
} npy_kind;

typedef struct npy_header {
    npy_kind kind;
    bool fortran;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
} npy_header;

/* Bytes per element in the file, and the dtype the array loads as. */
size_t npy_kind_size(npy_kind k);
nb_dtype npy_kind_dtype(npy_kind k);

/* Parses the header dict text[0..n) strictly (nabla/npy.h says what is
 * accepted): NB_ERR_FORMAT, or NB_ERR_UNSUPPORTED for a dtype nabla has no
 * counterpart for. */
nb_status npy_header_parse(const char *text, size_t n, npy_header *h);

/* The magic, version, length and padded header numpy.save writes for a C
 * order array of dtype and shape, into buf (NPY_PREFIX_MAX bytes); its
 * length in *len. */
#define NPY_PREFIX_MAX 1024
void npy_header_format(nb_dtype dtype, int ndim, const int64_t *shape, unsigned char *buf, size_t *len);

/* ---- arrays (npy.c) ---- */

/* Reads a whole .npy array from src (exactly src->size bytes). */
nb_status npy_read(npy_source *src, nb_tensor **out);

/* The number of bytes npy_write writes for t. */
uint64_t npy_size(const nb_tensor *t);
/* Writes t (contiguous) as a .npy array to sink. */
nb_status npy_write(const npy_sink *sink, const nb_tensor *t);

#endif
