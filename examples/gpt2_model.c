/* GPT-2's architecture and its parameter table (see gpt2_model.h). */
#include "gpt2_model.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Per kind: Hugging Face's name (after "h.<l>." for per-layer kinds),
 * whether per layer, whether llm.c stores it transposed. */
static const struct {
    const char *suffix;
    bool per_layer, transposed;
} KINDS[GPT2_KINDS] = {
    [GPT2_WTE] = {"wte.weight", false, false},
    [GPT2_WPE] = {"wpe.weight", false, false},
    [GPT2_LN1W] = {"ln_1.weight", true, false},
    [GPT2_LN1B] = {"ln_1.bias", true, false},
    [GPT2_QKVW] = {"attn.c_attn.weight", true, true},
    [GPT2_QKVB] = {"attn.c_attn.bias", true, false},
    [GPT2_ATTPROJW] = {"attn.c_proj.weight", true, true},
    [GPT2_ATTPROJB] = {"attn.c_proj.bias", true, false},
    [GPT2_LN2W] = {"ln_2.weight", true, false},
    [GPT2_LN2B] = {"ln_2.bias", true, false},
    [GPT2_FCW] = {"mlp.c_fc.weight", true, true},
    [GPT2_FCB] = {"mlp.c_fc.bias", true, false},
    [GPT2_FCPROJW] = {"mlp.c_proj.weight", true, true},
    [GPT2_FCPROJB] = {"mlp.c_proj.bias", true, false},
    [GPT2_LNFW] = {"ln_f.weight", false, false},
    [GPT2_LNFB] = {"ln_f.bias", false, false},
};

bool gpt2_kind_per_layer(int kind) { return kind >= 0 && kind < GPT2_KINDS && KINDS[kind].per_layer; }
bool gpt2_kind_transposed(int kind) { return kind >= 0 && kind < GPT2_KINDS && KINDS[kind].transposed; }

int64_t gpt2_pad_vocab(int64_t vocab) { return (vocab + 127) / 128 * 128; }

bool gpt2_preset(const char *name, gpt2_config *out)
{
    static const struct {
        const char *name;
        int64_t layers, heads, embed;
    } presets[] = {{"124M", 12, 12, 768}, {"350M", 24, 16, 1024}, {"774M", 36, 20, 1280}, {"1558M", 48, 25, 1600}};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            *out = (gpt2_config){.vocab = 50257,
                                 .padded_vocab = 50304,
                                 .layers = presets[i].layers,
                                 .heads = presets[i].heads,
                                 .embed = presets[i].embed,
                                 .block = 1024};
            return true;
        }
    return false;
}

