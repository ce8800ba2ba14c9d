/* ONNX's convolutions, pools, normalisations and losses as nabla ops.
 *
 * Only conv2d and pool2d are nabla ops of their own; every other rank is
 * composed from them: 1-D through an unsqueezed dim of one, 3-D and up by
 * folding the first spatial dim into the batch (a convolution is the sum
 * over the kernel's depth of 2-D convolutions of strided depth slices; a
 * pool is separable, so the last two dims are pooled, then the rest).
 * ConvTranspose is conv2d's input gradient (conv2d_grad's DInput), folded
 * the same way in 3-D and up, and the norms and losses are compositions of
 * differentiable ops, so an imported model gets gradients, JVPs and vmap
 * without kernels of its own. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <math.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"
#include "../layers/layer_internal.h"

#define B (im->b)

/* Whether input k is an initializer. */
static bool is_init(const ox_import *im, int k)
{
    return ox_has_in(im, k) && nb_strmap_get(&im->protos, im->node->input[k], NULL);
}

/* Whether output k is asked for (present and named). */
static bool wants_out(const ox_import *im, int k) { return k < (int)im->node->n_output && *im->node->output[k]; }

/* x with its dims [1, r) moved so that dim 1 comes last, and back. */
static nb_value channels_last(ox_import *im, nb_value x, int r)
{
    int64_t perm[NB_MAX_DIMS];
    perm[0] = 0;
    for (int d = 1; d < r - 1; d++) perm[d] = d + 1;
    perm[r - 1] = 1;
    return nb_transpose(B, x, r, perm);
}

/* v [C] shaped [C, 1, ..., 1] to broadcast over x [N, C, d1, ...] of rank r. */
static nb_value per_channel(ox_import *im, nb_value v, int r)
{
    int64_t shape[NB_MAX_DIMS] = {-1};
    for (int d = 1; d < r - 1; d++) shape[d] = 1;
    return nb_reshape(B, v, r - 1, shape);
}

/* The axes [from, r) of a rank-r value. */
static int axes_from(int64_t *axes, int from, int r)
{
    for (int d = from; d < r; d++) axes[d - from] = d;
    return r - from;
}

/* Whether dims [from, ndim) of xi are known; else the node refused with why. */
static bool sizes_known(ox_import *im, const nb_var_info *xi, int from, const char *why)
{
    for (int d = from; d < xi->ndim; d++)
        if (xi->shape[d] < 0) return ox_unsupported(im, why), false;
    return true;
}

/* ---- windows: the spatial attributes of convolutions and pools ------------------ */

/* A window over n spatial dims, with pads before (pb) and after (pe). */
typedef struct window {
    int n;
    int64_t k[NB_MAX_DIMS], s[NB_MAX_DIMS], d[NB_MAX_DIMS], pb[NB_MAX_DIMS], pe[NB_MAX_DIMS];
} window;

/* An ints attribute of n values, or `def` for each when absent. */
static bool per_dim(ox_import *im, const char *name, int n, int64_t *out, int64_t def)
{
    for (int i = 0; i < n; i++) out[i] = def;
    int got = ox_attr_list(im, name, out, n);
    if (got == -1 || got == n) return true;
    ox_node_error(im, NB_ERR_UNSUPPORTED, "attribute %s has %d values where %d spatial dims need %d", name, got, n, n);
    return false;
}

/* Strides, dilations and pads (explicit, or as auto_pad makes them from
 * x's static shape) of a window whose kernel is w->k. */
