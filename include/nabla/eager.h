/* nabla/eager.h: eager mode, a dynamic tape and its backward engine (as
 * PyTorch's autograd).
 *
 * An eager builder runs every op at once: values are tensors. When grad mode
 * is on and an input requires a gradient, the op also records a backward
 * node: the op, its attributes, the forward values its VJP rule reads (only
 * those), and edges to the nodes (or leaf accumulators) of its inputs. The
 * engine walks the nodes from the roots with dependency counts, an input
 * buffer per node and a ready queue, running the very VJP rules that static
 * programs use.
 *
 * Ownership: the tensors an eager builder produces belong to the builder
 * until nb_eager_release_values(); keep one with nb_tensor_retain(). Nodes
 * live as long as some tensor made by them (or a node after them) does. */
#ifndef NABLA_EAGER_H
#define NABLA_EAGER_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/rng.h"

NB_BEGIN_DECLS

/* ---- the eager builder ------------------------------------------------- */

NB_API nb_status nb_builder_new_eager(nb_builder **out);
/* Wraps a tensor of yours as a value (the builder holds a reference). */
NB_API nb_value nb_eager_value(nb_builder *b, nb_tensor *t);
/* The tensor of a value (borrowed); NULL, with an error, for NB_NONE or a
 * record builder's value. */
NB_API nb_tensor *nb_eager_tensor(nb_value v);
/* Drops the builder's references to the tensors it produced or wrapped (call
 * once per training step), and restarts its layer names, so that calling the
 * same model code again finds the same parameters (see nb_param in
 * nabla/init.h). */
NB_API void nb_eager_release_values(nb_builder *b);

/* Parameters of eager models live in the builder, by name: nb_param's first
 * call with a name creates one (a leaf that requires grad, initialised as
 * its nb_init says), later calls with that name return it. Layers use this,
 * so the same model code builds a program or runs eagerly. These look them
 * up: by name (borrowed, or NULL), and the i-th in creation order. */
NB_API nb_tensor *nb_eager_find_param(nb_builder *b, const char *name);
NB_API int nb_eager_param_count(const nb_builder *b); /* -1, with an error, if b is not an eager builder */
NB_API const char *nb_eager_param_name(const nb_builder *b, int i);
NB_API nb_tensor *nb_eager_param_at(const nb_builder *b, int i);
/* Makes t itself the parameter `name`, not a copy: the builder retains it
 * and sets requires_grad (float tensors), so updates to either are one.
 * nb_param_from (nabla/init.h) copies a tensor instead, in both modes. */
NB_API nb_status nb_eager_add_param(nb_builder *b, const char *name, nb_tensor *t);
/* The generator random ops and initialisers draw from in this builder. */
NB_API nb_rng *nb_eager_rng(nb_builder *b);
NB_API void nb_eager_set_seed(nb_builder *b, uint64_t seed);
/* Whether ops with an "is_test" attribute run in inference mode (default false). */
NB_API void nb_eager_set_test_mode(nb_builder *b, bool is_test);

/* Runs op `type` writing its first output into the tensor of in[target]
 * (an in-place op, e.g. an optimiser update). Bumps that tensor's version,
 * so that a node which saved it refuses to run its backward. Not allowed on
 * a tensor that requires grad while grad mode is on. */
NB_API nb_status nb_eager_inplace(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int target);

/* Forward mode: once switched on, every op the builder runs also turns the
 * tangents of its inputs into tangents of its outputs with its JVP rule
 * (inputs without a tangent count as zero). Tangents are set on inputs with
 * nb_eager_set_tangent and read with nb_eager_tangent (borrowed, or NULL for
 * a zero tangent). nb_jvp (nabla/transforms.h) is built on this. A builder
 * switched on inside another's forward mode (below) gets a level of tangents
 * of its own, nested: the ops of its JVP rules carry the outer tangents, so
 * forward mode nests too. */
NB_API nb_status nb_eager_forward_mode(nb_builder *b);
NB_API nb_status nb_eager_set_tangent(nb_builder *b, nb_tensor *t, nb_tensor *tangent);
NB_API nb_tensor *nb_eager_tangent(nb_builder *b, nb_value v);
/* n sets of tangents at once (n independent directions, as n columns of a
 * Jacobian): the ops run once and their JVP rules once per set. Sets are
 * numbered 0..n-1; the calls above use set 0. nb_jacfwd is built on this. */
