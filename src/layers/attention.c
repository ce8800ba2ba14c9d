/* Multi-head attention and the pre-norm transformer block, made of fc
 * layers, layer_norm and the fused scaled_dot_product_attention op (heads
 * side by side), so they run in programs and eagerly alike. */
#include <string.h>
#include "layer_internal.h"

/* Checks that x is a float [B, T, E] with E known; *info receives its info. */
static bool need_btE(nb_builder *b, const char *layer, const char *what, nb_value x, nb_var_info *info)
{
    if (!nb_layer_need_float(b, layer, x, info)) return false;
    if (info->ndim == 3 && info->shape[2] > 0) return true;
    char s[NB_SHAPE_STR_MAX];
    nb_builder_fail(b, NB_ERR_SHAPE, "%s: %s has shape %s; it must be 3-D [B, T, E] with E known", layer, what,
                    nb_shape_str(s, sizeof s, info->ndim, info->shape));
    return false;
}

/* Checks that `heads` divides x's width E. */
static bool heads_ok(nb_builder *b, const char *layer, int heads, const nb_var_info *xi)
{
    char s[NB_SHAPE_STR_MAX];
    if (heads < 1) nb_builder_fail(b, NB_ERR_ARG, "%s: heads is %d; it must be at least 1", layer, heads);
    else if (xi->shape[2] % heads)
        nb_builder_fail(b, NB_ERR_ARG, "%s: %d heads do not divide the embedding width %lld of x %s", layer, heads,
                        (long long)xi->shape[2], nb_shape_str(s, sizeof s, xi->ndim, xi->shape));
    else return true;
    return false;
}

/* "<layer>.<part>" into buf[NB_LAYER_NAME_MAX]; false (the builder failed,
 * naming it) when too long. */
static bool sub_name(nb_builder *b, const char *layer, const char *part, char *buf)
{
    size_t n = strlen(layer), m = strlen(part);
    if (n + m + 2 > NB_LAYER_NAME_MAX) {
        nb_builder_fail(b, NB_ERR_ARG, "%s: name \"%.40s...\" is too long", part, layer);
        return false;
    }
    memcpy(buf, layer, n);
    buf[n] = '.';
    memcpy(buf + n + 1, part, m + 1);
    return true;
}

/* fc over the last dim of a [B, T, E] value, named `layer`.`part`. */
static nb_value projection(nb_builder *b, nb_value x, int64_t size, const char *act, const char *layer,
                           const char *part, bool no_bias)
{
    char name[NB_LAYER_NAME_MAX];
    if (!sub_name(b, layer, part, name)) return NB_NONE;
    return nb_layer_fc(b, x, size, act, &(nb_fc_opts){.name = name, .in_num_col_dims = 2, .no_bias = no_bias});
}

nb_value nb_layer_multi_head_attention(nb_builder *b, nb_value x, nb_value kv, int heads, const nb_mha_opts *opts)
{
    static const char *L = "multi_head_attention";
    static const nb_mha_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, L, 1, &x)) return NB_NONE;
    nb_var_info xi, ki;
    if (!need_btE(b, L, "x", x, &xi)) return NB_NONE;
    const bool self = nb_is_none(kv);
    if (self) kv = x;
    if (!need_btE(b, L, "kv", kv, &ki)) return NB_NONE;
    const int64_t E = xi.shape[2];
    char s1[NB_SHAPE_STR_MAX], s2[NB_SHAPE_STR_MAX];
    nb_shape_str(s1, sizeof s1, xi.ndim, xi.shape);
    nb_shape_str(s2, sizeof s2, ki.ndim, ki.shape);
    if (!heads_ok(b, L, heads, &xi)) return NB_NONE;
    if (!self) {
        if (ki.dtype != xi.dtype) {
            nb_builder_fail(b, NB_ERR_DTYPE, "%s: kv is %s and x is %s; they must match", L, nb_dtype_name(ki.dtype),
                            nb_dtype_name(xi.dtype));
            return NB_NONE;
        }
        if (ki.shape[2] != E || (ki.shape[0] >= 0 && xi.shape[0] >= 0 && ki.shape[0] != xi.shape[0])) {
            nb_builder_fail(b, NB_ERR_SHAPE, "%s: kv %s does not fit x %s; it must be [B, S, E] with x's B and E", L,
                            s2, s1);
            return NB_NONE;
        }
    }
    if (!(opts->dropout >= 0 && opts->dropout < 1)) {
        nb_builder_fail(b, NB_ERR_ARG, "%s: dropout %g must lie in [0, 1)", L, opts->dropout);
        return NB_NONE;
    }
    char name[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "mha", opts->name, name, sizeof name)) return NB_NONE;
    /* The projections write the heads side by side, [B, T, H * D], and the
     * op reads them so (its heads option): no reshape or transpose. */
    nb_value q = projection(b, x, E, NULL, name, "q", opts->no_bias);
    nb_value k = projection(b, kv, E, NULL, name, "k", opts->no_bias);
    nb_value v = projection(b, kv, E, NULL, name, "v", opts->no_bias);
    if (nb_builder_status(b)) return NB_NONE;
    nb_attention_opts ao = {.mask = opts->mask, .causal = opts->causal, .dropout = opts->dropout, .heads = heads};
    nb_value a = nb_scaled_dot_product_attention(b, q, k, v, &ao); /* [B, T, H * D] */
    return projection(b, a, E, NULL, name, "o", opts->no_bias);
}