static bool read_window(ox_import *im, nb_value x, window *w)
{
    int64_t pads[2 * NB_MAX_DIMS];
    if (!per_dim(im, "strides", w->n, w->s, 1) || !per_dim(im, "dilations", w->n, w->d, 1) ||
        !per_dim(im, "pads", 2 * w->n, pads, 0))
        return false;
    for (int i = 0; i < w->n; i++) {
        w->pb[i] = pads[i], w->pe[i] = pads[w->n + i];
        if (w->s[i] < 1 || w->d[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0 || w->k[i] < 1) {
            ox_unsupported(im, "has a stride, dilation or kernel size below 1, or a negative pad");
            return false;
        }
    }
    const char *auto_pad = ox_attr_s(im, "auto_pad", "NOTSET");
    if (!strcmp(auto_pad, "NOTSET") || !*auto_pad) return true;
    bool upper = !strcmp(auto_pad, "SAME_UPPER");
    if (!strcmp(auto_pad, "VALID")) {
        for (int i = 0; i < w->n; i++) w->pb[i] = w->pe[i] = 0;
        return true;
    }
    if (!upper && strcmp(auto_pad, "SAME_LOWER")) {
        ox_node_error(im, NB_ERR_FORMAT, "has auto_pad '%s', not NOTSET, VALID, SAME_UPPER or SAME_LOWER", auto_pad);
        return false;
    }
    nb_var_info xi = nb_value_info(B, x);
    for (int i = 0; i < w->n; i++) {
        int64_t in = xi.shape[2 + i];
        if (in < 0) {
            ox_unsupported(im, "has auto_pad SAME_* over a spatial dim whose size only a run knows");
            return false;
        }
        int64_t out = (in + w->s[i] - 1) / w->s[i], keff = w->d[i] * (w->k[i] - 1) + 1;
        int64_t total = (out - 1) * w->s[i] + keff - in;
        if (total < 0) total = 0;
        w->pb[i] = upper ? total / 2 : total - total / 2;
        w->pe[i] = total - w->pb[i];
    }
    return true;
}

/* The window's sub-window without its first dim. */
static window inner_window(const window *w)
{
    window r = {.n = w->n - 1};
    for (int i = 0; i < r.n; i++) {
        r.k[i] = w->k[i + 1], r.s[i] = w->s[i + 1], r.d[i] = w->d[i + 1];
        r.pb[i] = w->pb[i + 1], r.pe[i] = w->pe[i + 1];
    }
    return r;
}

/* Pads dim `axis` of x (rank r) by (before, after) with `value`. */
static nb_value pad_dim(ox_import *im, nb_value x, int r, int axis, int64_t before, int64_t after, double value)
{
    if (!before && !after) return x;
    int64_t p[2 * NB_MAX_DIMS] = {0};
    p[2 * axis] = before, p[2 * axis + 1] = after;
    nb_attr attrs[] = {NB_ATTR_INTS_N("paddings", 2 * r, p), NB_ATTR_FLOAT("pad_value", value)};
    return nb_emit1(B, "pad", NB_VALUES(x), NB_ATTRS_N(2, attrs));
}

/* count elements of dim `axis` from `start`, every `step`. */
static nb_value strided(ox_import *im, nb_value x, int axis, int64_t start, int64_t count, int64_t step)
{
    int64_t ax = axis, end = start + (count - 1) * step + 1;
    nb_attr attrs[] = {NB_ATTR_INTS_N("axes", 1, &ax), NB_ATTR_INTS_N("starts", 1, &start),
                       NB_ATTR_INTS_N("ends", 1, &end), NB_ATTR_INTS_N("strides", 1, &step)};
    return nb_emit1(B, "slice", NB_VALUES(x), NB_ATTRS_N(4, attrs));
}

/* ---- Conv -------------------------------------------------------------------- */

static nb_value conv_nd(ox_import *im, nb_value x, nb_value w, const window *win, int64_t group);

/* conv2d of x [N, C, H, W] (or [N, C, L] through a dim of one). */
static nb_value conv_2d(ox_import *im, nb_value x, nb_value w, const window *win, int64_t group)
{
    bool one = win->n == 1;
    const int64_t ax2 = 2;
    if (one) x = nb_unsqueeze(B, x, 1, &ax2), w = nb_unsqueeze(B, w, 1, &ax2);
    int64_t s[2] = {1, win->s[0]}, d[2] = {1, win->d[0]}, p[4] = {0, 0, win->pb[0], win->pe[0]};
    if (!one) {
        s[0] = win->s[0], s[1] = win->s[1], d[0] = win->d[0], d[1] = win->d[1];
        p[0] = win->pb[0], p[1] = win->pe[0], p[2] = win->pb[1], p[3] = win->pe[1];
    }
    nb_attr attrs[] = {NB_ATTR_INTS_N("strides", 2, s), NB_ATTR_INTS_N("paddings", 4, p),
                       NB_ATTR_INTS_N("dilations", 2, d), NB_ATTR_INT("groups", group)};
    nb_value y = nb_emit1(B, "conv2d", NB_VALUES(x, w), NB_ATTRS_N(4, attrs));
    return one ? nb_squeeze(B, y, 1, &ax2) : y;
}

/* A convolution over 3 or more spatial dims: for each step kd of the
 * kernel's first dim, the depth planes it meets (a strided slice of the
 * padded input) fold into the batch and meet the kernel's plane kd in a
 * convolution of one dim fewer; the sum over kd is the output. Kd
 * convolutions of Do times the batch: the work of the direct loop. */
static nb_value conv_fold(ox_import *im, nb_value x, nb_value w, const window *win, int64_t group)
{
    nb_var_info xi = nb_value_info(B, x);
    int r = xi.ndim;
    int64_t depth = xi.shape[2], keff = win->d[0] * (win->k[0] - 1) + 1;
    if (!sizes_known(im, &xi, 1, "is a convolution of 3 or more dims over an input whose size only a run knows"))
        return NB_NONE;
    int64_t padded = depth + win->pb[0] + win->pe[0];
    if (padded < keff) {
        ox_unsupported(im, "has a kernel bigger than its padded input");
        return NB_NONE;
    }
    int64_t out_depth = (padded - keff) / win->s[0] + 1;
    x = pad_dim(im, x, r, 2, win->pb[0], win->pe[0], 0);
    window sub = inner_window(win);
    nb_value terms[64];
    if (win->k[0] > 64) {
        ox_unsupported(im, "has a kernel deeper than 64");
        return NB_NONE;
    }
    int64_t perm[NB_MAX_DIMS] = {0, 2, 1}, shape[NB_MAX_DIMS];
    for (int d = 3; d < r; d++) perm[d] = d;
    for (int64_t kd = 0; kd < win->k[0]; kd++) {
        nb_value planes = nb_transpose(B, strided(im, x, 2, kd * win->d[0], out_depth, win->s[0]), r, perm);
        shape[0] = -1, shape[1] = xi.shape[1];
        for (int d = 3; d < r; d++) shape[d - 1] = xi.shape[d];
        planes = nb_reshape(B, planes, r - 1, shape);
        const int64_t ax = 2, end = kd + 1;
        nb_value wk = nb_squeeze(B, nb_slice(B, w, 1, &ax, &kd, &end), 1, &ax);
        terms[kd] = conv_nd(im, planes, wk, &sub, group);
    }
    nb_value y = win->k[0] == 1 ? terms[0] : nb_sum(B, (int)win->k[0], terms);
    if (nb_builder_status(B)) return NB_NONE;
    nb_var_info yi = nb_value_info(B, y);
    shape[0] = -1, shape[1] = out_depth;
    for (int d = 1; d < yi.ndim; d++) shape[d + 1] = yi.shape[d];
    y = nb_reshape(B, y, r, shape);
    return nb_transpose(B, y, r, perm);
}

static nb_value conv_nd(ox_import *im, nb_value x, nb_value w, const window *win, int64_t group)
{
    return win->n <= 2 ? conv_2d(im, x, w, win, group) : conv_fold(im, x, w, win, group);
}

/* Conv's output for x, w and bias (NB_NONE: none); NB_NONE with the error
 * set when the node cannot be imported. */
static nb_value conv(ox_import *im, nb_value x, nb_value w, nb_value bias)
{
    if (nb_builder_status(B)) return NB_NONE;
    nb_var_info xi = nb_value_info(B, x), wi = nb_value_info(B, w);
    window win = {.n = xi.ndim - 2};
    if (win.n < 1 || wi.ndim != xi.ndim) {
        ox_unsupported(im, "needs X [N, C, d1, ...] and W of X's rank");
        return NB_NONE;
    }
    for (int i = 0; i < win.n; i++)
        if ((win.k[i] = wi.shape[2 + i]) < 0) {
            ox_unsupported(im, "has a kernel whose size only a run knows");
            return NB_NONE;
        }
    if (!read_window(im, x, &win)) return NB_NONE;
    nb_value y = conv_nd(im, x, w, &win, ox_attr_i(im, "group", 1));
    return nb_is_none(bias) ? y : nb_add(B, y, per_channel(im, bias, xi.ndim));
}

static nb_status i_conv(ox_import *im)
{
    return ox_out(im, 0, conv(im, ox_in(im, 0), ox_in(im, 1), ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE));
}

/* ConvInteger: (x - x_zero_point) convolved with (w - w_zero_point), in
 * float (exact for 8-bit values while a sum stays below 2^24), then int32.
 * A zero point per output channel is refused. */
static nb_status i_conv_integer(ox_import *im)
{
    nb_value x = nb_cast(B, ox_in(im, 0), NB_F32), w = nb_cast(B, ox_in(im, 1), NB_F32);
    for (int k = 2; k < 4 && !nb_builder_status(B); k++) {
        if (!ox_has_in(im, k)) continue;
        nb_value zp = ox_in(im, k);
        if (nb_is_none(zp)) break;
        nb_var_info zi = nb_value_info(B, zp);
        if (zi.ndim > 0 && zi.shape[0] != 1) return ox_unsupported(im, "has a zero point per channel");
        zp = nb_cast(B, zi.ndim > 0 ? nb_reshape(B, zp, 0, NULL) : zp, NB_F32);
        if (k == 2) x = nb_sub(B, x, zp);
        else w = nb_sub(B, w, zp);
    }
    nb_value y = conv(im, x, w, NB_NONE);
    return ox_out(im, 0, nb_is_none(y) ? y : nb_cast(B, y, NB_I32));
}

/* ---- ConvTranspose --------------------------------------------------------------- */

/* A transposed convolution over n spatial dims: strides, dilations, and
 * what is cropped from its full output s * (in - 1) + keff before (pb) and
 * after (pe; below 0: that many zeros added, ONNX's output padding),
 * leaving `out`. */
typedef struct tconv {
    int n;
    int64_t s[NB_MAX_DIMS], d[NB_MAX_DIMS], pb[NB_MAX_DIMS], pe[NB_MAX_DIMS], out[NB_MAX_DIMS];
} tconv;

static nb_value tconv_nd(ox_import *im, nb_value x, nb_value w, const tconv *t, int64_t group);

/* The input gradient of the convolution it transposes (conv2d_grad's
 * DInput for an input of the output's shape), so its own gradients are
 * conv2d's rules; over 1 spatial dim through a dim of one. */
static nb_value tconv_2d(ox_import *im, nb_value x, nb_value w, const tconv *t, int64_t group)
{
    nb_var_info xi = nb_value_info(B, x), wi = nb_value_info(B, w);
    bool one = t->n == 1;
    int64_t shape[4] = {xi.shape[0], wi.shape[1] * group, 1, t->out[0]}, s[2] = {1, t->s[0]}, d[2] = {1, t->d[0]};
    int64_t p[4] = {0, 0, t->pb[0], t->pe[0]};
    const int64_t ax2 = 2;
    if (one) x = nb_unsqueeze(B, x, 1, &ax2), w = nb_unsqueeze(B, w, 1, &ax2);
    else {
        shape[2] = t->out[0], shape[3] = t->out[1], s[0] = t->s[0], s[1] = t->s[1], d[0] = t->d[0], d[1] = t->d[1];
        p[0] = t->pb[0], p[1] = t->pe[0], p[2] = t->pb[1], p[3] = t->pe[1];
    }
    /* Output padding needs no pad of the convolution: conv2d_grad makes it
     * by its input's size. */
    for (int i = 1; i < 4; i += 2)
        if (p[i] < 0) p[i] = 0;
    nb_value like = nb_fill_constant(B, xi.dtype, 4, shape, 0);
    nb_attr attrs[] = {NB_ATTR_INTS_N("strides", 2, s), NB_ATTR_INTS_N("paddings", 4, p),
                       NB_ATTR_INTS_N("dilations", 2, d), NB_ATTR_INT("groups", group)};
    nb_value y = nb_emit1(B, "conv2d_grad", NB_VALUES(like, w, x), NB_ATTRS_N(4, attrs));
    return one ? nb_squeeze(B, y, 1, &ax2) : y;
}

/* Over 3 or more spatial dims, as conv_fold does the convolution: the
 * input's depth planes fold into the batch and meet each plane kd of the
 * kernel in a transposed convolution of one dim fewer; plane i's result
 * for kd lands at depth i * s + kd * d of the full output, so each kd's
 * results are spread s apart (zeros between) and shifted by kd * d, and
 * their sum, cropped, is the output. Kd transposed convolutions of the
 * batch times the depth: the work of the direct loop. */
static nb_value tconv_fold(ox_import *im, nb_value x, nb_value w, const tconv *t, int64_t group)
{
    nb_var_info xi = nb_value_info(B, x), wi = nb_value_info(B, w);
    int r = xi.ndim;
    int64_t n = xi.shape[0], depth = xi.shape[2], kdepth = wi.shape[2], s = t->s[0];
    if (kdepth > 64) {
        ox_unsupported(im, "has a kernel deeper than 64");
        return NB_NONE;
    }
    tconv sub = {.n = t->n - 1};
    for (int i = 0; i < sub.n; i++)
        sub.s[i] = t->s[i + 1], sub.d[i] = t->d[i + 1], sub.pb[i] = t->pb[i + 1], sub.pe[i] = t->pe[i + 1],
        sub.out[i] = t->out[i + 1];
    int64_t perm[NB_MAX_DIMS] = {0, 2, 1}, shape[NB_MAX_DIMS] = {-1, xi.shape[1]};
    for (int d = 3; d < r; d++) perm[d] = d, shape[d - 1] = xi.shape[d];
    nb_value planes = nb_reshape(B, nb_transpose(B, x, r, perm), r - 1, shape), terms[64];
    int64_t spread = (depth - 1) * s + 1, full = spread + t->d[0] * (kdepth - 1), rest = 1;
    for (int d = 0; d < sub.n; d++) rest *= sub.out[d];
    rest *= wi.shape[1] * group;
    for (int64_t kd = 0; kd < kdepth && !nb_builder_status(B); kd++) {
        const int64_t ax = 2, end = kd + 1, at = kd * t->d[0];
        nb_value wk = nb_squeeze(B, nb_slice(B, w, 1, &ax, &kd, &end), 1, &ax);
        nb_value y = nb_reshape(B, tconv_nd(im, planes, wk, &sub, group), 3, (int64_t[]){n, depth, rest});
        if (s > 1) {
            nb_value gaps = nb_fill_constant(B, xi.dtype, 4, (int64_t[]){n, depth, s - 1, rest}, 0);
            nb_value spaced = nb_concat(B, 2, (nb_value[]){nb_unsqueeze(B, y, 1, &ax), gaps}, 2);
            y = strided(im, nb_reshape(B, spaced, 3, (int64_t[]){n, depth * s, rest}), 1, 0, spread, 1);
        }
        terms[kd] = pad_dim(im, y, 3, 1, at, full - spread - at, 0);
    }
    nb_value y = kdepth == 1 ? terms[0] : nb_sum(B, (int)kdepth, terms);
    int64_t kept = t->pe[0] < 0 ? full - t->pb[0] : t->out[0];
    y = pad_dim(im, strided(im, y, 1, t->pb[0], kept, 1), 3, 1, 0, t->out[0] - kept, 0);
    shape[0] = n, shape[1] = t->out[0], shape[2] = wi.shape[1] * group;
    for (int d = 0; d < sub.n; d++) shape[3 + d] = sub.out[d];
    return nb_transpose(B, nb_reshape(B, y, r, shape), r, perm);
}

static nb_value tconv_nd(ox_import *im, nb_value x, nb_value w, const tconv *t, int64_t group)
{
    return t->n <= 2 ? tconv_2d(im, x, w, t, group) : tconv_fold(im, x, w, t, group);
}

/* ConvTranspose: the full output's crop from pads, or from output_shape
 * and auto_pad SAME_* (the pads that give it), then tconv_nd. */
static nb_status i_conv_transpose(ox_import *im)
{
    nb_value x = ox_in(im, 0), w = ox_in(im, 1), bias = ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE;
    if (nb_builder_status(B)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x), wi = nb_value_info(B, w);
    int r = xi.ndim, n = r - 2;
    if (n < 1 || wi.ndim != r) return ox_unsupported(im, "needs X [N, C, d1, ...] and W of X's rank");
    tconv t = {.n = n};
    int64_t group = ox_attr_i(im, "group", 1), op[NB_MAX_DIMS], os[NB_MAX_DIMS], pads[2 * NB_MAX_DIMS];
    if (!per_dim(im, "strides", n, t.s, 1) || !per_dim(im, "dilations", n, t.d, 1) ||
        !per_dim(im, "output_padding", n, op, 0) || !per_dim(im, "pads", 2 * n, pads, 0) ||
        !per_dim(im, "output_shape", n, os, -1))
        return nb_builder_status(B);
    for (int i = 0; i < r; i++)
        if (xi.shape[i] < 0 || wi.shape[i] < 0)
            return ox_unsupported(im, "transposes a convolution whose sizes only a run knows");
    const char *auto_pad = ox_attr_s(im, "auto_pad", "NOTSET");
    bool same = !strncmp(auto_pad, "SAME_", 5), upper = !strcmp(auto_pad, "SAME_UPPER");
    if (strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID") && !same && *auto_pad)
        return ox_node_error(im, NB_ERR_FORMAT, "has auto_pad '%s'", auto_pad);
    for (int i = 0; i < n; i++) {
        int64_t in = xi.shape[2 + i], keff = t.d[i] * (wi.shape[2 + i] - 1) + 1;
        int64_t full = t.s[i] * (in - 1) + op[i] + keff;
        t.pb[i] = pads[i], t.pe[i] = pads[n + i];
        if (!strcmp(auto_pad, "VALID")) t.pb[i] = t.pe[i] = 0;
        if (os[i] >= 0 || same) {
            /* The pads that give the output shape asked for (SAME: in * s),
             * split as ONNX's reference splits them (floor division). */
            int64_t want = os[i] >= 0 ? os[i] : in * t.s[i], total = full - want;
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            t.pb[i] = upper ? half : total - half, t.pe[i] = total - t.pb[i];
        }
        if (t.pb[i] < 0) return ox_unsupported(im, "has pads that extend the output before its first element");
        t.out[i] = full - t.pb[i] - t.pe[i];
        t.pe[i] -= op[i]; /* from here a crop of s * (in - 1) + keff */
    }
    nb_value y = tconv_nd(im, x, w, &t, group);
    if (!nb_is_none(bias)) y = nb_add(B, y, per_channel(im, bias, r));
    return ox_out(im, 0, y);
}

/* ---- pools ------------------------------------------------------------------- */

/* The window's size from kernel_shape, whose length is the spatial rank,
 * which x must have. */
static bool pool_kernel(ox_import *im, nb_value x, window *win)
{
    int n = ox_attr_list(im, "kernel_shape", win->k, NB_MAX_DIMS - 2);
    if (n == -1) return ox_node_error(im, NB_ERR_FORMAT, "has no kernel_shape"), false;
    if (n < 1 || n > NB_MAX_DIMS - 2)
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "attribute kernel_shape has %d values", n), false;
    if (ox_rank(im, x) != n + 2)
        return ox_node_error(im, NB_ERR_FORMAT, "has a kernel of %d dims for X of rank %d", n, ox_rank(im, x)), false;
    win->n = n;
    return true;
}

typedef struct pool_opts {
    bool max, ceil, include_pad;
} pool_opts;

/* pool2d over x's last two dims, x [N, C, H, W] (or [N, C, L]). */
static nb_value pool_2d(ox_import *im, nb_value x, const window *win, const pool_opts *o)
{
    bool one = win->n == 1;
    const int64_t ax2 = 2;
    if (one) x = nb_unsqueeze(B, x, 1, &ax2);
    int64_t k[2] = {1, win->k[0]}, s[2] = {1, win->s[0]}, p[4] = {0, 0, win->pb[0], win->pe[0]};
    if (!one) {
        k[0] = win->k[0], k[1] = win->k[1], s[0] = win->s[0], s[1] = win->s[1];
        p[0] = win->pb[0], p[1] = win->pe[0], p[2] = win->pb[1], p[3] = win->pe[1];
    }
    nb_attr attrs[] = {NB_ATTR_STRING("pooling_type", o->max ? "max" : "avg"),
                       NB_ATTR_INTS_N("ksize", 2, k),
                       NB_ATTR_INTS_N("strides", 2, s),
                       NB_ATTR_INTS_N("paddings", 4, p),
                       NB_ATTR_BOOL("ceil_mode", o->ceil),
                       NB_ATTR_BOOL("exclusive", !o->include_pad)};
    nb_value y = nb_emit1(B, "pool2d", NB_VALUES(x), NB_ATTRS_N(6, attrs));
    return one ? nb_squeeze(B, y, 1, &ax2) : y;
}

static nb_value pool_nd(ox_import *im, nb_value x, const window *win, const pool_opts *o);

/* A pool over 3 or more dims, by separability (a max of maxima; an
 * average's window count is the product of each dim's): the last two dims
 * pooled with the leading spatial dims folded into the channels, then the
 * leading dims with the pooled two merged into one window of one. */
static nb_value pool_fold(ox_import *im, nb_value x, const window *win, const pool_opts *o)
{
    nb_var_info xi = nb_value_info(B, x);
    int r = xi.ndim, n = win->n;
    if (!sizes_known(im, &xi, 1, "pools 3 or more dims of an input whose size only a run knows")) return NB_NONE;
    int64_t shape[NB_MAX_DIMS] = {0, -1, xi.shape[r - 2], xi.shape[r - 1]};
    window last = {.n = 2}, lead = {.n = n - 1};
    for (int i = 0; i < 2; i++) {
        int j = n - 2 + i;
        last.k[i] = win->k[j], last.s[i] = win->s[j], last.d[i] = 1, last.pb[i] = win->pb[j], last.pe[i] = win->pe[j];
    }
    for (int i = 0; i < n - 2; i++)
        lead.k[i] = win->k[i], lead.s[i] = win->s[i], lead.d[i] = 1, lead.pb[i] = win->pb[i], lead.pe[i] = win->pe[i];
    lead.k[n - 2] = lead.s[n - 2] = lead.d[n - 2] = 1, lead.pb[n - 2] = lead.pe[n - 2] = 0;
    nb_value y = pool_2d(im, nb_reshape(B, x, 4, shape), &last, o);
    if (nb_builder_status(B)) return NB_NONE;
    nb_var_info yi = nb_value_info(B, y);
    for (int d = 0; d < r - 2; d++) shape[d] = d ? xi.shape[d] : 0;
    shape[r - 2] = yi.shape[2] * yi.shape[3];
    y = pool_nd(im, nb_reshape(B, y, r - 1, shape), &lead, o);
    if (nb_builder_status(B)) return NB_NONE;
    nb_var_info zi = nb_value_info(B, y);
    for (int d = 0; d < r - 2; d++) shape[d] = d ? zi.shape[d] : 0;
    shape[r - 2] = yi.shape[2], shape[r - 1] = yi.shape[3];
    return nb_reshape(B, y, r, shape);
}

static nb_value pool_nd(ox_import *im, nb_value x, const window *win, const pool_opts *o)
{
    return win->n <= 2 ? pool_2d(im, x, win, o) : pool_fold(im, x, win, o);
}

/* The number of windows along spatial dim i of `in` elements, and the
 * padding after it that the last one reads (ceil_mode's may run past the
 * pads); false with the error set when the window does not fit. */
static bool window_count(ox_import *im, const window *win, int i, int64_t in, bool ceil_mode, int64_t *out,
                         int64_t *after)
{
    int64_t keff = win->d[i] * (win->k[i] - 1) + 1, padded = in + win->pb[i] + win->pe[i];
    if (padded < keff) return ox_unsupported(im, "has a window bigger than its padded input"), false;
    int64_t o = ceil_mode ? (padded - keff + win->s[i] - 1) / win->s[i] + 1 : (padded - keff) / win->s[i] + 1;
    if (ceil_mode && (o - 1) * win->s[i] >= in + win->pb[i]) o--;
    int64_t extra = (o - 1) * win->s[i] + keff - padded;
    *out = o, *after = win->pe[i] + (extra > 0 ? extra : 0);
    return true;
}

/* A dilated max pool, dim by dim (a max over a box is the max over each
 * dim in turn): the window's k taps of the padded dim are k strided
 * slices, and their elementwise maximum is the pool along that dim. */
static nb_value dilated_max(ox_import *im, nb_value x, const window *win, bool ceil_mode)
{
    nb_var_info xi = nb_value_info(B, x);
    for (int i = 0; i < win->n && !nb_builder_status(B); i++) {
        int64_t in = xi.shape[2 + i], out, after;
        if (in < 0) {
            ox_unsupported(im, "is a dilated pool over a dim whose size only a run knows");
            return NB_NONE;
        }
        if (!window_count(im, win, i, in, ceil_mode, &out, &after)) return NB_NONE;
        nb_value xp = pad_dim(im, x, xi.ndim, 2 + i, win->pb[i], after, -FLT_MAX);
        nb_value y = strided(im, xp, 2 + i, 0, out, win->s[i]);
        for (int64_t j = 1; j < win->k[i]; j++)
            y = nb_maximum(B, y, strided(im, xp, 2 + i, j * win->d[i], out, win->s[i]));
        x = y;
    }
    return x;
}

/* MaxPool's Indices: where in x, flattened (row-major, or with
 * storage_order 1 column-major within each plane), each window's maximum
 * is. Each of the window's taps, in the row-major order ONNX's reference
 * visits them, is a strided slice of the padded input; argmax over the
 * stacked taps takes the first of equal maxima, as the reference's strict
 * comparison does, and the index is that tap's offset in the window plus
 * the window's origin plus the plane's start. Integers: no gradient flows
 * here, and Y keeps the pool's. */
static nb_value max_indices(ox_import *im, nb_value x, const window *win, bool ceil_mode, bool col_major)
{
    nb_var_info xi = nb_value_info(B, x);
    int r = xi.ndim, n = win->n;
    if (!sizes_known(im, &xi, 0, "asks for MaxPool's Indices of an input whose size only a run knows")) return NB_NONE;
    int64_t out[NB_MAX_DIMS], stride[NB_MAX_DIMS], taps = 1, step = 1;
    nb_value xp = x, tap[256];
    for (int i = 0; i < n; i++) {
        int64_t after;
        if (!window_count(im, win, i, xi.shape[2 + i], ceil_mode, &out[i], &after)) return NB_NONE;
        xp = pad_dim(im, xp, r, 2 + i, win->pb[i], after, -INFINITY);
        taps *= win->k[i];
    }
    if (taps > 256) {
        ox_unsupported(im, "asks for MaxPool's Indices of a window of more than 256 elements");
        return NB_NONE;
    }
    for (int k = 0; k < n; k++) {
        int i = col_major ? k : n - 1 - k;
        stride[i] = step, step *= xi.shape[2 + i];
    }
    int64_t planes_shape[NB_MAX_DIMS] = {xi.shape[0], xi.shape[1], 1, 1, 1, 1, 1, 1};
    nb_tensor *offset = NULL, *origin = NULL, *planes = NULL;
    if (nb_tensor_new(&offset, NB_I64, 1, &taps) || nb_tensor_new(&origin, NB_I64, n, out) ||
        nb_tensor_new(&planes, NB_I64, r, planes_shape)) {
        nb_tensor_release(offset), nb_tensor_release(origin);
        ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        return NB_NONE;
    }
    for (int64_t t = 0; t < taps; t++) {
        nb_value v = xp;
        int64_t rest = t, off = 0;
        for (int i = n - 1; i >= 0; i--) {
            int64_t j = rest % win->k[i];
            rest /= win->k[i];
            v = strided(im, v, 2 + i, j * win->d[i], out[i], win->s[i]);
            off += j * win->d[i] * stride[i];
        }
        tap[t] = v;
        nb_tensor_set(offset, t, (double)off);
    }
    for (int64_t o = 0; o < nb_tensor_numel(origin); o++) {
        int64_t rest = o, at = 0;
        for (int i = n - 1; i >= 0; i--) {
            at += (rest % out[i] * win->s[i] - win->pb[i]) * stride[i];
            rest /= out[i];
        }
        nb_tensor_set(origin, o, (double)at);
    }
    for (int64_t p = 0; p < nb_tensor_numel(planes); p++) nb_tensor_set(planes, p, (double)(p * step));
    const int64_t flat = -1;
    nb_value which = nb_argmax(B, nb_stack(B, (int)taps, tap, 2), 2, false);
    nb_value picked = nb_gather(B, nb_constant(B, offset), nb_reshape(B, which, 1, &flat), 0);
    int64_t pooled[NB_MAX_DIMS] = {xi.shape[0], xi.shape[1]};
    memcpy(pooled + 2, out, (size_t)n * sizeof *out);
    nb_value idx = nb_add(B, nb_reshape(B, picked, r, pooled), nb_constant(B, origin));
    idx = nb_add(B, idx, nb_constant(B, planes));
    nb_tensor_release(offset), nb_tensor_release(origin), nb_tensor_release(planes);
    return idx;
}

static nb_status pool(ox_import *im, bool max)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    window win;
    if (!pool_kernel(im, x, &win) || !read_window(im, x, &win)) return nb_builder_status(B);
    pool_opts o = {max, ox_attr_i(im, "ceil_mode", 0) != 0, ox_attr_i(im, "count_include_pad", 0) != 0};
    bool dilated = false;
    for (int i = 0; i < win.n; i++) dilated |= win.d[i] != 1;
    if (dilated && !max) return ox_unsupported(im, "is a dilated average pool");
    /* Pools of integers (uint8 images) go through float32, exactly. */
    bool cast = !nb_dtype_is_float(xi.dtype);
    if (cast && !max) return ox_unsupported(im, "averages integers");
    if (cast) x = nb_cast(B, x, NB_F32);
    nb_value y = dilated ? dilated_max(im, x, &win, o.ceil) : pool_nd(im, x, &win, &o);
    if (cast) y = nb_cast(B, y, xi.dtype);
    nb_status st = ox_out(im, 0, y);
    if (!st && max && wants_out(im, 1))
        st = ox_out(im, 1, max_indices(im, x, &win, o.ceil, ox_attr_i(im, "storage_order", 0) != 0));
    return st;
}
static nb_status i_maxpool(ox_import *im) { return pool(im, true); }
static nb_status i_avgpool(ox_import *im) { return pool(im, false); }