NB_API nb_status nb_eager_forward_mode_sets(nb_builder *b, int n);
NB_API nb_status nb_eager_set_tangent_in(nb_builder *b, int set, nb_tensor *t, nb_tensor *tangent);
NB_API nb_tensor *nb_eager_tangent_in(nb_builder *b, int set, nb_value v);

/* Forward over reverse. Between nb_eager_forward_push(b) and
 * nb_eager_forward_pop(), every eager builder created shares b's tangents:
 * its ops carry them and nb_eager_tangent on it reads them. The backward
 * engine's builder is one, so a backward run there carries tangents through
 * every VJP rule (the forward values the tape saved keep their tangents, and
 * two gradients summed sum their tangents): each gradient comes out with a
 * tangent, the derivative of the gradient along the inputs' tangents, which
 * for the gradient of a scalar is a Hessian-vector product. nb_hvp and
 * nb_hessian (nabla/transforms.h) are built on this. */
NB_API nb_status nb_eager_forward_push(nb_builder *b); /* b must be in forward mode */
NB_API void nb_eager_forward_pop(void);
/* Gives `alias` (a detached view of t, say) t's tangent at every level of
 * tangents b carries: a detached view is a new tensor, without one. */
NB_API nb_status nb_eager_alias_tangent(nb_builder *b, nb_tensor *t, nb_tensor *alias);

/* ---- autograd state of tensors ------------------------------------------- */

NB_API nb_status nb_tensor_set_requires_grad(nb_tensor *t, bool on); /* leaves only */
NB_API bool nb_tensor_requires_grad(const nb_tensor *t);
NB_API bool nb_tensor_is_leaf(const nb_tensor *t);
/* The gradient accumulated by backward (borrowed), or NULL. */
NB_API nb_tensor *nb_tensor_grad(const nb_tensor *t);
NB_API void nb_tensor_zero_grad(nb_tensor *t); /* drops it */
/* Makes a non-leaf keep its .grad too. */
NB_API nb_status nb_tensor_retain_grad(nb_tensor *t);
/* A tensor sharing t's data, with no history and requires_grad off. */
NB_API nb_status nb_tensor_detach(nb_tensor **out, nb_tensor *t);
/* How many in-place writes the data has seen (shared by views). */
NB_API uint64_t nb_tensor_version(const nb_tensor *t);

/* ---- grad mode ------------------------------------------------------------ */

/* Nestable: nb_grad_mode_push(false) ... nb_grad_mode_pop() is a no-grad block. */
NB_API void nb_grad_mode_push(bool enabled);
NB_API void nb_grad_mode_pop(void);
NB_API bool nb_grad_mode_enabled(void);

/* Anomaly mode: a backward that produces NaN or Inf fails, naming the
 * forward op that created the node and its sequence number. */
NB_API void nb_set_anomaly_mode(bool on);
NB_API bool nb_anomaly_mode(void);

/* ---- nodes and hooks ---------------------------------------------------------- */

typedef struct nb_node nb_node;

/* The memory the tape holds for a backward pass from `roots`: the bytes of
 * every storage that the saved values of the nodes behind them keep alive
 * (each storage once, whole, however many views of it are saved), and how
 * many nodes still hold values. The storage of a leaf that requires grad
 * (a parameter) does not count, nor do saved views of it: its owner keeps
 * it whatever the tape does. So, taken at the end of a forward pass, it is
 * what recomputation could save; after a backward pass without
 * NB_RETAIN_GRAPH it is 0. */
NB_API nb_status nb_autograd_saved_bytes(nb_tensors roots, size_t *bytes, int *n_nodes);
NB_API nb_node *nb_tensor_grad_fn(const nb_tensor *t); /* NULL for leaves */
NB_API const char *nb_node_op(const nb_node *n);       /* the forward op's type */
NB_API uint64_t nb_node_sequence(const nb_node *n);    /* creation order; later nodes run first */

/* A hook on a tensor's gradient: called when it is computed, before it is
 * accumulated or passed on; it may replace it (*replace = a new reference)
 * or leave it (*replace = NULL). */
typedef nb_status (*nb_tensor_hook)(nb_tensor *grad, nb_tensor **replace, void *ctx);
NB_API nb_status nb_tensor_register_hook(nb_tensor *t, nb_tensor_hook fn, void *ctx);
/* A hook on a leaf that runs once per backward pass, when .grad holds the
 * pass's whole contribution (after its hooks above and the accumulation,
 * like torch's register_post_accumulate_grad_hook); nb_autograd_grad, which
 * leaves .grad alone, does not run it. Removing one that is not there does
 * nothing. nb_ddp (nabla/data_parallel.h) starts its all-reduces from here. */
