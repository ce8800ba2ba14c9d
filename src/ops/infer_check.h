/* Checks that shape-inference functions of several op families share. Each
 * returns NB_OK or an error naming the op (ctx->label) and the slot. */
#ifndef NABLA_INFER_CHECK_H
#define NABLA_INFER_CHECK_H

#include <stddef.h>
#include "nabla/op.h"

/* The shape of v as "[2, -1, 3]" in buf (NB_SHAPE_STR_MAX bytes). */
const char *nb_info_shape(char *buf, const nb_var_info *v);
/* v (the value in `slot`) is float32 or float64. */
nb_status nb_check_float(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v);
/* v has the dtype of ref (in ref_slot). */
nb_status nb_check_same_dtype(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, const char *ref_slot,
                              const nb_var_info *ref);
/* "float32, float64, int32": the dtypes of the set (NB_DT bits) in buf. */
const char *nb_dtype_list(char *buf, size_t size, unsigned dtypes);
/* v (the value in `slot`) has one of the dtypes of the set. */
nb_status nb_check_dtypes(const nb_op_ctx *ctx, const char *slot, const nb_var_info *v, unsigned dtypes);
/* The "axis" attribute is a dim of x (negative: from the end); made
 * non-negative into *axis. */
nb_status nb_check_axis(const nb_op_ctx *ctx, const nb_var_info *x, int *axis);

#endif
