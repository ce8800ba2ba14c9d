/* Parameters of the creation ops, as their kernels read them
 * (nabla/kernel.h). The op definitions (src/ops/creation.c) fill them from
 * the attributes once; shape and dtype attributes have already shaped the
 * output and do not appear. Device independent. */
#ifndef NABLA_KERNELS_PARAMS_CREATION_H
#define NABLA_KERNELS_PARAMS_CREATION_H

#include <stdint.h>

/* fill_constant and fill_constant_batch_size_like. */
typedef struct nb_fill_constant_params {
    double value;
} nb_fill_constant_params;

/* uniform_random: values in [min, max). */
typedef struct nb_uniform_random_params {
    double min, max;
} nb_uniform_random_params;

/* gaussian_random and truncated_gaussian_random. */
typedef struct nb_gaussian_random_params {
    double mean, std;
} nb_gaussian_random_params;

/* assign_value: the constant's n elements, from fp_values for float dtypes
 * and int_values for the others (pointers into the op's attributes). */
typedef struct nb_assign_value_params {
    int64_t n;
    const double *fp_values;
    const int64_t *int_values;
} nb_assign_value_params;

/* increment. */
typedef struct nb_increment_params {
    double step;
} nb_increment_params;

#endif
