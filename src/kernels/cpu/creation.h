/* CPU kernels of the creation family: constant fills, copies, random
 * initialisers and the in-place counter increment. The op definitions (and
 * the validation of their attributes) live in src/ops/creation.c, the
 * parameter structs in kernels/params/creation.h; the kernels, registered
 * through nb_cpu_kernels_creation, trust that `infer` has already run.
 * Private to the library. */
#ifndef NABLA_KERNELS_CPU_CREATION_H
#define NABLA_KERNELS_CPU_CREATION_H

#include "nabla/tensor.h"
#include "../params/creation.h"

/* Every element of `out` = value, converted to out's dtype (float32,
 * float64, int32, int64, uint8 or bool; NB_ERR_DTYPE naming `label` for
 * others). */
nb_status nb_cpu_fill(const char *label, nb_tensor *out, double value);

/* out = x, any dtype, same size; out may be x itself. */
nb_status nb_cpu_assign(const nb_tensor *x, nb_tensor *out);

#endif
