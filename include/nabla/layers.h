/* nabla/layers.h: layers, losses and metrics written against the builder.
 *
 *     nb_value x = nb_layer_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
 *     nb_value h = nb_layer_fc(b, x, 128, "relu", NULL);
 *     nb_value y = nb_layer_fc(b, h, 10, NULL, NULL);
 *     nb_value cost = nb_layer_softmax_cross_entropy(b, y, label);
 *     if (nb_builder_status(b)) puts(nb_builder_error(b));
 *
 * A layer emits its ops through the builder and creates its parameters with
 * nb_param (nabla/init.h): trainable, persistable vars of the main program
 * initialised in the builder's startup program. Like every builder call, a
 * layer that fails leaves the error in the builder and returns NB_NONE, and
 * a layer called on a builder that already failed does nothing.
 *
 * Names, Paddle's way: a layer takes a fresh name from the builder,
 * nb_builder_unique_name(b, "fc") = "fc_0", "fc_1", ... (or the name given
 * in its options), and its parameters are "<layer>.w_0", "<layer>.b_0"
 * (a further weight-like var is .w_1, .w_2, ...). The ops a layer emits name
 * their outputs as every emitted op does ("<op>_k.tmp_0"), from counters of
 * their own, so consecutive fc layers are fc_0, fc_1, ... Give opts.name for
 * names of your own.
 *
 * Default initialisers are torch's: fc and conv2d weights kaiming-uniform
 * with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and their
 * biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the weight's fan_in;
 * normalisation scales 1 and biases 0; embeddings N(0, 1). Options structs
 * are read with zero meaning "default" in every field.
 *
 * Parameters need known sizes: the dims a layer's parameters depend on (fc
 * input features, channels) must be known when the layer is built; the
 * batch dim may be -1.
 *
 * Eager builders (nabla/eager.h) run the same layers: the ops run at once,
 * and parameters and state are tensors kept in the builder by name (see
 * nb_param). The names come from counters that nb_eager_release_values
 * restarts, so a model function called once per step, with a release
 * between steps, names its layers alike every time and so finds the
 * parameters it made on the first call:
 *
 *     nb_value model(nb_builder *b, nb_value x)    // builds or runs
 *     {
 *         return nb_layer_fc(b, nb_layer_fc(b, x, 128, "relu", NULL), 10, NULL, NULL);
 *     }
 *
 * Layers that have an is_test attribute (dropout, batch_norm) leave it to
 * the eager builder's test mode (nb_eager_set_test_mode), which plays the
 * part of nb_program_clone_for_test. Random ops (dropout's mask,
 * initialisers) draw from the builder's generator (nb_eager_set_seed). Only
 * nb_layer_data is record-only: eager inputs are nb_eager_value(b, t). */
#ifndef NABLA_LAYERS_H
#define NABLA_LAYERS_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/program.h"
#include "nabla/init.h"

NB_BEGIN_DECLS

/* nb_data (builder.h): a var fed at run time, Fluid's layers.data. */
NB_API nb_value nb_layer_data(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape);

/* ---- activations ----------------------------------------------------------- */

/* act(x) for act one of: "" or NULL (x itself, no op), "relu", "sigmoid",
 * "tanh", "gelu" (exact, erf form), "silu", "leaky_relu" (slope 0.01),
 * "elu" (alpha 1), "softplus" (beta 1, threshold 20), "softmax" and
 * "log_softmax" (over the last axis), torch's defaults. Any other name is a
 * builder error listing these. */
NB_API nb_value nb_layer_activation(nb_builder *b, nb_value x, const char *act);

/* ---- fully connected ----------------------------------------------------------- */

typedef struct nb_fc_opts {
    const char *name;    /* layer name (default: fresh "fc_k") */
    int in_num_col_dims; /* x's dims [0, n) are rows, the rest are flattened into features (default 1) */
    bool no_bias;
    nb_init w_init, b_init; /* defaults: torch's nn.Linear */
} nb_fc_opts;

