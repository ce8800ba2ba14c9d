/* Parameter structs of the linear-algebra family (src/ops/linalg.c), filled
 * once from the attributes by the ops' params functions and read by every
 * backend's kernels. */
#ifndef NABLA_KERNELS_PARAMS_LINALG_H
#define NABLA_KERNELS_PARAMS_LINALG_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* matmul: Out = alpha * op(X) @ op(Y). */
typedef struct nb_matmul_params {
    bool transpose_x, transpose_y;
    double alpha;
} nb_matmul_params;

/* fc's fused activations. */
typedef enum nb_fc_act { NB_FC_NONE, NB_FC_RELU, NB_FC_SIGMOID, NB_FC_TANH } nb_fc_act;

/* fc: Out = act(flatten(Input, in_num_col_dims) @ W + Bias). */
typedef struct nb_fc_params {
    int64_t in_num_col_dims;
    nb_fc_act act;
} nb_fc_params;

/* Parses the "activation" attribute; false if unknown. Shape inference,
 * the params function and the gradient rules all read it this way. */
static inline bool nb_fc_act_parse(const char *name, nb_fc_act *act)
{
    static const char *const names[] = {"", "relu", "sigmoid", "tanh"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) {
            *act = (nb_fc_act)i;
            return true;
        }
    return false;
}

#endif