/* Layer normalisation over the last dim of x [B, T, E], its parameters
 * "<name>.w_0" and "<name>.b_0" (nb_layer_layer_norm names its layers
 * afresh; a block keeps all its parameters under its own name). */
static nb_value named_layer_norm(nb_builder *b, nb_value x, const nb_var_info *xi, const char *block, const char *part,
                                 double epsilon)
{
    char name[NB_LAYER_NAME_MAX], n_scale[NB_LAYER_NAME_MAX], n_bias[NB_LAYER_NAME_MAX];
    if (!sub_name(b, block, part, name) || !nb_layer_param_name(b, name, "w", n_scale, sizeof n_scale) ||
        !nb_layer_param_name(b, name, "b", n_bias, sizeof n_bias))
        return NB_NONE;
    const int64_t E = xi->shape[2];
    nb_value scale = nb_param(b, n_scale, xi->dtype, 1, &E, nb_init_ones());
    nb_value bias = nb_param(b, n_bias, xi->dtype, 1, &E, nb_init_zeros());
    if (nb_builder_status(b)) return NB_NONE;
    nb_attr attrs[] = {NB_ATTR_INT("begin_norm_axis", 2), NB_ATTR_FLOAT("epsilon", epsilon)};
    return nb_emit1(b, "layer_norm", NB_VALUES(x, scale, bias), NB_ATTRS_N(2, attrs));
}

static nb_value maybe_dropout(nb_builder *b, nb_value x, double p) { return p > 0 ? nb_layer_dropout(b, x, p) : x; }

nb_value nb_layer_transformer_block(nb_builder *b, nb_value x, int heads, const nb_transformer_block_opts *opts)
{
    static const char *L = "transformer_block";
    static const nb_transformer_block_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, L, 1, &x)) return NB_NONE;
    nb_var_info xi;
    if (!need_btE(b, L, "x", x, &xi)) return NB_NONE;
    const int64_t E = xi.shape[2];
    if (!heads_ok(b, L, heads, &xi)) return NB_NONE;
    const char *act = opts->act ? opts->act : "gelu";
    if (!nb_activation_known(act)) {
        nb_activation_unknown_error(b, L, act);
        return NB_NONE;
    }
    if (opts->mlp < 0) {
        nb_builder_fail(b, NB_ERR_ARG, "%s: mlp width %lld must be positive (0: 4 * E)", L, (long long)opts->mlp);
        return NB_NONE;
    }
    if (!(opts->dropout >= 0 && opts->dropout < 1)) {
        nb_builder_fail(b, NB_ERR_ARG, "%s: dropout %g must lie in [0, 1)", L, opts->dropout);
        return NB_NONE;
    }
    if (!(opts->epsilon >= 0)) {
        nb_builder_fail(b, NB_ERR_ARG, "%s: epsilon %g must not be negative (0: 1e-5)", L, opts->epsilon);
        return NB_NONE;
    }
    const double eps = opts->epsilon ? opts->epsilon : 1e-5;
    const int64_t hidden = opts->mlp ? opts->mlp : 4 * E;
    char name[NB_LAYER_NAME_MAX], attn[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "block", opts->name, name, sizeof name) || !sub_name(b, name, "attn", attn)) return NB_NONE;
    nb_mha_opts mo = {.name = attn, .causal = opts->causal, .dropout = opts->dropout};
    nb_value a = nb_layer_multi_head_attention(b, named_layer_norm(b, x, &xi, name, "ln1", eps), NB_NONE, heads, &mo);
    nb_value h = nb_add(b, x, maybe_dropout(b, a, opts->dropout));
    nb_value m = projection(b, named_layer_norm(b, h, &xi, name, "ln2", eps), hidden, act, name, "fc1", false);
    m = projection(b, m, E, NULL, name, "fc2", false);
    return nb_add(b, h, maybe_dropout(b, m, opts->dropout));
}
