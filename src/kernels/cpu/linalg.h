/* The dims of a matmul, which its CPU kernel (linalg.c, registered in
 * nb_cpu_kernels_linalg), shape inference and the gradient rules all work
 * out the same way. */
#ifndef NABLA_KERNELS_CPU_LINALG_H
#define NABLA_KERNELS_CPU_LINALG_H

#include "nabla/kernel.h"
#include "kernels/params/linalg.h"

/* How a matmul of X and Y lines up, NumPy style: a 1-D X is a row [1, K]
 * and a 1-D Y a column [K, 1] (the added dim is dropped from Out, and
 * transpose flags do not apply to them); the dims before the last two are
 * batch dims and broadcast. Dims may be -1 at build time. */
typedef struct nb_matmul_dims {
    int64_t M, N, K;   /* op(X) is M x K, op(Y) is K x N */
    bool x_vec, y_vec; /* 1-D operands */
    bool tx, ty;       /* transposes that apply */
    int batch_ndim;
    int64_t batch[NB_MAX_DIMS];
} nb_matmul_dims;

/* Works out the dims from the shapes of X and Y and checks them; errors
 * name `label` and both shapes, e.g. "matmul: X has shape [64, 784] but Y
 * has shape [256, 10]: inner dimensions differ". */
nb_status nb_matmul_dims_shapes(const char *label, int x_ndim, const int64_t *x_shape, int y_ndim,
                                const int64_t *y_shape, bool transpose_x, bool transpose_y, nb_matmul_dims *d);
/* The same for anything with `ndim` and `shape`: an nb_var_info at build
 * time, an nb_tensor at run time. A macro, so that this header needs
 * neither type's definition (nb_var_info belongs to the op layer). */
#define nb_matmul_dims_of(label, x, y, transpose_x, transpose_y, d) \
    nb_matmul_dims_shapes((label), (x)->ndim, (x)->shape, (y)->ndim, (y)->shape, (transpose_x), (transpose_y), (d))
/* Out's shape from the dims. */
void nb_matmul_out_shape(const nb_matmul_dims *d, int *ndim, int64_t *shape);

#endif
