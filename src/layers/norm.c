/* Batch and layer normalisation layers. */
#include <string.h>
#include "layer_internal.h"

nb_value nb_layer_batch_norm(nb_builder *b, nb_value x, const nb_norm_opts *opts)
{
    static const nb_norm_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, "batch_norm", 1, &x)) return NB_NONE;
    const char *act = opts->act ? opts->act : "";
    if (!nb_activation_known(act)) {
        nb_activation_unknown_error(b, "batch_norm", act);
        return NB_NONE;
    }
    nb_var_info xi;
    if (!nb_layer_need_float(b, "batch_norm", x, &xi)) return NB_NONE;
    if (xi.ndim < 2 || xi.shape[1] < 0) {
        char s[NB_SHAPE_STR_MAX];
        nb_builder_fail(b, NB_ERR_SHAPE, "batch_norm: input has shape %s; it must be [N, C, ...] with C known",
                        nb_shape_str(s, sizeof s, xi.ndim, xi.shape));
        return NB_NONE;
    }
    const int64_t C = xi.shape[1];
    char name[NB_LAYER_NAME_MAX], n_scale[NB_LAYER_NAME_MAX], n_bias[NB_LAYER_NAME_MAX];
    char n_mean[NB_LAYER_NAME_MAX], n_var[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "batch_norm", opts->name, name, sizeof name) ||
        !nb_layer_param_name(b, name, "w", n_scale, sizeof n_scale) ||
        !nb_layer_param_name(b, name, "b", n_bias, sizeof n_bias) ||
        !nb_layer_param_name(b, name, "w", n_mean, sizeof n_mean) ||
        !nb_layer_param_name(b, name, "w", n_var, sizeof n_var))
        return NB_NONE;
    nb_value in[5] = {
        x,
        nb_param(b, n_scale, xi.dtype, 1, &C, nb_init_or(opts->scale_init, nb_init_ones())),
        nb_param(b, n_bias, xi.dtype, 1, &C, nb_init_or(opts->bias_init, nb_init_zeros())),
        nb_persistable_var(b, n_mean, xi.dtype, 1, &C, nb_init_zeros()),
        nb_persistable_var(b, n_var, xi.dtype, 1, &C, nb_init_ones()),
    };
    if (nb_builder_status(b)) return NB_NONE;
    nb_value y = nb_batch_norm_of(b, in, opts->momentum ? opts->momentum : 0.9, opts->epsilon ? opts->epsilon : 1e-5,
                                  opts->use_global_stats);
    return nb_layer_activation(b, y, act);
}

nb_value nb_batch_norm_of(nb_builder *b, const nb_value in[5], double momentum, double epsilon, bool use_global_stats)
{
    nb_attr attrs[] = {NB_ATTR_FLOAT("momentum", momentum), NB_ATTR_FLOAT("epsilon", epsilon),
                       NB_ATTR_BOOL("use_global_stats", use_global_stats), NB_ATTR_BOOL("is_test", false)};
    /* MeanOut and VarianceOut go back into the running statistics. */
    nb_value out[5], into[5] = {NB_NONE, in[3], in[4], NB_NONE, NB_NONE};
    nb_emit_into(b, "batch_norm", NB_VALUES_N(5, in), NB_ATTRS_N(4, attrs), 5, out, into);
    return out[0];
}

nb_value nb_layer_layer_norm(nb_builder *b, nb_value x, int begin_norm_axis, double epsilon)
{
    if (!nb_layer_ok(b, "layer_norm", 1, &x)) return NB_NONE;
    nb_var_info xi;
    if (!nb_layer_need_float(b, "layer_norm", x, &xi)) return NB_NONE;
    char s[NB_SHAPE_STR_MAX];
    nb_shape_str(s, sizeof s, xi.ndim, xi.shape);
    int axis = begin_norm_axis < 0 ? begin_norm_axis + xi.ndim : begin_norm_axis;
    if (axis < 0 || axis >= xi.ndim) {
        nb_builder_fail(b, NB_ERR_ARG, "layer_norm: begin_norm_axis %d is out of range for input of shape %s",
                        begin_norm_axis, s);
        return NB_NONE;
    }
    int64_t cols;
    if (!nb_dims_known(&xi, axis, &cols)) {
        nb_builder_fail(b, NB_ERR_SHAPE,
                        "layer_norm: input of shape %s has unknown dims from axis %d; the scale's "
                        "size needs them",
                        s, axis);
        return NB_NONE;
    }
    char name[NB_LAYER_NAME_MAX], n_scale[NB_LAYER_NAME_MAX], n_bias[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "layer_norm", NULL, name, sizeof name) ||
        !nb_layer_param_name(b, name, "w", n_scale, sizeof n_scale) ||
        !nb_layer_param_name(b, name, "b", n_bias, sizeof n_bias))
        return NB_NONE;
    nb_value scale = nb_param(b, n_scale, xi.dtype, 1, &cols, nb_init_ones());
    nb_value bias = nb_param(b, n_bias, xi.dtype, 1, &cols, nb_init_zeros());
    if (nb_builder_status(b)) return NB_NONE;
    nb_attr attrs[] = {NB_ATTR_INT("begin_norm_axis", axis), NB_ATTR_FLOAT("epsilon", epsilon ? epsilon : 1e-5)};
    return nb_emit1(b, "layer_norm", NB_VALUES(x, scale, bias), NB_ATTRS_N(2, attrs));
}
