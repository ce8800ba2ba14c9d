/* CPU kernels of the creation family: constant fills, copies, random
 * initialisers and the in-place counter increment. The op definitions (and
 * the validation of their attributes) live in src/ops/creation.c; these
 * kernels trust that `infer` has already run on the same attributes. */
#ifndef NABLA_KERNELS_CPU_CREATION_H
#define NABLA_KERNELS_CPU_CREATION_H

#include "nabla/op.h"

/* Out = attribute "value" (fill_constant, fill_constant_batch_size_like). */
nb_status nb_cpu_fill_constant(nb_op_ctx *ctx);
nb_status nb_cpu_fill_zeros_like(nb_op_ctx *ctx);
nb_status nb_cpu_ones_like(nb_op_ctx *ctx);
/* Out = X, any dtype; Out may be X itself. */
nb_status nb_cpu_assign(nb_op_ctx *ctx);

/* Random initialisers (float32 and float64). Element i reads generator
 * positions that depend only on i and the generator's state on entry, so
 * the values do not depend on the number of threads; on return ctx->rng has
 * moved past every position used. */
nb_status nb_cpu_uniform_random(nb_op_ctx *ctx);
nb_status nb_cpu_gaussian_random(nb_op_ctx *ctx);
nb_status nb_cpu_truncated_gaussian_random(nb_op_ctx *ctx);

/* Out = X + step for a one-element X (Out may be X). */
nb_status nb_cpu_increment(nb_op_ctx *ctx);

#endif
