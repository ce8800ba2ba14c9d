/* nabla/ops.h: a typed call for each built-in op a model emits, for code
 * that builds models and gradient rules through a builder:
 *
 *     nb_value h = nb_relu(b, nb_fc(b, x, w, bias, 1));
 *
 * Each emits its op through nb_emit and returns the (first) output; on error
 * it returns NB_NONE and the builder keeps the error (see builder.h). The
 * generic nb_emit reaches every op, these included. The registered ops
 * without a call here are emitted by other calls: the gradient ops (*_grad)
 * by the ops' rules, the optimizer updates (sgd, momentum, adam, adamw,
 * rmsprop, adagrad, matmul_sgd, lr_schedule) by nabla/optimizer.h, the
 * control ops (while, cond, recurrent, net) by nabla/control.h, the
 * collectives (c_allreduce_sum, c_allreduce_start, c_allreduce_wait,
 * c_broadcast) by nabla/data_parallel.h, and
 * the parts of attention's mask (attention_causal_bias,
 * attention_dropout_mask) by its rules; tests/test_typed_calls.sh holds
 * this list to the registry. Options structs are read with zero meaning "default" in every
 * field, and may be NULL. */
#ifndef NABLA_OPS_H
#define NABLA_OPS_H

#include "nabla/export.h"

#include "nabla/builder.h"

NB_BEGIN_DECLS

/* ---- elementwise (NumPy broadcasting for binary ops) ----
 * One call per line of nabla/elementwise_ops.h, which says what each op does:
 * nb_add(b, x, y) ... nb_minimum; nb_neg(b, x) ... nb_silu;
 * nb_leaky_relu(b, x, alpha), nb_elu(b, x, alpha), nb_softplus(b, x, beta, threshold). */
#define NB_BINARY(name, dtypes, cost, uses_in, uses_out, doc) NB_API nb_value nb_##name(nb_builder *b, nb_value x, nb_value y);
#define NB_UNARY(name, dtypes, cost, uses_in, uses_out, doc) NB_API nb_value nb_##name(nb_builder *b, nb_value x);
#define NB_UNARY_A1(name, dtypes, cost, uses_in, uses_out, a, a_default, doc) \
    NB_API nb_value nb_##name(nb_builder *b, nb_value x, double a);
#define NB_UNARY_A2(name, dtypes, cost, uses_in, uses_out, a, a_default, b_, b_default, doc) \
    NB_API nb_value nb_##name(nb_builder *b, nb_value x, double a, double b_);
#include "nabla/elementwise_ops.h"

NB_API nb_value nb_gelu(nb_builder *b, nb_value x, bool approximate);
/* Composite activations (src/ops/composite_ops.c): X / (1 + |X|), X * tanh(softplus(X)), X * relu6(X + 3) / 6. */
NB_API nb_value nb_softsign(nb_builder *b, nb_value x);
NB_API nb_value nb_mish(nb_builder *b, nb_value x);
NB_API nb_value nb_hardswish(nb_builder *b, nb_value x);
NB_API nb_value nb_clip(nb_builder *b, nb_value x, double min, double max);
/* scale * x + bias */
NB_API nb_value nb_scale(nb_builder *b, nb_value x, double scale, double bias);
NB_API nb_value nb_cast(nb_builder *b, nb_value x, nb_dtype dtype);

