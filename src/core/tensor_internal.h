/* Helpers shared by the tensor code and kernels; not part of the public API. */
#ifndef NABLA_TENSOR_INTERNAL_H
#define NABLA_TENSOR_INTERNAL_H

#include "nabla/tensor.h"

/* Element i of a contiguous buffer of dtype dt, through double. */
double nb_load(nb_dtype dt, const void *p, int64_t i);
void nb_store(nb_dtype dt, void *p, int64_t i, double v);
void nb_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/* Called when a tensor carrying eager-mode state is freed (set by the eager
 * engine, once per process, before the first tensor gets that state). */
extern void (*nb_tensor_autograd_free_hook)(nb_tensor *t);

#endif
