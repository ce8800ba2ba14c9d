/* nabla/tensor.h: n-dimensional arrays.
 *
 * A tensor is a view (dtype, shape, strides, offset) of a reference-counted,
 * 64-byte-aligned storage. Views made by reshape, permute, slice and expand
 * share the storage of their base; strides and the offset count elements, not
 * bytes, and an expanded dimension has stride 0.
 *
 * Tensors are reference counted: every function that gives you a tensor
 * gives you one reference, which you drop with nb_tensor_release(). */
#ifndef NABLA_TENSOR_H
#define NABLA_TENSOR_H

#include "nabla/export.h"

#include <stdint.h>
#include <stdio.h>
#include "nabla/device.h"
#include "nabla/dtype.h"

NB_BEGIN_DECLS

#define NB_MAX_DIMS 8

typedef struct nb_storage {
    void *data;       /* 64-byte aligned, owned unless `borrowed` */
    nb_device device; /* where data lives, and whose allocator frees it */
    size_t nbytes;
    int refcount;
    bool borrowed;           /* wraps user memory that nabla must not free */
    uint64_t version;        /* in-place writes so far (eager mode checks saved values with it) */
    const char *last_writer; /* the op type of the last in-place write, for messages */
    bool inline_data;        /* data (at most 256 bytes) lives in this struct's own block and goes with it */
    bool in_block;           /* lives in the block of the tensor it was made with, and frees that block */
} nb_storage;

typedef struct nb_tensor {
    int refcount;
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    int64_t strides[NB_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements, into storage */
    nb_storage *storage;
    void *autograd; /* eager-mode state; NULL otherwise */
} nb_tensor;

/* A list of tensors (nb_op_run's inputs, nb_autograd_grad's outputs and
 * inputs): NB_TENSORS(a, b) in C, nb_tensors{n, array} in C++. */
typedef struct nb_tensors {
    int n;
    nb_tensor *const *v;
} nb_tensors;
/* The array behind the list is a compound literal, which lives only until
 * the end of the enclosing block: pass the list to a call, or keep it in a
 * variable used only inside that block (one made in an `if` and used after
 * it points at dead stack). */
#define NB_TENSORS(...) ((nb_tensors){(int)(sizeof((nb_tensor *[]){__VA_ARGS__}) / sizeof(nb_tensor *)), (nb_tensor *[]){__VA_ARGS__}})
#define NB_TENSORS_N(count, array) ((nb_tensors){(count), (array)})
#define NB_NO_TENSORS ((nb_tensors){0, 0})

/* ---- creation --------------------------------------------------------- */

/* A new contiguous tensor; its contents are zero. ndim may be 0 (a scalar). */
NB_API nb_status nb_tensor_new(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape);
/* A new contiguous tensor holding a copy of `data` (ndim/shape as above). */
NB_API nb_status nb_tensor_from_data(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, const void *data);
/* A tensor over memory the caller owns and keeps alive; nabla never frees it. */
NB_API nb_status nb_tensor_wrap(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, void *data);
NB_API nb_status nb_tensor_scalar(nb_tensor **out, nb_dtype dtype, double value);
NB_API nb_status nb_tensor_full(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, double value);

NB_API nb_tensor *nb_tensor_retain(nb_tensor *t); /* returns t */
NB_API void nb_tensor_release(nb_tensor *t);      /* NULL is fine */

/* ---- properties ------------------------------------------------------- */

NB_API int64_t nb_tensor_numel(const nb_tensor *t);
NB_API bool nb_tensor_is_contiguous(const nb_tensor *t); /* an empty one always is */
/* Address of the first element (storage data + offset). */
NB_API void *nb_tensor_data(const nb_tensor *t);
NB_API bool nb_shape_equal(int nda, const int64_t *a, int ndb, const int64_t *b);
NB_API int64_t nb_shape_numel(int ndim, const int64_t *shape);
/* Formats a shape as "[64, 784]" into buf (returns buf). -1 prints as -1. */
NB_API char *nb_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);
#define NB_SHAPE_STR_MAX 200

/* ---- element access (any dtype, converted through double) --------------- */

/* Reads/writes the element at flat row-major index i of the logical view. */
NB_API double nb_tensor_get(const nb_tensor *t, int64_t i);
NB_API void nb_tensor_set(nb_tensor *t, int64_t i, double v);
/* Element at a multi-index (ndim entries). */
NB_API double nb_tensor_at(const nb_tensor *t, const int64_t *index);

/* ---- views (share storage; no copy) ------------------------------------ */

/* Reshape; one dimension may be -1. A non-contiguous source is copied. */
NB_API nb_status nb_tensor_reshape(nb_tensor **out, nb_tensor *t, int ndim, const int64_t *shape);
NB_API nb_status nb_tensor_permute(nb_tensor **out, nb_tensor *t, const int *perm);
NB_API nb_status nb_tensor_transpose(nb_tensor **out, nb_tensor *t, int dim0, int dim1);
/* Elements start..stop-1 step `step` (> 0) along `dim`; negative start/stop
 * count from the end and both are clamped, as in Python. */
NB_API nb_status nb_tensor_slice(nb_tensor **out, nb_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
/* Broadcasts to `shape` (NumPy rules) by giving stride 0 to expanded dims. */
NB_API nb_status nb_tensor_expand(nb_tensor **out, nb_tensor *t, int ndim, const int64_t *shape);

/* ---- copies ------------------------------------------------------------ */

/* A contiguous tensor with the same values (t itself, retained, if already). */
NB_API nb_status nb_tensor_contiguous(nb_tensor **out, nb_tensor *t);
NB_API nb_status nb_tensor_clone(nb_tensor **out, const nb_tensor *t);
/* Copies src's values into dst, converting dtype; src broadcasts to dst. */
NB_API nb_status nb_tensor_copy_into(nb_tensor *dst, const nb_tensor *src);
NB_API nb_status nb_tensor_cast(nb_tensor **out, const nb_tensor *t, nb_dtype dtype);

/* ---- broadcasting -------------------------------------------------------- */

/* NumPy broadcasting of two shapes. -1 (unknown) broadcasts with anything
 * except a conflicting known size, giving -1 unless the other side is known
 * and not 1. On mismatch returns NB_ERR_SHAPE without setting an error text;
 * the caller names its op. */
NB_API nb_status nb_broadcast_shapes(int nda, const int64_t *a, int ndb, const int64_t *b, int *ndim_out, int64_t *out);

/* ---- comparison and printing ---------------------------------------------- */

/* True if same shape and every |a-b| <= atol + rtol*|b| (NaNs equal NaNs). */
NB_API bool nb_tensor_allclose(const nb_tensor *a, const nb_tensor *b, double rtol, double atol);

/* Prints as PyTorch does: tensor([[1.0000, 2.0000], ...], dtype=float64).
 * Long dimensions are summarised with "...". */
NB_API nb_status nb_tensor_print(const nb_tensor *t, FILE *f);
/* The same text into a string the caller releases with nb_free. */
NB_API char *nb_tensor_to_string(const nb_tensor *t);

NB_END_DECLS

#endif
