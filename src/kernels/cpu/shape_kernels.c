/* The shape family's CPU kernels that move elements by position: reshape
 * and its kin (one run), transpose, expand, slice, pad and pad_grad, and the
 * joining ops (concat, stack, split); the index ops are in index.c. They
 * call the byte movers of shape.c and share the helpers here; shape.c's
 * table lists them.
 *
 * Every kernel copies into its output: views belong to the tensor API, while
 * op outputs own contiguous storage that later ops may overwrite in place.
 * Shape inference has checked the parameters against the very shapes the
 * kernel gets, so kernels only map axes that count from the end. */
#include <string.h>
#include "core/tensor_internal.h"
#include "nabla/device.h"
#include "shape.h"

/* ---- helpers ------------------------------------------------------------------- */

static size_t tensor_bytes(const nb_tensor *t) { return (size_t)nb_tensor_numel(t) * nb_dtype_size(t->dtype); }

bool nb_cpu_shape_overlap(const nb_tensor *a, const nb_tensor *b)
{
    const char *pa = nb_tensor_data(a), *pb = nb_tensor_data(b);
    size_t na = tensor_bytes(a), nbytes = tensor_bytes(b);
    return na && nbytes && pa < pb + nbytes && pb < pa + na;
}

nb_status nb_cpu_shape_out_begin(const nb_kernel_ctx *k, nb_tensor *out, nb_cpu_shape_out *b)
{
    *b = (nb_cpu_shape_out){.t = out, .data = nb_tensor_data(out)};
    int n = k->in_begin[NB_MAX_SLOTS];
    for (int i = 0; i < n; i++) {
        if (!k->in[i] || !nb_cpu_shape_overlap(out, k->in[i])) continue;
        if (!(b->scratch = nb_malloc(tensor_bytes(out))))
            return nb_error(NB_ERR_NOMEM, "%s: out of memory for a scratch copy of the output", k->label);
        b->data = b->scratch;
        break;
    }
    return NB_OK;
}

void nb_cpu_shape_out_end(nb_cpu_shape_out *b)
{
    if (!b->scratch) return;
    memcpy(nb_tensor_data(b->t), b->scratch, tensor_bytes(b->t));
    nb_free(b->scratch);
    b->scratch = NULL;
}

/* Out (contiguous, its own shape) = the view of X with element strides st,
 * starting `offset` elements in. */
static nb_status strided(const nb_kernel_ctx *k, nb_tensor *x, nb_tensor *o, int64_t offset, const int64_t *st)
{
    nb_cpu_shape_out ob;
    nb_status s = nb_cpu_shape_out_begin(k, o, &ob);
    if (s) return s;
    size_t el = nb_dtype_size(x->dtype);
    nb_cpu_strided_copy(ob.data, (const char *)nb_tensor_data(x) + (size_t)offset * el, o->ndim, o->shape, st, el);
    nb_cpu_shape_out_end(&ob);
    return NB_OK;
}

/* ---- reshape, flatten, squeeze, unsqueeze, reshape_as, transpose, expand ------- */

/* Ops that keep the element order: the whole tensor is one run. */
static nb_status run_copy(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    void *s = nb_tensor_data(x), *d = nb_tensor_data(o);
    size_t bytes = tensor_bytes(x);
    if (d != s && bytes) memmove(d, s, bytes);
    return NB_OK;
}

static nb_status run_transpose(const nb_kernel_ctx *k)
{
    const nb_transpose_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    int64_t xs[NB_MAX_DIMS], st[NB_MAX_DIMS];
    nb_contiguous_strides(x->ndim, x->shape, xs);
    for (int i = 0; i < x->ndim; i++) st[i] = xs[nb_shapeparam_axis(p->perm[i], x->ndim)];
    return strided(k, x, o, 0, st);
}

/* expand, expand_as: broadcast dims read the same element again (stride 0). */
static nb_status run_expand(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    int64_t xs[NB_MAX_DIMS], st[NB_MAX_DIMS];
    nb_contiguous_strides(x->ndim, x->shape, xs);
    int lead = o->ndim - x->ndim;
    for (int i = 0; i < o->ndim; i++) st[i] = i < lead || x->shape[i - lead] == 1 ? 0 : xs[i - lead];
    return strided(k, x, o, 0, st);
}