typedef nb_status (*nb_grad_ready_hook)(nb_tensor *leaf, void *ctx);
NB_API nb_status nb_tensor_register_post_accumulate_hook(nb_tensor *t, nb_grad_ready_hook fn, void *ctx);
NB_API void nb_tensor_remove_post_accumulate_hook(nb_tensor *t, nb_grad_ready_hook fn, void *ctx);
/* Replaces t's .grad with grad (retained; same dtype and shape as t), or
 * drops it (grad NULL). */
NB_API nb_status nb_tensor_set_grad(nb_tensor *t, nb_tensor *grad);
/* Hooks around a node: `pre` sees the gradients of its outputs (entries may
 * be NULL), `post` the gradients it produced for its inputs; both may replace
 * entries (release the old, store a new reference). */
typedef nb_status (*nb_node_hook)(nb_node *n, int count, nb_tensor **grads, void *ctx);
NB_API nb_status nb_node_register_pre_hook(nb_node *n, nb_node_hook fn, void *ctx);
NB_API nb_status nb_node_register_post_hook(nb_node *n, nb_node_hook fn, void *ctx);

/* ---- recomputation ------------------------------------------------------------ */

/* torch.utils.checkpoint: runs f(b, ctx, in) -> out without recording it, so
 * that the tape keeps none of f's intermediate values, only one node that
 * holds f's inputs and the parameters f read (through nb_param, by name).
 * When a backward pass reaches that node, it runs f again, recording, its
 * random ops drawing what they drew the first time (dropout draws the same
 * masks, even when the first run also drew initial values for parameters
 * it created) and its layers finding the same parameters, and
 * passes on the gradients of f's outputs with respect to its inputs and
 * parameters: they equal those of running f without checkpoint, to the
 * bit. It nests (a checkpoint inside f), and with NB_CREATE_GRAPH the
 * recomputation is recorded too, so gradients through it can be
 * differentiated again. f writes n_out values (eager ones, of b) to out;
 * it must compute the same thing when called again. Without grad mode, or
 * when nothing f reads requires grad, this just runs f.
 *
 *     static nb_status block(nb_builder *b, void *ctx, int n_in, const nb_value *in, int n_out, nb_value *out)
 *     {
 *         out[0] = nb_layer_fc(b, nb_layer_fc(b, in[0], 512, "relu", NULL), 512, "relu", NULL);
 *         return nb_builder_status(b);
 *     }
 *     nb_value h;
 *     nb_checkpoint(b, block, NULL, NB_VALUES(x), 1, &h); */
typedef nb_status (*nb_checkpoint_fn)(nb_builder *b, void *ctx, int n_in, const nb_value *in, int n_out, nb_value *out);
NB_API nb_status nb_checkpoint(nb_builder *b, nb_checkpoint_fn f, void *ctx, nb_values in, int n_out, nb_value *out);

/* ---- the engine ------------------------------------------------------------- */

/* Accumulates into .grad of every leaf that requires grad the gradients of
 * the roots (root_grads, one per root, NULL or with NULL entries: ones, for
 * scalar roots).
 * flags: without NB_RETAIN_GRAPH the saved values are freed, and a second
 * backward through the same nodes fails clearly; with NB_CREATE_GRAPH the
 * backward itself is recorded, so gradients can be differentiated again.
 *
 *     nb_backward(NB_TENSORS(loss), NULL, 0); */
NB_API nb_status nb_backward(nb_tensors roots, nb_tensor *const *root_grads, unsigned flags);
/* torch.autograd.grad: the gradients of `outputs` with respect to `inputs`
 * (new references in grads_out), running only the nodes on a path to them
 * and leaving .grad alone. An input the outputs do not depend on gets NULL
 * with NB_ALLOW_UNUSED, an error otherwise. grad_outputs may be NULL (ones
 * for scalar outputs). (nb_grad, in nabla/transforms.h, is the function
 * transform, JAX's grad.)
 *
 *     nb_autograd_grad(NB_TENSORS(y), NULL, NB_TENSORS(x), NB_CREATE_GRAPH, &dx); */
NB_API nb_status nb_autograd_grad(nb_tensors outputs, nb_tensor *const *grad_outputs, nb_tensors inputs, unsigned flags,
                                  nb_tensor **grads_out);

NB_END_DECLS

#endif
