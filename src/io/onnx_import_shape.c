/* ONNX's ops that move, join, slice, pad and resize data as nabla ops.
 *
 * Every op here is a composition of differentiable nabla ops (slice,
 * gather, expand, reshape, transpose, matmul, ...), so an imported model
 * trains through them with no rule of its own. What must be known to build
 * the composition (a slice's bounds, a resize's sizes, a tile's repeats) is
 * read as a constant; the index lists and weights computed from it become
 * constants of the program. Old forms of each op (attributes that later
 * became inputs, defaults that changed) are read by the model's opset. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <math.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)
#define MAX_PARTS 64 /* inputs of a Concat, outputs of a Split */

/* ---- helpers ---------------------------------------------------------------- */

static nb_status nomem(ox_import *im) { return ox_node_error(im, NB_ERR_NOMEM, "out of memory"); }

/* An int list that is attribute `attr` before opset `from` and input k
 * since: its count (max + 1 when longer), -1 when absent, -2 on an error. */
static int int_list(ox_import *im, int from, int k, const char *attr, int64_t *out, int max)
{
    if (im->opset < from) return ox_attr_list(im, attr, out, max);
    return ox_has_in(im, k) ? ox_const_ints(im, k, out, max) : -1;
}

/* A constant of t's values (t released). */
static nb_value constant_of(ox_import *im, nb_tensor *t)
{
    nb_value c = nb_constant(B, t);
    nb_tensor_release(t);
    return c;
}

/* A 1-D int64 constant: the positions a gather reads. */
static nb_value index_const(ox_import *im, int64_t n, const int64_t *v)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_I64, 1, &n)) {
        nomem(im);
        return NB_NONE;
    }
    if (n) memcpy(nb_tensor_data(t), v, (size_t)n * sizeof *v);
    return constant_of(im, t);
}

/* A constant of dtype dt and rank `rank`, of size m along `axis` and 1
 * elsewhere: per-position weights that broadcast along the other dims. */
static nb_value along_axis(ox_import *im, nb_dtype dt, int rank, int axis, int64_t m, const double *w)
{
    int64_t shape[NB_MAX_DIMS];
    for (int d = 0; d < rank; d++) shape[d] = d == axis ? m : 1;
    nb_tensor *t;
    if (nb_tensor_new(&t, dt, rank, shape)) {
        nomem(im);
        return NB_NONE;
    }
    for (int64_t i = 0; i < m; i++) nb_tensor_set(t, i, w[i]);
    return constant_of(im, t);
}

static nb_value permute(ox_import *im, nb_value x, int n, const int64_t *perm)
{
    for (int i = 0; i < n; i++)
        if (perm[i] != i) return nb_transpose(B, x, n, perm);
    return x;
}

/* The node's input 0 and what is known of it. */
static nb_value input0(ox_import *im, nb_var_info *info)
{
    nb_value x = ox_in(im, 0);
    if (!nb_is_none(x)) *info = nb_value_info(B, x);
    return x;
}

static bool all_known(const nb_var_info *xi)
{
    for (int d = 0; d < xi->ndim; d++)
        if (xi->shape[d] < 0) return false;
    return true;
}

/* ---- moving and joining ----------------------------------------------------- */

/* Flatten(axis): the dims before axis into one, and those from axis into
 * another, always 2-D. Negative axes came with opset 11; the reading is
 * the same. */
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

/* Squeeze: ONNX's dims named must be 1 (torch's squeeze keeps others), and
 * with no axes every dim of size 1 goes, which only known sizes tell. */
