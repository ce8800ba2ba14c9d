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
#include "nabla/tensor.h"

/* ---- binary, NumPy broadcasting, X and Y of one dtype ------------------------ */

typedef enum nb_ew_binary_op {
    NB_EW_ADD,
    NB_EW_SUB,
    NB_EW_MUL,
    NB_EW_DIV, /* integers: truncating; a zero divisor is an error */
    NB_EW_POW,
    NB_EW_MAXIMUM, /* NaN in either operand gives NaN */
    NB_EW_MINIMUM,
    NB_EW_BINARY_COUNT
} nb_ew_binary_op;

bool nb_ew_binary_supports(nb_ew_binary_op op, nb_dtype dt);
/* out = x (op) y with x and y broadcast to out's shape; `label` names the op
 * in errors. */
nb_status nb_ew_binary(nb_ew_binary_op op, const nb_tensor *x, const nb_tensor *y, nb_tensor *out,
                       const char *label);

/* ---- unary, same shape and dtype in and out ----------------------------------- */

typedef enum nb_ew_unary_op {
    NB_EW_NEG,
    NB_EW_ABS,
    NB_EW_SIGN,
    NB_EW_SQUARE,
    NB_EW_SQRT,
    NB_EW_RSQRT,
    NB_EW_EXP,
    NB_EW_LOG,
    NB_EW_LOG1P,
    NB_EW_SIN,
    NB_EW_COS,
    NB_EW_TAN,
    NB_EW_TANH,
    NB_EW_SIGMOID,
    NB_EW_RELU,
    NB_EW_LEAKY_RELU,  /* alpha */
    NB_EW_ELU,         /* alpha */
    NB_EW_GELU,        /* exact: x * Phi(x) */
    NB_EW_GELU_TANH,   /* the tanh approximation */
    NB_EW_SOFTPLUS,    /* beta, threshold */
    NB_EW_SILU,
    NB_EW_CLIP,        /* lo, hi */
    NB_EW_SCALE,       /* scale * x + bias */
    NB_EW_SCALE_FIRST_BIAS, /* scale * (x + bias) */
    NB_EW_UNARY_COUNT
} nb_ew_unary_op;

/* The parameters an op reads; the others are ignored. */
typedef struct nb_ew_params {
    double alpha;
    double beta, threshold;
    double lo, hi;
    double scale, bias;
} nb_ew_params;

bool nb_ew_unary_supports(nb_ew_unary_op op, nb_dtype dt);
/* params may be NULL for ops without parameters. */
nb_status nb_ew_unary(nb_ew_unary_op op, const nb_tensor *x, nb_tensor *out, const nb_ew_params *params,
                      const char *label);

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

#endif
