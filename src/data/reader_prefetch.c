/* The prefetch decorator: a producer thread runs the inner reader and fills
 * a bounded queue; next takes from it.
 *
 * The queue carries the inner reader's whole sequence, end and errors
 * included: the producer pushes the end of the epoch or an error (with its
 * text, since error text is per thread) as an item and stops. Stopping the
 * producer (reset, skip, free) never loses a record: a record already read
 * from the inner reader is pushed even when the queue is full (there is one
 * spare slot for it), so after the join the queue plus the inner reader's
 * position are exactly the rest of the epoch.
 *
 * The queue, `stop` and `inner_done` are shared and guarded by `mu`; every
 * other field is the consumer's, except `scratch`, which only the producer
 * touches while it runs. */
#include <pthread.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "reader_internal.h"

typedef struct {
    nb_tensor **rec; /* this slot's n_fields references */
    bool end;
    nb_status st;
    char *msg; /* the inner reader's error text, when st != NB_OK */
} item;

/* An item taken from the queue: its record moved out of the slot. */
typedef struct {
    nb_tensor *rec[NB_READER_MAX_FIELDS];
    bool end;
    nb_status st;
    char *msg;
} taken;

typedef struct {
    nb_reader *inner;
    int n_fields, depth, cap; /* cap = depth + 1: the spare slot */
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    item *q;
    nb_tensor **slots; /* cap * n_fields record slots behind q[i].rec */
    int head, count;
    bool stop;       /* the consumer asks the producer to finish */
    bool inner_done; /* the producer has pushed an end or an error */
    pthread_t thread;
    bool running;  /* a producer thread exists (to be joined) */
    bool at_end;   /* the consumer took the end of the epoch */
    nb_status err; /* sticky: an error the consumer took, returned until reset */
    char *err_msg;
    nb_tensor *scratch[NB_READER_MAX_FIELDS];
} prefetch_reader;

