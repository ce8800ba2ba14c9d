/* Reading an ONNX node's arguments for onnx_import_*.c: attribute lists,
 * constant int inputs, the axes that moved from attribute to input at
 * opset 13, and the rows that need only a nabla op's name. */
#ifdef NABLA_HAVE_ONNX
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

nb_status ox_unsupported(ox_import *im, const char *why) { return ox_node_error(im, NB_ERR_UNSUPPORTED, "%s", why); }

int ox_rank(ox_import *im, nb_value v) { return nb_value_info(im->b, v).ndim; }

/* Reads ints (an attribute, or a constant int tensor) into out[0..max). */
int ox_attr_list(ox_import *im, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = ox_attr(im, name);
    if (!a) return -1;
    int n = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
    if (n) memcpy(out, a->ints, (size_t)n * sizeof *out); /* an empty list has no array */
    return (int)a->n_ints > max ? max + 1 : n;
}

int ox_const_ints(ox_import *im, int k, int64_t *out, int max)
{
    const nb_tensor *t = ox_const_in(im, k);
    if (!t) return -2;
    if (t->dtype != NB_I64 && t->dtype != NB_I32) {
        ox_unsupported(im, "its shape or axes input is not an integer tensor");
        return -2;
    }
    if (!nb_tensor_is_contiguous(t)) {
        ox_unsupported(im, "its shape or axes input is not a contiguous tensor");
        return -2;
    }
    /* Read as integers: through a double, a value beyond 2^63 would not
     * convert back (a file may hold any int64). */
    int64_t n = nb_tensor_numel(t);
    const void *d = nb_tensor_data(t);
    for (int64_t i = 0; i < n && i < max; i++)
        out[i] = t->dtype == NB_I64 ? ((const int64_t *)d)[i] : ((const int32_t *)d)[i];
    return n > max ? max + 1 : (int)n;
}

/* The axes of Squeeze, Unsqueeze and ReduceSum: an input from opset 13, an
 * attribute before; -1 when there are none (all dims). */
int ox_axes(ox_import *im, int64_t *axes)
{
    int n = im->opset >= 13 ? (ox_has_in(im, 1) ? ox_const_ints(im, 1, axes, NB_MAX_DIMS) : -1)
                            : ox_attr_list(im, "axes", axes, NB_MAX_DIMS);
    if (n > NB_MAX_DIMS) {
        ox_unsupported(im, "has more axes than nabla's dims");
        return -2;
    }
    return n;
}

nb_status ox_same(ox_import *im, const char *op, int n_in)
{
    nb_value in[4];
    for (int k = 0; k < n_in; k++)
        if (nb_is_none(in[k] = ox_in(im, k))) return nb_builder_status(im->b);
    return ox_out(im, 0, nb_emit1(im->b, op, NB_VALUES_N(n_in, in), NB_NO_ATTRS));
}

nb_value ox_const_scalar(ox_import *im, nb_dtype dt, double v)
{
    nb_tensor *t;
    if (nb_tensor_scalar(&t, dt, v)) {
        ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        return NB_NONE;
    }
    nb_value c = nb_constant(im->b, t);
    nb_tensor_release(t);
    return c;
}

#endif
