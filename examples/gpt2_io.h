/* The files GPT-2 users hold, read into and written from gpt2_model.h's
 * parameters:
 *
 *  - llm.c's checkpoint (gpt2_124M.bin): 256 little-endian int32 (magic
 *    20240326, version 3, max T, V, L, NH, C, Vp, then zeros), then the fp32
 *    parameters kind by kind in llm.c's order (gpt2_param_at's), each
 *    per-layer kind stacked over the layers, the matrices in nn.Linear's
 *    [out, in] layout, wte with Vp rows (the rows past V are padding, never
 *    read by the model; they are written as zeros);
 *  - a safetensors file with Hugging Face's GPT-2 names and layouts
 *    ("wte.weight", "h.0.attn.c_attn.weight" as Conv1D [in, out], ...,
 *    "ln_f.bias"; a "transformer." prefix is accepted, the attention-mask
 *    buffers "h.N.attn.bias" / ".masked_bias" and the tied "lm_head.weight"
 *    are skipped); the heads, which the tensors do not tell, come from the
 *    caller, the metadata "n_head" this writer adds, or width / 64 (every
 *    GPT-2 size has heads of 64);
 *  - llm.c's token files: 256 int32 (magic 20240520, version 1, count),
 *    then `count` uint16 token ids.
 *
 * Nothing in a file is trusted: a wrong magic or version, a header out of
 * range, a file shorter or longer than its header says, a missing,
 * unexpected or misshapen tensor gives NB_ERR_FORMAT (NB_ERR_NOT_FOUND for
 * no file) with a message naming the file and what is wrong. Files are
 * written atomically (nabla/atomic_file.h). */
#ifndef NABLA_EXAMPLES_GPT2_IO_H
#define NABLA_EXAMPLES_GPT2_IO_H

#include <stdint.h>
#include "gpt2_model.h"

/* A model's parameters in memory: t[i] is gpt2_param_at(&config, i), F32 in
 * the model's layout; each a reference of its own. */
typedef struct gpt2_weights {
    gpt2_config config;
    int n;
    nb_tensor **t;
} gpt2_weights;

/* Loads `path` by its extension: ".bin" llm.c's checkpoint, ".safetensors"
 * Hugging Face's layout (heads: 0, or the count to use). */
nb_status gpt2_weights_load(gpt2_weights *w, const char *path, int64_t heads);
/* Saves `w` to `path` by its extension, as above. */
nb_status gpt2_weights_save(const gpt2_weights *w, const char *path);
void gpt2_weights_free(gpt2_weights *w);

/* Empty weights for config c, to be filled with references (n set, t
 * zeroed). */
nb_status gpt2_weights_alloc(gpt2_weights *w, const gpt2_config *c);

nb_status gpt2_llmc_load(gpt2_weights *w, const char *path);
nb_status gpt2_llmc_save(const gpt2_weights *w, const char *path);
nb_status gpt2_hf_load(gpt2_weights *w, const char *path, int64_t heads);
nb_status gpt2_hf_save(const gpt2_weights *w, const char *path);

/* Token ids of an llm.c token file (ids malloc'ed). */
typedef struct gpt2_tokens {
    uint16_t *ids;
    int64_t n;
} gpt2_tokens;

nb_status gpt2_tokens_load(gpt2_tokens *t, const char *path);
void gpt2_tokens_free(gpt2_tokens *t);

#endif
