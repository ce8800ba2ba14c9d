/* GPT-2's architecture, written once against the builder, so that
 * examples/gpt2.c trains it as a static program or on the eager tape and
 * bench/bench_gpt2.c times the very same model.
 *
 * Token embedding wte [V, C] plus a learned position embedding wpe [maxT,
 * C]; L pre-norm blocks, each x + attn(ln_1(x)) then x + mlp(ln_2(x)), with
 * causal self-attention of NH heads through one fused projection c_attn [C,
 * 3C] and the output projection c_proj [C, C], and an MLP c_fc [C, 4C],
 * GELU (tanh approximation), c_proj [4C, C]; a final layer norm ln_f; the
 * logits are x wte^T (the output layer is tied to the token embedding).
 *
 * The parameters carry Hugging Face's GPT-2 names and layouts
 * ("h.3.attn.c_attn.weight", Conv1D [in, out], which is nabla's fc layout
 * too), so a checkpoint in that layout maps onto them name by name; llm.c's
 * checkpoint holds the same 16 kinds of tensors, stacked over the layers
 * (see gpt2_io.h). */
#ifndef NABLA_EXAMPLES_GPT2_MODEL_H
#define NABLA_EXAMPLES_GPT2_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include "nabla/nabla.h"

typedef struct gpt2_config {
    int64_t vocab;        /* V: tokens the model knows (50257 for GPT-2's tokenizer) */
    int64_t padded_vocab; /* Vp >= V: rows llm.c's checkpoint stores for wte (50304) */
    int64_t layers;       /* L */
    int64_t heads;        /* NH */
    int64_t embed;        /* C */
    int64_t block;        /* maxT: the longest sequence (rows of wpe) */
} gpt2_config;

/* The GPT-2 family by name: "124M" (12 layers, 12 heads, width 768),
 * "350M" (24, 16, 1024), "774M" (36, 20, 1280), "1558M" (48, 25, 1600), all
 * with context 1024 and vocabulary 50257 padded to 50304. False for another
 * name. */
bool gpt2_preset(const char *name, gpt2_config *out);

/* llm.c's padding of a vocabulary: up to a multiple of 128 (50257 -> 50304). */
int64_t gpt2_pad_vocab(int64_t vocab);

/* NB_ERR_ARG naming the first field out of range, or heads not dividing the
 * width; `what` starts the message (a flag, a file). */
nb_status gpt2_config_check(const gpt2_config *c, const char *what);

/* The 16 kinds of tensors, in llm.c's order. Per-layer kinds have one
 * parameter per layer ("h.<l>.<suffix>"); the others one ("<suffix>"). */
enum {
    GPT2_WTE,
    GPT2_WPE,
    GPT2_LN1W,
    GPT2_LN1B,
    GPT2_QKVW,
    GPT2_QKVB,
    GPT2_ATTPROJW,
    GPT2_ATTPROJB,
    GPT2_LN2W,
    GPT2_LN2B,
    GPT2_FCW,
    GPT2_FCB,
    GPT2_FCPROJW,
    GPT2_FCPROJB,
    GPT2_LNFW,
    GPT2_LNFB,
    GPT2_KINDS
};

/* Whether the kind has one tensor per layer. */
bool gpt2_kind_per_layer(int kind);
/* Whether llm.c stores the kind transposed ([out, in], nn.Linear's layout)
 * where the model holds [in, out]. */
bool gpt2_kind_transposed(int kind);

/* The parameters: every kind, and within a per-layer kind every layer, in
 * that order (llm.c's order in its file). */
int gpt2_param_count(const gpt2_config *c);

typedef struct gpt2_param {
    int kind, layer; /* layer -1 for a kind that is not per layer */
    char name[64];   /* Hugging Face's name, "h.0.ln_1.weight" */
    int ndim;
    int64_t shape[2]; /* the model's layout */
} gpt2_param;

/* The i-th parameter (0 <= i < gpt2_param_count). */
gpt2_param gpt2_param_at(const gpt2_config *c, int i);

/* Parameters in the model (and a checkpoint) excluding none: their count of
 * numbers. */
int64_t gpt2_param_numel(const gpt2_config *c);

/* Logits [B, T, V] of ids [B, T] (int64, T <= block). */
nb_value gpt2_logits(nb_builder *b, const gpt2_config *c, nb_value ids);

/* The mean cross-entropy of predicting targets [B, T] from ids [B, T]. */
nb_value gpt2_loss(nb_builder *b, const gpt2_config *c, nb_value ids, nb_value targets);

/* Multiply-adds of one training step (forward and backward) at batch B and
 * sequence T, counted twice: 6 N B T for the N parameters that multiply
 * (all but wpe, which is only looked up) plus attention's two products, 4 B
 * T^2 C per layer forward and twice that backward. */
double gpt2_step_flops(const gpt2_config *c, int64_t B, int64_t T);

/* AdamW with GPT-2's weight-decay split: decay on the matrices (and the
 * embeddings), none on biases and layer-norm gains. */
nb_optimizer gpt2_adamw(double lr, double weight_decay);

#endif
