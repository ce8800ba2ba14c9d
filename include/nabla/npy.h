/* nabla/npy.h: arrays in NumPy's .npy files and .npz archives, which
 * numpy.save, numpy.savez and numpy.savez_compressed write and numpy.load
 * reads.
 *
 * The .npy format (NumPy's NEP 1, numpy/lib/format.py): the magic
 * "\x93NUMPY", a major and a minor version byte, a little-endian header
 * length (2 bytes in version 1.0, 4 in 2.0 and 3.0), then the header: a
 * Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a final '\n' so that the data starts at a multiple
 * of 64 bytes; then the elements, little-endian, in C order (or Fortran
 * order when 'fortran_order' is True).
 *
 * Dtypes, NumPy descr -> nabla:
 *     '<f4' NB_F32   '<f8' NB_F64   '<i4' NB_I32   '<i8' NB_I64
 *     '|u1' NB_U8    '|b1' NB_BOOL (one byte, 0 or 1)
 * and, read only, converted exactly:
 *     '<f2' (float16) -> NB_F32     '|i1' '<i2' '<u2' -> NB_I32
 *     '<u4' -> NB_I64
 * Any other dtype (big-endian '>', complex, object, structured, strings,
 * datetimes, uint64, ...) is refused with NB_ERR_UNSUPPORTED naming the
 * descr. A Fortran-order file is read into a C-order tensor. A 0-d array
 * (shape ()) is a tensor of ndim 0.
 *
 * Writing produces the bytes numpy.save writes for the same array: format
 * 1.0 (2.0 only for a header over 65535 bytes, which nabla's dtypes never
 * need), C order, the tensor's own dtype, any strides (values are written
 * in C order of the view). Files are replaced atomically, as checkpoints
 * are (nabla/checkpoint.h).
 *
 * A .npz file is a zip archive holding one "<name>.npy" member per array.
 * Members may be stored or deflated; zip64 fields (which numpy writes for
 * every member) are understood, and every member's CRC-32 is checked.
 * nabla writes the members in the order given, stored or (with
 * NB_NPZ_COMPRESSED) deflated, dated 1980-01-01 so that the same arrays
 * give the same bytes.
 *
 * Reading trusts nothing in the file. A truncated file, a wrong magic or
 * version, a header length past the file or over NB_NPY_MAX_HEADER, a
 * header that is not exactly the dict above (keys 'descr', 'fortran_order'
 * and 'shape', each once, in any order; Python string, bool and tuple
 * literals), a negative or overflowing shape, data shorter or longer than
 * the shape says, a BOOL byte other than 0 or 1; in a .npz, a missing or
 * damaged end of central directory, offsets or sizes out of the file,
 * members that overlap, a local header that does not match the central
 * directory, a bad CRC-32, a deflate stream that is damaged or gives more
 * or fewer bytes than declared (inflating stops at the size the member's
 * .npy header implies, so a zip bomb costs nothing), or two members with one
 * name: each gives NB_ERR_FORMAT with a message naming the file (and the
 * member) and the problem. An encrypted member, a compression other than
 * stored or deflate, a multi-disk archive, or a member whose name does not
 * end in ".npy" give NB_ERR_UNSUPPORTED. */
#ifndef NABLA_NPY_H
#define NABLA_NPY_H

#include "nabla/export.h"

#include "nabla/program.h"
#include "nabla/scope.h"
#include "nabla/tensor.h"

NB_BEGIN_DECLS

/* The largest .npy header read (NumPy's own reader stops at 10000 bytes). */
#define NB_NPY_MAX_HEADER 1000000

/* ---- .npy: one array ------------------------------------------------------ */

/* Writes `t` (any strides) to `path`, replacing it atomically. */
NB_API nb_status nb_npy_save(const char *path, nb_tensor *t);

/* Reads the array in `path` as a new contiguous tensor (one reference).
 * NB_ERR_NOT_FOUND if the file does not exist, NB_ERR_IO if it cannot be
 * read, NB_ERR_FORMAT or NB_ERR_UNSUPPORTED as above. */
NB_API nb_status nb_npy_load(nb_tensor **out, const char *path);

/* ---- .npz: named arrays ----------------------------------------------------- */

/* Flags of nb_npz_save and nb_npz_save_state. */
enum {
    NB_NPZ_COMPRESSED = 1 << 0 /* deflate the members, as numpy.savez_compressed */
};

/* Writes tensors[i] as the member "<names[i]>.npy", in this order, to
 * `path`, replacing it atomically. NB_ERR_ARG for a NULL, empty, duplicate
 * or non-UTF-8 name, or a NULL tensor; the file is then untouched. */
NB_API nb_status nb_npz_save(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                             unsigned flags);

/* A loaded archive: its arrays, named without the ".npy", in the order of
 * the central directory (the order they were written in). */
typedef struct nb_npz nb_npz;

/* Reads and checks the whole archive. NB_ERR_NOT_FOUND if it does not
 * exist, NB_ERR_IO if it cannot be read, NB_ERR_FORMAT or
 * NB_ERR_UNSUPPORTED as above. */
NB_API nb_status nb_npz_load(nb_npz **out, const char *path);
NB_API void nb_npz_free(nb_npz *f); /* NULL is fine */

NB_API int nb_npz_count(const nb_npz *f);
/* The i-th name and tensor (borrowed: valid until nb_npz_free; retain the
 * tensor to keep it longer); NULL if i is out of range. */
NB_API const char *nb_npz_name(const nb_npz *f, int i);
NB_API nb_tensor *nb_npz_tensor(const nb_npz *f, int i);
/* The tensor named `name` (borrowed), or NULL. */
NB_API nb_tensor *nb_npz_find(const nb_npz *f, const char *name);

/* ---- .npz: the state of a program ------------------------------------------- */

/* nb_checkpoint_save and nb_checkpoint_load, with a .npz file in place of a
 * safetensors one (and no metadata): every persistable var of block 0 of
 * `program`, one member per var, under the var's name. Saving fails with
 * NB_ERR_NOT_FOUND, naming them, when some vars have no value in `scope`.
 * Loading checks every persistable var against the file first (missing, or
 * another dtype, or a shape that does not fit), reports all mismatches in
 * one NB_ERR_FORMAT message and then leaves the scope untouched; otherwise
 * the values are copied into the tensors the scope holds, or bound as new
 * ones, exactly as nb_checkpoint_load does. A float16 array loads as
 * float32 and an int8/int16/uint16 one as int32 (see the table above), so
 * it fits an NB_F32 or NB_I32 var. */
NB_API nb_status nb_npz_save_state(const char *path, const nb_program *program, nb_scope *scope, unsigned flags);
NB_API nb_status nb_npz_load_state(const char *path, const nb_program *program, nb_scope *scope);

NB_END_DECLS
#endif
