/* CPU kernels of the comparison family: comparisons and logic (bool
 * outputs, NumPy broadcasting) and where. Like the elementwise kernels they
 * take tensors, so other kernels can call them; inputs may be views. */
#ifndef NABLA_KERNELS_CPU_COMPARE_H
#define NABLA_KERNELS_CPU_COMPARE_H

#include "nabla/tensor.h"

typedef enum nb_cmp_op { NB_CMP_EQ, NB_CMP_NE, NB_CMP_LT, NB_CMP_LE, NB_CMP_GT, NB_CMP_GE, NB_CMP_COUNT } nb_cmp_op;

typedef enum nb_logic_op {
    NB_LOGIC_AND,
    NB_LOGIC_OR,
    NB_LOGIC_XOR,
    NB_LOGIC_NOT, /* takes x only */
    NB_LOGIC_COUNT
} nb_logic_op;

/* out (bool) = x (op) y; x and y share any one dtype and broadcast to out.
 * NaN compares unequal to everything, itself included. */
nb_status nb_cmp(nb_cmp_op op, const nb_tensor *x, const nb_tensor *y, nb_tensor *out, const char *label);

/* out (bool) = truth of x (op) truth of y, where a value is true if nonzero
 * (NaN included). x and y may have any dtypes, even different ones; y is
 * NULL for NB_LOGIC_NOT. */
nb_status nb_logic(nb_logic_op op, const nb_tensor *x, const nb_tensor *y, nb_tensor *out, const char *label);

#endif
