/* nabla/safetensors.h: named tensors in a file, in HuggingFace's safetensors
 * format, which PyTorch, JAX, TensorFlow and others read and write.
 *
 * The format (https://huggingface.co/docs/safetensors): an 8-byte
 * little-endian unsigned N, then N bytes of UTF-8 JSON,
 *     {"__metadata__": {"key": "value", ...},
 *      "name": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, ...}
 * then the data buffer. Offsets count from the start of the buffer; each
 * tensor is stored contiguously, in C order, little-endian. The dtypes read
 * and written are F32, F64, I32, I64, U8 and BOOL (one byte, 0 or 1), nabla's
 * six, and the 16-bit floats F16 (IEEE binary16) and BF16 (bfloat16), in
 * which Hugging Face models are usually published: those load as F32 tensors
 * holding exactly the stored values (every F16 and BF16 value is an F32
 * value), and nb_safetensors_stored_dtype tells what the file held. Files
 * with the other dtypes of the format (I8, I16, U16, U32, U64, F8_E4M3,
 * F8_E5M2, ...) are refused with NB_ERR_UNSUPPORTED naming the dtype.
 *
 * Writing is deterministic and byte-for-byte what the reference writer (the
 * safetensors Rust crate behind the Python package) produces for the same
 * tensors and metadata: compact JSON, "__metadata__" first (keys sorted), the
 * tensors ordered by the crate's dtype order, descending (I64, F64, F32, I32,
 * BF16, F16, U8, BOOL: by alignment, larger first), and then by name, data in
 * that order, the header padded with spaces to a multiple of 8 bytes so that
 * every tensor's data is aligned to its element size. The file is replaced
 * atomically (see nabla/checkpoint.h).
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

/* How float tensors are stored in a file: as they are (F32, F64), or
 * narrowed to 16 bits, which halves an F32 model's file. */
typedef enum nb_float_storage {
    NB_STORE_NATIVE, /* F32 as F32, F64 as F64 */
    NB_STORE_F16,    /* IEEE binary16: 11 significant bits, finite up to 65504 */
    NB_STORE_BF16    /* bfloat16: 8 significant bits, the range of F32 */
} nb_float_storage;

/* As nb_safetensors_save, with the F32 and F64 tensors stored as `storage`
 * says (integer and BOOL tensors are always stored as they are). Narrowing
 * rounds each value once, to nearest, ties to even (an F64 goes straight to
 * 16 bits, not through F32); values past the largest finite F16 become
 * infinities, tiny ones subnormals or zeros; NaNs stay NaNs. Loading such a
 * file gives F32 tensors. NB_ERR_ARG also for a `storage` that is none of
 * the above. */
NB_API nb_status nb_safetensors_save_as(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                                        const nb_meta *meta, nb_float_storage storage);

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
/* The dtype of the i-th tensor in the file, as the format names it: "F32",
 * "F64", "I32", "I64", "U8", "BOOL", "F16" or "BF16" (static strings); NULL
 * if i is out of range. */
NB_API const char *nb_safetensors_stored_dtype(const nb_safetensors *f, int i);
/* The tensor named `name` (borrowed), or NULL. */
NB_API nb_tensor *nb_safetensors_find(const nb_safetensors *f, const char *name);

/* The metadata value of `key`, or NULL; and the keys, sorted. */
NB_API const char *nb_safetensors_meta(const nb_safetensors *f, const char *key);
NB_API int nb_safetensors_meta_count(const nb_safetensors *f);
NB_API const char *nb_safetensors_meta_key(const nb_safetensors *f, int i);

NB_END_DECLS
#endif
