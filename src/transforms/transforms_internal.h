/* The transforms' paths kept beside the batched ones (private): Jacobians
 * without vmap, a forward pass per set of up to 32 columns (jacfwd) or a
 * pullback per row (jacrev). nb_jacfwd and nb_jacrev take them for inputs
 * vmap cannot batch (integer, empty); tests compare the two. */
#ifndef NABLA_TRANSFORMS_INTERNAL_H
#define NABLA_TRANSFORMS_INTERNAL_H

#include "nabla/transforms.h"

nb_status nb_jacfwd_by_sets(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac);
nb_status nb_jacrev_by_rows(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac);

#endif
