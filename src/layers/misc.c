/* Data, activations by name, dropout and embedding. */
#include <string.h>
#include "layer_internal.h"

nb_value nb_layer_data(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape)
{
    if (!b || nb_builder_status(b)) return NB_NONE;
    return nb_data(b, name, dtype, ndim, shape);
}

/* ---- activations ---------------------------------------------------------------- */

static nb_value act_relu(nb_builder *b, nb_value x) { return nb_relu(b, x); }
static nb_value act_sigmoid(nb_builder *b, nb_value x) { return nb_sigmoid(b, x); }
static nb_value act_tanh(nb_builder *b, nb_value x) { return nb_tanh(b, x); }
static nb_value act_gelu(nb_builder *b, nb_value x) { return nb_gelu(b, x, false); }
static nb_value act_silu(nb_builder *b, nb_value x) { return nb_silu(b, x); }
static nb_value act_leaky_relu(nb_builder *b, nb_value x) { return nb_leaky_relu(b, x, 0.01); }
static nb_value act_elu(nb_builder *b, nb_value x) { return nb_elu(b, x, 1.0); }
static nb_value act_softplus(nb_builder *b, nb_value x) { return nb_softplus(b, x, 1.0, 20.0); }
static nb_value act_softmax(nb_builder *b, nb_value x) { return nb_softmax(b, x, -1); }
static nb_value act_log_softmax(nb_builder *b, nb_value x) { return nb_log_softmax(b, x, -1); }

static const struct {
    const char *name;
    nb_value (*apply)(nb_builder *b, nb_value x);
} activations[] = {
    {"relu", act_relu},       {"sigmoid", act_sigmoid},         {"tanh", act_tanh}, {"gelu", act_gelu},
    {"silu", act_silu},       {"leaky_relu", act_leaky_relu},   {"elu", act_elu},   {"softplus", act_softplus},
    {"softmax", act_softmax}, {"log_softmax", act_log_softmax},
};
#define N_ACTIVATIONS ((int)(sizeof activations / sizeof *activations))

static int find_activation(const char *act)
{
    for (int i = 0; i < N_ACTIVATIONS; i++)
        if (!strcmp(act, activations[i].name)) return i;
    return -1;
}

bool nb_activation_known(const char *act) { return !act || !act[0] || find_activation(act) >= 0; }

nb_status nb_activation_unknown_error(nb_builder *b, const char *layer, const char *act)
{
    char known[256] = "";
    for (int i = 0; i < N_ACTIVATIONS; i++) {
        strcat(known, i ? ", " : "");
        strcat(known, activations[i].name);
    }
    return nb_builder_fail(b, NB_ERR_ARG, "%s: unknown activation \"%s\" (known: \"\" for none, %s)", layer, act,
                           known);
}

nb_value nb_layer_activation(nb_builder *b, nb_value x, const char *act)
{
    if (!nb_layer_ok(b, "activation", 1, &x)) return NB_NONE;
    if (!act || !act[0]) return x;
    int i = find_activation(act);
    if (i < 0) {
        nb_activation_unknown_error(b, "activation", act);
        return NB_NONE;
    }
    return activations[i].apply(b, x);
}

/* ---- dropout ------------------------------------------------------------------------ */

nb_value nb_layer_dropout(nb_builder *b, nb_value x, double p)
{
    if (!nb_layer_ok(b, "dropout", 1, &x)) return NB_NONE;
    /* Seed 0: the mask comes from the program's seed and the run index, or
     * in eager mode from the builder's generator. is_test is turned on by
     * a program's test clone, or by an eager builder's test mode. */
    nb_attr attrs[] = {NB_ATTR_FLOAT("dropout_prob", p), NB_ATTR_INT("seed", 0),
                       NB_ATTR_STRING("mode", "upscale_in_train"), NB_ATTR_BOOL("is_test", false)};
    return nb_emit1(b, "dropout", NB_VALUES(x), NB_ATTRS_N(4, attrs));
}

/* ---- embedding ---------------------------------------------------------------------- */

nb_value nb_layer_embedding(nb_builder *b, nb_value ids, int64_t vocab, int64_t dim, int64_t padding_idx,
                            const nb_embedding_opts *opts)
{
    static const nb_embedding_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, "embedding", 1, &ids)) return NB_NONE;
    nb_var_info info = nb_value_info(b, ids);
    if (info.dtype != NB_I64 && info.dtype != NB_I32) {
        nb_builder_fail(b, NB_ERR_DTYPE, "embedding: ids are %s; they must be int64 or int32",
                        nb_dtype_name(info.dtype));
        return NB_NONE;
    }
    if (vocab < 1 || dim < 1) {
        nb_builder_fail(b, NB_ERR_ARG, "embedding: vocab %lld and dim %lld must be at least 1", (long long)vocab,
                        (long long)dim);
        return NB_NONE;
    }
    if (padding_idx >= vocab) {
        nb_builder_fail(b, NB_ERR_ARG, "embedding: padding_idx %lld is outside the vocabulary of %lld",
                        (long long)padding_idx, (long long)vocab);
        return NB_NONE;
    }
    char name[NB_LAYER_NAME_MAX], wname[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "embedding", opts->name, name, sizeof name) ||
        !nb_layer_param_name(b, name, "w", wname, sizeof wname))
        return NB_NONE;
    nb_value w =
        nb_param(b, wname, opts->dtype, 2, (int64_t[]){vocab, dim}, nb_init_or(opts->w_init, nb_init_normal(0, 1)));
    if (nb_is_none(w)) return NB_NONE;
    return nb_embedding(b, w, ids, padding_idx < 0 ? -1 : padding_idx);
}
