/* ONNX's ops that move, join and pad data without arithmetic as nabla ops. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

/* Flatten(axis): the dims before axis into one, and those from axis into
 * another, always 2-D. */
static nb_status i_flatten(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = ox_rank(im, x), axis = (int)ox_attr_i(im, "axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return ox_node_error(im, NB_ERR_ARG, "axis %d is out of range for rank %d", axis, r);
    nb_value y;
    if (axis == 0) y = nb_reshape(B, x, 2, (int64_t[]){1, -1});
    else if (axis == r) y = nb_unsqueeze(B, r > 1 ? nb_flatten(B, x, 0, -1) : x, 1, (int64_t[]){1});
    else y = nb_flatten(B, axis > 1 ? nb_flatten(B, x, 0, axis - 1) : x, 1, -1);
    return ox_out(im, 0, y);
}

static nb_status i_transpose(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t perm[NB_MAX_DIMS];
    int r = ox_rank(im, x), n = ox_attr_list(im, "perm", perm, NB_MAX_DIMS);
    if (n == -1)
        for (int i = 0; i < (n = r); i++) perm[i] = r - 1 - i;
    return ox_out(im, 0, nb_transpose(B, x, n, perm));
}

static nb_status i_squeeze(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = ox_axes(im, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    return ox_out(im, 0, nb_squeeze(B, x, n < 0 ? 0 : n, axes));
}

static nb_status i_unsqueeze(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = ox_axes(im, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    if (n < 1) return ox_node_error(im, NB_ERR_FORMAT, "has no axes");
    return ox_out(im, 0, nb_unsqueeze(B, x, n, axes));
}

static nb_status i_concat(ox_import *im)
{
    int n = (int)im->node->n_input;
    nb_value xs[64];
    if (n > 64) return ox_unsupported(im, "joins more than 64 tensors");
    for (int k = 0; k < n; k++)
        if (nb_is_none(xs[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, nb_concat(B, n, xs, (int)ox_attr_i(im, "axis", 0)));
}

/* Pad: ONNX's pads list every dim's start, then every dim's end; nabla's
 * (before, after) per dim. Opset 11 on, pads and the value are inputs. */
static nb_status i_pad(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = ox_rank(im, x);
    int64_t pads[2 * NB_MAX_DIMS], pairs[2 * NB_MAX_DIMS];
    int n = ox_const_ints(im, 1, pads, 2 * NB_MAX_DIMS);
    if (n < 0) return nb_builder_status(B);
    if (n != 2 * r) return ox_node_error(im, NB_ERR_FORMAT, "has %d pads for a rank-%d input", n, r);
    bool any = false;
    for (int d = 0; d < r; d++) {
        pairs[2 * d] = pads[d], pairs[2 * d + 1] = pads[r + d];
        if (pads[d] < 0 || pads[r + d] < 0) return ox_unsupported(im, "has negative pads (a crop)");
        any |= pads[d] || pads[r + d];
    }
    double value = 0;
    if (ox_has_in(im, 2)) {
        const nb_tensor *v = ox_const_in(im, 2);
        if (!v) return nb_builder_status(B);
        value = nb_tensor_get(v, 0);
    }
    const char *mode = ox_attr_s(im, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has mode '%s'", mode);
    if (!any) return ox_out(im, 0, x);
    nb_attr attrs[] = {NB_ATTR_INTS_N("paddings", 2 * r, pairs), NB_ATTR_FLOAT("pad_value", value),
                       NB_ATTR_STRING("mode", mode)};
    return ox_out(im, 0, nb_emit1(B, "pad", NB_VALUES(x), NB_ATTRS_N(3, attrs)));
}

const ox_importer ox_imports_shape[] = {
    {"Flatten", 0, 0, i_flatten}, {"Transpose", 0, 0, i_transpose}, {"Squeeze", 0, 0, i_squeeze},
    {"Unsqueeze", 0, 0, i_unsqueeze}, {"Concat", 0, 0, i_concat}, {"Pad", 0, 0, i_pad},
    {0},
};

#endif
