/* Reading safetensors files. Every number in the file is checked before it
 * is used, so a hostile or damaged file gives an error, never an
 * out-of-bounds access or an allocation larger than twice the file (F16 and
 * BF16 tensors widen to F32 on their way in). */
#include <errno.h>
#include "nabla/device.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/half.h"
#include "core/input_file.h"
#include "json.h"
#include "safetensors_internal.h"

typedef struct entry {
    char *name;
    nb_st_dtype dtype; /* in the file */
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    uint64_t begin, end, nbytes;
} entry;

typedef struct meta_pair {
    char *key, *value;
} meta_pair;

typedef struct header {
    entry *e;
    int n, cap;
    meta_pair *meta;
    int n_meta, cap_meta;
    bool have_meta;
} header;

static void header_free(header *h)
{
    for (int i = 0; i < h->n; i++) nb_free(h->e[i].name);
    for (int i = 0; i < h->n_meta; i++) {
        nb_free(h->meta[i].key);
        nb_free(h->meta[i].value);
    }
    nb_free(h->e);
    nb_free(h->meta);
}

static nb_status oom(void) { return nb_error(NB_ERR_NOMEM, "out of memory"); }

/* The text of the last string token as a C string (malloc'ed); names and
 * values with a NUL inside cannot be C strings, so they are refused. */
static nb_status take_string(const json_reader *r, const char *what, char **out)
{
    size_t n;
    const char *s = json_text(r, &n);
    if (strlen(s) != n) return nb_error(NB_ERR_FORMAT, "%s holds a NUL character", what);
    *out = nb_strdup(s);
    return *out ? NB_OK : oom();
}

static nb_status parse_meta(json_reader *r, header *h)
{
    json_token tok;
    nb_status st = json_next(r, &tok);
    if (st) return st;
    if (tok != JSON_OBJECT_BEGIN) return nb_error(NB_ERR_FORMAT, "__metadata__ is not a JSON object");
    for (;;) {
        if ((st = json_next(r, &tok))) return st;
        if (tok == JSON_OBJECT_END) return NB_OK;
        if (h->n_meta == h->cap_meta) {
            int cap = h->cap_meta ? 2 * h->cap_meta : 8;
            meta_pair *m = nb_realloc(h->meta, (size_t)cap * sizeof *m);
            if (!m) return oom();
            h->meta = m;
            h->cap_meta = cap;
        }
        meta_pair *p = &h->meta[h->n_meta];
        *p = (meta_pair){0};
        if ((st = take_string(r, "a metadata key", &p->key))) return st;
        h->n_meta++;
        if ((st = json_next(r, &tok))) return st;
        if (tok != JSON_STRING)
            return nb_error(NB_ERR_FORMAT, "the value of metadata key '%.100s' is not a string", p->key);
        if ((st = take_string(r, "a metadata value", &p->value))) return st;
    }
}

static nb_status parse_shape(json_reader *r, entry *e)
{
    json_token tok;
    nb_status st = json_next(r, &tok);
    if (st) return st;
    if (tok != JSON_ARRAY_BEGIN)
        return nb_error(NB_ERR_FORMAT, "the shape of tensor '%.100s' is not an array", e->name);
    for (;;) {
        if ((st = json_next(r, &tok))) return st;
        if (tok == JSON_ARRAY_END) return NB_OK;
        const char *lit = json_text(r, NULL);
        uint64_t d;
        if (tok != JSON_NUMBER)
            return nb_error(NB_ERR_FORMAT, "the shape of tensor '%.100s' has a dimension that is not a number",
                            e->name);
        if (!json_parse_uint(lit, INT64_MAX, &d))
            return nb_error(NB_ERR_FORMAT, "the shape of tensor '%.100s' has a dimension %.40s that is %s", e->name,
                            lit, lit[0] == '-' ? "negative" : "not an integer that fits in 64 bits");
        if (e->ndim == NB_MAX_DIMS)
            return nb_error(NB_ERR_UNSUPPORTED, "tensor '%.100s' has more than %d dimensions, nabla's limit", e->name,
                            NB_MAX_DIMS);
        e->shape[e->ndim++] = (int64_t)d;
    }
}

