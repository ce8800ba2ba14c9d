/* Writing safetensors files, and the loaded-file accessors. The reader is in
 * safetensors_read.c. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "atomic_file.h"
#include "core/half.h"
#include "json.h"
#include "safetensors_internal.h"

/* The safetensors dtypes nabla reads and writes, with their place in the
 * reference crate's Dtype enum (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16,
 * F16, BF16, I32, U32, F32, F64, I64, U64: ordered by alignment): its writer
 * puts tensors of a later dtype first, which is what keeps every tensor's
 * data aligned. Later versions of the crate insert more dtypes (F4, F6_*,
 * F8_E8M0, C64) but keep these in the same relative order. */
static const struct {
    const char *name;
    int rank;
    size_t size;
    nb_dtype loaded;
} dtypes[NB_ST_DTYPE_COUNT] = {
    [NB_ST_BOOL] = {"BOOL", 0, 1, NB_BOOL}, [NB_ST_U8] = {"U8", 1, 1, NB_U8},     [NB_ST_F16] = {"F16", 7, 2, NB_F32},
    [NB_ST_BF16] = {"BF16", 8, 2, NB_F32},  [NB_ST_I32] = {"I32", 9, 4, NB_I32},  [NB_ST_F32] = {"F32", 11, 4, NB_F32},
    [NB_ST_F64] = {"F64", 12, 8, NB_F64},   [NB_ST_I64] = {"I64", 13, 8, NB_I64},
};

/* Valid safetensors dtypes that nabla does not read. */
static const char *const unsupported[] = {"I8",      "I16",     "U16", "U32",     "U64",     "F8_E5M2",
                                          "F8_E4M3", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

const char *nb_st_dtype_name(int t) { return t >= 0 && t < NB_ST_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t nb_st_dtype_size(nb_st_dtype t) { return dtypes[t].size; }
nb_dtype nb_st_dtype_loaded(nb_st_dtype t) { return dtypes[t].loaded; }

nb_st_dtype nb_st_dtype_stored(nb_dtype t, nb_float_storage storage)
{
    if (nb_dtype_is_float(t) && storage == NB_STORE_F16) return NB_ST_F16;
    if (nb_dtype_is_float(t) && storage == NB_STORE_BF16) return NB_ST_BF16;
    switch (t) {
    case NB_BOOL: return NB_ST_BOOL;
    case NB_U8: return NB_ST_U8;
    case NB_I32: return NB_ST_I32;
    case NB_F64: return NB_ST_F64;
    case NB_I64: return NB_ST_I64;
    default: return NB_ST_F32;
    }
}

nb_status nb_st_dtype_parse(const char *name, nb_st_dtype *out)
{
    for (int t = 0; t < NB_ST_DTYPE_COUNT; t++)
        if (!strcmp(name, dtypes[t].name)) {
            *out = (nb_st_dtype)t;
            return NB_OK;
        }
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (!strcmp(name, unsupported[i])) return NB_ERR_UNSUPPORTED;
    return NB_ERR_FORMAT;
}

bool nb_st_host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

void nb_st_swap_bytes(void *data, size_t count, size_t elem_size)
{
    unsigned char *p = data;
    for (size_t i = 0; i < count; i++, p += elem_size)
        for (size_t a = 0, b = elem_size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* ---- sorting (qsort has no context argument, so the keys travel along) -- */

typedef struct {
    const char *name;
    int rank;          /* rank of the file dtype; 0 where unused */
    nb_st_dtype dtype; /* the file dtype of a tensor */
    int idx;
} sort_item;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sort_item *)a)->name, ((const sort_item *)b)->name);
}

static int by_rank_then_name(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

nb_status nb_st_index(nb_safetensors *f)
{
    sort_item *items = nb_malloc(((size_t)f->n + 1) * sizeof *items);
    f->by_name = nb_malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!items || !f->by_name) {
        nb_free(items);
        return NB_ERR_NOMEM;
    }
    for (int i = 0; i < f->n; i++) items[i] = (sort_item){f->names[i], 0, NB_ST_BOOL, i};
    qsort(items, (size_t)f->n, sizeof *items, by_name);
    for (int i = 0; i < f->n; i++) f->by_name[i] = items[i].idx;
    nb_free(items);
    return NB_OK;
}

