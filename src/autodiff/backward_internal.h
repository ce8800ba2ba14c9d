/* The recursion of the backward pass into sub-blocks (as Fluid's), for the
 * gradient rules of control-flow ops. */
#ifndef NABLA_BACKWARD_INTERNAL_H
#define NABLA_BACKWARD_INTERNAL_H

#include "nabla/autodiff.h"

/* Creates a grad block whose parent is sub-block `fwd_idx` (its index in
 * *grad_idx) and writes into it the gradient of `targets` (vars of the
 * sub-block) with respect to `inputs` (its own vars, or outer vars it
 * reads), as nb_gradients does for block 0: shared gradients renamed and
 * summed, fill_zeros_like where needed, dead ops removed, and sub-blocks of
 * its own recursed into. The gradient of targets[i] is read from var
 * seeds[i], which this creates in the grad block for the caller's op to fill.
 * out->grads[i] names the gradient of inputs[i] (NULL: it has none). */
nb_status nb_backward_sub_block(nb_program *p, int fwd_idx, nb_names targets, const char *const *seeds, nb_names inputs,
                                int *grad_idx, nb_backward_result *out);

#endif
