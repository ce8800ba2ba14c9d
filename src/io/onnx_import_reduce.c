/* ONNX's reductions and the ops that index into a tensor (Gather and its
 * kin) as nabla ops. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

static nb_status i_reduce_sum(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = ox_axes(im, axes);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    if (n <= 0 && ox_attr_i(im, "noop_with_empty_axes", 0)) return ox_out(im, 0, x); /* none, or an empty list */
    return ox_out(im, 0, nb_reduce_sum(B, x, n < 0 ? 0 : n, axes, ox_attr_i(im, "keepdims", 1) != 0));
}

static nb_status i_reduce_mean(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t axes[NB_MAX_DIMS];
    int n = ox_attr_list(im, "axes", axes, NB_MAX_DIMS);
    if (n > NB_MAX_DIMS || nb_is_none(x)) return n > NB_MAX_DIMS ? ox_unsupported(im, "has too many axes") : nb_builder_status(B);
    return ox_out(im, 0, nb_reduce_mean(B, x, n < 0 ? 0 : n, axes, ox_attr_i(im, "keepdims", 1) != 0));
}

/* Gather: nabla's gather takes 1-D indices; a table [V, D] gathered along
 * axis 0 by indices of any shape is an embedding lookup. */
static nb_status i_gather(ox_import *im)
{
    nb_value x = ox_in(im, 0), idx = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    int axis = (int)ox_attr_i(im, "axis", 0), ri = ox_rank(im, idx);
    if (ri == 1) return ox_out(im, 0, nb_gather(B, x, idx, axis));
    if (ox_rank(im, x) == 2 && (axis == 0 || axis == -2) && ri > 1) return ox_out(im, 0, nb_embedding(B, x, idx, -1));
    return ox_unsupported(im, "gathers with indices that are not 1-D from a tensor that is not a [V, D] table");
}

const ox_importer ox_imports_reduce[] = {
    {"ReduceSum", 0, 0, i_reduce_sum}, {"ReduceMean", 0, 0, i_reduce_mean}, {"Gather", 0, 0, i_gather},
    {0},
};

#endif