static nb_status parse_offsets(json_reader *r, entry *e)
{
    json_token tok;
    uint64_t v[2];
    nb_status st = json_next(r, &tok);
    if (st) return st;
    if (tok != JSON_ARRAY_BEGIN) goto bad;
    for (int i = 0; i < 2; i++) {
        if ((st = json_next(r, &tok))) return st;
        if (tok != JSON_NUMBER || !json_parse_uint(json_text(r, NULL), UINT64_MAX, &v[i])) goto bad;
    }
    if ((st = json_next(r, &tok))) return st;
    if (tok != JSON_ARRAY_END) goto bad;
    e->begin = v[0];
    e->end = v[1];
    return NB_OK;
bad:
    return nb_error(NB_ERR_FORMAT, "the data_offsets of tensor '%.100s' are not two non-negative integers", e->name);
}

/* Element count and byte size, refusing shapes whose sizes overflow (the
 * strides of a tensor multiply every non-zero dimension, so those count
 * even when another dimension is 0). */
static nb_status entry_size(entry *e)
{
    int64_t span = 1, numel = 1;
    for (int i = 0; i < e->ndim; i++) {
        int64_t d = e->shape[i];
        if (d > 1 && span > INT64_MAX / 16 / d) {
            char s[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_FORMAT, "the shape %s of tensor '%.100s' is too large (its size overflows)",
                            nb_shape_str(s, sizeof s, e->ndim, e->shape), e->name);
        }
        if (d > 1) span *= d;
        numel *= d;
    }
    e->nbytes = (uint64_t)numel * nb_st_dtype_size(e->dtype);
    return NB_OK;
}

static nb_status parse_entry(json_reader *r, entry *e)
{
    json_token tok;
    nb_status st = json_next(r, &tok);
    if (st) return st;
    if (tok != JSON_OBJECT_BEGIN)
        return nb_error(NB_ERR_FORMAT, "the entry of tensor '%.100s' is not a JSON object", e->name);
    bool seen[3] = {false, false, false};
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    for (;;) {
        if ((st = json_next(r, &tok))) return st;
        if (tok == JSON_OBJECT_END) break;
        const char *key = json_text(r, NULL);
        int f = 0;
        while (f < 3 && strcmp(key, fields[f])) f++;
        if (f == 3) return nb_error(NB_ERR_FORMAT, "tensor '%.100s' has an unknown field '%.40s'", e->name, key);
        if (seen[f]) return nb_error(NB_ERR_FORMAT, "tensor '%.100s' has field '%s' twice", e->name, fields[f]);
        seen[f] = true;
        if (f == 0) {
            if ((st = json_next(r, &tok))) return st;
            if (tok != JSON_STRING)
                return nb_error(NB_ERR_FORMAT, "the dtype of tensor '%.100s' is not a string", e->name);
            const char *name = json_text(r, NULL);
            st = nb_st_dtype_parse(name, &e->dtype);
            if (st == NB_ERR_UNSUPPORTED)
                return nb_error(st, "tensor '%.100s' has dtype %s, which nabla does not have", e->name, name);
            if (st) return nb_error(st, "tensor '%.100s' has an unknown dtype '%.40s'", e->name, name);
        } else if (f == 1) {
            st = parse_shape(r, e);
        } else {
            st = parse_offsets(r, e);
        }
        if (st) return st;
    }
    for (int f = 0; f < 3; f++)
        if (!seen[f]) return nb_error(NB_ERR_FORMAT, "tensor '%.100s' has no '%s' field", e->name, fields[f]);
    return entry_size(e);
}

static nb_status parse_header(const char *text, size_t len, header *h)
{
    json_reader r;
    json_token tok;
    json_reader_init(&r, text, len);
    nb_status st = json_next(&r, &tok);
    if (!st && tok != JSON_OBJECT_BEGIN) st = nb_error(NB_ERR_FORMAT, "the header is not a JSON object");
    while (!st) {
        if ((st = json_next(&r, &tok)) || tok == JSON_OBJECT_END) break;
        size_t key_len;
        const char *key = json_text(&r, &key_len);
        if (key_len == 12 && !strcmp(key, "__metadata__")) {
            if (h->have_meta) st = nb_error(NB_ERR_FORMAT, "the header has __metadata__ twice");
            h->have_meta = true;
            if (!st) st = parse_meta(&r, h);
            continue;
        }
        if (h->n == h->cap) {
            int cap = h->cap ? 2 * h->cap : 16;
            entry *e = nb_realloc(h->e, (size_t)cap * sizeof *e);
            if (!e) {
                st = oom();
                break;
            }
            h->e = e;
            h->cap = cap;
        }
        entry *e = &h->e[h->n];
        *e = (entry){0};
        st = take_string(&r, "a tensor name", &e->name);
        if (st) break;
        h->n++;
        st = parse_entry(&r, e);
    }
    if (!st) st = json_next(&r, &tok); /* JSON_END, or an error for trailing text */
    json_reader_free(&r);
    return st;
}

