/* Tensor arrays as tensors indexed along axis 0 (see nabla/control.h).
 *
 * A write is a masked blend, out = a * (1 - m) + m * x with m the one-hot
 * row of the index, rather than an op of its own: it costs a pass over the
 * array, and in exchange its VJP and JVP are those of mul and add, already
 * proven, and the array stays a plain value that loops can carry. */
#include "nabla/control.h"
#include "nabla/ops.h"

nb_value nb_array_new(nb_builder *b, int64_t length, nb_dtype dtype, int ndim, const int64_t *elem_shape)
{
    if (length < 1 || ndim < 0 || ndim + 1 > NB_MAX_DIMS) {
        nb_builder_fail(b, NB_ERR_ARG,
                        "array_new: %lld elements of rank %d (it needs at least one element, rank below %d)",
                        (long long)length, ndim, NB_MAX_DIMS);
        return NB_NONE;
    }
    int64_t shape[NB_MAX_DIMS] = {length};
    for (int d = 0; d < ndim; d++) shape[d + 1] = elem_shape[d];
    return nb_fill_constant(b, dtype, ndim + 1, shape, 0);
}

static bool check_index(nb_builder *b, nb_value array, nb_value i, const char *who)
{
    if (nb_builder_status(b)) return false;
    nb_var_info a = nb_value_info(b, array), ii = nb_value_info(b, i);
    if (a.ndim < 1 || a.shape[0] < 1) {
        nb_builder_fail(b, NB_ERR_SHAPE, "%s: the array has no element axis", who);
        return false;
    }
    if (ii.dtype != NB_I64 || nb_shape_numel(ii.ndim, ii.shape) != 1) {
        char s[NB_SHAPE_STR_MAX];
        nb_builder_fail(b, NB_ERR_DTYPE, "%s: the index must be int64 with one element, not %s %s", who,
                        nb_dtype_name(ii.dtype), nb_shape_str(s, sizeof s, ii.ndim, ii.shape));
        return false;
    }
    return true;
}

/* The one-hot row of index i, shaped to broadcast against the array. */
static nb_value index_mask(nb_builder *b, nb_value array, nb_value i)
{
    nb_var_info a = nb_value_info(b, array);
    int64_t shape[NB_MAX_DIMS] = {a.shape[0]};
    for (int d = 1; d < a.ndim; d++) shape[d] = 1;
    nb_value m = nb_one_hot(b, nb_reshape(b, i, 1, (const int64_t[]){1}), a.shape[0]);
    return nb_reshape(b, nb_cast(b, m, a.dtype), a.ndim, shape);
}

nb_value nb_array_write(nb_builder *b, nb_value array, nb_value i, nb_value x)
{
    if (!check_index(b, array, i, "array_write")) return NB_NONE;
    nb_value m = index_mask(b, array, i);
    nb_value keep = nb_scale(b, m, -1, 1);
    return nb_add(b, nb_mul(b, array, keep), nb_mul(b, m, nb_unsqueeze(b, x, 1, (const int64_t[]){0})));
}

nb_value nb_array_read(nb_builder *b, nb_value array, nb_value i)
{
    if (!check_index(b, array, i, "array_read")) return NB_NONE;
    nb_value row = nb_gather(b, array, nb_reshape(b, i, 1, (const int64_t[]){1}), 0);
    return nb_squeeze(b, row, 1, (const int64_t[]){0});
}

nb_value nb_array_length(nb_builder *b, nb_value array)
{
    nb_var_info a = nb_value_info(b, array);
    if (a.ndim < 1) {
        nb_builder_fail(b, NB_ERR_SHAPE, "array_length: the value has no element axis");
        return NB_NONE;
    }
    return nb_fill_constant(b, NB_I64, 1, (const int64_t[]){1}, (double)a.shape[0]);
}