nb_status gpt2_config_check(const gpt2_config *c, const char *what)
{
    const struct {
        const char *name;
        int64_t v, lo, hi;
    } f[] = {{"vocabulary", c->vocab, 1, 1 << 24}, {"padded vocabulary", c->padded_vocab, c->vocab, 1 << 24},
             {"layers", c->layers, 1, 1024},       {"heads", c->heads, 1, 1 << 16},
             {"width", c->embed, 1, 1 << 16},      {"context", c->block, 1, 1 << 20}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return nb_error(NB_ERR_ARG, "%s: %s %lld is outside [%lld, %lld]", what, f[i].name, (long long)f[i].v,
                            (long long)f[i].lo, (long long)f[i].hi);
    if (c->embed % c->heads)
        return nb_error(NB_ERR_ARG, "%s: %lld heads do not divide the width %lld", what, (long long)c->heads,
                        (long long)c->embed);
    return NB_OK;
}

int gpt2_param_count(const gpt2_config *c)
{
    int n = 0;
    for (int k = 0; k < GPT2_KINDS; k++) n += KINDS[k].per_layer ? (int)c->layers : 1;
    return n;
}

/* The shape of kind k in the model's layout. */
static int kind_shape(const gpt2_config *c, int k, int64_t *shape)
{
    const int64_t C = c->embed;
    switch (k) {
    case GPT2_WTE: shape[0] = c->vocab, shape[1] = C; return 2;
    case GPT2_WPE: shape[0] = c->block, shape[1] = C; return 2;
    case GPT2_QKVW: shape[0] = C, shape[1] = 3 * C; return 2;
    case GPT2_QKVB: shape[0] = 3 * C; return 1;
    case GPT2_ATTPROJW: shape[0] = C, shape[1] = C; return 2;
    case GPT2_FCW: shape[0] = C, shape[1] = 4 * C; return 2;
    case GPT2_FCB: shape[0] = 4 * C; return 1;
    case GPT2_FCPROJW: shape[0] = 4 * C, shape[1] = C; return 2;
    default: shape[0] = C; return 1; /* layer norms, the projections' biases */
    }
}

gpt2_param gpt2_param_at(const gpt2_config *c, int i)
{
    gpt2_param p = {.kind = -1, .layer = -1};
    for (int k = 0; k < GPT2_KINDS; k++) {
        const int n = KINDS[k].per_layer ? (int)c->layers : 1;
        if (i >= n) {
            i -= n;
            continue;
        }
        p.kind = k;
        p.layer = KINDS[k].per_layer ? i : -1;
        if (p.layer >= 0) snprintf(p.name, sizeof p.name, "h.%d.%s", p.layer, KINDS[k].suffix);
        else snprintf(p.name, sizeof p.name, "%s", KINDS[k].suffix);
        p.ndim = kind_shape(c, k, p.shape);
        break;
    }
    return p;
}

int64_t gpt2_param_numel(const gpt2_config *c)
{
    int64_t n = 0;
    for (int i = 0; i < gpt2_param_count(c); i++) {
        gpt2_param p = gpt2_param_at(c, i);
        n += p.ndim == 2 ? p.shape[0] * p.shape[1] : p.shape[0];
    }
    return n;
}

/* ---- the model ------------------------------------------------------------------------ */

/* GPT-2's initialisation: N(0, 0.02) for matrices and embeddings, with the
 * projections into the residual stream scaled by 1/sqrt(2L); zero biases,
 * unit gains. */
static nb_init init_of(const gpt2_config *c, int kind)
{
    switch (kind) {
    case GPT2_LN1W:
    case GPT2_LN2W:
    case GPT2_LNFW: return nb_init_ones();
    case GPT2_WTE:
    case GPT2_WPE:
    case GPT2_QKVW:
    case GPT2_FCW: return nb_init_normal(0, 0.02);
    case GPT2_ATTPROJW:
    case GPT2_FCPROJW: return nb_init_normal(0, 0.02 / sqrt(2.0 * (double)c->layers));
    default: return nb_init_zeros();
    }
}

static nb_value param(nb_builder *b, const gpt2_config *c, int kind, int layer)
{
    gpt2_param p = {.kind = kind, .layer = layer};
    if (layer >= 0) snprintf(p.name, sizeof p.name, "h.%d.%s", layer, KINDS[kind].suffix);
    else snprintf(p.name, sizeof p.name, "%s", KINDS[kind].suffix);
    p.ndim = kind_shape(c, kind, p.shape);
    return nb_param(b, p.name, NB_F32, p.ndim, p.shape, init_of(c, kind));
}

static nb_value layer_norm(nb_builder *b, nb_value x, nb_value scale, nb_value bias)
{
    const int axis = nb_value_info(b, x).ndim - 1;
    nb_attr attrs[] = {NB_ATTR_INT("begin_norm_axis", axis), NB_ATTR_FLOAT("epsilon", 1e-5)};
    return nb_emit1(b, "layer_norm", NB_VALUES(x, scale, bias), NB_ATTRS_N(2, attrs));
}

/* One pre-norm block on x [B, T, C]. */
static nb_value block(nb_builder *b, const gpt2_config *c, nb_value x, int l)
{
    nb_value h = layer_norm(b, x, param(b, c, GPT2_LN1W, l), param(b, c, GPT2_LN1B, l));
    nb_value qkv = nb_fc(b, h, param(b, c, GPT2_QKVW, l), param(b, c, GPT2_QKVB, l), 2);
    nb_value q[3];
    if (nb_split(b, qkv, 2, 3, q)) return NB_NONE;
    /* The heads side by side in each of q, k, v, as c_attn writes them. */
    nb_attention_opts ao = {.causal = true, .heads = (int)c->heads};
    nb_value a = nb_scaled_dot_product_attention(b, q[0], q[1], q[2], &ao);
    x = nb_add(b, x, nb_fc(b, a, param(b, c, GPT2_ATTPROJW, l), param(b, c, GPT2_ATTPROJB, l), 2));
    h = layer_norm(b, x, param(b, c, GPT2_LN2W, l), param(b, c, GPT2_LN2B, l));
    nb_value m = nb_gelu(b, nb_fc(b, h, param(b, c, GPT2_FCW, l), param(b, c, GPT2_FCB, l), 2), true);
    return nb_add(b, x, nb_fc(b, m, param(b, c, GPT2_FCPROJW, l), param(b, c, GPT2_FCPROJB, l), 2));
}

/* Logits [B*T, V] of ids [B, T]. */
static nb_value flat_logits(nb_builder *b, const gpt2_config *c, nb_value ids)
{
    const nb_var_info ii = nb_value_info(b, ids);
    if (nb_builder_status(b)) return NB_NONE;
    if (ii.ndim != 2 || ii.shape[1] < 1 || ii.shape[1] > c->block) {
        nb_builder_fail(b, NB_ERR_SHAPE, "gpt2: ids must be [B, T] with 1 <= T <= %lld (the context)",
                        (long long)c->block);
        return NB_NONE;
    }
    const int64_t T = ii.shape[1];
    nb_value wte = param(b, c, GPT2_WTE, -1), pos = param(b, c, GPT2_WPE, -1);
    if (T != c->block) pos = nb_slice(b, pos, 1, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){T});
    nb_value x = nb_add(b, nb_embedding(b, wte, ids, -1), pos);
    for (int l = 0; l < (int)c->layers; l++) x = block(b, c, x, l);
    x = layer_norm(b, x, param(b, c, GPT2_LNFW, -1), param(b, c, GPT2_LNFB, -1));
    /* One [B*T, C] x [C, V] product rather than B batched ones. */
    return nb_matmul(b, nb_reshape(b, x, 2, (int64_t[]){-1, c->embed}), wte, NB_TRANSPOSE_Y);
}

nb_value gpt2_logits(nb_builder *b, const gpt2_config *c, nb_value ids)
{
    nb_value flat = flat_logits(b, c, ids);
    if (nb_is_none(flat)) return NB_NONE;
    const nb_var_info ii = nb_value_info(b, ids);
    return nb_reshape(b, flat, 3, (int64_t[]){ii.shape[0], ii.shape[1], c->vocab});
}

nb_value gpt2_loss(nb_builder *b, const gpt2_config *c, nb_value ids, nb_value targets)
{
    return nb_layer_softmax_cross_entropy(b, flat_logits(b, c, ids), nb_reshape(b, targets, 1, (int64_t[]){-1}));
}

double gpt2_step_flops(const gpt2_config *c, int64_t B, int64_t T)
{
    const double N = (double)(gpt2_param_numel(c) - c->block * c->embed);
    return 6 * N * (double)(B * T) + 12.0 * (double)c->layers * (double)B * (double)T * (double)T * (double)c->embed;
}

nb_optimizer gpt2_adamw(double lr, double weight_decay)
{
    nb_optimizer o = nb_adamw(lr, weight_decay);
    o.decay_min_ndim = 2;
    return o;
}
