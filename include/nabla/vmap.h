/* nabla/vmap.h: vectorising map (JAX's vmap, functorch's vmap).
 *
 * nb_vmap maps a function written for one example over a batch: each input
 * that in_axes marks batched carries the batch along one of its axes, the
 * others are shared by every example, and each output gets its batch axis
 * where out_axes says. The function is run once, on the whole batch:
 *
 *     static nb_status f(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
 *     {   out[0] = nb_matmul(b, in[0], in[1], 0);        (x [3] @ w [3, 4] -> [4])
 *         return nb_builder_status(b); }
 *
 *     nb_function fn = {f, 2, 1, NULL};
 *     nb_vmap(&fn, &(nb_vmap_opts){.in_axes = (int[]){0, NB_NOT_BATCHED}}, (nb_tensor *[]){xs, w}, &ys);
 *                                                       (xs [64, 3] -> ys [64, 4])
 *
 * How (functorch's design): inside, the function sees logical tensors,
 * shaped as one example, that hold no data but point at the physical batch
 * (and at which of its dims the batch is). Every op that meets one runs its
 * batching rule (nb_op_def.batch), which emits the op's batched form on the
 * physical values, or, for an op without a rule, a loop over the batch. The
 * logical op is recorded on the tape and gets its tangents as usual, so the
 * transforms compose: nb_grad inside a vmapped function gives per-example
 * gradients, nb_jvp batched tangents (nb_jacfwd, nb_jacrev and nb_hessian
 * push all their columns or rows through one batched pass this way), those
 * three and nb_hessian_by_reverse per-example Jacobians and Hessians
 * (functorch's vmap(jacrev(f))), and vmaps nest (each a level; an op is batched at the innermost level among
 * its inputs). Reading a logical tensor's memory (nb_tensor_data,
 * nb_tensor_get, copies, printing) is an error: only ops see through it.
 *
 * A random op on batched inputs (dropout) draws anew for every example; one
 * without inputs (nb_uniform_random) never meets the batch and draws once,
 * the same for all. Control flow steered by a batched value, whose examples
 * may take different paths, is masked as JAX's batched while and cond are:
 * nb_cond runs both branches and each example takes its own's outputs
 * (nb_where), and nb_while_loop runs until the last example's condition is
 * false, an example whose condition already is keeping its carried values.
 * (A branch an example does not take still runs on it: keep it free of NaNs
 * and infinities there, or the gradient can pick them up.) On a record
 * builder the helpers of nabla/control.h record their ops (while, cond on a
 * shared predicate, recurrent, net) with batched sub-blocks, each carried
 * value and output batched along dim 0, so the program's backward pass
 * differentiates them as it does any loop; emitting one of those ops
 * directly with nb_emit on batched values is an error.
 *
 * On a record builder, nb_vmap_emit writes the batched ops into the program:
 * the same rules, emitted as OpDescs. */
#ifndef NABLA_VMAP_H
#define NABLA_VMAP_H

#include "nabla/export.h"

#include "nabla/batch_rule.h"
#include "nabla/transforms.h"

NB_BEGIN_DECLS

/* An in_axes entry: the input is the same for every example. */
#define NB_NOT_BATCHED (-0x7fffffff - 1)

/* How nb_vmap maps. NULL, or a zeroed struct: every input batched along
 * axis 0, every output's batch axis at 0, the batch size from the inputs,
 * all examples in one pass. */
typedef struct nb_vmap_opts {
    const int *in_axes;  /* per input: its batch axis (negative: from the end) or NB_NOT_BATCHED; NULL: all 0 */
    const int *out_axes; /* per output: where its batch axis goes (negative: from the end); NULL: all 0. An output
                            that does not depend on the batch is broadcast along it. */
    int64_t batch_size;  /* 0: from the batched inputs; else they must have it (needed when none is batched) */
    int64_t chunk_size;  /* nb_vmap: 0 runs the whole batch at once; n > 0 at most n examples per pass */
} nb_vmap_opts;

/* f mapped over the batch: out[i] new references, each with its batch axis
 * at out_axes[i]. Errors name the input and the sizes when batched inputs
 * disagree on the batch size, and the axis and the shape when an axis is
 * out of range. */
NB_API nb_status nb_vmap(const nb_function *f, const nb_vmap_opts *opts, nb_tensor *const *in, nb_tensor **out);
/* The same inside another function, against its builder: on an eager
 * builder (values are tensors, logical ones too, so vmap nests and composes
 * with the transforms a function calls), or on a record builder (the batched
 * ops go into the program; in_axes must be known dims). chunk_size must be
 * 0. */
NB_API nb_status nb_vmap_emit(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in,
                              nb_value *out);

NB_END_DECLS

#endif
