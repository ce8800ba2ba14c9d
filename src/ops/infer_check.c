#include <stdio.h>
#include "infer_check.h"

const char *nb_info_shape(char *buf, const nb_var_info *v)
{
    return nb_shape_str(buf, NB_SHAPE_STR_MAX, v->ndim, v->shape);
}

nb_status nb_check_float(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v)
{
    if (v->dtype != NB_F32 && v->dtype != NB_F64)
        return nb_error(NB_ERR_DTYPE, "%s: %s has dtype %s; it takes float32 or float64", ctx->label, slot,
                        nb_dtype_name(v->dtype));
    return NB_OK;
}

nb_status nb_check_same_dtype(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, const char *ref_slot,
                              const nb_var_info *ref)
{
    if (v->dtype != ref->dtype)
        return nb_error(NB_ERR_DTYPE, "%s: %s has dtype %s but %s has dtype %s", ctx->label, slot,
                        nb_dtype_name(v->dtype), ref_slot, nb_dtype_name(ref->dtype));
    return NB_OK;
}

const char *nb_dtype_list(char *buf, size_t size, unsigned dtypes)
{
    size_t u = 0;
    buf[0] = '\0';
    for (int t = 0; t < NB_DTYPE_COUNT && u < size; t++)
        if (dtypes & NB_DT(t))
            u += (size_t)snprintf(buf + u, size - u, "%s%s", u ? ", " : "", nb_dtype_name((nb_dtype)t));
    return buf;
}

nb_status nb_check_dtypes(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, unsigned dtypes)
{
    if (dtypes & NB_DT(v->dtype)) return NB_OK;
    char list[128];
    return nb_error(NB_ERR_DTYPE, "%s: %s has dtype %s but it takes %s", ctx->label, slot, nb_dtype_name(v->dtype),
                    nb_dtype_list(list, sizeof list, dtypes));
}

nb_status nb_check_axis(const nb_op_ctx *ctx, const nb_var_info *x, int *axis)
{
    int64_t a = nb_attr_int(ctx, "axis");
    if (x->ndim == 0 || a < -x->ndim || a >= x->ndim) {
        char xs[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_ARG, "%s: axis %lld is out of range for X of shape %s", ctx->label, (long long)a,
                        nb_info_shape(xs, x));
    }
    *axis = (int)(a < 0 ? a + x->ndim : a);
    return NB_OK;
}
