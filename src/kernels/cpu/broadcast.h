/* Broadcasting iteration for elementwise CPU kernels.
 *
 * A kernel that combines up to three inputs element by element (add, less,
 * where, an activation, a cast) describes its operands once with
 * nb_bcast_plan_init() and hands nb_bcast_run() an inner loop. The plan
 * follows NumPy broadcasting: every input is viewed at the output's shape,
 * with stride 0 along the dimensions it is broadcast over.
 *
 * The plan then makes the iteration as flat as it can: it drops dimensions of
 * size 1 and merges neighbouring dimensions that every operand walks
 * uniformly. So the common cases reach the inner loop as few, long runs:
 *
 *     same shape            [N, C] + [N, C]   one run of N*C, all strides 1
 *     scalar                [N, C] + []       one run of N*C, Y stride 0
 *     row (bias add)        [N, C] + [C]      N runs of C, strides 1 and 1
 *     column                [N, C] + [N, 1]   N runs of C, strides 1 and 0
 *     general               [4, 1, 3] + [2, 1] runs along the last merged dim
 *
 * Inside a run every operand advances by a fixed element stride (0 for an
 * operand broadcast along the innermost dimension, 1 for a contiguous one,
 * anything for a strided view), so an inner loop can test for the (1, 1, 1)
 * and the one-stride-0 cases and give the compiler plain loops to vectorise.
 *
 * nb_bcast_run() splits the output into contiguous ranges across the team's
 * threads when the output has at least two `grain`s of elements, and runs
 * serially otherwise. Ranges split runs anywhere, so inner loops must not
 * assume a run starts at the beginning of a row. Outputs may alias inputs of
 * the same shape (in-place ops): each element is read before it is written,
 * and by the same thread. */
#ifndef NABLA_KERNELS_CPU_BROADCAST_H
#define NABLA_KERNELS_CPU_BROADCAST_H

#include <stdint.h>
#include "nabla/tensor.h"
#include "core/tensor_internal.h"

/* Inputs plus the output. */
#define NB_BCAST_MAX_OPERANDS 4

/* Minimum elements per thread: for loops of a few cycles per element
 * (arithmetic, comparisons, copies) and for loops calling libm (exp, erf...),
 * whose per-element cost amortises threading sooner. */
#define NB_BCAST_GRAIN_CHEAP 32768
#define NB_BCAST_GRAIN_MATH 4096

typedef struct nb_bcast_plan {
    int nops;                                            /* inputs, then the output */
    int ndim;                                            /* >= 1 after merging */
    int64_t numel;                                       /* output elements */
    int64_t shape[NB_MAX_DIMS];                          /* merged iteration shape */
    int64_t strides[NB_BCAST_MAX_OPERANDS][NB_MAX_DIMS]; /* in elements; 0 = broadcast */
    int64_t elsize[NB_BCAST_MAX_OPERANDS];               /* bytes per element */
    char *base[NB_BCAST_MAX_OPERANDS];                   /* first element of each operand */
} nb_bcast_plan;

/* An inner loop over one run of n elements. ptr[k] is operand k's first
 * element of the run (inputs first, the output last), stride[k] its step in
 * elements. aux is what the caller gave nb_bcast_run (parameters of the op). */
typedef void (*nb_bcast_loop)(int64_t n, char *const ptr[], const int64_t stride[], const void *aux);

/* Plans iterating `out` together with n_in (1 to 3) inputs that broadcast to
 * its shape. Any strides work (views included); dtypes may differ, elsize
 * follows each tensor's dtype. Returns NB_ERR_SHAPE, naming `label` and the
 * shapes, if an input does not broadcast to the output, so a kernel never
 * reads out of bounds even when handed tensors its infer did not check. */
nb_status nb_bcast_plan_init(nb_bcast_plan *p, const char *label, int n_in, const nb_tensor *const *in,
                             const nb_tensor *out);

/* Calls `loop` over every element of the plan's output, in parallel when
 * there are at least 2 * grain elements (see NB_BCAST_GRAIN_*). */
void nb_bcast_run(const nb_bcast_plan *p, nb_bcast_loop loop, const void *aux, int64_t grain);

/* The common case, seen without the general walk: every operand
 * contiguous, each input of the output's shape or a single element (of no
 * more dims), so the whole output is one run, operand k starting at ptr[k]
 * and stepping step[k] (1, or 0 for a single element). */
static inline bool nb_bcast_flat_operands(int n_in, const nb_tensor *const *in, const nb_tensor *out, char **ptr,
                                          int64_t *step)
{
    if (!nb_is_contiguous_inline(out)) return false;
    for (int k = 0; k < n_in; k++) {
        const nb_tensor *t = in[k];
        bool same = nb_shape_equal_inline(t->ndim, t->shape, out->ndim, out->shape);
        bool single = !same && t->ndim <= out->ndim && nb_shape_numel_inline(t->ndim, t->shape) == 1;
        if (!(same || single) || !nb_is_contiguous_inline(t)) return false;
        step[k] = same ? 1 : 0;
    }
    /* Kernels get tensors with storage: their data is read off directly. */
    for (int k = 0; k <= n_in; k++) {
        const nb_tensor *t = k < n_in ? in[k] : out;
        ptr[k] = (char *)t->storage->data + t->offset * (int64_t)nb_dtype_bytes(t->dtype);
    }
    step[n_in] = 1;
    return true;
}

/* The plan and the run at once, for work too small to split (under 2 *
 * grain elements) whose operands make one run: each input of the output's
 * shape or a single element, all contiguous. Returns false, having done
 * nothing, for any other case, which the caller plans. An eager op on small
 * tensors spent a tenth of its cost filling a plan and reading it back; and
 * inline, as it is, its callers skip two calls on every op. */
static inline bool nb_bcast_run_small_flat(int n_in, const nb_tensor *const *in, const nb_tensor *out,
                                           nb_bcast_loop loop, const void *aux, int64_t grain)
{
    int64_t n = nb_shape_numel_inline(out->ndim, out->shape);
    char *ptr[NB_BCAST_MAX_OPERANDS];
    int64_t step[NB_BCAST_MAX_OPERANDS];
    if (n_in < 1 || n_in >= NB_BCAST_MAX_OPERANDS || n >= 2 * grain ||
        !nb_bcast_flat_operands(n_in, in, out, ptr, step))
        return false;
    if (n > 0) loop(n, ptr, step, aux);
    return true;
}

#endif
