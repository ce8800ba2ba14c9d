/* nabla/safetensors.h: named tensors in a file, in HuggingFace's safetensors
 * format, which PyTorch, JAX, TensorFlow and others read and write.
 *
 * The format (https://huggingface.co/docs/safetensors): an 8-byte
 * little-endian unsigned N, then N bytes of UTF-8 JSON,
 *     {"__metadata__": {"key": "value", ...},
 *      "name": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, ...}
 * then the data buffer. Offsets count from the start of the buffer; each
 * tensor is stored contiguously, in C order, little-endian. The dtypes are
 * F32, F64, I32, I64, U8 and BOOL (one byte, 0 or 1), nabla's six; files with
 * other dtypes (F16, BF16, ...) are refused with NB_ERR_UNSUPPORTED.
 *
 * Writing is deterministic and byte-for-byte what the reference writer (the
 * safetensors Rust crate behind the Python package) produces for the same
 * tensors and metadata: compact JSON, "__metadata__" first (keys sorted), the
 * tensors ordered by dtype alignment (I64, F64, F32, I32, U8, BOOL) and then
 * by name, data in that order, the header padded with spaces to a multiple
 * of 8 bytes so that every tensor's data is aligned to its element size.
 * The file is replaced atomically (see nabla/checkpoint.h).
 *
 * Reading trusts nothing in the file: a file that is truncated, has a header
 * size past the file or over 100 MB, a header that is not strict JSON in
 * UTF-8 or does not start with '{', duplicate names, an unknown dtype, a
 * shape with negative or overflowing dimensions, data_offsets that leave the
 * buffer, overlap, leave a hole or do not match dtype size x element count,
 * bytes after the last tensor, or a BOOL byte other than 0 or 1, gives
 * NB_ERR_FORMAT with a message naming the file and the problem. */
#ifndef NABLA_SAFETENSORS_H
#define NABLA_SAFETENSORS_H

#include "nabla/export.h"

#include "nabla/tensor.h"

NB_BEGIN_DECLS

/* The largest header accepted, as in the reference reader. */
#define NB_SAFETENSORS_MAX_HEADER 100000000

/* Metadata of a file: n string pairs keys[i] -> values[i]. */
typedef struct nb_meta {
    int n;
    const char *const *keys;
    const char *const *values;
} nb_meta;

/* Writes tensors[i] under names[i] (any strides; values are written in C
 * order) and the metadata pairs of `meta` (may be NULL; UTF-8 strings) to
 * `path`, replacing it atomically. NB_ERR_ARG for a NULL, empty, duplicate
 * or non-UTF-8 name, the reserved name "__metadata__", or a duplicate
 * metadata key; the file is then untouched. */
NB_API nb_status nb_safetensors_save(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                                     const nb_meta *meta);

/* A loaded file: its tensors (in the order of their data in the file), and
 * its metadata. */
typedef struct nb_safetensors nb_safetensors;

/* Reads and checks the whole file. NB_ERR_NOT_FOUND if it does not exist,
 * NB_ERR_IO if it cannot be read, NB_ERR_FORMAT if it is malformed. */
NB_API nb_status nb_safetensors_load(nb_safetensors **out, const char *path);
NB_API void nb_safetensors_free(nb_safetensors *f); /* NULL is fine */

NB_API int nb_safetensors_count(const nb_safetensors *f);
/* The i-th name and tensor (borrowed: valid until nb_safetensors_free;
 * retain the tensor to keep it longer); NULL if i is out of range. */
NB_API const char *nb_safetensors_name(const nb_safetensors *f, int i);
NB_API nb_tensor *nb_safetensors_tensor(const nb_safetensors *f, int i);
/* The tensor named `name` (borrowed), or NULL. */
NB_API nb_tensor *nb_safetensors_find(const nb_safetensors *f, const char *name);

/* The metadata value of `key`, or NULL; and the keys, sorted. */
NB_API const char *nb_safetensors_meta(const nb_safetensors *f, const char *key);
NB_API int nb_safetensors_meta_count(const nb_safetensors *f);
NB_API const char *nb_safetensors_meta_key(const nb_safetensors *f, int i);

NB_END_DECLS
#endif
