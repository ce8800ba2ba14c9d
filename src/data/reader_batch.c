/* The batch decorator: stacks records into [B, ...] tensors.
 *
 * When the inner reader can hand over several records at once (from_tensors,
 * shuffle over it) a batch is one gather: a memcpy per row, no tensor per
 * record. Otherwise records are read one by one and copied into place. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "reader_internal.h"

typedef struct {
    nb_reader *inner;
    int n_fields;
    int batch_size;
    bool drop_last;
} batch_reader;

static nb_status check_like(const nb_tensor *batch, const nb_tensor *rec, int k, int64_t i)
{
    if (rec->dtype == batch->dtype && nb_shape_equal(rec->ndim, rec->shape, batch->ndim - 1, batch->shape + 1))
        return NB_OK;
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    return nb_error(
        NB_ERR_SHAPE,
        "reader batch: field %d of record %lld of the batch is %s %s, but the batch's first record has %s %s", k,
        (long long)i, nb_dtype_name(rec->dtype), nb_shape_str(a, sizeof a, rec->ndim, rec->shape),
        nb_dtype_name(batch->dtype), nb_shape_str(b, sizeof b, batch->ndim - 1, batch->shape + 1));
}

static nb_status copy_row(nb_tensor *batch, int64_t i, nb_tensor *rec)
{
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, rec);
    if (st) return st;
    size_t rb = (size_t)nb_tensor_numel(c) * nb_dtype_size(c->dtype);
    memcpy((char *)nb_tensor_data(batch) + (size_t)i * rb, nb_tensor_data(c), rb);
    nb_tensor_release(c);
    return NB_OK;
}

/* Reads up to batch_size records one by one into fields[k] of [B, ...];
 * *got says how many came. */
static nb_status stack_records(batch_reader *s, nb_tensor **fields, int64_t *got)
{
    nb_tensor *rec[NB_READER_MAX_FIELDS];
    nb_status st = NB_OK;
    *got = 0;
    while (*got < s->batch_size) {
        bool end;
        st = nb_reader_next(s->inner, rec, &end);
        if (st || end) break;
        for (int k = 0; k < s->n_fields && !st; k++) {
            if (*got == 0) {
                int64_t shape[NB_MAX_DIMS];
                if (rec[k]->ndim + 1 > NB_MAX_DIMS) {
                    st = nb_error(NB_ERR_SHAPE, "reader batch: field %d has %d dimensions already (at most %d)", k,
                                  rec[k]->ndim, NB_MAX_DIMS);
                    break;
                }
                shape[0] = s->batch_size;
                memcpy(shape + 1, rec[k]->shape, (size_t)rec[k]->ndim * sizeof *shape);
                st = nb_tensor_new(&fields[k], rec[k]->dtype, rec[k]->ndim + 1, shape);
            } else {
                st = check_like(fields[k], rec[k], k, *got);
            }
            if (!st) st = copy_row(fields[k], *got, rec[k]);
        }
        nb_record_clear(s->n_fields, rec);
        if (st) break;
        (*got)++;
    }
    return st;
}

/* The last, short batch: a tensor of exactly `got` rows. */
static nb_status shrink(nb_tensor **field, int64_t got)
{
    nb_tensor *t;
    nb_status st = nb_tensor_new_rows(&t, *field, got);
    if (st) return st;
    memcpy(nb_tensor_data(t), nb_tensor_data(*field), (size_t)nb_tensor_numel(t) * nb_dtype_size(t->dtype));
    nb_tensor_release(*field);
    *field = t;
    return NB_OK;
}

static nb_status batch_next(void *self, nb_tensor **record, bool *end)
{
    batch_reader *s = self;
    int64_t got;
    nb_status st = nb_reader_has_next_many(s->inner) ? nb_reader_next_many(s->inner, s->batch_size, record, &got)
                                                     : stack_records(s, record, &got);
    if (st) return st;
    if (got == 0 || (got < s->batch_size && s->drop_last)) {
        nb_record_clear(s->n_fields, record);
        *end = true;
        return NB_OK;
    }
    for (int k = 0; k < s->n_fields; k++) {
        if (record[k]->shape[0] == got) continue;
        st = shrink(&record[k], got);
        if (st) return st;
    }
    return NB_OK;
}

static nb_status batch_reset(void *self, uint64_t epoch)
{
    return nb_reader_reset(((batch_reader *)self)->inner, epoch);
}

static nb_status batch_skip(void *self, int64_t n)
{
    batch_reader *s = self;
    int64_t records = n > INT64_MAX / s->batch_size ? INT64_MAX : n * s->batch_size;
    return nb_reader_skip(s->inner, records);
}

static void batch_free(void *self)
{
    batch_reader *s = self;
    nb_reader_free(s->inner);
    nb_free(s);
}

static const nb_reader_ops batch_ops = {
    .name = "batch",
    .next = batch_next,
    .reset = batch_reset,
    .skip = batch_skip,
    .free = batch_free,
};

nb_status nb_reader_batch(nb_reader **out, nb_reader *inner, int batch_size, bool drop_last)
{
    nb_status st = NB_OK;
    if (out) *out = NULL;
    if (!out || !inner) st = nb_error(NB_ERR_ARG, "reader batch: out or inner is NULL");
    else if (batch_size < 1) st = nb_error(NB_ERR_ARG, "reader batch: batch size %d (must be at least 1)", batch_size);
    batch_reader *s = st ? NULL : nb_calloc(1, sizeof *s);
    if (!st && !s) st = nb_error(NB_ERR_NOMEM, "reader batch: out of memory");
    if (st) {
        nb_reader_free(inner);
        return st;
    }
    s->inner = inner;
    s->n_fields = nb_reader_fields(inner);
    s->batch_size = batch_size;
    s->drop_last = drop_last;
    return nb_reader_new(out, s->n_fields, &batch_ops, s);
}