/* ---- slice, pad, pad_grad --------------------------------------------------------- */

/* Dims not in axes are taken whole: their stride stays the contiguous one. */
static nb_status run_slice(const nb_kernel_ctx *k)
{
    const nb_slice_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    if (nb_tensor_numel(o) == 0) return NB_OK;
    int64_t xs[NB_MAX_DIMS], st[NB_MAX_DIMS], off = 0;
    nb_contiguous_strides(x->ndim, x->shape, xs);
    memcpy(st, xs, sizeof st);
    for (int i = 0; i < p->n; i++) {
        int d = nb_shapeparam_axis(p->axes[i], x->ndim);
        int64_t first, count;
        nb_slice_range(x->shape[d], p->starts[i], p->ends[i], p->strides[i], &first, &count);
        off += first * xs[d];
        st[d] = xs[d] * p->strides[i];
    }
    return strided(k, x, o, off, st);
}

static nb_status run_pad(const nb_kernel_ctx *k)
{
    const nb_pad_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0), *o = nb_kout(k, 0, 0);
    union {
        double f;
        int64_t i;
        unsigned char bytes[8];
    } fill; /* aligned for any dtype */
    nb_store(x->dtype, &fill, 0, p->value);
    nb_cpu_shape_out ob;
    nb_status st = nb_cpu_shape_out_begin(k, o, &ob);
    if (st) return st;
    st = nb_cpu_pad(ob.data, nb_tensor_data(x), x->ndim, x->shape, p->paddings, p->mode, fill.bytes,
                    nb_dtype_size(x->dtype));
    if (st) {
        nb_free(ob.scratch);
        return nb_error(st, "%s: out of memory", k->label);
    }
    nb_cpu_shape_out_end(&ob);
    return NB_OK;
}

static nb_status run_pad_grad(const nb_kernel_ctx *k)
{
    const nb_pad_params *p = k->params;
    nb_tensor *dy = nb_kin(k, 0, 0), *dx = nb_kout(k, 0, 0);
    nb_cpu_shape_out ob;
    nb_status st = nb_cpu_shape_out_begin(k, dx, &ob);
    if (st) return st;
    st = nb_cpu_pad_grad(dx->dtype, ob.data, nb_tensor_data(dy), dx->ndim, dx->shape, p->paddings, p->mode);
    if (st) {
        nb_free(ob.scratch);
        return st == NB_ERR_DTYPE ? nb_error(st, "%s: no kernel for %s", k->label, nb_dtype_name(dx->dtype))
                                  : nb_error(st, "%s: out of memory", k->label);
    }
    nb_cpu_shape_out_end(&ob);
    return NB_OK;
}

/* ---- concat, stack, split ------------------------------------------------------- */

/* Views every input as [outer, its rows], the dims before `axis` against
 * the rest, and joins the rows. Stack is the case where each input brings a
 * new dim of size 1 at axis. */
static nb_status join(const nb_kernel_ctx *k, int axis)
{
    int n = nb_kin_count(k, 0);
    nb_tensor *o = nb_kout(k, 0, 0), *x0 = nb_kin(k, 0, 0);
    size_t el = nb_dtype_size(o->dtype);
    const void **src = nb_malloc((size_t)n * sizeof *src);
    size_t *row_bytes = nb_malloc((size_t)n * sizeof *row_bytes);
    nb_cpu_shape_out ob;
    nb_status st =
        !src || !row_bytes ? nb_error(NB_ERR_NOMEM, "%s: out of memory", k->label) : nb_cpu_shape_out_begin(k, o, &ob);
    if (!st) {
        int64_t outer = nb_cpu_shape_product(x0->shape, 0, axis);
        for (int i = 0; i < n; i++) {
            nb_tensor *x = nb_kin(k, 0, i);
            src[i] = nb_tensor_data(x);
            row_bytes[i] = (size_t)nb_cpu_shape_product(x->shape, axis, x->ndim) * el;
        }
        nb_cpu_concat(ob.data, n, src, row_bytes, outer);
        nb_cpu_shape_out_end(&ob);
    }
    nb_free(src);
    nb_free(row_bytes);
    return st;
}

