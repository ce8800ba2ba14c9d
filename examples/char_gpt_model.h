/* char_gpt's model, written once against the builder, so that the example
 * (examples/char_gpt.c) trains it as a static program or on the eager tape
 * and bench/bench_transformer.c times the very same model.
 *
 * A GPT: token embedding plus a learned position embedding, `layers`
 * pre-norm transformer blocks (causal self-attention with `heads` heads, a
 * GELU MLP of width 4 * embed), a final layer norm and a linear head to the
 * vocabulary (or, tied, the token embedding's transpose). */
#ifndef NABLA_EXAMPLES_CHAR_GPT_MODEL_H
#define NABLA_EXAMPLES_CHAR_GPT_MODEL_H

#include "nabla/nabla.h"

typedef struct gpt_config {
    int64_t vocab;  /* characters */
    int64_t layers; /* transformer blocks */
    int64_t embed;  /* width */
    int64_t heads;
    int64_t block;  /* context: the longest sequence */
    int64_t batch;  /* sequences per step (training) */
    double dropout; /* residual and attention dropout, in training */
    bool tied;      /* the head reuses the token embedding */
} gpt_config;

/* The defaults of char_gpt: a model that trains well on two cores in ten
 * minutes. */
static inline gpt_config gpt_default_config(void)
{
    return (gpt_config){.vocab = 65, .layers = 4, .embed = 128, .heads = 4, .block = 64, .batch = 32};
}

/* Logits [B, T, vocab] of ids [B, T] (int64, T <= block). */
static inline nb_value gpt_logits(nb_builder *b, const gpt_config *c, nb_value ids)
{
    const int64_t T = nb_value_info(b, ids).shape[1];
    /* The token table, made here rather than by nb_layer_embedding so that
     * a tied head can use it too. */
    nb_value table = nb_param(b, "gpt.tok.w_0", NB_F32, 2, (int64_t[]){c->vocab, c->embed}, nb_init_normal(0, 0.02));
    nb_value tok = nb_embedding(b, table, ids, -1);
    nb_value pos = nb_param(b, "gpt.pos", NB_F32, 2, (int64_t[]){c->block, c->embed}, nb_init_normal(0, 0.02));
    if (T != c->block) pos = nb_slice(b, pos, 1, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){T});
    nb_value x = nb_add(b, tok, pos);
    if (c->dropout > 0) x = nb_layer_dropout(b, x, c->dropout);
    const nb_transformer_block_opts bo = {.causal = true, .dropout = c->dropout};
    for (int64_t l = 0; l < c->layers; l++) x = nb_layer_transformer_block(b, x, (int)c->heads, &bo);
    x = nb_layer_layer_norm(b, x, 2, 1e-5);
    if (!c->tied) return nb_layer_fc(b, x, c->vocab, NULL, &(nb_fc_opts){.name = "gpt.head", .in_num_col_dims = 2});
    return nb_matmul(b, x, table, NB_TRANSPOSE_Y);
}

/* The mean cross-entropy of predicting targets [B, T] from ids [B, T]. */
static inline nb_value gpt_loss(nb_builder *b, const gpt_config *c, nb_value ids, nb_value targets)
{
    nb_value logits = nb_reshape(b, gpt_logits(b, c, ids), 2, (int64_t[]){-1, c->vocab});
    return nb_layer_softmax_cross_entropy(b, logits, nb_reshape(b, targets, 1, (int64_t[]){-1}));
}

#endif