/* ---- comparison and logic (bool results) ---- */
NB_API nb_value nb_equal(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_not_equal(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_less(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_less_equal(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_greater(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_greater_equal(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_logical_and(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_logical_or(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_logical_not(nb_builder *b, nb_value x);
NB_API nb_value nb_logical_xor(nb_builder *b, nb_value x, nb_value y);
NB_API nb_value nb_where(nb_builder *b, nb_value cond, nb_value x, nb_value y);

/* ---- reductions: axes NULL/0 means all; negative axes count from the end ---- */
NB_API nb_value nb_reduce_sum(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim);
NB_API nb_value nb_reduce_mean(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim);
NB_API nb_value nb_reduce_max(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim);
NB_API nb_value nb_reduce_min(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim);
NB_API nb_value nb_reduce_prod(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim);
NB_API nb_value nb_logsumexp(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, bool keepdim);
NB_API nb_value nb_argmax(nb_builder *b, nb_value x, int axis, bool keepdim);
NB_API nb_value nb_argmin(nb_builder *b, nb_value x, int axis, bool keepdim);
/* Elementwise sum of n values of one shape. */
NB_API nb_value nb_sum(nb_builder *b, int n, const nb_value *xs);
/* Sums x down to the shape of `like` (undoing a broadcast). */
NB_API nb_value nb_sum_to(nb_builder *b, nb_value x, nb_value like);
/* The k largest (or, with largest false, smallest) values of x along axis,
 * sorted; *indices (if given) receives their int64 positions. */
NB_API nb_value nb_topk(nb_builder *b, nb_value x, int64_t k, int axis, bool largest, nb_value *indices);

/* ---- scans: running combinations along axis (negative: from the end) ----
 * One call per line of nabla/scan_ops.h (cumsum), which says what each op
 * does: nb_<name>(b, x, axis, flags). The flags leave each element out of
 * its own result (NB_SCAN_EXCLUSIVE) and run from the end (NB_SCAN_REVERSE). */
enum { NB_SCAN_EXCLUSIVE = 1 << 0, NB_SCAN_REVERSE = 1 << 1 };
/* The flags under the names cumsum's call gave them first (macros, so that
 * they mix with NB_SCAN_* in C++20, which deprecates mixing enums). */
#define NB_CUMSUM_EXCLUSIVE NB_SCAN_EXCLUSIVE
#define NB_CUMSUM_REVERSE NB_SCAN_REVERSE
#define NB_SCAN(name, ...) NB_API nb_value nb_##name(nb_builder *b, nb_value x, int axis, unsigned flags);
#include "nabla/scan_ops.h"

/* ---- linear algebra ---- */
/* nb_matmul's flags: multiply by the transpose of x, of y. */
enum { NB_TRANSPOSE_X = 1 << 0, NB_TRANSPOSE_Y = 1 << 1 };
/* x @ y over the last two dims, batch dims broadcasting; flags:
 * NB_TRANSPOSE_X, NB_TRANSPOSE_Y. */
NB_API nb_value nb_matmul(nb_builder *b, nb_value x, nb_value y, unsigned flags);
/* input [.., in] x w [in, out] + bias (bias may be NB_NONE). */
NB_API nb_value nb_fc(nb_builder *b, nb_value input, nb_value w, nb_value bias, int in_num_col_dims);

/* ---- shape ----
 * Run eagerly (or by nb_op_run), reshape, flatten, squeeze, unsqueeze and
 * reshape_as return a view sharing the storage of a contiguous input, as
 * torch's reshape does: writing into one's data writes into the other's. */
NB_API nb_value nb_reshape(nb_builder *b, nb_value x, int ndim, const int64_t *shape);
NB_API nb_value nb_flatten(nb_builder *b, nb_value x, int start_axis, int stop_axis);
NB_API nb_value nb_transpose(nb_builder *b, nb_value x, int ndim, const int64_t *perm);
NB_API nb_value nb_squeeze(nb_builder *b, nb_value x, int n_axes, const int64_t *axes);
NB_API nb_value nb_unsqueeze(nb_builder *b, nb_value x, int n_axes, const int64_t *axes);
NB_API nb_value nb_expand(nb_builder *b, nb_value x, int ndim, const int64_t *shape);
NB_API nb_value nb_expand_as(nb_builder *b, nb_value x, nb_value like);
/* x reshaped to the shape of `like`. */
NB_API nb_value nb_reshape_as(nb_builder *b, nb_value x, nb_value like);
NB_API nb_value nb_concat(nb_builder *b, int n, const nb_value *xs, int axis);
NB_API nb_value nb_stack(nb_builder *b, int n, const nb_value *xs, int axis);
/* Splits x into n_out equal parts along axis (written to outs). */
NB_API nb_status nb_split(nb_builder *b, nb_value x, int axis, int n_out, nb_value *outs);
NB_API nb_value nb_slice(nb_builder *b, nb_value x, int n_axes, const int64_t *axes, const int64_t *starts,
                         const int64_t *ends);
NB_API nb_value nb_gather(nb_builder *b, nb_value x, nb_value index, int axis);
NB_API nb_value nb_scatter_add(nb_builder *b, nb_value x, nb_value index, nb_value updates, int axis);
NB_API nb_value nb_one_hot(nb_builder *b, nb_value x, int64_t depth);
/* torch.index_select: the slices of x at index (1-D, integer) along dim. */
NB_API nb_value nb_index_select(nb_builder *b, nb_value x, nb_value index, int dim);
/* torch.gather and scatter: out[..i..] = x[..index[..i..]..] along axis
 * (index shaped as the output); and x with updates written at index along
 * axis, reduction "none" replacing x's elements, "add" or "mul" combining
 * them with them. */
NB_API nb_value nb_gather_elements(nb_builder *b, nb_value x, nb_value index, int axis);
NB_API nb_value nb_scatter_elements(nb_builder *b, nb_value x, nb_value index, nb_value updates, int axis,
                                    const char *reduction);
/* x padded by paddings, n = 2 * rank values: (before, after) for each dim
 * in order; mode "constant" (NULL: with value), "reflect" or "edge". */
NB_API nb_value nb_pad(nb_builder *b, nb_value x, int n, const int64_t *paddings, double value, const char *mode);

/* ---- convolution and pooling (NCHW) ----
 * These take their weights as inputs (the layers of nabla/layers.h make
 * them as parameters), so functional transforms and vmap see them. */
typedef struct nb_conv2d_op_opts {
    int64_t strides[2];   /* (h, w); 0: 1 */
    int64_t paddings[4];  /* top, bottom, left, right; default 0 */
    int64_t dilations[2]; /* (h, w); 0: 1 */
    int64_t groups;       /* 0: 1; must divide the channels of input and filter */
} nb_conv2d_op_opts;
/* input [N, C, H, W] with filter [M, C/groups, kh, kw], plus bias [M]
 * (NB_NONE: none), giving [N, M, H', W']. */
NB_API nb_value nb_conv2d(nb_builder *b, nb_value input, nb_value filter, nb_value bias, const nb_conv2d_op_opts *opts);

typedef struct nb_pool2d_op_opts {
    int64_t strides[2];     /* (h, w); 0: the window's size, as torch */
    int64_t paddings[4];    /* top, bottom, left, right; default 0 */
    bool global;            /* one window over the whole image, [N, C, 1, 1]; ksize may be NULL */
    bool ceil_mode;         /* round the output size up */
    bool count_include_pad; /* avg: divide by the whole window, padding included (default: by the
                               elements inside the image, Paddle's exclusive average) */
} nb_pool2d_op_opts;
/* Pooling of type "max" (NULL: max) or "avg" of x [N, C, H, W] over windows
 * of ksize (h, w). */
NB_API nb_value nb_pool2d(nb_builder *b, nb_value x, const char *type, const int64_t *ksize,
                          const nb_pool2d_op_opts *opts);

/* ---- normalisation ---- */
/* The running statistics batch_norm reads and, in training, updates. */
typedef struct nb_batch_norm_stats {
    nb_value mean, variance;
} nb_batch_norm_stats;
typedef struct nb_batch_norm_op_opts {
    double momentum;       /* running = momentum * running + (1 - momentum) * batch; 0: 0.9 */
    double epsilon;        /* 0: 1e-5 */
    bool is_test;          /* normalise with the running statistics (left false, an eager builder in
                              test mode sets it, and a program's test copy does) */
    bool use_global_stats; /* ... in training too (frozen statistics) */
} nb_batch_norm_op_opts;
/* Batch normalisation of x [N, C, ...] per channel, * scale [C] + bias [C].
 * *running holds the running statistics ([C] each); on return it holds the
 * updated ones, new values that the caller keeps (nb_layer_batch_norm
 * writes them back into its state for you). */
NB_API nb_value nb_batch_norm(nb_builder *b, nb_value x, nb_value scale, nb_value bias, nb_batch_norm_stats *running,
                              const nb_batch_norm_op_opts *opts);
/* Layer normalisation of x over its dims [begin_norm_axis, rank), * scale +
 * bias (each flattened over those dims; NB_NONE: none); epsilon 0: 1e-5. */
NB_API nb_value nb_layer_norm(nb_builder *b, nb_value x, nb_value scale, nb_value bias, int begin_norm_axis,
                              double epsilon);

/* ---- neural networks ---- */
NB_API nb_value nb_softmax(nb_builder *b, nb_value x, int axis);
NB_API nb_value nb_log_softmax(nb_builder *b, nb_value x, int axis);
/* Per-example loss; *softmax_out (if given) receives the softmax. */
NB_API nb_value nb_softmax_with_cross_entropy(nb_builder *b, nb_value logits, nb_value label, nb_value *softmax_out);
NB_API nb_value nb_cross_entropy(nb_builder *b, nb_value probs, nb_value label);
/* An LSTM's gates as one op (torch.nn.LSTMCell's order i, f, g, o): from
 * gates [..., 4H] (the pre-activations x W_ih^T + b_ih + h W_hh^T + b_hh)
 * and the cell state c [..., H], c' = sigmoid(f) c + sigmoid(i) tanh(g)
 * (into *c_next) and h' = sigmoid(o) tanh(c'), returned. */
NB_API nb_value nb_lstm_cell(nb_builder *b, nb_value gates, nb_value c, nb_value *c_next);
/* reduction: "mean", "sum" or "none". */
NB_API nb_value nb_mse_loss(nb_builder *b, nb_value x, nb_value label, const char *reduction);
NB_API nb_value nb_bce_with_logits(nb_builder *b, nb_value x, nb_value label, const char *reduction);
NB_API nb_value nb_dropout(nb_builder *b, nb_value x, double p, bool is_test, uint64_t seed);
NB_API nb_value nb_embedding(nb_builder *b, nb_value w, nb_value ids, int64_t padding_idx);

/* nb_scaled_dot_product_attention's options; NULL or all zero: no mask,
 * scale 1/sqrt(D), no dropout. */
typedef struct nb_attention_opts {
    nb_value mask;  /* additive, added to the scores: [T, S] or any shape that broadcasts to
                        [..., T, S] (-inf masks a pair out); NB_NONE: none */
    bool causal;    /* query i sees keys j <= i (the top-left aligned lower triangle, as torch) */
    double scale;   /* the scores' factor; 0: 1/sqrt(D) */
    double dropout; /* probability of dropping each attention weight (training only; kept
                        weights are scaled by 1/(1-p)) */
    bool is_test;   /* no dropout */
    uint64_t seed;  /* of the dropout mask: 0 draws one from the generator each run */
    int heads;      /* > 0: q, k and v hold this many heads side by side in their last dim,
                        [..., T, heads * D] as a projection writes them, and the output is
                        [..., T, heads * Dv]: no transposes needed around the op */
} nb_attention_opts;

/* softmax(scale * q k^T + mask) v for q [..., T, D], k [..., S, D] and v
 * [..., S, Dv] (the leading dims, batch and heads, equal), giving [..., T,
 * Dv]; or, with opts->heads, each head's part of [..., T, heads * D] and so
 * on. One fused op, scaled_dot_product_attention: its CPU kernel holds one
 * block of the [T, S] weights at a time (online softmax), and its gradient
 * op recomputes them the same way. opts may be NULL. */
NB_API nb_value nb_scaled_dot_product_attention(nb_builder *b, nb_value q, nb_value k, nb_value v,
                                                const nb_attention_opts *opts);
NB_API nb_value nb_accuracy(nb_builder *b, nb_value scores, nb_value label, int k);

/* ---- creation ---- */
NB_API nb_value nb_fill_constant(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double value);
/* A constant with the values of `value` (any dtype; a view is fine), copied
 * into the program (an assign_value op), so a static program needs no feed
 * for it and keeps it in its file; eagerly, a copy. */
NB_API nb_value nb_constant(nb_builder *b, const nb_tensor *value);
NB_API nb_value nb_fill_zeros_like(nb_builder *b, nb_value x);
NB_API nb_value nb_ones_like(nb_builder *b, nb_value x);
NB_API nb_value nb_assign(nb_builder *b, nb_value x);
/* Random values, drawn from the program's stream (nb_program_set_seed) in a
 * program and from the builder's generator eagerly; for a seed of the op's
 * own, emit "uniform_random" or "gaussian_random" with a "seed" attribute. */
NB_API nb_value nb_uniform_random(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double min,
                                  double max);
NB_API nb_value nb_gaussian_random(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double mean,
                                   double std);
/* N(mean, std^2), redrawn until within 2 std of the mean (as nb_init's truncated normal). */
NB_API nb_value nb_truncated_gaussian_random(nb_builder *b, nb_dtype dtype, int ndim, const int64_t *shape, double mean,
                                             double std);
/* fill_constant whose dim 0 takes dim 0 of `like` (a batch size unknown
 * until run); for other dims emit it with input_dim_idx and output_dim_idx. */
NB_API nb_value nb_fill_constant_batch_size_like(nb_builder *b, nb_value like, nb_dtype dtype, int ndim,
                                                 const int64_t *shape, double value);
/* x + step, for a one-element counter. */
NB_API nb_value nb_increment(nb_builder *b, nb_value x, double step);

NB_END_DECLS

#endif