/* ---- saving ------------------------------------------------------------- */

static nb_status check_name(const char *path, const char *what, int i, const char *s)
{
    if (!s) return nb_error(NB_ERR_ARG, "safetensors save '%s': %s %d is NULL", path, what, i);
    if (!json_utf8_valid(s, strlen(s)))
        return nb_error(NB_ERR_ARG, "safetensors save '%s': %s %d is not valid UTF-8", path, what, i);
    return NB_OK;
}

static nb_status check_args(const char *path, int n, const char *const *names, nb_tensor *const *tensors, int n_meta,
                            const char *const *keys, const char *const *values)
{
    if (!path || !*path) return nb_error(NB_ERR_ARG, "safetensors save: empty file path");
    if (n < 0 || (n > 0 && (!names || !tensors)))
        return nb_error(NB_ERR_ARG, "safetensors save '%s': %d tensors but no names or tensors", path, n);
    if (n_meta < 0 || (n_meta > 0 && (!keys || !values)))
        return nb_error(NB_ERR_ARG, "safetensors save '%s': %d metadata pairs but no keys or values", path, n_meta);
    for (int i = 0; i < n; i++) {
        nb_status st = check_name(path, "tensor name", i, names[i]);
        if (st) return st;
        if (!*names[i] || !strcmp(names[i], "__metadata__"))
            return nb_error(NB_ERR_ARG, "safetensors save '%s': tensor name %d ('%s') is empty or reserved", path, i,
                            names[i]);
        if (!tensors[i] || !nb_dtype_valid(tensors[i]->dtype))
            return nb_error(NB_ERR_ARG, "safetensors save '%s': tensor '%s' is NULL or has no valid dtype", path,
                            names[i]);
    }
    for (int i = 0; i < n_meta; i++) {
        nb_status st = check_name(path, "metadata key", i, keys[i]);
        if (!st) st = check_name(path, "metadata value", i, values[i]);
        if (st) return st;
    }
    return NB_OK;
}

/* Items for names[0..n) sorted by `cmp`, with the file dtypes of `tensors`
 * (when given) stored as `storage` says; NB_ERR_ARG naming a repeated name. */
static nb_status sorted_items(const char *path, const char *what, int n, const char *const *names,
                              nb_tensor *const *tensors, nb_float_storage storage,
                              int (*cmp)(const void *, const void *), sort_item **out)
{
    sort_item *items = nb_malloc(((size_t)n + 1) * sizeof *items);
    if (!items) return nb_error(NB_ERR_NOMEM, "safetensors save '%s': out of memory", path);
    for (int i = 0; i < n; i++) {
        nb_st_dtype dt = tensors ? nb_st_dtype_stored(tensors[i]->dtype, storage) : NB_ST_BOOL;
        items[i] = (sort_item){names[i], tensors ? dtypes[dt].rank : 0, dt, i};
    }
    qsort(items, (size_t)n, sizeof *items, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(items[i - 1].name, items[i].name)) {
            nb_status st =
                nb_error(NB_ERR_ARG, "safetensors save '%s': %s '%s' is given twice", path, what, items[i].name);
            nb_free(items);
            return st;
        }
    if (cmp != by_name) qsort(items, (size_t)n, sizeof *items, cmp);
    *out = items;
    return NB_OK;
}

