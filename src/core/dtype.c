#include <string.h>
#include "nabla/dtype.h"
#include "tensor_internal.h"

static const struct {
    const char *name, *alias;
} info[NB_DTYPE_COUNT] = {
    [NB_F32] = {"float32", "f32"}, [NB_F64] = {"float64", "f64"}, [NB_I32] = {"int32", "i32"},
    [NB_I64] = {"int64", "i64"},   [NB_U8] = {"uint8", "u8"},     [NB_BOOL] = {"bool", "b8"},
};

bool nb_dtype_valid(int t) { return t >= 0 && t < NB_DTYPE_COUNT; }
size_t nb_dtype_size(nb_dtype t) { return nb_dtype_bytes(t); }
const char *nb_dtype_name(nb_dtype t) { return nb_dtype_valid(t) ? info[t].name : "invalid-dtype"; }
bool nb_dtype_is_float(nb_dtype t) { return t == NB_F32 || t == NB_F64; }

nb_status nb_dtype_parse(const char *name, nb_dtype *out)
{
    for (int t = 0; t < NB_DTYPE_COUNT; t++)
        if (name && (!strcmp(name, info[t].name) || !strcmp(name, info[t].alias))) {
            *out = (nb_dtype)t;
            return NB_OK;
        }
    return nb_error(NB_ERR_NOT_FOUND, "unknown dtype '%s'", name ? name : "(null)");
}