/* LpPool: (sum over the window of |x|^p)^(1/p), the sum an average over
 * the whole window (pads included) times its size. */
static nb_status i_lppool(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    window win;
    if (!pool_kernel(im, x, &win) || !read_window(im, x, &win)) return nb_builder_status(B);
    double p = (double)ox_attr_i(im, "p", 2), size = 1;
    for (int i = 0; i < win.n; i++) {
        if (win.d[i] != 1) return ox_unsupported(im, "is a dilated LpPool");
        size *= (double)win.k[i];
    }
    pool_opts o = {false, ox_attr_i(im, "ceil_mode", 0) != 0, true};
    nb_value powered = p == 2 ? nb_square(B, x) : nb_pow(B, nb_abs(B, x), ox_const_scalar(im, xi.dtype, p));
    nb_value sum = nb_scale(B, pool_nd(im, powered, &win, &o), size, 0);
    return ox_out(im, 0, p == 2 ? nb_sqrt(B, sum) : nb_pow(B, sum, ox_const_scalar(im, xi.dtype, 1 / p)));
}

/* Global pools in any rank: a reduction over the spatial dims. */
static nb_status global_pool(ox_import *im, bool max)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t axes[NB_MAX_DIMS];
    int r = ox_rank(im, x);
    if (r < 3) return ox_unsupported(im, "needs X [N, C, d1, ...]");
    int n = axes_from(axes, 2, r);
    return ox_out(im, 0, max ? nb_reduce_max(B, x, n, axes, true) : nb_reduce_mean(B, x, n, axes, true));
}
static nb_status i_global_avg(ox_import *im) { return global_pool(im, false); }
static nb_status i_global_max(ox_import *im) { return global_pool(im, true); }

