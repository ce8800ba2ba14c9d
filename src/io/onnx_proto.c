/* The arena of an export and the tensor conversions both directions share
 * (see onnx_internal.h). */
#ifdef NABLA_HAVE_ONNX
#define _XOPEN_SOURCE 700 /* realpath */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <limits.h>
#include <string.h>
#include "nabla/device.h"
#include "onnx_internal.h"
#include "../core/half.h"

/* ---- the arena ---------------------------------------------------------- */

struct ox_chunk {
    ox_chunk *next;
    size_t size;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_BYTES (64 * 1024)

void *ox_alloc(ox_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (!size) size = 16;
    if (!a->head || a->left < size) {
        size_t n = size > CHUNK_BYTES ? size : CHUNK_BYTES;
        ox_chunk *c = nb_malloc(sizeof *c + n);
        if (!c) {
            a->failed = true;
            return NULL;
        }
        c->size = n;
        if (a->head && size > CHUNK_BYTES) {
            /* A big block gets a chunk of its own behind the head, so the
             * head's free space is not thrown away. */
            c->next = a->head->next;
            a->head->next = c;
            memset(c->data, 0, size);
            return c->data;
        }
        c->next = a->head;
        a->head = c;
        a->left = n;
    }
    void *p = a->head->data + (a->head->size - a->left);
    a->left -= size;
    memset(p, 0, size);
    return p;
}

char *ox_strdup(ox_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = ox_alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}

void ox_arena_free(ox_arena *a)
{
    for (ox_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        nb_free(c);
    }
    *a = (ox_arena){0};
}

/* ---- dtypes ------------------------------------------------------------- */

int ox_onnx_type(nb_dtype dt)
{
    switch (dt) {
    case NB_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case NB_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case NB_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case NB_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case NB_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case NB_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

bool ox_nabla_dtype(int onnx_type, nb_dtype *out)
{
    switch (onnx_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = NB_F32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = NB_F64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = NB_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = NB_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = NB_U8; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = NB_BOOL; return true;
    default: return false;
    }
}

const char *ox_type_name(int t)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                        "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

/* ---- nabla -> TensorProto ----------------------------------------------- */

Onnx__TensorProto *ox_tensor_proto(ox_arena *a, const char *name, const nb_tensor *t)
{
    Onnx__TensorProto *p = ox_alloc(a, sizeof *p);
    if (!p) return NULL;
    onnx__tensor_proto__init(p);
    p->name = ox_strdup(a, name);
    p->has_data_type = 1;
    p->data_type = ox_onnx_type(t->dtype);
    p->n_dims = (size_t)t->ndim;
    p->dims = ox_alloc(a, (size_t)t->ndim * sizeof *p->dims);
    if (!p->name || !p->dims) return NULL;
    memcpy(p->dims, t->shape, (size_t)t->ndim * sizeof *p->dims);
    nb_tensor *c = NULL;
    if (nb_tensor_contiguous(&c, (nb_tensor *)t)) {
        a->failed = true;
        return NULL;
    }
    size_t n = (size_t)nb_tensor_numel(c) * nb_dtype_size(c->dtype);
    p->has_raw_data = 1;
    p->raw_data.len = n;
    p->raw_data.data = ox_alloc(a, n);
    if (p->raw_data.data) memcpy(p->raw_data.data, nb_tensor_data(c), n); /* x86 and arm64 are little-endian */
    nb_tensor_release(c);
    return p->raw_data.data ? p : NULL;
}

/* ---- TensorProto -> nabla ----------------------------------------------- */

/* The bytes of an external-data tensor: `n` bytes at the entry's offset in
 * the file its location names, under model_dir. */
static nb_status read_external(const Onnx__TensorProto *p, const char *model_dir, const char *what, void *dst, size_t n)
{
    const char *location = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < p->n_external_data; i++) {
        const char *k = p->external_data[i]->key, *v = p->external_data[i]->value;
        if (!k || !v) continue;
        char *end;
        if (!strcmp(k, "location")) location = v;
        else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
            long long x = strtoll(v, &end, 10);
            if (*end || end == v || x < 0)
                return nb_error(NB_ERR_FORMAT, "%s: external data %s \"%s\" is not a size", what, k, v);
            *(!strcmp(k, "offset") ? &offset : &length) = x;
        }
    }
    if (!location || !*location) return nb_error(NB_ERR_FORMAT, "%s: external data without a location", what);
    /* The model names a file beside it; it may not reach out of its folder. */
    if (location[0] == '/' || !strcmp(location, "..") || !strncmp(location, "../", 3) || strstr(location, "/../") ||
        (strlen(location) >= 3 && !strcmp(location + strlen(location) - 3, "/..")))
        return nb_error(NB_ERR_FORMAT, "%s: external data location \"%s\" leaves the model's folder", what, location);
    if (length >= 0 && (unsigned long long)length != n)
        return nb_error(NB_ERR_FORMAT, "%s: external data length %lld does not match its %zu bytes", what, length, n);
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", model_dir, location) >= sizeof path)
        return nb_error(NB_ERR_ARG, "%s: external data path is too long", what);
    /* A link may still lead out: where the file really is must be inside
     * the folder where the model really is. */
    char real_dir[PATH_MAX], real_file[PATH_MAX];
    if (!realpath(path, real_file))
        return nb_error(NB_ERR_NOT_FOUND, "%s: cannot open external data file %s", what, path);
    if (!realpath(model_dir, real_dir))
        return nb_error(NB_ERR_IO, "%s: cannot resolve the model's folder %s", what, model_dir);
    size_t dl = strlen(real_dir);
    if (strncmp(real_file, real_dir, dl) || (real_file[dl] != '/' && strcmp(real_dir, "/")))
        return nb_error(NB_ERR_FORMAT, "%s: external data location \"%s\" leads out of the model's folder (to %s)",
                        what, location, real_file);
    FILE *f = fopen(real_file, "rb");
    if (!f) return nb_error(NB_ERR_NOT_FOUND, "%s: cannot open external data file %s", what, path);
    nb_status st = NB_OK;
    if (fseeko(f, (off_t)offset, SEEK_SET) || fread(dst, 1, n, f) != n)
        st =
            nb_error(NB_ERR_FORMAT, "%s: external data file %s has no %zu bytes at offset %lld", what, path, n, offset);
    fclose(f);
    return st;
}

/* The bytes one element of an ONNX type takes where nabla stores it wider
 * (int8, int16, uint16 as int32; uint32 as int64), or 0. */
static size_t narrow_width(int type)
{
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return 1;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    default: return 0;
    }
}

