/* Gradient rules for fused ops from a composite definition.
 *
 * A fused op (batch_norm_grad, say) is fast as one kernel but has no
 * derivative of its own. Given a function that computes the same outputs
 * with primitive ops, these rules differentiate that function: the JVP runs
 * each primitive's JVP rule beside it (dual numbers), the VJP records the
 * primitives it emits and runs their VJP rules in reverse, summing the
 * cotangents of values used more than once. Both work on any builder, so
 * the fused op gets second derivatives and forward over reverse in static
 * programs and on the tape alike. */
#ifndef NABLA_COMPOSITE_H
#define NABLA_COMPOSITE_H

#include "nabla/grad_rule.h"

typedef struct nb_composite nb_composite;

/* Computes the fused op's outputs y (one per output of g, NB_NONE for one
 * not needed) from its inputs x, emitting primitives with nb_cmp_emit.
 * g gives the attributes and which inputs are present. */
typedef nb_status (*nb_composite_fn)(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y);

/* Emits primitive `type` (fixed slots, all present, one output). */
nb_value nb_cmp_emit(nb_composite *c, const char *type, int n_in, const nb_value *in, int n_attrs,
                     const nb_attr *attrs);
nb_builder *nb_cmp_builder(nb_composite *c);

nb_status nb_composite_jvp(nb_builder *b, nb_grad_ctx *g, nb_composite_fn fn);
nb_status nb_composite_vjp(nb_builder *b, nb_grad_ctx *g, nb_composite_fn fn);

#endif