/* ---- normalisations ------------------------------------------------------------ */

/* (x - mean) / sqrt(var + eps) over `axes`, with the mean, the (biased)
 * variance and the inverse deviation (keepdim) into those asked for. */
static nb_value standardise(ox_import *im, nb_value x, int n, const int64_t *axes, double eps, nb_value *mean,
                            nb_value *variance, nb_value *inv)
{
    nb_var_info xi = nb_value_info(B, x);
    nb_value m = nb_reduce_mean(B, x, n, axes, true), centred = nb_sub(B, x, m);
    nb_value var = nb_reduce_mean(B, nb_square(B, centred), n, axes, true);
    nb_value r = nb_rsqrt(B, nb_add(B, var, ox_const_scalar(im, xi.dtype, eps)));
    if (mean) *mean = m;
    if (variance) *variance = var;
    if (inv) *inv = r;
    return nb_mul(B, centred, r);
}

/* Whether input k, now v, is state that training may write: an
 * initializer, or in a program a persistable var that is not a trainable
 * parameter. */
static bool is_state(ox_import *im, int k, nb_value v)
{
    if (is_init(im, k)) return true;
    nb_var *var = ox_var(v);
    return var && var->persistable && !var->trainable;
}

/* PyTorch's exporter keeps one initializer for equal running statistics
 * (every fresh batch norm's zeros and ones) and hands it to each
 * BatchNormalization through an Identity named after the buffer
 * ("bn1.running_mean"). In a program, statistics that such an Identity made
 * a parameter of its own (onnx_import_unshare.c) become state; a shared
 * parameter or initializer reached otherwise gives the layer state of its
 * own, named as its input and holding the initializer's values. Else the
 * layer would normalise with running statistics while training. Anything
 * else computed is left as it is (read, never written). */
