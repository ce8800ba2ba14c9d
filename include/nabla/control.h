/* nabla/control.h: loops, branches and nested nets, one code in both modes.
 *
 * A user writes the body of a loop or a branch as a C callback against a
 * builder, and calls one of the functions below. On an eager builder they are
 * plain C control flow: the body runs on the tape as often as it must, and
 * the tape differentiates it like any other code (so the functional
 * transforms see through them too). On a record builder they build one op
 * holding a sub-block (seeds 000 and 002):
 *
 *   nb_while_loop  -> `while`      (the body block runs while a bool is true)
 *   nb_cond        -> `cond`       (one of two blocks runs)
 *   nb_scan        -> `recurrent`  (a step block runs once per time step)
 *   nb_net         -> `net`        (a block used as one op)
 *
 * The body reads values from outside freely (parameters, inputs: closure
 * capture); they become the op's inputs. nb_append_backward and
 * nb_gradients recurse into the sub-blocks, writing a grad block for each
 * (its parent is the forward block), and the executor runs sub-blocks in
 * child scopes. In training each iteration keeps its own scope (its "step
 * scope") so that the gradient op can replay the iterations in reverse.
 *
 * Values carried from one iteration to the next must keep their dtype and
 * shape. A predicate is a bool tensor with one element (under vmap, one per
 * example: see nabla/vmap.h for how the eager helpers mask). */
#ifndef NABLA_CONTROL_H
#define NABLA_CONTROL_H

#include "nabla/export.h"

#include "nabla/builder.h"

NB_BEGIN_DECLS

/* Registers the control-flow ops (while, cond, recurrent, net and their
 * gradient ops) with the op registry. The functions below and the program
 * loader call it; call it yourself only to look those ops up (nb_op_find)
 * or emit them (nb_emit) before either has run. Idempotent and thread-safe. */
NB_API nb_status nb_control_register_ops(void);

/* ---- while ------------------------------------------------------------- */

/* cond: sets *pred (bool, one element) from the carried values.
 * body: sets next[i] for every carried value carry[i]. */
typedef nb_status (*nb_loop_cond_fn)(nb_builder *b, const nb_value *carry, nb_value *pred, void *ctx);
typedef nb_status (*nb_loop_body_fn)(nb_builder *b, const nb_value *carry, nb_value *next, void *ctx);

/* As JAX's lax.while_loop: carry = init; while (cond(carry)) carry =
 * body(carry); final = carry. The trip count may depend on the data. */
NB_API nb_status nb_while_loop(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, nb_values init,
                               nb_value *final);

/* ---- cond -------------------------------------------------------------- */

/* A branch computes out[0..n_out) from in[0..n_in). */
typedef nb_status (*nb_branch_fn)(nb_builder *b, const nb_value *in, nb_value *out, void *ctx);

/* The two branches of nb_cond, and the context both get. */
typedef struct nb_branches {
    nb_branch_fn then_fn, else_fn;
    void *ctx;
} nb_branches;

/* As lax.cond: out = pred ? then_fn(in) : else_fn(in). Both branches must
 * give outputs of the same dtypes and shapes. Only the branch taken runs, and
 * in the backward pass only its gradient. */
NB_API nb_status nb_cond(nb_builder *b, nb_value pred, const nb_branches *branches, nb_values in, int n_out,
                         nb_value *out);

/* ---- scan (recurrence) -------------------------------------------------- */

/* One time step: from the carried state (the RNN's memories) and this
 * step's slices x_t of the sequences, computes the next state and this
 * step's outputs y_t. */
typedef nb_status (*nb_step_fn)(nb_builder *b, const nb_value *carry, const nb_value *x_t, nb_value *next,
                                nb_value *y_t, void *ctx);

/* What nb_scan reads and writes: the carried values' initial values and
 * the sequences in; final (one per carried value) and the n_ys stacked
 * step outputs ys out; reverse runs time backwards. */
typedef struct nb_scan_io {
    nb_values init;
    nb_values xs;
    int n_ys;
    nb_value *final;
    nb_value *ys;
    bool reverse;
} nb_scan_io;

/* As lax.scan over axis 0 (time-major: xs[j] is [T, ...], sliced to x_t of
 * shape [...]): carry = init; for t in 0..T (T-1..0 when `reverse`):
 * (carry, y_t) = step(carry, xs[:, t]); final = carry; ys[k] = stack of the
 * y_t along axis 0, in time order. Needs at least one sequence. */
NB_API nb_status nb_scan(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io);

/* What a scan's step is, when it is a cell that file formats have an op
 * for: "lstm", "gru" or "rnn" (tanh), the cells of nabla/recurrent.h, with
 * carry {h, c} or {h}, one sequence x [T, B, I] and one step output, h; and
 * the outer values the step reads as the cell's W_ih, W_hh, b_ih and b_hh
 * (NB_NONE for no bias), in torch's layout and gate order. */
typedef struct nb_scan_form {
    const char *cell;
    nb_values weights;
} nb_scan_form;

/* nb_scan of a step that is the cell `form` names (NULL: nb_scan), so that
 * an exporter can write the scan as that format's op rather than refuse a
 * loop: a record builder keeps the form on its `recurrent` op, which
 * nb_onnx_export writes as ONNX's LSTM, GRU or RNN; an eager builder, which
 * runs the step, has no use for it. The step must compute exactly that
 * cell on those weights; nb_rnn_sequence's does. */
NB_API nb_status nb_scan_cell(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io,
                              const nb_scan_form *form);

/* ---- nested net ---------------------------------------------------------- */

/* Seed 000's NetOp: fn's ops as one op of the enclosing block, whose
 * gradient recurses into them. Eagerly it simply calls fn. */
NB_API nb_status nb_net(nb_builder *b, nb_branch_fn fn, void *ctx, nb_values in, int n_out, nb_value *out);

/* ---- tensor arrays ------------------------------------------------------ */

/* Values that cross iterations (Fluid's LoDTensorArray, TF's TensorArray):
 * an array of `length` elements of one dtype and shape, held as one tensor
 * whose axis 0 indexes the elements, so that a loop can carry it (its shape
 * never changes) and the stack of its elements is the array itself. Reads
 * and writes take the index as an int64 value of one element (a loop
 * counter, say) and are compositions of differentiable ops, so gradients
 * flow through them in every mode. */
NB_API nb_value nb_array_new(nb_builder *b, int64_t length, nb_dtype dtype, int ndim, const int64_t *elem_shape);
/* The array with element i replaced by x (a new value: arrays are values). */
NB_API nb_value nb_array_write(nb_builder *b, nb_value array, nb_value i, nb_value x);
NB_API nb_value nb_array_read(nb_builder *b, nb_value array, nb_value i);
/* Its number of elements, as an int64 value of shape [1]. */
NB_API nb_value nb_array_length(nb_builder *b, nb_value array);

NB_END_DECLS

#endif