static void *produce(void *arg)
{
    prefetch_reader *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        bool end = false;
        nb_status st = nb_reader_next(s->inner, s->scratch, &end);
        char *msg = st ? nb_strdup(nb_last_error()) : NULL;
        pthread_mutex_lock(&s->mu);
        while (s->count >= s->depth && !s->stop) pthread_cond_wait(&s->not_full, &s->mu);
        item *it = &s->q[(s->head + s->count) % s->cap];
        memcpy(it->rec, s->scratch, (size_t)s->n_fields * sizeof *it->rec);
        it->end = end;
        it->st = st;
        it->msg = msg;
        s->count++;
        pthread_cond_signal(&s->not_empty);
        if (st || end) {
            s->inner_done = true;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static nb_status start(prefetch_reader *s)
{
    if (s->running || s->inner_done) return NB_OK;
    s->stop = false;
    int e = pthread_create(&s->thread, NULL, produce, s);
    if (e) return nb_error(NB_ERR_STATE, "reader prefetch: cannot start its thread: %s", strerror(e));
    s->running = true;
    return NB_OK;
}

static void stop(prefetch_reader *s)
{
    if (!s->running) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->not_full);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->running = false;
    s->stop = false;
}

/* Takes the oldest item, waiting for the producer if need be; the caller
 * owns its record and message. The record leaves its slot under the lock,
 * before the producer may reuse the slot. */
static void pop(prefetch_reader *s, taken *t)
{
    pthread_mutex_lock(&s->mu);
    while (s->count == 0) pthread_cond_wait(&s->not_empty, &s->mu);
    item *it = &s->q[s->head];
    memcpy(t->rec, it->rec, (size_t)s->n_fields * sizeof *t->rec);
    t->end = it->end;
    t->st = it->st;
    t->msg = it->msg;
    it->msg = NULL;
    s->head = (s->head + 1) % s->cap;
    s->count--;
    pthread_cond_signal(&s->not_full);
    pthread_mutex_unlock(&s->mu);
}

static void drop(prefetch_reader *s, taken *t)
{
    nb_record_clear(s->n_fields, t->rec);
    nb_free(t->msg);
    t->msg = NULL;
}

/* With the producer stopped: empties the queue and forgets the epoch. */
static void drain(prefetch_reader *s)
{
    while (s->count > 0) {
        taken t;
        pop(s, &t);
        drop(s, &t);
    }
    s->head = 0;
    s->inner_done = false;
    s->at_end = false;
    s->err = NB_OK;
    nb_free(s->err_msg);
    s->err_msg = NULL;
}

static nb_status sticky_error(prefetch_reader *s)
{
    if (s->err_msg) return nb_error(s->err, "%s", s->err_msg);
    return nb_error(s->err, "reader prefetch: the inner reader failed (%s)", nb_status_name(s->err));
}

static nb_status prefetch_next(void *self, nb_tensor **record, bool *end)
{
    prefetch_reader *s = self;
    if (s->err) return sticky_error(s);
    if (s->at_end) {
        *end = true;
        return NB_OK;
    }
    nb_status st = start(s); /* normally running already; not after a failed start */
    if (st) return st;
    taken t;
    pop(s, &t);
    if (t.st) {
        s->err = t.st;
        s->err_msg = t.msg;
        return sticky_error(s);
    }
    if (t.end) {
        s->at_end = true;
        *end = true;
        return NB_OK;
    }
    memcpy(record, t.rec, (size_t)s->n_fields * sizeof *record);
    return NB_OK;
}

/* Stops the producer, passes over what it queued, then skips the rest in the
 * inner reader (which can do it without building records). A queued error
 * is passed over like the record that raised it, as it would never have
 * been raised without prefetch (skip builds nothing). */
static nb_status prefetch_skip(void *self, int64_t n)
{
    prefetch_reader *s = self;
    stop(s);
    if (s->err) return sticky_error(s);
    while (n > 0 && s->count > 0 && !s->at_end) {
        taken t;
        pop(s, &t);
        if (t.end) {
            s->at_end = true;
            break;
        }
        if (t.st) s->inner_done = false; /* the producer may go on after it */
        drop(s, &t);
        n--;
    }
    if (n > 0 && !s->at_end && !s->inner_done) {
        nb_status st = nb_reader_skip(s->inner, n);
        if (st) {
            s->err = st;
            s->err_msg = nb_strdup(nb_last_error());
            s->inner_done = true;
            return st;
        }
    }
    return s->at_end ? NB_OK : start(s);
}

static nb_status prefetch_reset(void *self, uint64_t epoch)
{
    prefetch_reader *s = self;
    stop(s);
    drain(s);
    nb_status st = nb_reader_reset(s->inner, epoch);
    if (st) {
        /* The inner reader is in no known place: fail until the next reset. */
        s->err = st;
        s->err_msg = nb_strdup(nb_last_error());
        s->inner_done = true;
        return st;
    }
    return start(s);
}

static void prefetch_free(void *self)
{
    prefetch_reader *s = self;
    stop(s);
    drain(s);
    pthread_cond_destroy(&s->not_full);
    pthread_cond_destroy(&s->not_empty);
    pthread_mutex_destroy(&s->mu);
    nb_reader_free(s->inner);
    nb_free(s->slots);
    nb_free(s->q);
    nb_free(s);
}

static const nb_reader_ops prefetch_ops = {
    .name = "prefetch",
    .next = prefetch_next,
    .reset = prefetch_reset,
    .skip = prefetch_skip,
    .free = prefetch_free,
};

#define MAX_DEPTH 4096

nb_status nb_reader_prefetch(nb_reader **out, nb_reader *inner, int depth)
{
    nb_status st = NB_OK;
    if (out) *out = NULL;
    if (!out || !inner) st = nb_error(NB_ERR_ARG, "reader prefetch: out or inner is NULL");
    else if (depth < 1 || depth > MAX_DEPTH)
        st = nb_error(NB_ERR_ARG, "reader prefetch: depth %d (1 to %d allowed)", depth, MAX_DEPTH);
    prefetch_reader *s = st ? NULL : nb_calloc(1, sizeof *s);
    if (!st && !s) st = nb_error(NB_ERR_NOMEM, "reader prefetch: out of memory");
    if (st) {
        nb_reader_free(inner);
        return st;
    }
    s->n_fields = nb_reader_fields(inner);
    s->depth = depth;
    s->cap = depth + 1;
    s->q = nb_calloc((size_t)s->cap, sizeof *s->q);
    s->slots = nb_calloc((size_t)s->cap * (size_t)s->n_fields, sizeof *s->slots);
    int e = 0;
    if (!s->q || !s->slots || (e = pthread_mutex_init(&s->mu, NULL))) {
        nb_free(s->q);
        nb_free(s->slots);
        nb_free(s);
        nb_reader_free(inner);
        return e ? nb_error(NB_ERR_STATE, "reader prefetch: %s", strerror(e))
                 : nb_error(NB_ERR_NOMEM, "reader prefetch: out of memory");
    }
    pthread_cond_init(&s->not_empty, NULL);
    pthread_cond_init(&s->not_full, NULL);
    for (int i = 0; i < s->cap; i++) s->q[i].rec = &s->slots[(size_t)i * (size_t)s->n_fields];
    s->inner = inner;
    st = nb_reader_new(out, s->n_fields, &prefetch_ops, s);
    if (st) return st;
    /* Start reading now, so that the first batch is ready when asked for. */
    st = start(s);
    if (st) {
        nb_reader_free(*out);
        *out = NULL;
    }
    return st;
}
