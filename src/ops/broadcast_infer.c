/* Broadcast shape inference with errors that name the op and the shapes. */
#include <stdio.h>
#include "broadcast_infer.h"
#include "core/tensor_internal.h"

nb_status nb_infer_broadcast(const nb_op_ctx *ctx, int n, const int *slots, nb_var_info *out)
{
    int nd = 0;
    int64_t shape[NB_MAX_DIMS];
    bool ok = true;
    for (int k = 0; k < n && ok; k++) {
        const nb_var_info *v = nb_in_info(ctx, slots[k], 0);
        if (k == 0) {
            nd = v->ndim;
            for (int d = 0; d < nd; d++) shape[d] = v->shape[d];
            continue;
        }
        /* The same shape, the usual case, is settled without the general rule. */
        if (!nb_shape_equal_inline(v->ndim, v->shape, nd, shape))
            ok = nb_broadcast_shapes(nd, shape, v->ndim, v->shape, &nd, shape) == NB_OK;
    }
    if (!ok) {
        char msg[1024], s[NB_SHAPE_STR_MAX];
        size_t u = 0;
        for (int k = 0; k < n && u < sizeof msg; k++) {
            const nb_var_info *v = nb_in_info(ctx, slots[k], 0);
            const char *sep = k == 0 ? "" : (n == 2 ? " with " : (k == n - 1 ? " and " : ", "));
            u += (size_t)snprintf(msg + u, sizeof msg - u, "%s%s of shape %s", sep, ctx->def->inputs[slots[k]].name,
                                  nb_shape_str(s, sizeof s, v->ndim, v->shape));
        }
        return nb_error(NB_ERR_SHAPE, "%s: cannot broadcast %s", ctx->label, msg);
    }
    out->ndim = nd;
    for (int d = 0; d < nd; d++) out->shape[d] = shape[d];
    return NB_OK;
}

nb_status nb_infer_same_dtype(const nb_op_ctx *ctx, int a, int b)
{
    nb_dtype da = nb_in_info(ctx, a, 0)->dtype, db = nb_in_info(ctx, b, 0)->dtype;
    if (da == db) return NB_OK;
    return nb_error(NB_ERR_DTYPE, "%s: %s is %s but %s is %s; they must have the same dtype", ctx->label,
                    ctx->def->inputs[a].name, nb_dtype_name(da), ctx->def->inputs[b].name, nb_dtype_name(db));
}
