/* ONNX's convolutions, pools and normalisations as nabla ops. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"
#include "../layers/layer_internal.h"

#define B (im->b)

/* ONNX pads are (top, left, bottom, right); nabla's (top, bottom, left, right). */
static bool pads_of(ox_import *im, int64_t out[4])
{
    const char *auto_pad = ox_attr_s(im, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID")) {
        ox_unsupported(im, "has auto_pad SAME_*; nabla takes explicit pads");
        return false;
    }
    int64_t p[4] = {0, 0, 0, 0};
    int n = ox_attr_list(im, "pads", p, 4);
    if (n != -1 && n != 4) {
        ox_unsupported(im, "is not 2-D (pads)");
        return false;
    }
    out[0] = p[0], out[1] = p[2], out[2] = p[1], out[3] = p[3];
    return true;
}

static bool pair_attr(ox_import *im, const char *name, int64_t out[2], int64_t def)
{
    out[0] = out[1] = def;
    int n = ox_attr_list(im, name, out, 2);
    if (n == -1 || n == 2) return true;
    ox_node_error(im, NB_ERR_UNSUPPORTED, "attribute %s has %d values; nabla's op is 2-D", name, n);
    return false;
}

static nb_status i_conv(ox_import *im)
{
    int64_t pads[4], strides[2], dil[2];
    nb_value in[3] = {ox_in(im, 0), ox_in(im, 1), ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE};
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (ox_rank(im, in[0]) != 4) return ox_unsupported(im, "is not a 2-D convolution (X must be [N, C, H, W])");
    if (!pads_of(im, pads) || !pair_attr(im, "strides", strides, 1) || !pair_attr(im, "dilations", dil, 1))
        return nb_builder_status(B);
    nb_attr attrs[] = {NB_ATTR_INTS_N("strides", 2, strides), NB_ATTR_INTS_N("paddings", 4, pads),
                       NB_ATTR_INTS_N("dilations", 2, dil), NB_ATTR_INT("groups", ox_attr_i(im, "group", 1))};
    return ox_out(im, 0, nb_emit1(B, "conv2d", NB_VALUES_N(3, in), NB_ATTRS_N(4, attrs)));
}

static nb_status pool(ox_import *im, const char *type)
{
    nb_value x = ox_in(im, 0);
    int64_t pads[4], strides[2], ks[2], dil[2];
    if (nb_is_none(x)) return nb_builder_status(B);
    if (im->node->n_output > 1 && *im->node->output[1]) return ox_unsupported(im, "asks for MaxPool's Indices");
    if (!pads_of(im, pads) || !pair_attr(im, "strides", strides, 1) || !pair_attr(im, "dilations", dil, 1) ||
        !pair_attr(im, "kernel_shape", ks, -1))
        return nb_builder_status(B);
    if (dil[0] != 1 || dil[1] != 1) return ox_unsupported(im, "has dilations, which nabla's pool2d lacks");
    if (ks[0] < 0) return ox_node_error(im, NB_ERR_FORMAT, "has no kernel_shape");
    nb_attr attrs[] = {NB_ATTR_STRING("pooling_type", type), NB_ATTR_INTS_N("ksize", 2, ks),
                       NB_ATTR_INTS_N("strides", 2, strides), NB_ATTR_INTS_N("paddings", 4, pads),
                       NB_ATTR_BOOL("ceil_mode", ox_attr_i(im, "ceil_mode", 0) != 0),
                       NB_ATTR_BOOL("exclusive", ox_attr_i(im, "count_include_pad", 0) == 0)};
    return ox_out(im, 0, nb_emit1(B, "pool2d", NB_VALUES(x), NB_ATTRS_N(6, attrs)));
}
static nb_status i_maxpool(ox_import *im) { return pool(im, "max"); }
static nb_status i_avgpool(ox_import *im) { return pool(im, "avg"); }

static nb_status global_pool(ox_import *im, const char *type)
{
    nb_value x = ox_in(im, 0);
    nb_attr attrs[] = {NB_ATTR_STRING("pooling_type", type), NB_ATTR_INTS("ksize", 1, 1),
                       NB_ATTR_BOOL("global_pooling", true)};
    return ox_out(im, 0, nb_emit1(B, "pool2d", NB_VALUES(x), NB_ATTRS_N(3, attrs)));
}
static nb_status i_global_avg(ox_import *im) { return global_pool(im, "avg"); }
static nb_status i_global_max(ox_import *im) { return global_pool(im, "max"); }

/* BatchNormalization: ONNX's momentum weighs the running value, as nabla's. */
static nb_status i_batch_norm(ox_import *im)
{
    if (ox_attr_i(im, "training_mode", 0)) return ox_unsupported(im, "is in training mode");
    nb_value in[5];
    for (int k = 0; k < 5; k++)
        if (nb_is_none(in[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, nb_batch_norm_of(B, in, ox_attr_f(im, "momentum", 0.9), ox_attr_f(im, "epsilon", 1e-5), false));
}

static nb_status i_layer_norm(ox_import *im)
{
    nb_value in[3] = {ox_in(im, 0), ox_has_in(im, 1) ? ox_in(im, 1) : NB_NONE, ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE};
    if (im->node->n_output > 1) return ox_unsupported(im, "asks for the mean or inverse deviation outputs");
    nb_attr attrs[] = {NB_ATTR_INT("begin_norm_axis", ox_attr_i(im, "axis", -1)),
                       NB_ATTR_FLOAT("epsilon", ox_attr_f(im, "epsilon", 1e-5))};
    return ox_out(im, 0, nb_emit1(B, "layer_norm", NB_VALUES_N(3, in), NB_ATTRS_N(2, attrs)));
}

const ox_importer ox_imports_nn[] = {
    {"Conv", 0, 0, i_conv},       {"MaxPool", 0, 0, i_maxpool},   {"AveragePool", 0, 0, i_avgpool},
    {"GlobalAveragePool", 0, 0, i_global_avg}, {"GlobalMaxPool", 0, 0, i_global_max},
    {"BatchNormalization", 0, 0, i_batch_norm}, {"LayerNormalization", 0, 0, i_layer_norm},
    {0},
};

#endif