/* ---- checks across entries --------------------------------------------- */

static int by_offsets(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const meta_pair *)a)->key, ((const meta_pair *)b)->key);
}

/* The data_offsets must tile [0, buffer) exactly, as the specification
 * requires: no range out of the buffer, none overlapping, no hole, nothing
 * after the last tensor. Sorts h->e by offsets. */
static nb_status check_offsets(header *h, uint64_t buffer)
{
    for (int i = 0; i < h->n; i++) {
        const entry *e = &h->e[i];
        if (e->begin > e->end || e->end > buffer)
            return nb_error(NB_ERR_FORMAT,
                            "the data_offsets [%llu, %llu] of tensor '%.100s' are not a range within the "
                            "%llu-byte data buffer",
                            (unsigned long long)e->begin, (unsigned long long)e->end, e->name,
                            (unsigned long long)buffer);
        if (e->end - e->begin != e->nbytes) {
            char s[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_FORMAT,
                            "tensor '%.100s' is %s %s, %llu bytes, but its data_offsets [%llu, %llu] span %llu",
                            e->name, nb_st_dtype_name(e->dtype), nb_shape_str(s, sizeof s, e->ndim, e->shape),
                            (unsigned long long)e->nbytes, (unsigned long long)e->begin, (unsigned long long)e->end,
                            (unsigned long long)(e->end - e->begin));
        }
    }
    if (h->n > 1) qsort(h->e, (size_t)h->n, sizeof *h->e, by_offsets);
    uint64_t pos = 0;
    for (int i = 0; i < h->n; i++) {
        const entry *e = &h->e[i];
        if (e->begin > pos)
            return nb_error(NB_ERR_FORMAT, "bytes [%llu, %llu) of the data buffer belong to no tensor (a hole)",
                            (unsigned long long)pos, (unsigned long long)e->begin);
        if (e->begin < pos)
            return nb_error(NB_ERR_FORMAT, "the data of tensor '%.100s' [%llu, %llu] overlaps that of '%.100s'",
                            e->name, (unsigned long long)e->begin, (unsigned long long)e->end, h->e[i - 1].name);
        pos = e->end;
    }
    if (pos < buffer)
        return nb_error(NB_ERR_FORMAT, "the file has %llu bytes after the data of the last tensor",
                        (unsigned long long)(buffer - pos));
    return NB_OK;
}

/* Moves the entries and metadata into f, checking names and keys are unique. */
static nb_status take_header(header *h, nb_safetensors *f)
{
    size_t n = (size_t)h->n + 1, m = (size_t)h->n_meta + 1;
    f->names = nb_calloc(n, sizeof *f->names);
    f->tensors = nb_calloc(n, sizeof *f->tensors);
    f->stored = nb_calloc(n, sizeof *f->stored);
    f->meta_keys = nb_calloc(m, sizeof *f->meta_keys);
    f->meta_values = nb_calloc(m, sizeof *f->meta_values);
    if (!f->names || !f->tensors || !f->stored || !f->meta_keys || !f->meta_values) return oom();
    for (int i = 0; i < h->n; i++) {
        f->names[i] = h->e[i].name;
        h->e[i].name = NULL;
    }
    f->n = h->n;
    if (nb_st_index(f)) return oom();
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->names[f->by_name[i - 1]], f->names[f->by_name[i]]))
            return nb_error(NB_ERR_FORMAT, "tensor name '%.100s' appears twice", f->names[f->by_name[i]]);
    if (h->n_meta > 1) qsort(h->meta, (size_t)h->n_meta, sizeof *h->meta, by_key);
    for (int i = 0; i < h->n_meta; i++) {
        f->meta_keys[i] = h->meta[i].key;
        f->meta_values[i] = h->meta[i].value;
        h->meta[i].key = h->meta[i].value = NULL;
    }
    f->n_meta = h->n_meta;
    for (int i = 1; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i - 1], f->meta_keys[i]))
            return nb_error(NB_ERR_FORMAT, "metadata key '%.100s' appears twice", f->meta_keys[i]);
    return NB_OK;
}

/* Reads `count` F16 or BF16 elements into the F32 array `out`, a chunk at a
 * time, widening each (exactly). */
