/* The fully connected layer. */
#include <math.h>
#include <string.h>
#include "layer_internal.h"

/* Activations the fc op applies itself (its gradient reads Out for them). */
static bool fused(const char *act) { return !strcmp(act, "relu") || !strcmp(act, "sigmoid") || !strcmp(act, "tanh"); }

nb_value nb_layer_fc(nb_builder *b, nb_value x, int64_t size, const char *act, const nb_fc_opts *opts)
{
    static const nb_fc_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, "fc", 1, &x)) return NB_NONE;
    if (!act) act = "";
    if (!nb_activation_known(act)) {
        nb_activation_unknown_error(b, "fc", act);
        return NB_NONE;
    }
    nb_var_info xi;
    if (!nb_layer_need_float(b, "fc", x, &xi)) return NB_NONE;
    int ncd = opts->in_num_col_dims ? opts->in_num_col_dims : 1;
    char s[NB_SHAPE_STR_MAX];
    if (ncd < 1 || ncd >= xi.ndim) {
        nb_builder_fail(b, NB_ERR_ARG, "fc: in_num_col_dims %d must lie in [1, %d) for input of shape %s", ncd, xi.ndim,
                        nb_shape_str(s, sizeof s, xi.ndim, xi.shape));
        return NB_NONE;
    }
    int64_t in;
    if (!nb_dims_known(&xi, ncd, &in)) {
        nb_builder_fail(b, NB_ERR_SHAPE,
                        "fc: input of shape %s has unknown feature dims (after in_num_col_dims %d); "
                        "the weight's size needs them",
                        nb_shape_str(s, sizeof s, xi.ndim, xi.shape), ncd);
        return NB_NONE;
    }
    if (size < 1) {
        nb_builder_fail(b, NB_ERR_ARG, "fc: size is %lld; it must be at least 1", (long long)size);
        return NB_NONE;
    }
    char name[NB_LAYER_NAME_MAX], wname[NB_LAYER_NAME_MAX], bname[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "fc", opts->name, name, sizeof name) ||
        !nb_layer_param_name(b, name, "w", wname, sizeof wname))
        return NB_NONE;
    /* torch's nn.Linear: kaiming_uniform(a = sqrt(5)) = U(+-1/sqrt(in)). */
    nb_value w = nb_param(b, wname, xi.dtype, 2, (int64_t[]){in, size},
                          nb_init_or(opts->w_init, (nb_init){NB_INIT_KAIMING_UNIFORM, sqrt(5.0), 0}));
    nb_value bias = NB_NONE;
    if (!opts->no_bias) {
        if (!nb_layer_param_name(b, name, "b", bname, sizeof bname)) return NB_NONE;
        bias = nb_param(b, bname, xi.dtype, 1, &size, nb_init_or(opts->b_init, nb_layer_default_bias_init(in)));
    }
    if (nb_builder_status(b)) return NB_NONE;
    const bool fuse = act[0] && fused(act);
    nb_attr attrs[] = {NB_ATTR_INT("in_num_col_dims", ncd), NB_ATTR_STRING("activation", fuse ? act : "")};
    nb_value y = nb_emit1(b, "fc", NB_VALUES(x, w, bias), NB_ATTRS_N(2, attrs));
    return fuse ? y : nb_layer_activation(b, y, act);
}