/* act(x @ W + b): x [rows..., features...] -> [rows..., size], with W
 * [features, size] and b [size] of x's (float) dtype. act as
 * nb_layer_activation (relu, sigmoid and tanh fuse into the fc op); opts
 * may be NULL. */
NB_API nb_value nb_layer_fc(nb_builder *b, nb_value x, int64_t size, const char *act, const nb_fc_opts *opts);

/* ---- convolution and pooling (NCHW) ------------------------------------------------ */

typedef struct nb_conv2d_opts {
    const char *name; /* default: fresh "conv2d_k" */
    int stride;       /* default 1 */
    int padding;      /* default 0 */
    int dilation;     /* default 1 */
    int groups;       /* default 1; must divide the input channels and out_channels */
    bool no_bias;
    const char *act;        /* applied after the convolution, as nb_layer_activation */
    nb_init w_init, b_init; /* defaults: torch's nn.Conv2d */
} nb_conv2d_opts;

/* x [N, C, H, W] -> [N, out_channels, H', W'] with a square kernel; Filter
 * "<layer>.w_0" [out_channels, C/groups, kernel, kernel], bias "<layer>.b_0"
 * [out_channels]. opts may be NULL. */
NB_API nb_value nb_layer_conv2d(nb_builder *b, nb_value x, int64_t out_channels, int kernel,
                                const nb_conv2d_opts *opts);

typedef struct nb_pool2d_opts {
    int stride;             /* default: kernel, as torch */
    int padding;            /* default 0 */
    bool global;            /* one window over the whole image: [N, C, 1, 1] */
    bool ceil_mode;         /* round the output size up */
    bool count_include_pad; /* avg: divide by the full window, padding included (torch's default is
                               true; the default here is Paddle's exclusive average) */
} nb_pool2d_opts;

/* Pooling of type "max" (NULL: max) or "avg" over square windows of side
 * `kernel` (ignored when opts->global); opts may be NULL. */
NB_API nb_value nb_layer_pool2d(nb_builder *b, nb_value x, const char *type, int kernel, const nb_pool2d_opts *opts);

/* ---- normalisation ------------------------------------------------------------------- */

typedef struct nb_norm_opts {
    const char *name; /* default: fresh "batch_norm_k" */
    /* Paddle's convention: running = momentum * running + (1 - momentum) *
     * batch statistic. Default 0.9, which is torch's momentum 0.1 (torch
     * weighs the batch, Paddle the running value). As every field, 0 means
     * the default. */
    double momentum;
    double epsilon;                /* default 1e-5 */
    const char *act;               /* applied after the normalisation */
    nb_init scale_init, bias_init; /* defaults: ones, zeros */
    bool use_global_stats;         /* normalise with the running statistics in training too (frozen) */
} nb_norm_opts;

/* Batch normalisation of x [N, C, ...] per channel C. Creates parameters
 * "<layer>.w_0" (scale, [C]) and "<layer>.b_0" (bias, [C]), and the running
 * mean "<layer>.w_1" (zeros) and variance "<layer>.w_2" (ones): persistable,
 * stop_gradient, not parameters, initialised by the startup program. The
 * batch_norm op writes the updated statistics back into those same vars
 * (MeanOut = Mean, VarianceOut = Variance), so they live in the scope and
 * advance with every training run; the running variance uses the unbiased
 * batch variance, as torch. The op is in training mode (is_test false);
 * nb_program_clone_for_test makes an evaluation copy that normalises with
 * the running statistics. opts may be NULL.
 *
 * Eager: the op runs at once and the running statistics (state tensors in
 * the builder, requires_grad off) take its MeanOut and VarianceOut after
 * each training-mode call; in the builder's test mode it normalises with
 * them and leaves them as they are. */
NB_API nb_value nb_layer_batch_norm(nb_builder *b, nb_value x, const nb_norm_opts *opts);

/* Layer normalisation over x's dims [begin_norm_axis, ndim) (negative
 * counts from the end), with scale (ones) and bias (zeros) parameters
 * "<layer>.w_0", "<layer>.b_0" of shape [product of those dims].
 * epsilon 0 means 1e-5. */
