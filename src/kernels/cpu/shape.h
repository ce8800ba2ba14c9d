/* CPU kernels that move elements without looking at their values: strided
 * copies (transpose, expand, slice), concatenation and its inverse, and
 * padding. They work on raw bytes, so every dtype goes through the same code;
 * `elsize` is the size of one element in bytes. Destinations are contiguous
 * and must not overlap the sources (the family's kernels route aliased
 * outputs through a scratch buffer: nb_cpu_shape_out_begin).
 *
 * Also the helpers the family's kernels share and the kernel definitions
 * of shape_kernels.c, which the table in shape.c lists. */
#ifndef NABLA_KERNELS_CPU_SHAPE_H
#define NABLA_KERNELS_CPU_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "kernels/params/shape.h"
#include "nabla/dtype.h"
#include "nabla/kernel.h"
#include "nabla/status.h"

/* Below this many elements a kernel runs on one thread: starting a team run
 * costs more than the copy. */
#define NB_SHAPE_PARALLEL_MIN 32768
#define NB_SHAPE_PARALLEL_BYTES (NB_SHAPE_PARALLEL_MIN * 4)

/* dst (contiguous, shape `shape`) receives the view of src whose element at
 * multi-index (i_0, ..., i_{n-1}) lies at src + sum(i_k * strides[k])
 * elements. Strides are >= 0; a stride of 0 repeats an element (expand). */
void nb_cpu_strided_copy(void *dst, const void *src, int ndim, const int64_t *shape, const int64_t *strides,
                         size_t elsize);

/* Concatenation of `n` blocks viewed as [outer, row_bytes[i]] byte matrices
 * along their rows: row o of dst is row o of src[0], then of src[1], ... */
void nb_cpu_concat(void *dst, int n, const void *const *src, const size_t *row_bytes, int64_t outer);
/* The inverse: row o of src is cut into pieces of row_bytes[i] for dst[i]. */
void nb_cpu_split(void *const *dst, int n, const void *src, const size_t *row_bytes, int64_t outer);

/* Pads src (shape in_shape) by pads[2d] elements before and pads[2d+1] after
 * dimension d. Constant mode writes the element `fill` (elsize bytes) in the
 * border; reflect mirrors without repeating the edge (pads < dim size);
 * edge repeats the edge element (dim size > 0 where a pad is non-zero). The
 * caller validates those conditions. Fails only for lack of memory, with
 * NB_ERR_NOMEM and no error text: the caller reports it under its name. */
nb_status nb_cpu_pad(void *dst, const void *src, int ndim, const int64_t *in_shape, const int64_t *pads,
                     nb_pad_mode mode, const void *fill, size_t elsize);

/* The gradient of nb_cpu_pad: dst (shape in_shape) = the sum of the
 * elements of src (the padded shape) that pad copied from each element;
 * the constant border adds to nothing. float32 and float64 only
 * (NB_ERR_DTYPE otherwise, with no error text); fails otherwise only as
 * nb_cpu_pad does. */
nb_status nb_cpu_pad_grad(nb_dtype dt, void *dst, const void *src, int ndim, const int64_t *in_shape,
                          const int64_t *pads, nb_pad_mode mode);

/* ---- helpers of the family's kernels (shape_kernels.c) ----------------------- */

/* Product of shape[from..to), -1 if any of those dims is unknown. */
static inline int64_t nb_cpu_shape_product(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) {
        if (shape[d] < 0) return -1;
        p *= shape[d];
    }
    return p;
}

/* Whether the bytes of two tensors' elements intersect. */
bool nb_cpu_shape_overlap(const nb_tensor *a, const nb_tensor *b);

/* Kernels that move elements around cannot write into memory they still
 * read, and an output may be an input's own tensor. nb_cpu_shape_out_begin
 * gives the place to write: the output itself, or, when it overlaps any
 * input of `k`, a scratch buffer that nb_cpu_shape_out_end copies into it
 * afterwards (on failure, free `scratch` instead). */
typedef struct nb_cpu_shape_out {
    nb_tensor *t;
    void *data;
    void *scratch;
} nb_cpu_shape_out;

nb_status nb_cpu_shape_out_begin(const nb_kernel_ctx *k, nb_tensor *out, nb_cpu_shape_out *b);
void nb_cpu_shape_out_end(nb_cpu_shape_out *b);

/* ---- the kernels of shape_kernels.c, listed by nb_cpu_kernels_shape ---------- */

extern const nb_kernel_def nb_cpu_kernel_reshape, nb_cpu_kernel_flatten, nb_cpu_kernel_squeeze, nb_cpu_kernel_unsqueeze,
    nb_cpu_kernel_reshape_as, nb_cpu_kernel_transpose, nb_cpu_kernel_expand, nb_cpu_kernel_expand_as,
    nb_cpu_kernel_concat, nb_cpu_kernel_stack, nb_cpu_kernel_split, nb_cpu_kernel_slice, nb_cpu_kernel_pad,
    nb_cpu_kernel_pad_grad;

#endif
