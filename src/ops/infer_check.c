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
