/* CPU kernels of the elementwise family: broadcasting binary arithmetic
 * (elementwise.c), unary math and activations (unary.c) and dtype casts
 * (cast.c). They work on tensors, not op contexts, so other kernels can call
 * them directly (an optimiser adding tensors, a loss casting labels).
 *
 * Inputs may be any strided views; outputs must already have the result's
 * shape and dtype. An output may be the same tensor as an input of its shape. */
#ifndef NABLA_KERNELS_CPU_ELEMENTWISE_H
#define NABLA_KERNELS_CPU_ELEMENTWISE_H

#include <stdbool.h>
#include "nabla/kernel.h"
#include "nabla/tensor.h"
#include "../params/elementwise.h"

/* ---- binary, NumPy broadcasting, X and Y of one dtype ------------------------ */

/* NB_EW_<name>, one per NB_BINARY line of nabla/elementwise_ops.h. Integer
 * div truncates; a zero divisor is an error. maximum and minimum give NaN if
 * either operand is NaN. */
typedef enum nb_ew_binary_op {
#define NB_BINARY(name, ...) NB_EW_##name,
#include "nabla/elementwise_ops.h"
    NB_EW_BINARY_COUNT
} nb_ew_binary_op;

bool nb_ew_binary_supports(nb_ew_binary_op op, nb_dtype dt);
/* out = x (op) y with x and y broadcast to out's shape; `label` names the op
 * in errors. */
nb_status nb_ew_binary(nb_ew_binary_op op, const nb_tensor *x, const nb_tensor *y, nb_tensor *out, const char *label);

/* ---- unary, same shape and dtype in and out ----------------------------------- */

/* NB_EW_<name>, one per unary line of nabla/elementwise_ops.h, then the
 * loops of the ops written out in full. */
typedef enum nb_ew_unary_op {
#define NB_UNARY(name, ...) NB_EW_##name,
#define NB_UNARY_A1(name, ...) NB_EW_##name,
#define NB_UNARY_A2(name, ...) NB_EW_##name,
#include "nabla/elementwise_ops.h"
    NB_EW_gelu,        /* exact: x * Phi(x) */
    NB_EW_gelu_tanh,   /* the tanh approximation */
    NB_EW_clip,        /* min, max */
    NB_EW_scale,       /* scale * x + bias */
    NB_EW_scale_first, /* scale * (x + bias) */
    NB_EW_UNARY_COUNT
} nb_ew_unary_op;

bool nb_ew_unary_supports(nb_ew_unary_op op, nb_dtype dt);
/* params may be NULL for ops without parameters. */
nb_status nb_ew_unary(nb_ew_unary_op op, const nb_tensor *x, nb_tensor *out, const nb_ew_params *params,
                      const char *label);

/* gelu's gradient: out = dout * gelu'(x), exact or (approximate) the tanh
 * form's; x and dout of one float dtype, broadcast to out's shape. */
nb_status nb_ew_gelu_grad(const nb_tensor *x, const nb_tensor *dout, nb_tensor *out, bool approximate,
                          const char *label);

/* ---- the same loops over slices (nb_kernel_def.pointwise) --------------------------
 * Each fills `f` and returns true, or false where the op cannot run on bare
 * slices: integer div (which checks for a zero divisor first), integer scale
 * (whose exact form is chosen from the parameters) and dtypes it does not
 * take. `params` must outlive the loop's use of f->aux. */
bool nb_ew_binary_pointwise(nb_ew_binary_op op, nb_dtype dt, nb_pointwise *f);
bool nb_ew_unary_pointwise(nb_ew_unary_op op, nb_dtype dt, const nb_ew_params *params, nb_pointwise *f);
bool nb_ew_gelu_grad_pointwise(bool approximate, nb_dtype dt, nb_pointwise *f);

/* ---- casts ---------------------------------------------------------------------- */

/* Copies x into out (same shape, x may broadcast to it) converting between
 * any two dtypes. Floats to integers truncate toward zero and saturate at
 * the target's range (NaN gives 0); integers to narrower integers wrap, as
 * in C, NumPy and PyTorch; anything to bool is x != 0. */
nb_status nb_ew_cast(const nb_tensor *x, nb_tensor *out, const char *label);

/* Float to integer without undefined behaviour: truncates toward zero and
 * saturates at [lo, hi]; NaN gives lo (callers that want 0 test first). The
 * comparisons are exact since lo and the double nearest hi bound the range. */
static inline int64_t nb_ew_sat_i64(double v, int64_t lo, int64_t hi)
{
    if (!(v > (double)lo)) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

/* The body of a one-input map kernel (an nb_loop_fn over p[0] -> p[1]):
 * v, the element of x (of type S), becomes EXPR in o (of type D); the
 * contiguous case apart, so that it vectorises. */
#define NB_MAP_LOOP_BODY(S, D, EXPR)                                                  \
    const S *x = (const S *)p[0];                                                    \
    D *o = (D *)p[1];                                                                \
    if (s[0] == 1 && s[1] == 1) {                                                    \
        for (int64_t i = 0; i < n; i++) {                                            \
            S v = x[i];                                                              \
            o[i] = (EXPR);                                                           \
        }                                                                            \
    } else {                                                                         \
        for (int64_t i = 0; i < n; i++) {                                            \
            S v = x[i * s[0]];                                                       \
            o[i * s[1]] = (EXPR);                                                    \
        }                                                                            \
    }

#endif
