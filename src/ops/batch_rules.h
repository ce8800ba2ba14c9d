/* What batching rules share (src/ops/batch_rules_*.c): moving batch dims,
 * emitting the op again with changed attributes, and the loop over the
 * batch that serves ops without a rule. Written against the builder, so the
 * same rules serve the eager backend (src/eager/batched.c) and a program
 * (src/transforms/vmap_record.c). */
#ifndef NABLA_BATCH_RULES_H
#define NABLA_BATCH_RULES_H

#include "nabla/builder.h"
#include "nabla/batch_rule.h"

/* A possibly negative axis of a rank-`rank` value, made non-negative. */
static inline int64_t nb_batch_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* v with its dim `from` moved to `to` (a transpose; v itself when equal). */
nb_value nb_batch_move(nb_builder *b, nb_value v, int from, int to);
/* Input i with its batch dim first; an unbatched input as it is. */
nb_value nb_batch_front(nb_builder *b, const nb_batch_ctx *c, int i);
/* The same, and a batched input given size-1 dims after the batch dim up to
 * logical rank `rank`, so that NumPy broadcasting lines the examples up. */
nb_value nb_batch_front_padded(nb_builder *b, const nb_batch_ctx *c, int i, int rank);
/* Input i with a leading batch dim: an unbatched one expanded along it. */
nb_value nb_batch_materialize(nb_builder *b, const nb_batch_ctx *c, int i);
/* Emits c's op on `in` (n_in values, as c->x) with its attributes, those
 * named in `set` replaced. */
nb_status nb_batch_reemit(nb_builder *b, const nb_batch_ctx *c, const nb_value *in, int n_set, const nb_attr *set,
                          int n_out, nb_value *out);
/* The op's attribute `name` (a NONE-typed value if it has none). */
const nb_attr_value *nb_batch_attr(const nb_batch_ctx *c, const char *name);
/* Sets every output's batch dim to `bdim`. */
void nb_batch_set_all(nb_batch_ctx *c, int bdim);
/* Whether input i is batched. */
static inline bool nb_batch_is(const nb_batch_ctx *c, int i) { return i < c->n_in && c->x_bdim[i] >= 0; }

/* Runs def's batching rule (or the loop) through b: fills c (whose x, x_bdim,
 * x_info, batch, n_in, n_out, y and y_bdim the caller set, and y_info's
 * room) with the resolved attributes and the logical output shapes, which
 * inference on the examples' shapes gives (not for control-flow ops: then
 * *checked is false). Errors name the op and the examples' shapes. */
nb_status nb_batch_apply(nb_builder *b, nb_batch_ctx *c, nb_attr_value *attrs_room, nb_var_info *y_info_room,
                         int n_attrs, const nb_attr *attrs, bool *checked);

/* The fallback: the op once per example (each batched input sliced), the
 * results stacked along a new dim 0. Correct for every op; random ops draw
 * anew for each example. */
nb_status nb_batch_loop(nb_builder *b, nb_batch_ctx *c);

/* Rules shared by families of ops (batch_rules_elementwise.c). */
nb_status nb_batch_unary(nb_builder *b, nb_batch_ctx *c);      /* one input; outputs batched where it is */
nb_status nb_batch_broadcast(nb_builder *b, nb_batch_ctx *c);  /* NumPy-broadcasting inputs */
nb_status nb_batch_same_shape(nb_builder *b, nb_batch_ctx *c); /* inputs of one shape (sum, gelu_grad) */
/* Per family. */
nb_status nb_batch_reduce(nb_builder *b, nb_batch_ctx *c);     /* axes, keepdim */
nb_status nb_batch_arg_reduce(nb_builder *b, nb_batch_ctx *c); /* argmax, argmin: axis */
nb_status nb_batch_matmul(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_fc(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_reshape(nb_builder *b, nb_batch_ctx *c); /* reshape, reshape_as */
nb_status nb_batch_flatten(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_transpose(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_squeeze(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_unsqueeze(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_expand(nb_builder *b, nb_batch_ctx *c); /* expand, expand_as */
nb_status nb_batch_sum_to(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_concat(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_stack(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_split(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_slice(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_gather(nb_builder *b, nb_batch_ctx *c);        /* gather (axis), index_select (dim) */
nb_status nb_batch_pad(nb_builder *b, nb_batch_ctx *c);           /* pad, pad_grad */
nb_status nb_batch_softmax(nb_builder *b, nb_batch_ctx *c);       /* softmax, log_softmax: axis */
nb_status nb_batch_cross_entropy(nb_builder *b, nb_batch_ctx *c); /* cross_entropy, softmax_with_cross_entropy(_grad) */
nb_status nb_batch_pointwise_loss(nb_builder *b, nb_batch_ctx *c); /* mse_loss, bce_with_logits */
nb_status nb_batch_layer_norm(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_layer_norm_grad(nb_builder *b, nb_batch_ctx *c); /* DScale, DBias per example */
nb_status nb_batch_embedding(nb_builder *b, nb_batch_ctx *c);
nb_status nb_batch_fold(nb_builder *b,
                        nb_batch_ctx *c); /* pool2d(_grad), shared-filter conv: the batch folded into N */
nb_status nb_batch_conv(nb_builder *b, nb_batch_ctx *c); /* conv2d(_grad): folded, or the examples as groups */
nb_status nb_batch_embedding_grad(nb_builder *b, nb_batch_ctx *c); /* per-example tables by one_hot^T @ DOut */
nb_status nb_batch_scatter_add(nb_builder *b, nb_batch_ctx *c);    /* shared indices: axis moved up */
nb_status nb_batch_shape_like(nb_builder *b, nb_batch_ctx *c);     /* fill_constant_batch_size_like: one for all */
nb_status nb_batch_each(nb_builder *b, nb_batch_ctx *c);           /* output k batched as input k (collectives) */
nb_status nb_batch_batch_norm(nb_builder *b, nb_batch_ctx *c);     /* batch_norm(_grad): the batch joins the channels */
nb_status nb_batch_attention(nb_builder *b, nb_batch_ctx *c);      /* attention and its grad and mask ops */

#endif