static nb_value own_statistic(ox_import *im, int k, nb_value v)
{
    nb_var *var = ox_var(v);
    if (!var) return v; /* a tensor: an eager builder finds its parameters by name at each import */
    if (var && var->trainable && !strcmp(var->name, im->node->input[k])) {
        /* The parameter of its own that an Identity made (onnx_import_unshare.c). */
        var->trainable = var->is_parameter = false;
        var->stop_gradient = true;
        return v;
    }
    const Onnx__TensorProto *p = var && var->persistable ? nb_strmap_get(&im->protos, var->name, NULL) : NULL;
    if (!p || nb_block_find_var_recursive(nb_builder_block(B), im->node->input[k])) return v;
    nb_tensor *t;
    char what[300];
    snprintf(what, sizeof what, "initializer '%.256s'", var->name);
    if (ox_tensor_from_proto(p, im->dir, what, &t)) {
        ox_node_error(im, NB_ERR_FORMAT, "%s", nb_last_error());
        return NB_NONE;
    }
    nb_value own = nb_persistable_from(B, im->node->input[k], t);
    nb_tensor_release(t);
    return own;
}

/* BatchNormalization. Inference with the running statistics, which stay
 * state when they are initializers (a program's training updates them, as
 * nabla's batch_norm layer does); given as graph inputs or computed, they
 * are read and never written (a fed value is read-only). Training mode
 * (training_mode=1 from opset 14; before, is_test=0 up to opset 6 and
 * asking for the running statistics from 7 to 13) normalises with the
 * batch's statistics, composed, and gives the updated running ones. */