static nb_status run_concat(const nb_kernel_ctx *k)
{
    const nb_shape_axis_params *p = k->params;
    return join(k, nb_shapeparam_axis(p->axis, nb_kin(k, 0, 0)->ndim));
}

/* Stack's axis counts in the output, which has one dim more. */
static nb_status run_stack(const nb_kernel_ctx *k)
{
    const nb_shape_axis_params *p = k->params;
    return join(k, nb_shapeparam_axis(p->axis, nb_kin(k, 0, 0)->ndim + 1));
}

static nb_status run_split(const nb_kernel_ctx *k)
{
    const nb_shape_axis_params *p = k->params;
    nb_tensor *x = nb_kin(k, 0, 0);
    int n = nb_kout_count(k, 0), axis = nb_shapeparam_axis(p->axis, x->ndim), i = 0;
    size_t el = nb_dtype_size(x->dtype);
    void **dst = nb_malloc((size_t)n * sizeof *dst);
    size_t *row_bytes = nb_malloc((size_t)n * sizeof *row_bytes);
    nb_cpu_shape_out *ob = nb_calloc((size_t)n, sizeof *ob);
    nb_status st = !dst || !row_bytes || !ob ? nb_error(NB_ERR_NOMEM, "%s: out of memory", k->label) : NB_OK;
    for (; !st && i < n; i++) {
        nb_tensor *o = nb_kout(k, 0, i);
        if ((st = nb_cpu_shape_out_begin(k, o, &ob[i]))) break;
        dst[i] = ob[i].data;
        row_bytes[i] = (size_t)nb_cpu_shape_product(o->shape, axis, o->ndim) * el;
    }
    if (!st) nb_cpu_split(dst, n, nb_tensor_data(x), row_bytes, nb_cpu_shape_product(x->shape, 0, axis));
    /* Scratch copies go back only once the source has been read in full. */
    for (int j = 0; j < i; j++) {
        if (st) nb_free(ob[j].scratch);
        else nb_cpu_shape_out_end(&ob[j]);
    }
    nb_free(dst);
    nb_free(row_bytes);
    nb_free(ob);
    return st;
}

/* ---- definitions ------------------------------------------------------------------ */

/* Element moves look at no value, so every dtype takes them, except
 * pad_grad, which adds. */
#define SHAPE_KERNEL(name, dts, fn)                                                                              \
    const nb_kernel_def nb_cpu_kernel_##name = {                                                                 \
        .op = #name, .device = NB_DEVICE_CPU, .dtypes = (dts), .provider = "nabla", .run = (fn)}

SHAPE_KERNEL(reshape, NB_DT_ALL, run_copy);
SHAPE_KERNEL(flatten, NB_DT_ALL, run_copy);
SHAPE_KERNEL(squeeze, NB_DT_ALL, run_copy);
SHAPE_KERNEL(unsqueeze, NB_DT_ALL, run_copy);
SHAPE_KERNEL(reshape_as, NB_DT_ALL, run_copy);
SHAPE_KERNEL(transpose, NB_DT_ALL, run_transpose);
SHAPE_KERNEL(expand, NB_DT_ALL, run_expand);
SHAPE_KERNEL(expand_as, NB_DT_ALL, run_expand);
SHAPE_KERNEL(slice, NB_DT_ALL, run_slice);
SHAPE_KERNEL(pad, NB_DT_ALL, run_pad);
SHAPE_KERNEL(pad_grad, NB_DT_FLOAT, run_pad_grad);
SHAPE_KERNEL(concat, NB_DT_ALL, run_concat);
SHAPE_KERNEL(stack, NB_DT_ALL, run_stack);
SHAPE_KERNEL(split, NB_DT_ALL, run_split);
