/* The map decorator: a user function applied to every record. */
#include <stdlib.h>
#include "nabla/device.h"
#include "reader_internal.h"

typedef struct {
    nb_reader *inner;
    int n_fields;
    nb_reader_map_fn fn;
    void *ctx;
} map_reader;

static nb_status map_next(void *self, nb_tensor **record, bool *end)
{
    map_reader *s = self;
    nb_status st = nb_reader_next(s->inner, record, end);
    if (st || *end) return st;
    st = s->fn(s->ctx, s->n_fields, record);
    return st ? nb_error_context(st, "reader map") : NB_OK;
}

static nb_status map_reset(void *self, uint64_t epoch) { return nb_reader_reset(((map_reader *)self)->inner, epoch); }

static nb_status map_skip(void *self, int64_t n) { return nb_reader_skip(((map_reader *)self)->inner, n); }

static void map_free(void *self)
{
    map_reader *s = self;
    nb_reader_free(s->inner);
    nb_free(s);
}

static const nb_reader_ops map_ops = {
    .name = "map",
    .next = map_next,
    .reset = map_reset,
    .skip = map_skip,
    .free = map_free,
};

nb_status nb_reader_map(nb_reader **out, nb_reader *inner, nb_reader_map_fn fn, void *ctx)
{
    nb_status st = NB_OK;
    if (out) *out = NULL;
    if (!out || !inner || !fn) st = nb_error(NB_ERR_ARG, "reader map: out, inner or fn is NULL");
    map_reader *s = st ? NULL : nb_calloc(1, sizeof *s);
    if (!st && !s) st = nb_error(NB_ERR_NOMEM, "reader map: out of memory");
    if (st) {
        nb_reader_free(inner);
        return st;
    }
    s->inner = inner;
    s->n_fields = nb_reader_fields(inner);
    s->fn = fn;
    s->ctx = ctx;
    return nb_reader_new(out, s->n_fields, &map_ops, s);
}