static nb_status i_batch_norm(ox_import *im)
{
    nb_value in[5];
    for (int k = 0; k < 5; k++)
        if (nb_is_none(in[k] = ox_in(im, k))) return nb_builder_status(B);
    if (!ox_attr_i(im, "spatial", 1)) return ox_unsupported(im, "has spatial=0 (statistics per activation)");
    double eps = ox_attr_f(im, "epsilon", 1e-5), momentum = ox_attr_f(im, "momentum", 0.9);
    bool training = im->opset >= 14 ? ox_attr_i(im, "training_mode", 0) != 0
        : im->opset < 7             ? ox_attr_i(im, "is_test", 0) == 0
                                    : wants_out(im, 1) || wants_out(im, 2);
    if (im->opset < 14 && (wants_out(im, 3) || wants_out(im, 4)))
        return ox_unsupported(im, "asks for the saved mean or variance of training (outputs 3 and 4)");
    nb_var_info xi = nb_value_info(B, in[0]);
    int r = xi.ndim;
    if (r < 2) return ox_unsupported(im, "needs X [N, C, ...]");
    if (!training) {
        for (int k = 3; k < 5; k++)
            if (!is_init(im, k) && nb_is_none(in[k] = own_statistic(im, k, in[k]))) return nb_builder_status(B);
        if (is_state(im, 3, in[3]) && is_state(im, 4, in[4]))
            return ox_out(im, 0, nb_batch_norm_of(B, in, momentum, eps, false));
        nb_value out[5];
        nb_attr attrs[] = {NB_ATTR_FLOAT("epsilon", eps), NB_ATTR_BOOL("use_global_stats", true)};
        if (nb_emit(B, "batch_norm", NB_VALUES_N(5, in), NB_ATTRS_N(2, attrs), 5, out)) return nb_builder_status(B);
        return ox_out(im, 0, out[0]);
    }
    int64_t axes[NB_MAX_DIMS] = {0};
    int n = 1 + axes_from(axes + 1, 2, r);
    nb_value mean, var;
    nb_value y = standardise(im, in[0], n, axes, eps, &mean, &var, NULL);
    y = nb_add(B, nb_mul(B, y, per_channel(im, in[1], r)), per_channel(im, in[2], r));
    nb_status st = ox_out(im, 0, y);
    if (st) return st;
    /* The running statistics: momentum weighs the old value; the variance
     * is the batch's biased one, as ONNX's reference takes it. */
    const int64_t flat = -1;
    nb_value stats[2] = {nb_reshape(B, mean, 1, &flat), nb_reshape(B, var, 1, &flat)};
    for (int k = 0; k < 2 && !st; k++) {
        if (!wants_out(im, 1 + k)) continue;
        nb_value old = nb_scale(B, in[3 + k], momentum, 0);
        st = ox_out(im, 1 + k, nb_add(B, old, nb_scale(B, stats[k], 1 - momentum, 0)));
    }
    return st;
}

