/* Parameters of the attention ops, as their kernels read them
 * (nabla/kernel.h). The op definitions (src/ops/attention.c) fill them from
 * the attributes once. Device independent. */
#ifndef NABLA_KERNELS_PARAMS_ATTENTION_H
#define NABLA_KERNELS_PARAMS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

/* scaled_dot_product_attention, its grad op and its mask ops. */
typedef struct nb_attention_params {
    double scale;   /* the scores' factor; 0: 1/sqrt(D), which only the kernel knows */
    double dropout; /* probability of dropping a weight; 0 when is_test */
    bool causal;    /* query i sees keys j <= i */
    int64_t heads;  /* > 0: Q, K, V hold that many heads side by side in their last dim */
} nb_attention_params;

#endif