static nb_status read_widened(FILE *fp, nb_st_dtype dtype, float *out, size_t count, const char *name)
{
    uint16_t chunk[2048];
    for (size_t done = 0; done < count;) {
        size_t k = count - done < sizeof chunk / sizeof *chunk ? count - done : sizeof chunk / sizeof *chunk;
        if (fread(chunk, sizeof *chunk, k, fp) != k)
            return nb_error(NB_ERR_FORMAT,
                            "the file ended while reading tensor '%.100s' (did it change while being read?)", name);
        if (!nb_st_host_is_little_endian()) nb_st_swap_bytes(chunk, k, sizeof *chunk);
        if (dtype == NB_ST_F16) nb_f16_to_f32_n(chunk, out + done, k);
        else nb_bf16_to_f32_n(chunk, out + done, k);
        done += k;
    }
    return NB_OK;
}

/* Reads each tensor's bytes, in file order (the buffer is read front to back). */
static nb_status read_data(FILE *fp, const header *h, nb_safetensors *f)
{
    for (int i = 0; i < h->n; i++) {
        const entry *e = &h->e[i];
        f->stored[i] = (unsigned char)e->dtype;
        nb_status st = nb_tensor_new(&f->tensors[i], nb_st_dtype_loaded(e->dtype), e->ndim, e->shape);
        if (st) return st;
        unsigned char *p = nb_tensor_data(f->tensors[i]);
        size_t es = nb_st_dtype_size(e->dtype), count = (size_t)(e->nbytes / es);
        if (e->dtype == NB_ST_F16 || e->dtype == NB_ST_BF16) {
            st = read_widened(fp, e->dtype, (float *)p, count, f->names[i]);
            if (st) return st;
            continue;
        }
        if (e->nbytes && fread(p, 1, (size_t)e->nbytes, fp) != e->nbytes)
            return nb_error(NB_ERR_FORMAT,
                            "the file ended while reading tensor '%.100s' (did it change while being read?)",
                            f->names[i]);
        if (!nb_st_host_is_little_endian() && es > 1) nb_st_swap_bytes(p, count, es);
        if (e->dtype == NB_ST_BOOL)
            for (size_t k = 0; k < count; k++)
                if (p[k] > 1)
                    return nb_error(NB_ERR_FORMAT, "BOOL tensor '%.100s' holds byte %u at element %zu (not 0 or 1)",
                                    f->names[i], p[k], k);
    }
    return NB_OK;
}

static nb_status load_from(FILE *fp, uint64_t size, nb_safetensors *f)
{
    unsigned char size_le[8];
    if (size < 8 || fread(size_le, 1, 8, fp) != 8)
        return nb_error(NB_ERR_FORMAT, "the file is %llu bytes long, too short for the 8-byte header size",
                        (unsigned long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | size_le[i];
    if (n > NB_SAFETENSORS_MAX_HEADER)
        return nb_error(NB_ERR_FORMAT, "the header size %llu is over the limit of %d bytes", (unsigned long long)n,
                        NB_SAFETENSORS_MAX_HEADER);
    if (n > size - 8)
        return nb_error(NB_ERR_FORMAT, "the header size %llu is larger than the %llu bytes that follow it",
                        (unsigned long long)n, (unsigned long long)(size - 8));
    if (n == 0) return nb_error(NB_ERR_FORMAT, "the header is empty");
    char *text = nb_malloc((size_t)n);
    if (!text) return oom();
    header h = {0};
    nb_status st = NB_OK;
    if (fread(text, 1, (size_t)n, fp) != n)
        st = nb_error(NB_ERR_FORMAT, "the file ended while reading the header (did it change while being read?)");
    else if (text[0] != '{') st = nb_error(NB_ERR_FORMAT, "the header does not start with '{'");
    if (!st) st = parse_header(text, (size_t)n, &h);
    nb_free(text);
    if (!st) st = check_offsets(&h, size - 8 - n);
    if (!st) st = take_header(&h, f);
    if (!st) st = read_data(fp, &h, f);
    header_free(&h);
    return st;
}

static nb_status load_any(FILE *fp, uint64_t size, void *f) { return load_from(fp, size, f); }
static void free_any(void *f) { nb_safetensors_free(f); }

nb_status nb_safetensors_load(nb_safetensors **out, const char *path)
{
    if (!out) return nb_error(NB_ERR_ARG, "safetensors load: out is NULL");
    void *f;
    nb_status st = nb_input_file_load("safetensors", path, sizeof **out, load_any, free_any, &f);
    *out = f;
    return st;
}