static nb_status build_header(int n, const sort_item *order, nb_tensor *const *tensors, int n_meta,
                              const sort_item *meta, const char *const *values, char **out, size_t *out_len)
{
    char *h = NULL, num[96];
    size_t len = 0, cap = 0;
    nb_status st = json_append_raw(&h, &len, &cap, "{", 1);
    if (n_meta > 0 && !st) {
        st = json_append_raw(&h, &len, &cap, "\"__metadata__\":{", 16);
        for (int i = 0; i < n_meta && !st; i++) {
            if (i) st = json_append_raw(&h, &len, &cap, ",", 1);
            if (!st) st = json_append_string(&h, &len, &cap, meta[i].name, strlen(meta[i].name));
            if (!st) st = json_append_raw(&h, &len, &cap, ":", 1);
            const char *v = values[meta[i].idx];
            if (!st) st = json_append_string(&h, &len, &cap, v, strlen(v));
        }
        if (!st) st = json_append_raw(&h, &len, &cap, "}", 1);
    }
    uint64_t offset = 0;
    for (int i = 0; i < n && !st; i++) {
        const nb_tensor *t = tensors[order[i].idx];
        if (i || n_meta > 0) st = json_append_raw(&h, &len, &cap, ",", 1);
        if (!st) st = json_append_string(&h, &len, &cap, order[i].name, strlen(order[i].name));
        int k = snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[order[i].dtype].name);
        if (!st) st = json_append_raw(&h, &len, &cap, num, (size_t)k);
        for (int d = 0; d < t->ndim && !st; d++) {
            k = snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)t->shape[d]);
            st = json_append_raw(&h, &len, &cap, num, (size_t)k);
        }
        uint64_t end = offset + (uint64_t)nb_tensor_numel(t) * dtypes[order[i].dtype].size;
        k = snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                     (unsigned long long)end);
        if (!st) st = json_append_raw(&h, &len, &cap, num, (size_t)k);
        offset = end;
    }
    if (!st) st = json_append_raw(&h, &len, &cap, "}", 1);
    while (!st && len % 8) st = json_append_raw(&h, &len, &cap, " ", 1);
    if (st) {
        nb_free(h);
        return nb_error(NB_ERR_NOMEM, "out of memory building the header");
    }
    *out = h;
    *out_len = len;
    return NB_OK;
}

/* Writes `count` elements of `es` bytes from p, little-endian. */
static nb_status write_le(nb_atomic_file *af, const void *p, size_t count, size_t es)
{
    if (nb_st_host_is_little_endian() || es == 1) return nb_atomic_write(af, p, count * es);
    unsigned char chunk[4096];
    nb_status st = NB_OK;
    for (size_t done = 0; done < count && !st;) {
        size_t k = count - done < sizeof chunk / es ? count - done : sizeof chunk / es;
        memcpy(chunk, (const unsigned char *)p + done * es, k * es);
        nb_st_swap_bytes(chunk, k, es);
        st = nb_atomic_write(af, chunk, k * es);
        done += k;
    }
    return st;
}

/* Writes the F32 or F64 values at p narrowed to F16 or BF16, a chunk at a
 * time, so that no copy of the whole tensor is made. */
static nb_status write_narrowed(nb_atomic_file *af, const void *p, nb_dtype from, size_t count, nb_st_dtype to)
{
    uint16_t chunk[2048];
    nb_status st = NB_OK;
    for (size_t done = 0; done < count && !st;) {
        size_t k = count - done < sizeof chunk / sizeof *chunk ? count - done : sizeof chunk / sizeof *chunk;
        if (from == NB_F64 && to == NB_ST_F16) nb_f64_to_f16_n((const double *)p + done, chunk, k);
        else if (from == NB_F64) nb_f64_to_bf16_n((const double *)p + done, chunk, k);
        else if (to == NB_ST_F16) nb_f32_to_f16_n((const float *)p + done, chunk, k);
        else nb_f32_to_bf16_n((const float *)p + done, chunk, k);
        st = write_le(af, chunk, k, sizeof *chunk);
        done += k;
    }
    return st;
}

static nb_status write_tensor(nb_atomic_file *af, nb_tensor *t, nb_st_dtype stored)
{
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, t);
    if (st) return st;
    size_t n = (size_t)nb_tensor_numel(c);
    if (stored == NB_ST_F16 || stored == NB_ST_BF16) st = write_narrowed(af, nb_tensor_data(c), c->dtype, n, stored);
    else st = write_le(af, nb_tensor_data(c), n, nb_dtype_size(c->dtype));
    nb_tensor_release(c);
    return st;
}

nb_status nb_safetensors_save(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                              const nb_meta *pairs)
{
    return nb_safetensors_save_as(path, n, names, tensors, pairs, NB_STORE_NATIVE);
}