NB_API nb_value nb_layer_layer_norm(nb_builder *b, nb_value x, int begin_norm_axis, double epsilon);

/* ---- dropout and embedding ---------------------------------------------------------- */

/* Zeroes each element with probability p (in [0, 1)) and scales the rest by
 * 1/(1-p) ("upscale_in_train", as torch), in training; the copy made by
 * nb_program_clone_for_test passes x through. Its mask is drawn from the
 * main program's seed and the run index; in eager mode from the builder's
 * generator, and the builder's test mode passes x through. */
NB_API nb_value nb_layer_dropout(nb_builder *b, nb_value x, double p);

typedef struct nb_embedding_opts {
    const char *name; /* default: fresh "embedding_k" */
    nb_dtype dtype;   /* of the table; default float32 */
    nb_init w_init;   /* default N(0, 1), as torch */
} nb_embedding_opts;

/* Rows of a table W "<layer>.w_0" [vocab, dim] picked by integer ids:
 * ids [...] -> [..., dim]. An id equal to padding_idx gives a row of zeros
 * and no gradient; a negative padding_idx means none. opts may be NULL. */
NB_API nb_value nb_layer_embedding(nb_builder *b, nb_value ids, int64_t vocab, int64_t dim, int64_t padding_idx,
                                   const nb_embedding_opts *opts);

/* ---- attention and transformers ------------------------------------------------------ */

typedef struct nb_mha_opts {
    const char *name; /* default: fresh "mha_k" */
    bool causal;      /* each position attends to itself and the ones before it */
    nb_value mask;    /* additive mask as nb_attention_opts; NB_NONE: none */
    double dropout;   /* on the attention weights, in training */
    bool no_bias;     /* projections without biases */
} nb_mha_opts;

/* Multi-head attention as torch's nn.MultiheadAttention (batch first):
 * queries from x [B, T, E], keys and values from kv [B, S, E] (NB_NONE: x,
 * self-attention), `heads` heads of width E / heads, then the output
 * projection: [B, T, E]. Parameters "<layer>.q", ".k", ".v", ".o" (fc
 * layers of width E). opts may be NULL. */
NB_API nb_value nb_layer_multi_head_attention(nb_builder *b, nb_value x, nb_value kv, int heads,
                                              const nb_mha_opts *opts);

typedef struct nb_transformer_block_opts {
    const char *name; /* default: fresh "block_k" */
    int64_t mlp;      /* the MLP's hidden width; 0: 4 * E */
    bool causal;
    double dropout;  /* after attention and after the MLP, and on the attention weights */
    const char *act; /* the MLP's activation, as nb_layer_activation; NULL: "gelu" */
    double epsilon;  /* of the layer norms; 0: 1e-5 */
} nb_transformer_block_opts;

/* A pre-norm transformer block (GPT-2's): x + mha(ln1(x)), then h +
 * mlp(ln2(h)) with mlp = fc(act(fc(., mlp)), E). x [B, T, E] -> [B, T, E].
 * opts may be NULL. */
NB_API nb_value nb_layer_transformer_block(nb_builder *b, nb_value x, int heads, const nb_transformer_block_opts *opts);

/* ---- losses and metrics ------------------------------------------------------------- */

/* mean((y - label)^2) over every element: a scalar. */
NB_API nb_value nb_layer_mse(nb_builder *b, nb_value y, nb_value label);
/* The mean over the batch of softmax cross-entropy of logits [B, C] with
 * integer class labels [B] or [B, 1]: a scalar. */
NB_API nb_value nb_layer_softmax_cross_entropy(nb_builder *b, nb_value logits, nb_value label);
/* The mean binary cross-entropy of sigmoid(x) against label (same shape,
 * values in [0, 1]): a scalar. */
NB_API nb_value nb_layer_bce_with_logits(nb_builder *b, nb_value x, nb_value label);
/* The fraction (float32 scalar) of rows of scores [B, C] whose label [B] or
 * [B, 1] is among the k highest scores. */
NB_API nb_value nb_layer_accuracy(nb_builder *b, nb_value scores, nb_value label, int k);

NB_END_DECLS

#endif
