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

#endif
