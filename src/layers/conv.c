/* 2-D convolution and pooling layers (NCHW). */
#include <math.h>
#include <string.h>
#include "layer_internal.h"

nb_value nb_layer_conv2d(nb_builder *b, nb_value x, int64_t out_channels, int kernel, const nb_conv2d_opts *opts)
{
    static const nb_conv2d_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, "conv2d", 1, &x)) return NB_NONE;
    const char *act = opts->act ? opts->act : "";
    if (!nb_activation_known(act)) {
        nb_activation_unknown_error(b, "conv2d", act);
        return NB_NONE;
    }
    nb_var_info xi;
    if (!nb_layer_need_float(b, "conv2d", x, &xi)) return NB_NONE;
    char s[NB_SHAPE_STR_MAX];
    nb_shape_str(s, sizeof s, xi.ndim, xi.shape);
    if (xi.ndim != 4 || xi.shape[1] < 0) {
        nb_builder_fail(b, NB_ERR_SHAPE, "conv2d: input has shape %s; it must be [N, C, H, W] with C known", s);
        return NB_NONE;
    }
    const int64_t in_channels = xi.shape[1];
    const int groups = opts->groups ? opts->groups : 1;
    const int stride = opts->stride ? opts->stride : 1, dilation = opts->dilation ? opts->dilation : 1;
    if (kernel < 1 || out_channels < 1 || groups < 1 || stride < 1 || dilation < 1 || opts->padding < 0) {
        nb_builder_fail(b, NB_ERR_ARG,
                        "conv2d: kernel %d, out_channels %lld, groups %d, stride %d and dilation %d must be at least "
                        "1, padding %d at least 0",
                        kernel, (long long)out_channels, groups, stride, dilation, opts->padding);
        return NB_NONE;
    }
    if (in_channels % groups || out_channels % groups) {
        nb_builder_fail(b, NB_ERR_ARG,
                        "conv2d: groups %d must divide the input channels (%lld, input %s) and "
                        "out_channels (%lld)",
                        groups, (long long)in_channels, s, (long long)out_channels);
        return NB_NONE;
    }
    char name[NB_LAYER_NAME_MAX], wname[NB_LAYER_NAME_MAX], bname[NB_LAYER_NAME_MAX];
    if (!nb_layer_name(b, "conv2d", opts->name, name, sizeof name) ||
        !nb_layer_param_name(b, name, "w", wname, sizeof wname))
        return NB_NONE;
    const int64_t fshape[4] = {out_channels, in_channels / groups, kernel, kernel};
    /* torch's nn.Conv2d: kaiming_uniform(a = sqrt(5)) = U(+-1/sqrt(fan_in)),
     * fan_in = C/groups * k * k, and the same bound for the bias. */
    nb_value w = nb_param(b, wname, xi.dtype, 4, fshape,
                          nb_init_or(opts->w_init, (nb_init){NB_INIT_KAIMING_UNIFORM, sqrt(5.0), 0}));
    nb_value bias = NB_NONE;
    if (!opts->no_bias) {
        if (!nb_layer_param_name(b, name, "b", bname, sizeof bname)) return NB_NONE;
        bias = nb_param(b, bname, xi.dtype, 1, &out_channels,
                        nb_init_or(opts->b_init, nb_layer_default_bias_init(fshape[1] * kernel * kernel)));
    }
    if (nb_builder_status(b)) return NB_NONE;
    nb_attr attrs[] = {NB_ATTR_INTS("strides", stride, stride), NB_ATTR_INTS("paddings", opts->padding, opts->padding),
                       NB_ATTR_INTS("dilations", dilation, dilation), NB_ATTR_INT("groups", groups)};
    nb_value y = nb_emit1(b, "conv2d", NB_VALUES(x, w, bias), NB_ATTRS_N(4, attrs));
    return nb_layer_activation(b, y, act);
}

nb_value nb_layer_pool2d(nb_builder *b, nb_value x, const char *type, int kernel_size, const nb_pool2d_opts *opts)
{
    static const nb_pool2d_opts none = {0};
    if (!opts) opts = &none;
    if (!nb_layer_ok(b, "pool2d", 1, &x)) return NB_NONE;
    type = type && type[0] ? type : "max";
    if (strcmp(type, "max") && strcmp(type, "avg")) {
        nb_builder_fail(b, NB_ERR_ARG, "pool2d: type \"%s\" must be \"max\" or \"avg\"", type);
        return NB_NONE;
    }
    /* Global pooling ignores the window; the op still wants a ksize. */
    const int kernel = opts->global ? 1 : kernel_size;
    const int stride = opts->stride ? opts->stride : kernel;
    if (kernel < 1 || stride < 1 || opts->padding < 0) {
        nb_builder_fail(b, NB_ERR_ARG, "pool2d: kernel %d and stride %d must be at least 1, padding %d at least 0",
                        kernel_size, opts->stride, opts->padding);
        return NB_NONE;
    }
    nb_attr attrs[] = {NB_ATTR_STRING("pooling_type", type),
                       NB_ATTR_INTS("ksize", kernel, kernel),
                       NB_ATTR_INTS("strides", stride, stride),
                       NB_ATTR_INTS("paddings", opts->padding, opts->padding),
                       NB_ATTR_BOOL("global_pooling", opts->global),
                       NB_ATTR_BOOL("ceil_mode", opts->ceil_mode),
                       NB_ATTR_BOOL("exclusive", !opts->count_include_pad)};
    return nb_emit1(b, "pool2d", NB_VALUES(x), NB_ATTRS_N(7, attrs));
}
