/* CPU kernels of the linear-algebra family (src/ops/linalg.c): matmul and fc,
 * both on top of the shared GEMM in gemm.h. */
#ifndef NABLA_KERNELS_CPU_LINALG_H
#define NABLA_KERNELS_CPU_LINALG_H

#include "nabla/op.h"

/* How a matmul of X and Y lines up, NumPy style: a 1-D X is a row [1, K]
 * and a 1-D Y a column [K, 1] (the added dim is dropped from Out, and
 * transpose flags do not apply to them); the dims before the last two are
 * batch dims and broadcast. Dims may be -1 at build time. */
typedef struct nb_matmul_dims {
    int64_t M, N, K;       /* op(X) is M x K, op(Y) is K x N */
    bool x_vec, y_vec;     /* 1-D operands */
    bool tx, ty;           /* transposes that apply */
    int batch_ndim;
    int64_t batch[NB_MAX_DIMS];
} nb_matmul_dims;

/* Works out the dims and checks them; errors name `label` and both shapes,
 * e.g. "matmul: X has shape [64, 784] but Y has shape [256, 10]: inner
 * dimensions differ". */
nb_status nb_matmul_dims_of(const char *label, const nb_var_info *x, const nb_var_info *y, bool transpose_x,
                            bool transpose_y, nb_matmul_dims *d);
/* Out's shape from the dims. */
void nb_matmul_out_shape(const nb_matmul_dims *d, int *ndim, int64_t *shape);

/* fc's fused activations. */
typedef enum nb_fc_act { NB_FC_NONE, NB_FC_RELU, NB_FC_SIGMOID, NB_FC_TANH } nb_fc_act;
/* Parses the "activation" attribute; false if unknown. */
bool nb_fc_act_parse(const char *name, nb_fc_act *act);

nb_status nb_cpu_matmul(nb_op_ctx *ctx);
nb_status nb_cpu_fc(nb_op_ctx *ctx);

#endif
