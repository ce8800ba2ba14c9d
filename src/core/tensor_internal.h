/* Helpers shared by the tensor code and kernels; not part of the public API. */
#ifndef NABLA_TENSOR_INTERNAL_H
#define NABLA_TENSOR_INTERNAL_H

#include "nabla/tensor.h"

/* Inline forms of nb_dtype_size, nb_shape_numel, nb_shape_equal and
 * nb_tensor_is_contiguous (which are defined by them), for the paths every
 * op takes: an eager op on a small tensor asked each several times, and the
 * calls were a twentieth of its cost. */
static inline size_t nb_dtype_bytes(nb_dtype t)
{
    static const unsigned char bytes[NB_DTYPE_COUNT] = {
        [NB_F32] = 4, [NB_F64] = 8, [NB_I32] = 4, [NB_I64] = 8, [NB_U8] = 1, [NB_BOOL] = 1};
    return (unsigned)t < NB_DTYPE_COUNT ? bytes[t] : 0;
}

static inline int64_t nb_shape_numel_inline(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

static inline bool nb_shape_equal_inline(int nda, const int64_t *a, int ndb, const int64_t *b)
{
    if (nda != ndb) return false;
    for (int i = 0; i < nda; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static inline bool nb_has_no_elements_inline(const nb_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0) return true;
    return false;
}

/* An empty tensor is contiguous whatever its strides: no element is out of
 * place. (A new one's strides count a 0 dim as 1, which the running product,
 * 0 from that dim on, never matches.) Asked only on a mismatch, so the usual
 * case pays nothing. */
static inline bool nb_is_contiguous_inline(const nb_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s) return nb_has_no_elements_inline(t);
        s *= t->shape[i];
    }
    return true;
}

/* nb_tensor_release for the paths every eager op takes twice per value:
 * dropping a reference that is not the last needs no call. */
static inline void nb_tensor_release_inline(nb_tensor *t)
{
    if (t && t->refcount > 1) t->refcount--;
    else nb_tensor_release(t);
}

/* Element i of a contiguous buffer of dtype dt, through double. */
double nb_load(nb_dtype dt, const void *p, int64_t i);
void nb_store(nb_dtype dt, void *p, int64_t i, double v);
void nb_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* nb_tensor_new without zeroing the elements: for the outputs of kernels
 * that write every one (NB_OP_WRITES_ALL, NB_OP_INPLACE), as the executor's
 * buffers are. */
nb_status nb_tensor_new_uninit(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape);
/* Whether NABLA_POISON=1: memory handed out uninitialised (the tensors
 * above, and the executor's buffers for such kernels) is filled with 0xff
 * bytes (NaN in every float dtype, -1 in the integers) instead, so that a
 * kernel flagged as writing every element that leaves one unwritten shows
 * up in the tests as a wrong result. */
bool nb_poison_uninit(void);

/* Room for a tensor's eager-mode state in the block it was made with (the
 * tensor, its storage and small data, one allocation): the tape gives every
 * op output that state, and a calloc of its own per output was a twentieth
 * of recording an op. NULL for a tensor that is not its block's own (a view,
 * a shell over borrowed memory). */
#define NB_TENSOR_ROOM 96
void *nb_tensor_room(nb_tensor *t);
/* Warms the block that a tensor of t's size would be made in next. */
void nb_tensor_prefetch_block_like(const nb_tensor *t);
/* Warms t itself, its storage and autograd state, and small data, without
 * reading t first (t may be cold). */
void nb_tensor_prefetch(const nb_tensor *t);

/* Called when a tensor carrying eager-mode state is freed (set by the eager
 * engine, once per process, before the first tensor gets that state). */
extern void (*nb_tensor_autograd_free_hook)(nb_tensor *t);

#endif