/* Widens n little-endian integers of a narrow type into dst (int32 or int64). */
static void widen_ints(const uint8_t *src, void *dst, size_t n, int type)
{
    for (size_t i = 0; i < n; i++) switch (type) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: ((int32_t *)dst)[i] = (int8_t)src[i]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
            ((int32_t *)dst)[i] = (int16_t)(src[2 * i] | src[2 * i + 1] << 8);
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: ((int32_t *)dst)[i] = src[2 * i] | src[2 * i + 1] << 8; break;
        default:
            ((int64_t *)dst)[i] = (int64_t)((uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 |
                                            (uint32_t)src[4 * i + 2] << 16 | (uint32_t)src[4 * i + 3] << 24);
        }
}

/* Widens n 16-bit floats (little-endian pairs of bytes) into dst. */
static void widen_halves(const uint8_t *src, float *dst, size_t n, bool bf16)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = bf16 ? nb_bf16_to_f32(h) : nb_f16_to_f32(h);
    }
}

nb_status ox_tensor_from_proto(const Onnx__TensorProto *p, const char *model_dir, const char *what, nb_tensor **out)
{
    *out = NULL;
    nb_dtype dt;
    int type = p->has_data_type ? p->data_type : 0;
    if (!ox_nabla_dtype(type, &dt))
        return nb_error(NB_ERR_UNSUPPORTED, "%s: element type %s has no nabla dtype", what, ox_type_name(type));
    if (p->n_dims > NB_MAX_DIMS)
        return nb_error(NB_ERR_FORMAT, "%s: %zu dims, more than %d", what, p->n_dims, NB_MAX_DIMS);
    int64_t shape[NB_MAX_DIMS], numel = 1;
    for (size_t i = 0; i < p->n_dims; i++) {
        shape[i] = p->dims[i];
        if (shape[i] < 0 || (shape[i] && numel > INT64_MAX / 8 / shape[i]))
            return nb_error(NB_ERR_FORMAT, "%s: dimension %zu is %lld", what, i, (long long)p->dims[i]);
        numel *= shape[i];
    }
    bool half = type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    size_t narrow = narrow_width(type); /* the stored bytes are narrower than nabla's too */
    size_t stored = (size_t)numel * (half ? 2 : narrow ? narrow : nb_dtype_size(dt));
    bool external = p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    bool u32 = type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32;
    size_t typed = dt == NB_F32 && !half ? p->n_float_data
        : dt == NB_F64                   ? p->n_double_data
        : u32                            ? p->n_uint64_data
        : dt == NB_I64                   ? p->n_int64_data
                                         : p->n_int32_data; /* the other ints, bool, float16 and bfloat16 bits */
    if (!external && !p->has_raw_data && typed != (size_t)numel)
        return nb_error(NB_ERR_FORMAT, "%s: holds %zu values for shape of %lld elements", what, typed,
                        (long long)numel);
    if (!external && p->has_raw_data && p->raw_data.len != stored)
        return nb_error(NB_ERR_FORMAT, "%s: raw_data has %zu bytes; its %s shape needs %zu", what, p->raw_data.len,
                        ox_type_name(type), stored);
    nb_tensor *t;
    nb_status st = nb_tensor_new(&t, dt, (int)p->n_dims, shape);
    if (st) return st;
    uint8_t *d = nb_tensor_data(t);
    uint8_t *bytes = NULL; /* the stored bytes, when they are not the tensor's own */
    if (external || p->has_raw_data) {
        if ((half || narrow) && !(bytes = nb_malloc(stored + 1)))
            st = nb_error(NB_ERR_NOMEM, "%s: out of memory", what);
        uint8_t *dst = half || narrow ? bytes : d;
        if (!st && external) st = read_external(p, model_dir, what, dst, stored);
        else if (!st && stored) memcpy(dst, p->raw_data.data, stored);
    } else if (half) {
        if (!(bytes = nb_malloc(stored + 1))) st = nb_error(NB_ERR_NOMEM, "%s: out of memory", what);
        for (int64_t i = 0; !st && i < numel; i++) {
            bytes[2 * i] = (uint8_t)p->int32_data[i];
            bytes[2 * i + 1] = (uint8_t)(p->int32_data[i] >> 8);
        }
    } else {
        for (int64_t i = 0; i < numel; i++) switch (dt) {
            case NB_F32: ((float *)d)[i] = p->float_data[i]; break;
            case NB_F64: ((double *)d)[i] = p->double_data[i]; break;
            case NB_I64: ((int64_t *)d)[i] = u32 ? (int64_t)(uint32_t)p->uint64_data[i] : p->int64_data[i]; break;
            case NB_I32: ((int32_t *)d)[i] = p->int32_data[i]; break;
            default: d[i] = (uint8_t)p->int32_data[i]; break;
            }
    }
    if (!st && narrow && bytes) widen_ints(bytes, d, (size_t)numel, type);
    if (!st && half) widen_halves(bytes, (float *)d, (size_t)numel, type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16);
    if (!st && dt == NB_BOOL)
        for (int64_t i = 0; i < numel; i++)
            if (d[i] > 1) st = nb_error(NB_ERR_FORMAT, "%s: BOOL element %lld is %u", what, (long long)i, d[i]);
    nb_free(bytes);
    if (st) nb_tensor_release(t);
    else *out = t;
    return st;
}

#endif
