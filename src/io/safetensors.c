/* Writing safetensors files, and the loaded-file accessors. The reader is in
 * safetensors_read.c. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "atomic_file.h"
#include "json.h"
#include "safetensors_internal.h"

/* Safetensors dtype names, with their place in the reference crate's Dtype
 * enum (ordered by alignment): its writer puts tensors of a later dtype
 * first, which is what keeps every tensor's data aligned. */
static const struct {
    const char *name;
    int rank;
} dtypes[NB_DTYPE_COUNT] = {
    [NB_BOOL] = {"BOOL", 0}, [NB_U8] = {"U8", 1},   [NB_I32] = {"I32", 9},
    [NB_F32] = {"F32", 11},  [NB_F64] = {"F64", 12}, [NB_I64] = {"I64", 13},
};

/* Valid safetensors dtypes that nabla does not have. */
static const char *const unsupported[] = {"I8",      "I16",     "U16",     "F16",  "BF16", "U32",
                                          "U64",     "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3",
                                          "F6_E3M2", "C64"};

const char *nb_st_dtype_name(nb_dtype t) { return nb_dtype_valid(t) ? dtypes[t].name : "?"; }

nb_status nb_st_dtype_parse(const char *name, nb_dtype *out)
{
    for (int t = 0; t < NB_DTYPE_COUNT; t++)
        if (!strcmp(name, dtypes[t].name)) {
            *out = (nb_dtype)t;
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
    int rank; /* dtype rank; 0 where unused */
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
    for (int i = 0; i < f->n; i++) items[i] = (sort_item){f->names[i], 0, i};
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

static nb_status check_args(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                            int n_meta, const char *const *keys, const char *const *values)
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
            return nb_error(NB_ERR_ARG, "safetensors save '%s': tensor name %d ('%s') is empty or reserved", path,
                            i, names[i]);
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

/* Items for names[0..n) sorted by `cmp`; NB_ERR_ARG naming a repeated name. */
static nb_status sorted_items(const char *path, const char *what, int n, const char *const *names,
                              nb_tensor *const *tensors, int (*cmp)(const void *, const void *), sort_item **out)
{
    sort_item *items = nb_malloc(((size_t)n + 1) * sizeof *items);
    if (!items) return nb_error(NB_ERR_NOMEM, "safetensors save '%s': out of memory", path);
    for (int i = 0; i < n; i++) items[i] = (sort_item){names[i], tensors ? dtypes[tensors[i]->dtype].rank : 0, i};
    qsort(items, (size_t)n, sizeof *items, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(items[i - 1].name, items[i].name)) {
            nb_status st = nb_error(NB_ERR_ARG, "safetensors save '%s': %s '%s' is given twice", path, what,
                                    items[i].name);
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
        int k = snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[t->dtype].name);
        if (!st) st = json_append_raw(&h, &len, &cap, num, (size_t)k);
        for (int d = 0; d < t->ndim && !st; d++) {
            k = snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)t->shape[d]);
            st = json_append_raw(&h, &len, &cap, num, (size_t)k);
        }
        uint64_t end = offset + (uint64_t)nb_tensor_numel(t) * nb_dtype_size(t->dtype);
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

static nb_status write_tensor(nb_atomic_file *af, nb_tensor *t)
{
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, t);
    if (st) return st;
    size_t es = nb_dtype_size(c->dtype), n = (size_t)nb_tensor_numel(c);
    if (nb_st_host_is_little_endian() || es == 1) {
        st = nb_atomic_write(af, nb_tensor_data(c), n * es);
    } else {
        unsigned char chunk[4096];
        const unsigned char *p = nb_tensor_data(c);
        for (size_t done = 0; done < n && !st;) {
            size_t k = n - done < sizeof chunk / es ? n - done : sizeof chunk / es;
            memcpy(chunk, p + done * es, k * es);
            nb_st_swap_bytes(chunk, k, es);
            st = nb_atomic_write(af, chunk, k * es);
            done += k;
        }
    }
    nb_tensor_release(c);
    return st;
}

nb_status nb_safetensors_save(const char *path, int n, const char *const *names, nb_tensor *const *tensors,
                              const nb_meta *pairs)
{
    int n_meta = pairs ? pairs->n : 0;
    const char *const *meta_keys = pairs ? pairs->keys : NULL, *const *meta_values = pairs ? pairs->values : NULL;
    nb_status st = check_args(path, n, names, tensors, n_meta, meta_keys, meta_values);
    if (st) return st;
    sort_item *order = NULL, *meta = NULL;
    char *header = NULL;
    size_t header_len = 0;
    nb_atomic_file *af = NULL;
    st = sorted_items(path, "tensor name", n, names, tensors, by_rank_then_name, &order);
    if (!st) st = sorted_items(path, "metadata key", n_meta, meta_keys, NULL, by_name, &meta);
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
        for (int i = 0; i < n && !st; i++) st = write_tensor(af, tensors[order[i].idx]);
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
    nb_free(f->by_name);
    nb_free(f->meta_keys);
    nb_free(f->meta_values);
    nb_free(f);
}

int nb_safetensors_count(const nb_safetensors *f) { return f ? f->n : 0; }

const char *nb_safetensors_name(const nb_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n ? f->names[i] : NULL;
}

nb_tensor *nb_safetensors_tensor(const nb_safetensors *f, int i)
{
    return f && i >= 0 && i < f->n ? f->tensors[i] : NULL;
}

nb_tensor *nb_safetensors_find(const nb_safetensors *f, const char *name)
{
    if (!f || !name) return NULL;
    for (int lo = 0, hi = f->n - 1; lo <= hi;) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, f->names[f->by_name[mid]]);
        if (!c) return f->tensors[f->by_name[mid]];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
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