static nb_status i_squeeze(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    int64_t axes[NB_MAX_DIMS];
    int n = nb_is_none(x) ? -2 : ox_axes(im, axes);
    if (n < -1) return nb_builder_status(B);
    for (int i = 0; i < n; i++) {
        int64_t d = axes[i] < 0 ? axes[i] + xi.ndim : axes[i];
        if (d >= 0 && d < xi.ndim && xi.shape[d] > 1)
            return ox_node_error(im, NB_ERR_SHAPE, "squeezes dim %lld, of size %lld", (long long)d,
                                 (long long)xi.shape[d]);
    }
    if (n <= 0 && !all_known(&xi))
        return ox_unsupported(im, "squeezes every dim of size 1 of an input whose sizes are not all known");
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

/* Concat: axis defaulted to 1 before opset 4 and is required since. */
static nb_status i_concat(ox_import *im)
{
    int n = (int)im->node->n_input;
    nb_value xs[MAX_PARTS];
    if (n > MAX_PARTS) return ox_unsupported(im, "joins more than 64 tensors");
    if (n < 1) return ox_node_error(im, NB_ERR_FORMAT, "has no inputs");
    if (im->opset >= 4 && !ox_attr(im, "axis")) return ox_node_error(im, NB_ERR_FORMAT, "has no axis attribute");
    for (int k = 0; k < n; k++)
        if (nb_is_none(xs[k] = ox_in(im, k))) return nb_builder_status(B);
    return ox_out(im, 0, n == 1 ? xs[0] : nb_concat(B, n, xs, (int)ox_attr_i(im, "axis", 1)));
}

/* Split: the sizes an input from opset 13, an attribute before (and in
 * opset 1 either); equal parts, one per output, when there are none. */
static nb_status i_split(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int n_out = (int)im->node->n_output;
    if (n_out > MAX_PARTS) return ox_unsupported(im, "splits into more than 64 outputs");
    int64_t sizes[MAX_PARTS + 1];
    int n = int_list(im, 13, 1, "split", sizes, MAX_PARTS);
    if (n == -1 && im->opset < 2 && ox_has_in(im, 1)) n = ox_const_ints(im, 1, sizes, MAX_PARTS);
    if (n == -2) return nb_builder_status(B);
    if (n > 0 && n != n_out) return ox_node_error(im, NB_ERR_FORMAT, "has %d split sizes for %d outputs", n, n_out);
    for (int k = 0; k < n; k++)
        if (sizes[k] < 0) return ox_node_error(im, NB_ERR_ARG, "split size %d is %lld", k, (long long)sizes[k]);
    nb_value outs[MAX_PARTS];
    nb_attr attrs[] = {NB_ATTR_INT("axis", ox_attr_i(im, "axis", 0)), NB_ATTR_INTS_N("sections", n < 0 ? 0 : n, sizes)};
    nb_status st = nb_emit(B, "split", NB_VALUES(x), NB_ATTRS_N(2, attrs), n_out, outs);
    for (int k = 0; k < n_out && !st; k++) st = ox_out(im, k, outs[k]);
    return st;
}

/* Expand broadcasts both ways: a 1 in the shape keeps x's dim. */
static nb_status i_expand(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    int64_t shape[NB_MAX_DIMS + 1], to[NB_MAX_DIMS];
    int n = nb_is_none(x) ? -2 : ox_const_ints(im, 1, shape, NB_MAX_DIMS);
    if (n == -2) return nb_builder_status(B);
    if (n > NB_MAX_DIMS) return ox_unsupported(im, "expands to more dims than nabla has");
    int r = xi.ndim, rank = n > r ? n : r;
    bool same = rank == r;
    for (int i = 0; i < rank; i++) {
        int64_t s = i >= rank - n ? shape[i - (rank - n)] : 1;
        if (s < 0) return ox_node_error(im, NB_ERR_ARG, "its shape has entry %lld", (long long)s);
        to[i] = s == 1 && i >= rank - r ? -1 : s;
        same &= to[i] == -1;
    }
    return ox_out(im, 0, same ? x : nb_expand(B, x, rank, to));
}

/* Tile: along each repeated dim d, a new dim of the repeats before it,
 * expanded and merged into d. Opset 1 tiled one axis, both inputs. */
static nb_status i_tile(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = xi.ndim;
    int64_t reps[NB_MAX_DIMS + 1];
    if (im->opset < 6) {
        int64_t tiles, axis;
        if (ox_const_ints(im, 1, &tiles, 1) != 1 || ox_const_ints(im, 2, &axis, 1) != 1) {
            nb_status st = nb_builder_status(B);
            return st ? st : ox_node_error(im, NB_ERR_FORMAT, "needs scalar tiles and axis");
        }
        if (axis < 0 || axis >= r) return ox_node_error(im, NB_ERR_ARG, "axis %lld is out of range", (long long)axis);
        for (int d = 0; d < r; d++) reps[d] = d == axis ? tiles : 1;
    } else {
        int n = ox_const_ints(im, 1, reps, NB_MAX_DIMS);
        if (n == -2) return nb_builder_status(B);
        if (n != r) return ox_node_error(im, NB_ERR_FORMAT, "has %d repeats for a rank-%d input", n, r);
    }
    for (int d = 0; d < r && !nb_is_none(x); d++) {
        if (reps[d] < 0) return ox_node_error(im, NB_ERR_ARG, "repeats dim %d %lld times", d, (long long)reps[d]);
        if (reps[d] == 1) continue;
        if (r == NB_MAX_DIMS) return ox_unsupported(im, "tiles a tensor of nabla's most dims (it needs one more)");
        int64_t to[NB_MAX_DIMS];
        for (int i = 0; i <= r; i++) to[i] = i == d ? reps[d] : -1;
        x = nb_flatten(B, nb_expand(B, nb_unsqueeze(B, x, 1, (int64_t[]){d}), r + 1, to), d, d + 1);
    }
    return ox_out(im, 0, x);
}

/* ---- slicing ----------------------------------------------------------------- */

/* Slice: bounds as attributes before opset 10, inputs since (with steps).
 * Positive steps are nabla's slice, whose clamping is ONNX's; a negative
 * step gathers the positions it visits, which needs the dim's size. */
static nb_status i_slice(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t starts[NB_MAX_DIMS + 1], ends[NB_MAX_DIMS + 1], axes[NB_MAX_DIMS + 1], steps[NB_MAX_DIMS + 1];
    int n = int_list(im, 10, 1, "starts", starts, NB_MAX_DIMS), ne = -1, na = -1, ns = -1;
    if (n != -2) ne = int_list(im, 10, 2, "ends", ends, NB_MAX_DIMS);
    if (ne != -2) na = int_list(im, 10, 3, "axes", axes, NB_MAX_DIMS);
    if (na != -2 && im->opset >= 10) ns = int_list(im, 10, 4, "steps", steps, NB_MAX_DIMS);
    if (n == -2 || ne == -2 || na == -2 || ns == -2) return nb_builder_status(B);
    if (n < 0 || ne < 0) return ox_node_error(im, NB_ERR_FORMAT, "has no starts or no ends");
    if (n > NB_MAX_DIMS) return ox_unsupported(im, "slices more axes than nabla's dims");
    if (ne != n || (na >= 0 && na != n) || (ns >= 0 && ns != n))
        return ox_node_error(im, NB_ERR_FORMAT, "has %d starts, %d ends, %d axes and %d steps", n, ne, na, ns);
    int64_t pa[NB_MAX_DIMS], ps[NB_MAX_DIMS], pe[NB_MAX_DIMS], pst[NB_MAX_DIMS];
    int np = 0, back[NB_MAX_DIMS], nback = 0;
    bool seen[NB_MAX_DIMS] = {false};
    for (int k = 0; k < n; k++) {
        int64_t a = na >= 0 ? axes[k] : k, step = ns >= 0 ? steps[k] : 1;
        if (a < 0) a += xi.ndim;
        if (a < 0 || a >= xi.ndim || seen[a])
            return ox_node_error(im, NB_ERR_ARG, "axis %lld is out of range or named twice", (long long)axes[k]);
        if (step == 0) return ox_node_error(im, NB_ERR_ARG, "has a step of 0");
        seen[a] = true;
        if (step > 0) pa[np] = a, ps[np] = starts[k], pe[np] = ends[k], pst[np++] = step;
        else back[nback++] = k;
    }
    nb_value y = x;
    if (np)
        y = nb_emit1(B, "slice", NB_VALUES(x),
                     NB_ATTRS(NB_ATTR_INTS_N("axes", np, pa), NB_ATTR_INTS_N("starts", np, ps),
                              NB_ATTR_INTS_N("ends", np, pe), NB_ATTR_INTS_N("strides", np, pst)));
    for (int j = 0; j < nback && !nb_is_none(y); j++) {
        int k = back[j];
        int64_t a = na >= 0 ? (axes[k] < 0 ? axes[k] + xi.ndim : axes[k]) : k, dim = xi.shape[a];
        if (dim < 0) return ox_unsupported(im, "slices with a negative step along a dim of unknown size");
        /* Going backwards, start is clamped to [0, dim - 1] and end to [-1, dim - 1]. */
        int64_t step = steps[k] < -INT64_MAX ? -INT64_MAX : steps[k], first = starts[k], end = ends[k];
        if (first < 0) first += dim;
        if (end < 0) end += dim;
        first = first < 0 ? 0 : first > dim - 1 ? dim - 1 : first;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        int64_t count = first > end ? (first - end - 1) / -step + 1 : 0;
        if (!count) {
            y = nb_slice(B, y, 1, &a, (int64_t[]){0}, (int64_t[]){0});
            continue;
        }
        int64_t *idx = nb_malloc((size_t)count * sizeof *idx);
        if (!idx) return nomem(im);
        for (int64_t i = 0; i < count; i++) idx[i] = first + i * step;
        nb_value iv = index_const(im, count, idx);
        nb_free(idx);
        if (nb_is_none(iv)) return nb_builder_status(B);
        y = nb_gather(B, y, iv, (int)a);
    }
    return ox_out(im, 0, y);
}

/* Pad: pads and value are attributes before opset 11 (`paddings` in opset
 * 1, `pads` after), inputs since. ONNX's pads list every dim's start, then
 * every dim's end; nabla's (before, after) per dim. A negative pad crops,
 * as a slice before the padding. */
static nb_status i_pad(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = ox_rank(im, x);
    int64_t pads[2 * NB_MAX_DIMS + 1], pairs[2 * NB_MAX_DIMS];
    double value = 0;
    int n;
    if (im->opset < 11) {
        n = ox_attr_list(im, im->opset < 2 ? "paddings" : "pads", pads, 2 * NB_MAX_DIMS);
        if (n < 0) return ox_node_error(im, NB_ERR_FORMAT, "has no %s attribute", im->opset < 2 ? "paddings" : "pads");
        value = ox_attr_f(im, "value", 0);
    } else {
        if ((n = ox_const_ints(im, 1, pads, 2 * NB_MAX_DIMS)) == -2) return nb_builder_status(B);
        if (ox_has_in(im, 2)) {
            const nb_tensor *v = ox_const_in(im, 2);
            if (!v) return nb_builder_status(B);
            value = nb_tensor_numel(v) ? nb_tensor_get(v, 0) : 0;
        }
    }
    if (n != 2 * r) return ox_node_error(im, NB_ERR_FORMAT, "has %d pads for a rank-%d input", n, r);
    const char *mode = ox_attr_s(im, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has mode '%s'", mode);
    int64_t ca[NB_MAX_DIMS], cs[NB_MAX_DIMS], ce[NB_MAX_DIMS];
    int nc = 0;
    bool any = false;
    for (int d = 0; d < r; d++) {
        int64_t before = pads[d], after = pads[r + d];
        if (before < 0 || after < 0) /* a negative end counts from the end: no size needed */
            ca[nc] = d, cs[nc] = before < 0 ? -before : 0, ce[nc++] = after < 0 ? after : INT64_MAX;
        pairs[2 * d] = before > 0 ? before : 0, pairs[2 * d + 1] = after > 0 ? after : 0;
        any |= before > 0 || after > 0;
    }
    if (nc) x = nb_slice(B, x, nc, ca, cs, ce);
    if (!any) return ox_out(im, 0, x);
    nb_attr attrs[] = {NB_ATTR_INTS_N("paddings", 2 * r, pairs), NB_ATTR_FLOAT("pad_value", value),
                       NB_ATTR_STRING("mode", mode)};
    return ox_out(im, 0, nb_emit1(B, "pad", NB_VALUES(x), NB_ATTRS_N(3, attrs)));
}

/* ReverseSequence: batch b's first lens[b] steps reversed. With batch and
 * time the two leading dims (transposed there), one gather along the two
 * merged picks every element. */
static nb_status i_reverse_sequence(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = xi.ndim, ba = (int)ox_attr_i(im, "batch_axis", 1), ta = (int)ox_attr_i(im, "time_axis", 0);
    if (r < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return ox_node_error(im, NB_ERR_ARG, "has batch_axis %d and time_axis %d for a rank-%d input", ba, ta, r);
    if (!all_known(&xi)) return ox_unsupported(im, "reverses an input whose sizes are not all known");
    int64_t nbatch = xi.shape[ba], nt = xi.shape[ta];
    int64_t *lens = nb_malloc((size_t)(nbatch + 1) * sizeof *lens);
    if (!lens) return nomem(im);
    int n = ox_const_ints(im, 1, lens, (int)(nbatch < INT32_MAX ? nbatch : INT32_MAX - 1));
    nb_status st = n == -2 ? nb_builder_status(B) : NB_OK;
    if (!st && n != nbatch)
        st = ox_node_error(im, NB_ERR_FORMAT, "has %d sequence lengths for a batch of %lld", n, (long long)nbatch);
    for (int64_t b = 0; b < n && !st; b++)
        if (lens[b] < 0 || lens[b] > nt)
            st = ox_node_error(im, NB_ERR_ARG, "sequence %lld has length %lld of %lld steps", (long long)b,
                               (long long)lens[b], (long long)nt);
    int64_t *idx = st ? NULL : nb_malloc((size_t)(nbatch * nt) * sizeof *idx + 1);
    if (!st && !idx) st = nomem(im);
    if (st) {
        nb_free(lens);
        return st;
    }
    for (int64_t b = 0; b < nbatch; b++)
        for (int64_t t = 0; t < nt; t++) idx[b * nt + t] = b * nt + (t < lens[b] ? lens[b] - 1 - t : t);
    nb_free(lens);
    nb_value iv = index_const(im, nbatch * nt, idx);
    nb_free(idx);
    if (nb_is_none(iv)) return nb_builder_status(B);
    int64_t perm[NB_MAX_DIMS], shape[NB_MAX_DIMS];
    for (int d = 0; d < r; d++) perm[d] = d < 2 ? (ba == 0 ? d : 1 - d) : d;
    shape[0] = nbatch, shape[1] = nt;
    for (int d = 2; d < r; d++) shape[d] = xi.shape[d];
    nb_value y = nb_flatten(B, permute(im, x, r, perm), 0, 1);
    y = nb_reshape(B, nb_gather(B, y, iv, 0), r, shape);
    return ox_out(im, 0, permute(im, y, r, perm));
}

/* ---- depth and space ---------------------------------------------------------- */

/* DepthToSpace: [N, C, H, W] to [N, C/b^2, H b, W b]. DCR (the only mode
 * before opset 11) takes the channel as (b, b, C/b^2), CRD as (C/b^2, b, b). */
static nb_status i_depth_to_space(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t b = ox_attr_i(im, "blocksize", 0), c = xi.ndim == 4 ? xi.shape[1] : 0;
    const char *mode = ox_attr_s(im, "mode", "DCR");
    bool crd = !strcmp(mode, "CRD");
    if (!crd && strcmp(mode, "DCR")) return ox_node_error(im, NB_ERR_UNSUPPORTED, "has mode '%s'", mode);
    if (xi.ndim != 4 || b <= 0) return ox_node_error(im, NB_ERR_ARG, "needs a 4-D input and a positive blocksize");
    if (c < 0 || xi.shape[2] < 0 || xi.shape[3] < 0) return ox_unsupported(im, "needs its input's C, H and W known");
    if (c % (b * b))
        return ox_node_error(im, NB_ERR_SHAPE, "has %lld channels, not a multiple of %lld", (long long)c,
                             (long long)(b * b));
    int64_t h = xi.shape[2], w = xi.shape[3], cb = c / (b * b);
    int64_t split[6] = {0, b, b, cb, h, w}, dcr[6] = {0, 3, 4, 1, 5, 2};
    int64_t split_crd[6] = {0, cb, b, b, h, w}, perm_crd[6] = {0, 1, 4, 2, 5, 3};
    nb_value y = nb_reshape(B, x, 6, crd ? split_crd : split);
    y = nb_transpose(B, y, 6, crd ? perm_crd : dcr);
    return ox_out(im, 0, nb_reshape(B, y, 4, (int64_t[]){0, cb, h * b, w * b}));
}

/* SpaceToDepth: [N, C, H, W] to [N, C b^2, H/b, W/b], DepthToSpace's DCR
 * undone. */
static nb_status i_space_to_depth(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    int64_t b = ox_attr_i(im, "blocksize", 0);
    if (xi.ndim != 4 || b <= 0) return ox_node_error(im, NB_ERR_ARG, "needs a 4-D input and a positive blocksize");
    int64_t c = xi.shape[1], h = xi.shape[2], w = xi.shape[3];
    if (c < 0 || h < 0 || w < 0) return ox_unsupported(im, "needs its input's C, H and W known");
    if (h % b || w % b)
        return ox_node_error(im, NB_ERR_SHAPE, "has H %lld and W %lld, not multiples of %lld", (long long)h,
                             (long long)w, (long long)b);
    nb_value y = nb_reshape(B, x, 6, (int64_t[]){0, c, h / b, b, w / b, b});
    y = nb_transpose(B, y, 6, (int64_t[]){0, 3, 5, 1, 2, 4});
    return ox_out(im, 0, nb_reshape(B, y, 4, (int64_t[]){0, c * b * b, h / b, w / b}));
}

/* ---- resizing ------------------------------------------------------------------ */

/* How Resize (and Upsample) maps positions, from its attributes. */
typedef struct resize_mode {
    int taps;          /* 1 nearest, 2 linear, 4 cubic */
    const char *coord; /* coordinate_transformation_mode */
    char nearest[24];  /* nearest_mode */
    double cubic_a, extrapolation;
    bool exclude_outside;
} resize_mode;

/* One dim's resize: dim `axis`, from n positions to m at `scale`; out_w is
 * the output's length as the reference computes it (scale * n, in float32
 * where the scales were), out_w1 that less one; roi[0] and roi[1] the crop's
 * start and extent (tf_crop_and_resize). */
typedef struct axis_resize {
    int axis;
    int64_t n, m;
    double scale, out_w, out_w1;
    double roi[2];
} axis_resize;

/* Where output position i of the resize `a` reads from, as
 * onnx/backend/test/case/node/resize.py does; *outside when it reads
 * nothing (tf_crop_and_resize outside the roi). */
static double source_of(const resize_mode *m, int64_t i, const axis_resize *a, bool *outside)
{
    const int64_t n = a->n;
    const double scale = a->scale, out_w = a->out_w, out_w1 = a->out_w1, *roi = a->roi;
    double x = (double)i;
    *outside = false;
    if (!strcmp(m->coord, "align_corners")) return out_w == 1 ? 0 : x * (double)(n - 1) / out_w1;
    if (!strcmp(m->coord, "asymmetric")) return x / scale;
    if (!strcmp(m->coord, "pytorch_half_pixel")) return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    if (!strcmp(m->coord, "tf_half_pixel_for_nn")) return (x + 0.5) / scale;
    if (!strcmp(m->coord, "tf_crop_and_resize")) {
        double s = out_w == 1 ? roi[1] * (double)(n - 1) / 2 : x * roi[1] * (double)(n - 1) / out_w1;
        s += roi[0] * (double)(n - 1);
        *outside = s < 0 || s > (double)(n - 1);
        return s;
    }
    return (x + 0.5) / scale - 0.5; /* half_pixel */
}

/* The reference's weights of the taps around a source position at `ratio`
 * (in (0, 1]) past the tap before it. */
static void tap_weights(const resize_mode *m, double ratio, double *w)
{
    if (m->taps == 2) {
        w[0] = 1 - ratio, w[1] = ratio;
    } else if (m->taps == 4) {
        double a = m->cubic_a, r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        w[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
        w[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
        w[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
        w[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
    } else {
        /* nearest: 1 on the tap before the position or on the one after */
        bool after = ratio == 1 || !strcmp(m->nearest, "ceil") ||
            (!strcmp(m->nearest, "round_prefer_floor") && ratio > 0.5) ||
            (!strcmp(m->nearest, "round_prefer_ceil") && ratio >= 0.5);
        w[0] = !after, w[1] = after;
    }
}

/* Resizes dim `axis` of x (of size n) to m positions: for each of the
 * mode's taps, a gather of the positions it reads, weighted, and summed;
 * nearest without extrapolation is one gather. */
static nb_value resize_axis(ox_import *im, nb_value x, const resize_mode *rm, const axis_resize *a)
{
    const int axis = a->axis;
    const int64_t n = a->n, m = a->m;
    nb_var_info xi = nb_value_info(B, x);
    int k_taps = rm->taps == 1 ? 2 : rm->taps;
    int64_t *idx = nb_malloc((size_t)(k_taps * m + 1) * sizeof *idx);
    double *w = nb_malloc((size_t)((k_taps + 1) * m + 1) * sizeof *w), *extra = w + k_taps * m;
    if (!idx || !w) {
        nb_free(idx), nb_free(w);
        nomem(im);
        return NB_NONE;
    }
    bool any_outside = false, identity = m == n;
    for (int64_t i = 0; i < m; i++) {
        bool outside;
        double s = source_of(rm, i, a, &outside), tw[4];
        int64_t before = (int64_t)ceil(s) - 1;
        tap_weights(rm, s - (double)before, tw);
        int64_t first = before - (rm->taps == 4);
        double sum = 0;
        for (int k = 0; k < k_taps; k++) {
            int64_t j = first + k;
            if (rm->exclude_outside && (j < 0 || j >= n)) tw[k] = 0;
            sum += tw[k];
        }
        for (int k = 0; k < k_taps; k++) {
            int64_t j = first + k;
            idx[k * m + i] = j < 0 ? 0 : j >= n ? n - 1 : j;
            w[k * m + i] = outside ? 0 : rm->exclude_outside && sum != 0 ? tw[k] / sum : tw[k];
            identity &= w[k * m + i] == 0 || (w[k * m + i] == 1 && idx[k * m + i] == i);
        }
        extra[i] = outside ? rm->extrapolation : 0;
        any_outside |= outside;
    }
    nb_value y = NB_NONE;
    if (identity && !any_outside) {
        y = x;
    } else if (rm->taps == 1 && !any_outside) {
        for (int64_t i = 0; i < m; i++) idx[i] = w[i] == 1 ? idx[i] : idx[m + i];
        nb_value iv = index_const(im, m, idx);
        if (!nb_is_none(iv)) y = nb_gather(B, x, iv, axis);
    } else if (!nb_dtype_is_float(xi.dtype)) {
        ox_unsupported(im, "interpolates (or extrapolates) a tensor that is not floating point");
    } else {
        bool extrapolates = false;
        for (int64_t i = 0; i < m; i++) extrapolates |= extra[i] != 0;
        for (int k = 0; k < k_taps && !nb_builder_status(B); k++) {
            bool used = k == k_taps - 1 && nb_is_none(y); /* one tap at least, for the shape */
            for (int64_t i = 0; i < m; i++) used |= w[k * m + i] != 0;
            if (!used) continue;
            nb_value iv = index_const(im, m, idx + k * m), wv = along_axis(im, xi.dtype, xi.ndim, axis, m, w + k * m);
            if (nb_is_none(iv) || nb_is_none(wv)) break;
            nb_value part = nb_mul(B, nb_gather(B, x, iv, axis), wv);
            y = nb_is_none(y) ? part : nb_add(B, y, part);
        }
        if (!nb_builder_status(B) && extrapolates) y = nb_add(B, y, along_axis(im, xi.dtype, xi.ndim, axis, m, extra));
    }
    nb_free(idx), nb_free(w);
    return y;
}

/* Resizes every dim of x with its scale (scales[d], or sizes[d] / n when
 * sizes are given): what Resize and Upsample share. scales_f32: the scales
 * came as float32, in which the reference computes an output's length. */
static nb_status resize(ox_import *im, nb_value x, const resize_mode *rm, const double *scales, bool scales_f32,
                        const int64_t *sizes, const double *roi)
{
    nb_var_info xi = nb_value_info(B, x);
    for (int d = 0; d < xi.ndim && !nb_is_none(x); d++) {
        int64_t n = xi.shape[d];
        double scale = sizes ? (double)sizes[d] / (double)n : scales[d];
        bool crop = !strcmp(rm->coord, "tf_crop_and_resize");
        if (!sizes && !(scale > 0 && scale < 1e9))
            return ox_node_error(im, NB_ERR_ARG, "has scale %g for dim %d", scales[d], d);
        if (sizes && sizes[d] < 0)
            return ox_node_error(im, NB_ERR_ARG, "has size %lld for dim %d", (long long)sizes[d], d);
        if (n < 0 && (crop || (sizes ? sizes[d] != n : scale != 1)))
            return ox_unsupported(im, "resizes a dim whose size is not known");
        if (n <= 0 || (!crop && (sizes ? sizes[d] == n : scale == 1))) continue;
        int64_t m = sizes ? sizes[d] : (int64_t)floor(scale * (double)n);
        double out_w = scale * (double)n, out_w1 = out_w - 1;
        if (scales_f32 && !sizes) out_w = (float)out_w, out_w1 = (float)((float)out_w - 1.0f);
        if (m > ((int64_t)1 << 31)) return ox_unsupported(im, "resizes a dim to more than 2^31 positions");
        axis_resize a = {d, n, m, scale, out_w, out_w1, {roi ? roi[d] : 0, roi ? roi[xi.ndim + d] - roi[d] : 0}};
        x = resize_axis(im, x, rm, &a);
    }
    return ox_out(im, 0, x);
}

static int taps_of(const char *mode)
{
    return !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "linear") ? 2 : !strcmp(mode, "cubic") ? 4 : 0;
}

/* The floats of input k, count in *n (at most max); false with an error
 * when it is not a constant. */
static bool const_floats(ox_import *im, int k, double *out, int max, int *n, bool *f32)
{
    const nb_tensor *t = ox_const_in(im, k);
    if (!t) return false;
    if (!nb_dtype_is_float(t->dtype) || nb_tensor_numel(t) > max) {
        ox_node_error(im, NB_ERR_FORMAT, "input %d is not a list of at most %d floats", k, max);
        return false;
    }
    *n = (int)nb_tensor_numel(t);
    *f32 = t->dtype == NB_F32;
    for (int i = 0; i < *n; i++) out[i] = nb_tensor_get(t, i);
    return true;
}

static nb_status i_resize(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    int r = xi.ndim;
    const char *mode = ox_attr_s(im, "mode", "nearest");
    resize_mode rm = {.taps = taps_of(mode),
                      .cubic_a = ox_attr_f(im, "cubic_coeff_a", -0.75),
                      .extrapolation = ox_attr_f(im, "extrapolation_value", 0),
                      .exclude_outside = ox_attr_i(im, "exclude_outside", 0) != 0};
    if (!rm.taps || (im->opset < 11 && rm.taps == 4))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has mode '%s'", mode);
    /* Opset 10 mapped positions as Upsample did: asymmetric, nearest taking
     * the position before (PyTorch's nearest). */
    snprintf(rm.nearest, sizeof rm.nearest, "%s",
             im->opset < 11 ? "floor" : ox_attr_s(im, "nearest_mode", "round_prefer_floor"));
    char coord[32];
    snprintf(coord, sizeof coord, "%s",
             im->opset < 11 ? "asymmetric" : ox_attr_s(im, "coordinate_transformation_mode", "half_pixel"));
    rm.coord = coord;
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    bool known_coord = false, known_nearest = false;
    for (size_t i = 0; i < sizeof coords / sizeof *coords; i++) known_coord |= !strcmp(coord, coords[i]);
    for (size_t i = 0; i < sizeof nearests / sizeof *nearests; i++) known_nearest |= !strcmp(rm.nearest, nearests[i]);
    if (!known_coord) return ox_node_error(im, NB_ERR_UNSUPPORTED, "has coordinate_transformation_mode '%s'", coord);
    if (!known_nearest) return ox_node_error(im, NB_ERR_UNSUPPORTED, "has nearest_mode '%s'", rm.nearest);
    double scales[NB_MAX_DIMS], roi[2 * NB_MAX_DIMS];
    int64_t sizes[NB_MAX_DIMS + 1];
    int n_scales = 0, n_sizes = -1, n_roi = 0;
    bool f32 = false, roi_f32 = false;
    int k_scales = im->opset < 11 ? 1 : 2;
    if (ox_has_in(im, k_scales) && !const_floats(im, k_scales, scales, NB_MAX_DIMS, &n_scales, &f32))
        return nb_builder_status(B);
    if (im->opset >= 11 && ox_has_in(im, 3) && (n_sizes = ox_const_ints(im, 3, sizes, NB_MAX_DIMS)) == -2)
        return nb_builder_status(B);
    bool crop = !strcmp(coord, "tf_crop_and_resize");
    if (crop && (!ox_has_in(im, 1) || !const_floats(im, 1, roi, 2 * NB_MAX_DIMS, &n_roi, &roi_f32)))
        return nb_builder_status(B) ? nb_builder_status(B) : ox_node_error(im, NB_ERR_FORMAT, "has no roi");
    if (crop && n_roi != 2 * r)
        return ox_node_error(im, NB_ERR_FORMAT, "has %d roi entries for a rank-%d input", n_roi, r);
    if (n_sizes > 0 && n_scales > 0) return ox_node_error(im, NB_ERR_FORMAT, "has both scales and sizes");
    if (n_sizes > 0 ? n_sizes != r : n_scales != r)
        return ox_node_error(im, NB_ERR_FORMAT, "has %d scales and %d sizes for a rank-%d input", n_scales, n_sizes, r);
    return resize(im, x, &rm, scales, f32, n_sizes > 0 ? sizes : NULL, crop ? roi : NULL);
}

/* Upsample (opsets 7 to 9; deprecated at 10): Resize-10's mapping, its
 * scales an attribute before opset 9. Opset 1's experimental form, with
 * height_scale and width_scale, is not read. */
static nb_status i_upsample(ox_import *im)
{
    nb_var_info xi;
    nb_value x = input0(im, &xi);
    if (nb_is_none(x)) return nb_builder_status(B);
    if (im->opset < 7) return ox_unsupported(im, "is Upsample-1 (experimental: height_scale and width_scale)");
    const char *mode = ox_attr_s(im, "mode", "nearest");
    resize_mode rm = {.taps = taps_of(mode), .coord = "asymmetric", .nearest = "floor"};
    if (!rm.taps || rm.taps == 4) return ox_node_error(im, NB_ERR_UNSUPPORTED, "has mode '%s'", mode);
    double scales[NB_MAX_DIMS];
    int n = 0;
    bool f32 = true;
    if (im->opset < 9) {
        const Onnx__AttributeProto *a = ox_attr(im, "scales");
        if (!a) return ox_node_error(im, NB_ERR_FORMAT, "has no scales attribute");
        n = (int)(a->n_floats < NB_MAX_DIMS + 1 ? a->n_floats : NB_MAX_DIMS + 1);
        for (int i = 0; i < n && i < NB_MAX_DIMS; i++) scales[i] = a->floats[i];
    } else if (!const_floats(im, 1, scales, NB_MAX_DIMS, &n, &f32)) {
        return nb_builder_status(B);
    }
    if (n != xi.ndim) return ox_node_error(im, NB_ERR_FORMAT, "has %d scales for a rank-%d input", n, xi.ndim);
    return resize(im, x, &rm, scales, f32, NULL, NULL);
}

/* ---- Range --------------------------------------------------------------------------- */

/* Range of constant scalars, folded at import into a constant (kept as the
 * node's constant value too, for a Reshape or a Slice that reads it). */
static nb_status i_range(ox_import *im)
{
    const nb_tensor *t[3];
    for (int k = 0; k < 3; k++)
        if (!(t[k] = ox_const_in(im, k))) return nb_builder_status(B);
    nb_dtype dt = t[0]->dtype;
    for (int k = 0; k < 3; k++)
        if (t[k]->dtype != dt || nb_tensor_numel(t[k]) != 1)
            return ox_node_error(im, NB_ERR_FORMAT, "needs three scalars of one dtype");
    double start = nb_tensor_get(t[0], 0), limit = nb_tensor_get(t[1], 0), delta = nb_tensor_get(t[2], 0);
    if (delta == 0) return ox_node_error(im, NB_ERR_ARG, "has delta 0");
    double count = ceil((limit - start) / delta);
    if (!(count < 1e9)) return ox_unsupported(im, "makes more than 10^9 elements");
    int64_t n = count > 0 ? (int64_t)count : 0;
    nb_tensor *out, *kept;
    if (nb_tensor_new(&out, dt, 1, &n)) return nomem(im);
    for (int64_t i = 0; i < n; i++) nb_tensor_set(out, i, start + (double)i * delta);
    if (nb_tensor_clone(&kept, out)) {
        nb_tensor_release(out);
        return nomem(im);
    }
    nb_status st = ox_set_const(im, 0, kept);
    return st ? st : ox_out(im, 0, constant_of(im, out));
}

/* ---- Einsum -------------------------------------------------------------------------- *
 *
 * Each operand's dims get a letter (those under "..." the characters '0'
 * on, right-aligned as they broadcast). An operand's repeated letter is a
 * diagonal, taken by a gather; a letter no other operand nor the output
 * has is summed out; two operands are then one batched matmul, the letters
 * both have and the result keeps as its batch, those only both have as its
 * inner dim. Operands are taken left to right. */

typedef struct es_term {
    int n;
    char c[NB_MAX_DIMS];
} es_term;

/* Parses a term of s[0..len) for an operand of `rank` dims (-1: the
 * output, whose "..." takes all n_ell); false when it does not fit. *ell:
 * how many dims its "..." stands for. */
static bool es_parse(const char *s, size_t len, int rank, int n_ell, es_term *t, int *ell)
{
    bool dots = false;
    int letters = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (dots || i + 3 > len || strncmp(s + i, "...", 3)) return false;
            dots = true, i += 2;
        } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')) {
            letters++;
        } else {
            return false;
        }
    }
    int e = !dots ? 0 : rank < 0 ? n_ell : rank - letters;
    if (e < 0 || (rank >= 0 && letters + e != rank) || letters + e > NB_MAX_DIMS) return false;
    t->n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '.') {
            t->c[t->n++] = s[i];
            continue;
        }
        for (int j = 0; j < e; j++) t->c[t->n++] = (char)('0' + n_ell - e + j);
        i += 2;
    }
    *ell = e;
    return true;
}

static int es_find(const es_term *t, char c)
{
    for (int d = 0; d < t->n; d++)
        if (t->c[d] == c) return d;
    return -1;
}

/* Takes the diagonal of each letter that x's term repeats: the two dims
 * moved last, merged, and every (n + 1)th element gathered. */
static nb_value es_diagonals(ox_import *im, nb_value x, es_term *t)
{
    for (int q = 1; q < t->n && !nb_is_none(x); q++) {
        int p = es_find(t, t->c[q]);
        if (p == q) continue;
        nb_var_info xi = nb_value_info(B, x);
        int64_t n = xi.shape[p], perm[NB_MAX_DIMS], shape[NB_MAX_DIMS];
        if (n < 0 || xi.shape[q] != n) {
            ox_unsupported(im, "takes a diagonal of dims whose sizes are unknown or differ");
            return NB_NONE;
        }
        es_term rest = {0};
        for (int d = 0; d < t->n; d++)
            if (d != p && d != q) perm[rest.n] = d, shape[rest.n] = 0, rest.c[rest.n++] = t->c[d];
        perm[rest.n] = p, perm[rest.n + 1] = q, shape[rest.n] = n * n;
        int64_t *idx = nb_malloc((size_t)n * sizeof *idx + 1);
        if (!idx) {
            nomem(im);
            return NB_NONE;
        }
        for (int64_t i = 0; i < n; i++) idx[i] = i * (n + 1);
        nb_value iv = index_const(im, n, idx);
        nb_free(idx);
        if (nb_is_none(iv)) return NB_NONE;
        x = nb_reshape(B, permute(im, x, t->n, perm), rest.n + 1, shape);
        x = nb_gather(B, x, iv, rest.n);
        rest.c[rest.n++] = t->c[p];
        *t = rest;
        q = 0; /* the term changed: look again */
    }
    return x;
}

/* Sums out the letters of t that `keep` does not hold. */
static nb_value es_sum_out(ox_import *im, nb_value x, es_term *t, const bool *keep)
{
    int64_t axes[NB_MAX_DIMS];
    int n = 0;
    es_term kept = {0};
    for (int d = 0; d < t->n; d++)
        if (keep[(unsigned char)t->c[d]]) kept.c[kept.n++] = t->c[d];
        else axes[n++] = d;
    if (!n) return x;
    *t = kept;
    return nb_reduce_sum(B, x, n, axes, false);
}

/* a times b over the letters both have and `keep` does not. */
static nb_value es_contract(ox_import *im, nb_value a, es_term *ta, nb_value b, const es_term *tb, const bool *keep)
{
    nb_var_info ai = nb_value_info(B, a), bi = nb_value_info(B, b);
    int64_t pa[NB_MAX_DIMS], pb[NB_MAX_DIMS], shape[NB_MAX_DIMS], nbatch = 1, nl = 1, nk = 1, nr = 1;
    es_term out = {0};
    int na = 0, nb = 0;
    if (!all_known(&ai) || !all_known(&bi)) {
        ox_unsupported(im, "multiplies operands whose sizes are not all known");
        return NB_NONE;
    }
    for (int d = 0; d < ta->n; d++) { /* batch letters */
        int e = es_find(tb, ta->c[d]);
        if (e < 0 || !keep[(unsigned char)ta->c[d]]) continue;
        if (ai.shape[d] != bi.shape[e]) {
            ox_unsupported(im, "broadcasts a dim of size 1 against a larger one");
            return NB_NONE;
        }
        pa[na++] = d, pb[nb++] = e, shape[out.n] = ai.shape[d], out.c[out.n++] = ta->c[d], nbatch *= ai.shape[d];
    }
    for (int d = 0; d < ta->n; d++) /* a's own letters */
        if (es_find(tb, ta->c[d]) < 0)
            pa[na++] = d, shape[out.n] = ai.shape[d], out.c[out.n++] = ta->c[d], nl *= ai.shape[d];
    for (int d = 0; d < ta->n; d++) { /* contracted letters */
        int e = es_find(tb, ta->c[d]);
        if (e < 0 || keep[(unsigned char)ta->c[d]]) continue;
        if (ai.shape[d] != bi.shape[e]) {
            ox_unsupported(im, "broadcasts a dim of size 1 against a larger one");
            return NB_NONE;
        }
        pa[na++] = d, pb[nb++] = e, nk *= ai.shape[d];
    }
    for (int e = 0; e < tb->n; e++) /* b's own letters */
        if (es_find(ta, tb->c[e]) < 0)
            pb[nb++] = e, shape[out.n] = bi.shape[e], out.c[out.n++] = tb->c[e], nr *= bi.shape[e];
    nb_value a3 = nb_reshape(B, permute(im, a, ta->n, pa), 3, (int64_t[]){nbatch, nl, nk});
    nb_value b3 = nb_reshape(B, permute(im, b, tb->n, pb), 3, (int64_t[]){nbatch, nk, nr});
    *ta = out;
    return nb_reshape(B, nb_matmul(B, a3, b3, 0), out.n, shape);
}

static nb_status i_einsum(ox_import *im)
{
    const char *eq = ox_attr_s(im, "equation", NULL);
    const Onnx__AttributeProto *attr = ox_attr(im, "equation");
    if (!eq || !attr) return ox_node_error(im, NB_ERR_FORMAT, "has no equation");
    char s[256];
    size_t len = 0;
    for (size_t i = 0; i < attr->s.len; i++) /* ox_attr_s keeps 63 characters; spaces mean nothing */
        if (attr->s.data[i] != ' ') {
            if (len + 1 >= sizeof s) return ox_unsupported(im, "has an equation of more than 255 characters");
            s[len++] = (char)attr->s.data[i];
        }
    s[len] = 0;
    int n_in = (int)im->node->n_input;
    if (n_in < 1 || n_in > MAX_PARTS) return ox_unsupported(im, "has no operands, or more than 64");
    nb_value xs[MAX_PARTS];
    es_term ts[MAX_PARTS], out;
    const char *arrow = strstr(s, "->"), *lhs_end = arrow ? arrow : s + len, *p = s;
    int n_ell = 0, ell[MAX_PARTS];
    for (int k = 0; k < n_in; k++) {
        if (nb_is_none(xs[k] = ox_in(im, k))) return nb_builder_status(B);
        const char *comma = memchr(p, ',', (size_t)(lhs_end - p)), *end = comma ? comma : lhs_end;
        bool fits =
            (k < n_in - 1) == (comma != NULL) && es_parse(p, (size_t)(end - p), ox_rank(im, xs[k]), 0, &ts[k], &ell[k]);
        if (!fits)
            return ox_node_error(im, NB_ERR_FORMAT, "equation '%s' does not fit its %d operands' ranks", s, n_in);
        if (ell[k] > n_ell) n_ell = ell[k];
        p = end + 1;
    }
    /* Now the widest "..." is known, number every operand's from its end. */
    p = s;
    for (int k = 0; k < n_in; k++) {
        const char *comma = memchr(p, ',', (size_t)(lhs_end - p)), *end = comma ? comma : lhs_end;
        es_parse(p, (size_t)(end - p), ox_rank(im, xs[k]), n_ell, &ts[k], &ell[k]);
        p = end + 1;
    }
    int count[128] = {0};
    for (int k = 0; k < n_in; k++)
        for (int d = 0; d < ts[k].n; d++) count[(unsigned char)ts[k].c[d]]++;
    if (arrow) {
        int e;
        if (!es_parse(arrow + 2, strlen(arrow + 2), -1, n_ell, &out, &e))
            return ox_node_error(im, NB_ERR_FORMAT, "equation '%s' has an output it cannot have", s);
    } else { /* implicit: "..." then the letters met once, in order */
        out.n = 0;
        for (int j = 0; j < n_ell; j++) out.c[out.n++] = (char)('0' + j);
        for (int c = 'A'; c <= 'z'; c++)
            if (count[c] == 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
                if (out.n == NB_MAX_DIMS) return ox_unsupported(im, "has more output dims than nabla has");
                out.c[out.n++] = (char)c;
            }
    }
    for (int d = 0; d < out.n; d++)
        if (!count[(unsigned char)out.c[d]] || es_find(&out, out.c[d]) != d)
            return ox_node_error(im, NB_ERR_FORMAT, "equation '%s' has an output letter twice or from no operand", s);
    nb_value acc = NB_NONE;
    es_term ta = {0};
    for (int k = 0; k < n_in && !nb_builder_status(B); k++) {
        bool keep[128] = {false};
        for (int d = 0; d < out.n; d++) keep[(unsigned char)out.c[d]] = true;
        for (int j = k + 1; j < n_in; j++)
            for (int d = 0; d < ts[j].n; d++) keep[(unsigned char)ts[j].c[d]] = true;
        bool keep_b[128];
        memcpy(keep_b, keep, sizeof keep);
        if (k) /* the operand's own letters may still meet acc's */
            for (int d = 0; d < ta.n; d++) keep_b[(unsigned char)ta.c[d]] = true;
        nb_value x = es_diagonals(im, xs[k], &ts[k]);
        if (nb_is_none(x)) break;
        x = es_sum_out(im, x, &ts[k], keep_b);
        if (!k) {
            acc = x, ta = ts[0];
            continue;
        }
        bool keep_a[128];
        memcpy(keep_a, keep, sizeof keep);
        for (int d = 0; d < ts[k].n; d++) keep_a[(unsigned char)ts[k].c[d]] = true;
        acc = es_sum_out(im, acc, &ta, keep_a);
        acc = es_contract(im, acc, &ta, x, &ts[k], keep);
    }
    if (nb_builder_status(B) || nb_is_none(acc)) return nb_builder_status(B) ? nb_builder_status(B) : NB_ERR_ARG;
    int64_t perm[NB_MAX_DIMS];
    for (int d = 0; d < out.n; d++) perm[d] = es_find(&ta, out.c[d]);
    return ox_out(im, 0, permute(im, acc, out.n, perm));
}

/* clang-format off */
const ox_importer ox_imports_shape[] = {
    OX_FN(Flatten, flatten), OX_FN(Transpose, transpose), OX_FN(Squeeze, squeeze), OX_FN(Unsqueeze, unsqueeze),
    OX_FN(Concat, concat), OX_FN(Split, split), OX_FN(Slice, slice), OX_FN(Expand, expand), OX_FN(Tile, tile),
    OX_FN(Pad, pad), OX_FN(ReverseSequence, reverse_sequence), OX_FN(DepthToSpace, depth_to_space),
    OX_FN(SpaceToDepth, space_to_depth), OX_FN(Resize, resize), OX_FN(Upsample, upsample), OX_FN(Range, range),
    OX_FN(Einsum, einsum),
    {0},
};
/* clang-format on */

#endif