static nb_status i_instance_norm(ox_import *im)
{
    nb_value x = ox_in(im, 0), s = ox_in(im, 1), b = ox_in(im, 2);
    if (nb_builder_status(B)) return nb_builder_status(B);
    int r = ox_rank(im, x);
    if (r < 3) return ox_unsupported(im, "needs X [N, C, d1, ...]");
    int64_t axes[NB_MAX_DIMS];
    int n = axes_from(axes, 2, r);
    nb_value y = standardise(im, x, n, axes, ox_attr_f(im, "epsilon", 1e-5), NULL, NULL, NULL);
    return ox_out(im, 0, nb_add(B, nb_mul(B, y, per_channel(im, s, r)), per_channel(im, b, r)));
}

/* LayerNormalization: nabla's layer_norm, or composed when the Mean and
 * InvStdDev outputs are asked for (layer_norm keeps its statistics for its
 * own gradient, not as values to differentiate). */
static nb_status i_layer_norm(ox_import *im)
{
    nb_value x = ox_in(im, 0), s = ox_in(im, 1), b = ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE;
    if (nb_builder_status(B)) return nb_builder_status(B);
    int r = ox_rank(im, x), axis = (int)ox_attr_i(im, "axis", -1);
    double eps = ox_attr_f(im, "epsilon", 1e-5);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return ox_node_error(im, NB_ERR_FORMAT, "has axis %d for X of rank %d", axis, r);
    if (!wants_out(im, 1) && !wants_out(im, 2)) {
        nb_value in[3] = {x, s, b};
        nb_attr attrs[] = {NB_ATTR_INT("begin_norm_axis", axis), NB_ATTR_FLOAT("epsilon", eps)};
        return ox_out(im, 0, nb_emit1(B, "layer_norm", NB_VALUES_N(3, in), NB_ATTRS_N(2, attrs)));
    }
    int64_t axes[NB_MAX_DIMS];
    int n = axes_from(axes, axis, r);
    nb_value mean, inv, y = nb_mul(B, standardise(im, x, n, axes, eps, &mean, NULL, &inv), s);
    if (!nb_is_none(b)) y = nb_add(B, y, b);
    nb_status st = ox_out(im, 0, y);
    if (!st && wants_out(im, 1)) st = ox_out(im, 1, mean);
    if (!st && wants_out(im, 2)) st = ox_out(im, 2, inv);
    return st;
}

/* MeanVarianceNormalization: (x - mean) / (std + 1e-9) over axes (opset 9
 * on; opset 1's across_channels and normalize_variance are refused). */
static nb_status i_mvn(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    if (im->opset < 9) return ox_unsupported(im, "is opset 1's form (across_channels, normalize_variance)");
    int64_t axes[NB_MAX_DIMS] = {0, 2, 3};
    int n = ox_attr_list(im, "axes", axes, NB_MAX_DIMS);
    if (n == -1) n = 3;
    if (n > NB_MAX_DIMS) return ox_unsupported(im, "has more axes than nabla's dims");
    nb_var_info xi = nb_value_info(B, x);
    nb_value mean = nb_reduce_mean(B, x, n, axes, true), centred = nb_sub(B, x, mean);
    nb_value std = nb_sqrt(B, nb_reduce_mean(B, nb_square(B, centred), n, axes, true));
    return ox_out(im, 0, nb_div(B, centred, nb_add(B, std, ox_const_scalar(im, xi.dtype, 1e-9))));
}

/* LRN: x / (bias + alpha/size * sum of x^2 over `size` channels)^beta;
 * the channel window's sum is size times an average pool (pads counted)
 * over the channels, laid out as the height of a one-channel image. */
