/* The reader interface: checks around the callbacks of every reader, and
 * the record helpers the readers share. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "reader_internal.h"

nb_status nb_reader_new(nb_reader **out, int n_fields, const nb_reader_ops *ops, void *self)
{
    nb_status st = NB_OK;
    if (out) *out = NULL;
    if (!out || !ops) {
        st = nb_error(NB_ERR_ARG, "reader: out or ops is NULL");
    } else if (!ops->next || !ops->reset) {
        st = nb_error(NB_ERR_ARG, "reader %s: next and reset are required", ops->name ? ops->name : "?");
    } else if (!ops->size != !ops->gather) {
        st = nb_error(NB_ERR_ARG, "reader %s: give both size and gather, or neither", ops->name ? ops->name : "?");
    } else if (n_fields < 1 || n_fields > NB_READER_MAX_FIELDS) {
        st = nb_error(NB_ERR_ARG, "reader %s: %d fields (1 to %d allowed)", ops->name ? ops->name : "?", n_fields,
                      NB_READER_MAX_FIELDS);
    }
    nb_reader *r = st ? NULL : nb_malloc(sizeof *r);
    if (!st && !r) st = nb_error(NB_ERR_NOMEM, "reader: out of memory");
    if (st) {
        if (ops && ops->free) ops->free(self);
        return st;
    }
    r->ops = ops;
    r->self = self;
    r->n_fields = n_fields;
    *out = r;
    return NB_OK;
}

void nb_reader_free(nb_reader *r)
{
    if (!r) return;
    if (r->ops->free) r->ops->free(r->self);
    nb_free(r);
}

int nb_reader_fields(const nb_reader *r) { return r ? r->n_fields : 0; }

static const char *name_of(const nb_reader *r) { return r->ops->name ? r->ops->name : "(unnamed)"; }

void nb_record_clear(int n, nb_tensor **rec)
{
    for (int k = 0; k < n; k++) {
        nb_tensor_release(rec[k]);
        rec[k] = NULL;
    }
}

nb_status nb_reader_next(nb_reader *r, nb_tensor **record, bool *end)
{
    if (!r || !record || !end) return nb_error(NB_ERR_ARG, "reader next: reader, record or end is NULL");
    for (int k = 0; k < r->n_fields; k++) record[k] = NULL;
    *end = false;
    nb_status st = r->ops->next(r->self, record, end);
    if (st || *end) {
        nb_record_clear(r->n_fields, record);
        return st;
    }
    for (int k = 0; k < r->n_fields; k++) {
        if (!record[k]) {
            nb_record_clear(r->n_fields, record);
            return nb_error(NB_ERR_STATE, "reader %s: yielded no tensor for field %d", name_of(r), k);
        }
    }
    return NB_OK;
}

nb_status nb_reader_reset(nb_reader *r, uint64_t epoch)
{
    if (!r) return nb_error(NB_ERR_ARG, "reader reset: reader is NULL");
    return r->ops->reset(r->self, epoch);
}

nb_status nb_reader_skip(nb_reader *r, int64_t n)
{
    if (!r) return nb_error(NB_ERR_ARG, "reader skip: reader is NULL");
    if (n < 0) return nb_error(NB_ERR_ARG, "reader %s: cannot skip %lld records", name_of(r), (long long)n);
    if (n == 0) return NB_OK;
    if (r->ops->skip) return r->ops->skip(r->self, n);
    nb_tensor *rec[NB_READER_MAX_FIELDS];
    for (int64_t i = 0; i < n; i++) {
        bool end;
        nb_status st = nb_reader_next(r, rec, &end);
        if (st) return st;
        if (end) break;
        nb_record_clear(r->n_fields, rec);
    }
    return NB_OK;
}

bool nb_reader_indexable(const nb_reader *r) { return r->ops->size && r->ops->gather; }

int64_t nb_reader_size(nb_reader *r) { return r->ops->size(r->self); }

nb_status nb_reader_gather(nb_reader *r, const int64_t *idx, int64_t n, nb_tensor **fields)
{
    for (int k = 0; k < r->n_fields; k++) fields[k] = NULL;
    nb_status st = r->ops->gather(r->self, idx, n, fields);
    if (st) nb_record_clear(r->n_fields, fields);
    return st;
}

bool nb_reader_has_next_many(const nb_reader *r) { return r->ops->next_many != NULL; }

nb_status nb_reader_next_many(nb_reader *r, int64_t max, nb_tensor **fields, int64_t *got)
{
    for (int k = 0; k < r->n_fields; k++) fields[k] = NULL;
    *got = 0;
    nb_status st = r->ops->next_many(r->self, max, fields, got);
    if (st || *got == 0) nb_record_clear(r->n_fields, fields);
    return st;
}

nb_status nb_record_unstack1(int n, nb_tensor **fields)
{
    for (int k = 0; k < n; k++) {
        nb_tensor *row;
        nb_status st = nb_tensor_reshape(&row, fields[k], fields[k]->ndim - 1, fields[k]->shape + 1);
        if (st) return st;
        nb_tensor_release(fields[k]);
        fields[k] = row;
    }
    return NB_OK;
}

nb_status nb_tensor_new_rows(nb_tensor **out, const nb_tensor *t, int64_t rows)
{
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = rows;
    return nb_tensor_new(out, t->dtype, t->ndim, shape);
}
