/* nabla/dtype.h: element types. */
#ifndef NABLA_DTYPE_H
#define NABLA_DTYPE_H

#include "nabla/export.h"

#include <stddef.h>
#include <stdbool.h>
#include "nabla/status.h"

NB_BEGIN_DECLS

typedef enum nb_dtype {
    NB_F32 = 0,
    NB_F64,
    NB_I32,
    NB_I64,
    NB_U8,
    NB_BOOL, /* stored as one byte, 0 or 1 */
    NB_DTYPE_COUNT
} nb_dtype;

NB_API size_t nb_dtype_size(nb_dtype t);
NB_API const char *nb_dtype_name(nb_dtype t); /* "float32", "int64", ... */
NB_API bool nb_dtype_is_float(nb_dtype t);
NB_API bool nb_dtype_valid(int t);
/* Parses "float32"/"f32"/"float64"/... ; NB_ERR_NOT_FOUND if unknown. */
NB_API nb_status nb_dtype_parse(const char *name, nb_dtype *out);

NB_END_DECLS

#endif