static nb_status i_lrn(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info xi = nb_value_info(B, x);
    int64_t size = ox_attr_i(im, "size", 0);
    if (size < 1) return ox_node_error(im, NB_ERR_FORMAT, "has no size, or one below 1");
    if (xi.ndim < 2 || xi.shape[1] < 0) return ox_unsupported(im, "needs X [N, C, ...] with C known");
    double alpha = ox_attr_f(im, "alpha", 1e-4), beta = ox_attr_f(im, "beta", 0.75), bias = ox_attr_f(im, "bias", 1);
    int64_t shape[4] = {0, 1, xi.shape[1], -1};
    window win = {.n = 2, .k = {size, 1}, .s = {1, 1}, .d = {1, 1}, .pb = {(size - 1) / 2, 0}, .pe = {size / 2, 0}};
    pool_opts o = {false, false, true};
    nb_value mean = pool_2d(im, nb_reshape(B, nb_square(B, x), 4, shape), &win, &o);
    int64_t back[NB_MAX_DIMS];
    memcpy(back, xi.shape, sizeof back);
    back[0] = 0; /* N as it is, the rest as X's (known: C was, the rest -1 at most once) */
    mean = nb_reshape(B, mean, xi.ndim, back);
    nb_value base = nb_scale(B, mean, alpha, bias);
    return ox_out(im, 0, nb_div(B, x, nb_pow(B, base, ox_const_scalar(im, xi.dtype, beta))));
}

/* LpNormalization: x over its p-norm (p 1 or 2) along axis. */
static nb_status i_lp_norm(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t axis = ox_attr_i(im, "axis", -1), p = ox_attr_i(im, "p", 2);
    if (p != 1 && p != 2) return ox_unsupported(im, "has p other than 1 or 2");
    if (p == 1) return ox_out(im, 0, nb_div(B, x, nb_reduce_sum(B, nb_abs(B, x), 1, &axis, true)));
    return ox_out(im, 0, nb_mul(B, x, nb_rsqrt(B, nb_reduce_sum(B, nb_square(B, x), 1, &axis, true))));
}

/* ---- losses ------------------------------------------------------------------- */

/* NegativeLogLikelihoodLoss of log-probabilities lp [N, C, d...] and
 * targets t [N, d...]: -lp[n, t, d...] times the target class's weight,
 * 0 where t is ignore_index; summed, or averaged by the weights' sum. The
 * pick is a product with the targets' one-hot rows (an ignored or out of
 * range target picks class 0 and is masked off), so it differentiates. */
static nb_value nll(ox_import *im, nb_value lp, nb_value t, nb_value weight)
{
    nb_var_info li = nb_value_info(B, lp), ti = nb_value_info(B, t);
    int r = li.ndim;
    if (r < 2 || ti.ndim != r - 1 || li.shape[1] < 0) {
        ox_unsupported(im, "needs input [N, C, d...] with C known and target [N, d...]");
        return NB_NONE;
    }
    if (ti.dtype != NB_I64 && ti.dtype != NB_I32) {
        ox_node_error(im, NB_ERR_FORMAT, "has a target of dtype %s, not an integer", nb_dtype_name(ti.dtype));
        return NB_NONE;
    }
    const char *reduction = ox_attr_s(im, "reduction", "mean");
    bool mean = !strcmp(reduction, "mean"), sum = !strcmp(reduction, "sum");
    if (!mean && !sum && strcmp(reduction, "none")) {
        ox_node_error(im, NB_ERR_FORMAT, "has reduction '%s', not none, sum or mean", reduction);
        return NB_NONE;
    }
    const Onnx__AttributeProto *ii = ox_attr(im, "ignore_index");
    nb_value keep = NB_NONE, target = t;
    if (ii && ii->has_i) {
        nb_value ignored = ox_const_scalar(im, ti.dtype, (double)ii->i);
        nb_value kept = nb_not_equal(B, t, ignored);
        target = nb_where(B, kept, t, nb_fill_zeros_like(B, t));
        keep = nb_cast(B, kept, li.dtype);
    }
    const int64_t last = -1;
    nb_attr hot_attrs[] = {NB_ATTR_INT("depth", li.shape[1]), NB_ATTR_INT("dtype", li.dtype)};
    nb_value hot = nb_emit1(B, "one_hot", NB_VALUES(target), NB_ATTRS_N(2, hot_attrs));
    nb_value picked = nb_reduce_sum(B, nb_mul(B, channels_last(im, lp, r), hot), 1, &last, false);
    nb_value w = nb_is_none(weight) ? keep : nb_reduce_sum(B, nb_mul(B, hot, weight), 1, &last, false);
    if (!nb_is_none(weight) && !nb_is_none(keep)) w = nb_mul(B, w, keep);
    nb_value loss = nb_neg(B, nb_is_none(w) ? picked : nb_mul(B, picked, w));
    if (sum) return nb_reduce_sum(B, loss, 0, NULL, false);
    if (!mean) return loss;
    if (nb_is_none(w)) return nb_reduce_mean(B, loss, 0, NULL, false);
    return nb_div(B, nb_reduce_sum(B, loss, 0, NULL, false), nb_reduce_sum(B, w, 0, NULL, false));
}

static nb_status i_nll(ox_import *im)
{
    nb_value lp = ox_in(im, 0), t = ox_in(im, 1), w = ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE;
    if (nb_builder_status(B)) return nb_builder_status(B);
    return ox_out(im, 0, nll(im, lp, t, w));
}

/* SoftmaxCrossEntropyLoss: the NLL of log_softmax over the classes (dim
 * 1), which is the optional second output. */
static nb_status i_softmax_ce(ox_import *im)
{
    nb_value x = ox_in(im, 0), t = ox_in(im, 1), w = ox_has_in(im, 2) ? ox_in(im, 2) : NB_NONE;
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (ox_rank(im, x) < 2) return ox_unsupported(im, "needs scores [N, C, d...]");
    nb_value lp = nb_log_softmax(B, x, 1);
    nb_status st = ox_out(im, 0, nll(im, lp, t, w));
    if (!st && wants_out(im, 1)) st = ox_out(im, 1, lp);
    return st;
}

/* clang-format off */
const ox_importer ox_imports_nn[] = {
    OX_FN(Conv, conv), OX_FN(ConvInteger, conv_integer), OX_FN(ConvTranspose, conv_transpose),
    OX_FN(MaxPool, maxpool), OX_FN(AveragePool, avgpool), OX_FN(LpPool, lppool), OX_FN(GlobalAveragePool, global_avg),
    OX_FN(GlobalMaxPool, global_max), OX_FN(BatchNormalization, batch_norm),
    OX_FN(InstanceNormalization, instance_norm), OX_FN(LayerNormalization, layer_norm),
    OX_FN(MeanVarianceNormalization, mvn), OX_FN(LRN, lrn), OX_FN(LpNormalization, lp_norm),
    OX_FN(NegativeLogLikelihoodLoss, nll), OX_FN(SoftmaxCrossEntropyLoss, softmax_ce),
    {0},
};
/* clang-format on */

#endif