nb_status nb_safetensors_save_as(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                                 const nb_meta *pairs, nb_float_storage storage)
{
    int n_meta = pairs ? pairs->n : 0;
    const char *const *meta_keys = pairs ? pairs->keys : NULL, *const *meta_values = pairs ? pairs->values : NULL;
    nb_status st = check_args(path, n, names, tensors, n_meta, meta_keys, meta_values);
    if (st) return st;
    if (storage != NB_STORE_NATIVE && storage != NB_STORE_F16 && storage != NB_STORE_BF16)
        return nb_error(NB_ERR_ARG, "safetensors save '%s': %d is no nb_float_storage", path, (int)storage);
    sort_item *order = NULL, *meta = NULL;
    char *header = NULL;
    size_t header_len = 0;
    nb_atomic_file *af = NULL;
    st = sorted_items(path, "tensor name", n, names, tensors, storage, by_rank_then_name, &order);
    if (!st) st = sorted_items(path, "metadata key", n_meta, meta_keys, NULL, storage, by_name, &meta);
    if (!st) {
        st = build_header(n, order, tensors, n_meta, meta, meta_values, &header, &header_len);
        if (st) st = nb_error_context(st, "safetensors save '%s'", path);
    }
    if (!st) st = nb_atomic_open(&af, path);
    if (!st) {
        unsigned char size_le[8];
        for (int i = 0; i < 8; i++) size_le[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
        st = nb_atomic_write(af, size_le, 8);
        if (!st) st = nb_atomic_write(af, header, header_len);
        for (int i = 0; i < n && !st; i++) st = write_tensor(af, tensors[order[i].idx], order[i].dtype);
        if (!st) st = nb_atomic_commit(af);
        else nb_atomic_abort(af);
    }
    nb_free(order);
    nb_free(meta);
    nb_free(header);
    return st;
}

/* ---- a loaded file ------------------------------------------------------ */

void nb_safetensors_free(nb_safetensors *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) {
        if (f->names) nb_free(f->names[i]);
        if (f->tensors) nb_tensor_release(f->tensors[i]);
    }
    for (int i = 0; i < f->n_meta; i++) {
        if (f->meta_keys) nb_free(f->meta_keys[i]);
        if (f->meta_values) nb_free(f->meta_values[i]);
    }
    nb_free(f->names);
    nb_free(f->tensors);
    nb_free(f->stored);
    nb_free(f->by_name);
    nb_free(f->meta_keys);
    nb_free(f->meta_values);
    nb_free(f);
}

int nb_safetensors_count(const nb_safetensors *f) { return f ? f->n : 0; }

const char *nb_safetensors_name(const nb_safetensors *f, int i) { return f && i >= 0 && i < f->n ? f->names[i] : NULL; }

nb_tensor *nb_safetensors_tensor(const nb_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n ? f->tensors[i] : NULL;
}

const char *nb_safetensors_stored_dtype(const nb_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n ? dtypes[f->stored[i]].name : NULL;
}

int nb_st_find_index(const nb_safetensors *f, const char *name)
{
    if (!f || !name) return -1;
    for (int lo = 0, hi = f->n - 1; lo <= hi;) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, f->names[f->by_name[mid]]);
        if (!c) return f->by_name[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

nb_tensor *nb_safetensors_find(const nb_safetensors *f, const char *name)
{
    int i = nb_st_find_index(f, name);
    return i < 0 ? NULL : f->tensors[i];
}

const char *nb_safetensors_meta(const nb_safetensors *f, const char *key)
{
    if (!f || !key) return NULL;
    for (int lo = 0, hi = f->n_meta - 1; lo <= hi;) {
        int mid = lo + (hi - lo) / 2, c = strcmp(key, f->meta_keys[mid]);
        if (!c) return f->meta_values[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int nb_safetensors_meta_count(const nb_safetensors *f) { return f ? f->n_meta : 0; }

const char *nb_safetensors_meta_key(const nb_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n_meta ? f->meta_keys[i] : NULL;
}
