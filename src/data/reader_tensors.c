/* The source reader over in-memory tensors: record i is row i of every
 * field. Rows are copied out with memcpy, so the records it yields never
 * share storage with the tensors it holds (see reader.h). */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "reader_internal.h"

typedef struct {
    int n_fields;
    int64_t n;   /* records */
    int64_t pos; /* next record of the epoch */
    nb_tensor *fields[NB_READER_MAX_FIELDS];
    size_t row_bytes[NB_READER_MAX_FIELDS];
} tensors_reader;

static void tensors_free(void *self)
{
    tensors_reader *s = self;
    for (int k = 0; k < s->n_fields; k++) nb_tensor_release(s->fields[k]);
    nb_free(s);
}

static const char *row_ptr(const tensors_reader *s, int k, int64_t i)
{
    return (const char *)nb_tensor_data(s->fields[k]) + (size_t)i * s->row_bytes[k];
}

static nb_status tensors_next(void *self, nb_tensor **record, bool *end)
{
    tensors_reader *s = self;
    if (s->pos >= s->n) {
        *end = true;
        return NB_OK;
    }
    for (int k = 0; k < s->n_fields; k++) {
        const nb_tensor *f = s->fields[k];
        nb_status st = nb_tensor_from_data(&record[k], f->dtype, f->ndim - 1, f->shape + 1, row_ptr(s, k, s->pos));
        if (st) return st;
    }
    s->pos++;
    return NB_OK;
}

static nb_status tensors_reset(void *self, uint64_t epoch)
{
    ((tensors_reader *)self)->pos = 0;
    return NB_OK;
}

static nb_status tensors_skip(void *self, int64_t n)
{
    tensors_reader *s = self;
    s->pos = n > s->n - s->pos ? s->n : s->pos + n;
    return NB_OK;
}

static int64_t tensors_size(void *self) { return ((tensors_reader *)self)->n; }

static nb_status tensors_gather(void *self, const int64_t *idx, int64_t n, nb_tensor **fields)
{
    tensors_reader *s = self;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= s->n)
            return nb_error(NB_ERR_ARG, "reader from_tensors: record %lld asked for, there are %lld", (long long)idx[i],
                            (long long)s->n);
    for (int k = 0; k < s->n_fields; k++) {
        nb_status st = nb_tensor_new_rows(&fields[k], s->fields[k], n);
        if (st) return st;
        char *dst = nb_tensor_data(fields[k]);
        size_t rb = s->row_bytes[k];
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * rb, row_ptr(s, k, idx[i]), rb);
    }
    return NB_OK;
}

static nb_status tensors_next_many(void *self, int64_t max, nb_tensor **fields, int64_t *got)
{
    tensors_reader *s = self;
    int64_t n = s->n - s->pos < max ? s->n - s->pos : max;
    if (n <= 0) return NB_OK;
    for (int k = 0; k < s->n_fields; k++) {
        nb_status st = nb_tensor_new_rows(&fields[k], s->fields[k], n);
        if (st) return st;
        memcpy(nb_tensor_data(fields[k]), row_ptr(s, k, s->pos), (size_t)n * s->row_bytes[k]);
    }
    s->pos += n;
    *got = n;
    return NB_OK;
}

static const nb_reader_ops tensors_ops = {
    .name = "from_tensors",
    .next = tensors_next,
    .reset = tensors_reset,
    .skip = tensors_skip,
    .free = tensors_free,
    .size = tensors_size,
    .gather = tensors_gather,
    .next_many = tensors_next_many,
};

nb_status nb_reader_from_tensors(nb_reader **out, int n_fields, nb_tensor *const *fields)
{
    if (!out) return nb_error(NB_ERR_ARG, "reader from_tensors: out is NULL");
    *out = NULL;
    if (n_fields < 1 || n_fields > NB_READER_MAX_FIELDS)
        return nb_error(NB_ERR_ARG, "reader from_tensors: %d fields (1 to %d allowed)", n_fields, NB_READER_MAX_FIELDS);
    if (!fields) return nb_error(NB_ERR_ARG, "reader from_tensors: fields is NULL");
    for (int k = 0; k < n_fields; k++) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        if (!fields[k]) return nb_error(NB_ERR_ARG, "reader from_tensors: field %d is NULL", k);
        if (fields[k]->ndim < 1)
            return nb_error(NB_ERR_SHAPE, "reader from_tensors: field %d is a scalar; fields are [N, ...]", k);
        if (fields[k]->shape[0] != fields[0]->shape[0])
            return nb_error(NB_ERR_SHAPE,
                            "reader from_tensors: field %d has shape %s but field 0 has %s: "
                            "every field needs the same number of records",
                            k, nb_shape_str(a, sizeof a, fields[k]->ndim, fields[k]->shape),
                            nb_shape_str(b, sizeof b, fields[0]->ndim, fields[0]->shape));
    }
    tensors_reader *s = nb_calloc(1, sizeof *s);
    if (!s) return nb_error(NB_ERR_NOMEM, "reader from_tensors: out of memory");
    s->n = fields[0]->shape[0];
    for (int k = 0; k < n_fields; k++) {
        nb_status st = nb_tensor_contiguous(&s->fields[k], fields[k]);
        if (st) {
            tensors_free(s);
            return st;
        }
        s->n_fields = k + 1;
        const nb_tensor *f = s->fields[k];
        s->row_bytes[k] = (size_t)nb_shape_numel(f->ndim - 1, f->shape + 1) * nb_dtype_size(f->dtype);
    }
    return nb_reader_new(out, n_fields, &tensors_ops, s);
}
