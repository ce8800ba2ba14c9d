/* Communicators: the part every kind shares (starting and waiting with a
 * timeout, the tensor calls, the hash check, the rings) and the
 * single-process kind, for which every collective is the identity. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nabla/device.h"
#include "comm_internal.h"

#define DEFAULT_TIMEOUT 300.0

double nb_comm_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double default_timeout(void)
{
    const char *s = getenv("NABLA_COMM_TIMEOUT");
    double v = s ? strtod(s, NULL) : 0;
    return v > 0 ? v : DEFAULT_TIMEOUT;
}

nb_status nb_comm_alloc(nb_comm **out, const nb_comm_impl_ops *kind, int rank, int size)
{
    nb_comm *c = nb_calloc(1, sizeof *c);
    double *heard = nb_calloc((size_t)size, sizeof *heard);
    if (!c || !heard) {
        nb_free(c);
        nb_free(heard);
        return nb_error(NB_ERR_NOMEM, "comm: out of memory");
    }
    *c = (nb_comm){
        .kind = kind, .rank = rank, .size = size, .timeout = default_timeout(), .transport = "none", .heard = heard};
    *out = c;
    return NB_OK;
}

/* ---- the single-process kind ------------------------------------------------------ */

static nb_status single_allreduce(nb_comm *c, void *buf, int64_t n, nb_dtype dt, void **req)
{
    *req = NULL;
    return NB_OK;
}

static nb_status single_broadcast(nb_comm *c, void *buf, int64_t bytes, int root, void **req)
{
    *req = NULL;
    return NB_OK;
}

static nb_status single_barrier(nb_comm *c, void **req)
{
    *req = NULL;
    return NB_OK;
}

static nb_status single_test(nb_comm *c, void *req, bool *done)
{
    *done = true;
    return NB_OK;
}

static const nb_comm_impl_ops single_kind = {.name = "single",
                                             .allreduce_sum = single_allreduce,
                                             .broadcast = single_broadcast,
                                             .barrier = single_barrier,
                                             .test = single_test};

nb_status nb_comm_init_single(nb_comm **out)
{
    if (!out) return nb_error(NB_ERR_ARG, "comm_init_single: out is NULL");
    return nb_comm_alloc(out, &single_kind, 0, 1);
}

static void abandon_open(nb_comm *c);
static void free_open(nb_comm *c);

void nb_comm_free(nb_comm *c)
{
    if (!c) return;
    abandon_open(c);
    if (c->kind->free) c->kind->free(c);
    free_open(c);
    nb_free(c->staging);
    nb_free(c->heard);
    nb_free(c);
}

void *nb_comm_staging(nb_comm *c, size_t bytes)
{
    if (bytes <= c->staging_size) return c->staging;
    void *p = nb_malloc(bytes);
    if (!p) {
        nb_error(NB_ERR_NOMEM, "comm: out of memory for %zu bytes of staging", bytes);
        return NULL;
    }
    nb_free(c->staging);
    c->staging = p;
    c->staging_size = bytes;
    return p;
}

int nb_comm_rank(const nb_comm *c) { return c ? c->rank : 0; }
int nb_comm_size(const nb_comm *c) { return c ? c->size : 1; }
const char *nb_comm_kind(const nb_comm *c) { return c ? c->kind->name : "single"; }
const char *nb_comm_transport(const nb_comm *c) { return c ? c->transport : "none"; }
double nb_comm_timeout(const nb_comm *c) { return c->timeout; }

void nb_comm_set_timeout(nb_comm *c, double seconds)
{
    if (c && seconds > 0) c->timeout = seconds;
}

/* ---- starting and waiting ------------------------------------------------------------- */

static nb_status usable(nb_comm *c, const char *what)
{
    if (!c) return nb_error(NB_ERR_ARG, "comm: %s on a NULL communicator", what);
    if (c->broken)
        return nb_error(NB_ERR_STATE,
                        "comm: %s on rank %d: an earlier collective timed out, so the ranks no longer "
                        "agree on what comes next; the communicator is unusable",
                        what, c->rank);
    return NB_OK;
}

/* Wraps the kind's request (NULL: already complete) in one of ours. */
static nb_status make_request(nb_comm *c, void *impl, const char *what, int64_t n, nb_dtype dt, nb_comm_request **out)
{
    nb_comm_request *r = nb_malloc(sizeof *r);
    if (!r) {
        /* Complete it rather than lose it: the other ranks are in it too. */
        bool done = impl == NULL;
        while (!done && !c->kind->test(c, impl, &done)) {}
        *out = NULL;
        return nb_error(NB_ERR_NOMEM, "comm: out of memory for a request");
    }
    double now = nb_comm_clock();
    *r = (nb_comm_request){
        .c = c, .impl = impl, .what = what, .n = n, .dtype = dt, .started = now, .done_at = impl ? 0 : now};
    *out = r;
    return NB_OK;
}

static nb_status summable(nb_dtype dt)
{
    return dt == NB_F32 || dt == NB_F64
        ? NB_OK
        : nb_error(NB_ERR_DTYPE, "comm: all-reduce of %s; it sums float32 or float64", nb_dtype_name(dt));
}

nb_status nb_comm_allreduce_buffer(nb_comm *c, void *buf, int64_t n, nb_dtype dt, nb_comm_request **req)
{
    *req = NULL;
    nb_status st = usable(c, "all-reduce");
    if (st) return st;
    if ((st = summable(dt))) return st;
    void *impl = NULL;
    if ((st = c->kind->allreduce_sum(c, buf, n, dt, &impl))) return st;
    return make_request(c, impl, "all-reduce", n, dt, req);
}

nb_status nb_comm_allreduce_parts(nb_comm *c, int n, const void *const *src, void *const *dst, const int64_t *counts,
                                  nb_dtype dt, nb_comm_request **req)
{
    return nb_comm_reduce_scatter_parts(c, n, src, dst, counts, dt, 0, INT64_MAX, req);
}

nb_status nb_comm_reduce_scatter_parts(nb_comm *c, int n, const void *const *src, void *const *dst,
                                       const int64_t *counts, nb_dtype dt, int64_t keep_lo, int64_t keep_hi,
                                       nb_comm_request **req)
{
    *req = NULL;
    nb_status st = usable(c, "all-reduce");
    if (st) return st;
    if (!c->reads_parts)
        return nb_error(NB_ERR_UNSUPPORTED, "comm: the %s transport all-reduces one buffer, not parts", c->transport);
    if ((st = summable(dt))) return st;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += counts[i];
    void *impl = NULL;
    if (total > 0 && (st = c->kind->allreduce_parts(c, n, src, dst, counts, dt, keep_lo, keep_hi, &impl))) return st;
    return make_request(c, impl, "all-reduce", total, dt, req);
}

nb_status nb_comm_allreduce_tensors(nb_comm *c, int n, nb_tensor *const *x, nb_tensor *const *y, nb_comm_request **req)
{
    *req = NULL;
    void **at = nb_malloc((size_t)n * (2 * sizeof(void *) + sizeof(int64_t)));
    if (!at) return nb_error(NB_ERR_NOMEM, "comm: out of memory for an all-reduce of %d tensors", n);
    int64_t *counts = (int64_t *)(at + 2 * n);
    for (int i = 0; i < n; i++) {
        at[i] = nb_tensor_data(x[i]);
        at[n + i] = nb_tensor_data(y[i]);
        counts[i] = nb_tensor_numel(x[i]);
    }
    nb_status st = nb_comm_allreduce_parts(c, n, (const void *const *)at, at + n, counts, x[0]->dtype, req);
    nb_free(at); /* the transport keeps its own list */
    return st;
}

nb_status nb_comm_broadcast_buffer(nb_comm *c, void *buf, int64_t n, nb_dtype dt, int root, nb_comm_request **req)
{
    *req = NULL;
    nb_status st = usable(c, "broadcast");
    if (st) return st;
    if (root < 0 || root >= c->size)
        return nb_error(NB_ERR_ARG, "comm: broadcast from rank %d, but ranks are 0..%d", root, c->size - 1);
    void *impl = NULL;
    if ((st = c->kind->broadcast(c, buf, n * (int64_t)nb_dtype_size(dt), root, &impl))) return st;
    return make_request(c, impl, "broadcast", n, dt, req);
}

/* r's kind request has completed. */
static void completed(nb_comm_request *r)
{
    r->impl = NULL;
    r->done_at = nb_comm_clock();
    if (r->tracked) atomic_fetch_sub_explicit(&nb_comm_tracked, 1, memory_order_relaxed);
}

nb_status nb_comm_test(nb_comm_request *r, bool *done)
{
    if (!r || !done) return nb_error(NB_ERR_ARG, "comm_test: NULL request or flag");
    if (r->impl) {
        bool d = false;
        nb_status st = r->c->kind->test(r->c, r->impl, &d);
        if (st) return st;
        if (d) completed(r);
    }
    *done = r->impl == NULL;
    return NB_OK;
}

double nb_comm_done_at(const nb_comm_request *r) { return r ? r->done_at : 0; }

/* ---- tracked requests ---------------------------------------------------------------------- */

_Atomic int nb_comm_tracked;
_Thread_local bool nb_comm_tracker;
static nb_comm_request **tracked;
static int n_tracked, cap_tracked;

void nb_comm_track(nb_comm_request *r)
{
    if (!r || r->tracked || !r->impl) return; /* complete already: nothing to move on */
    if (n_tracked == cap_tracked) {
        int cap = cap_tracked ? 2 * cap_tracked : 16;
        nb_comm_request **t = nb_realloc(tracked, (size_t)cap * sizeof *t);
        if (!t) return; /* untracked, it still completes in its wait */
        tracked = t;
        cap_tracked = cap;
    }
    tracked[n_tracked++] = r;
    r->tracked = true;
    nb_comm_tracker = true;
    atomic_fetch_add_explicit(&nb_comm_tracked, 1, memory_order_relaxed);
}

static void untrack(nb_comm_request *r)
{
    if (!r->tracked) return;
    if (r->impl) atomic_fetch_sub_explicit(&nb_comm_tracked, 1, memory_order_relaxed);
    for (int k = 0; k < n_tracked; k++)
        if (tracked[k] == r) {
            tracked[k] = tracked[--n_tracked];
            break;
        }
    r->tracked = false;
}

void nb_comm_progress_tracked(void)
{
    for (int k = 0; k < n_tracked; k++) {
        nb_comm_request *r = tracked[k];
        bool done;
        if (r->impl && !r->c->broken) nb_comm_test(r, &done); /* an error shows in the wait */
    }
}

/* Appends to buf the ranks q < n with mark[q] == want, as "1, 3, 4" (the
 * first 16, then "..."); returns how many there are. */
static int list_ranks(char *buf, size_t cap, const bool *mark, int n, bool want)
{
    size_t len = strlen(buf);
    int count = 0;
    for (int q = 0; q < n; q++) {
        if (mark[q] != want) continue;
        if (count++ < 16 && len < cap) len += (size_t)snprintf(buf + len, cap - len, "%s%d", count > 1 ? ", " : "", q);
        else if (count == 17 && len < cap) len += (size_t)snprintf(buf + len, cap - len, ", ...");
    }
    return count;
}

/* How long before the timeout the census starts: answers take a few
 * polls of the other ranks' waits, tens of milliseconds. */
static double census_window(double timeout) { return timeout / 4 < 2 ? timeout / 4 : 2; }

/* The error of a collective that timed out, naming the ranks not heard
 * from since a timeout before it started: they are the lost ones. */
static nb_status timed_out(nb_comm *c, const nb_comm_request *r)
{
    c->broken = true;
    char head[160];
    snprintf(head, sizeof head,
             "comm: rank %d waited %.0f s for an %s of %lld %s values and the other ranks did not "
             "join",
             c->rank, c->timeout, r->what, (long long)r->n, nb_dtype_name(r->dtype));
    const char *hint = "raise the limit with nb_comm_set_timeout or NABLA_COMM_TIMEOUT";
    if (!c->kind->census_ask) return nb_error(NB_ERR_STATE, "%s; %s", head, hint);
    bool *heard = nb_calloc((size_t)c->size, sizeof *heard);
    if (!heard) return nb_error(NB_ERR_STATE, "%s (and no memory to name the lost rank); %s", head, hint);
    for (int q = 0; q < c->size; q++)
        heard[q] = q == c->rank || (c->heard[q] > 0 && c->heard[q] > r->started - c->timeout);
    char lost[200] = "", alive[200] = "";
    int n_lost = list_ranks(lost, sizeof lost, heard, c->size, false);
    list_ranks(alive, sizeof alive, heard, c->size, true);
    nb_free(heard);
    if (!n_lost)
        return nb_error(NB_ERR_STATE,
                        "%s, though every rank answered the census: they are waiting in different "
                        "collectives (a rank took another path); %s",
                        head, hint);
    return nb_error(NB_ERR_STATE,
                    "%s: rank%s %s %s lost (no answer to the census in %.2g s: dead, stopped, or busy "
                    "outside nabla's collectives; rank%s %s answered); %s",
                    head, n_lost > 1 ? "s" : "", lost, n_lost > 1 ? "are" : "is", census_window(c->timeout),
                    n_lost + 1 < c->size ? "s" : "", alive, hint);
}

nb_status nb_comm_wait(nb_comm_request *r)
{
    if (!r) return nb_error(NB_ERR_ARG, "comm_wait: NULL request");
    nb_comm *c = r->c;
    const nb_comm_impl_ops *k = c->kind;
    nb_status st = NB_OK;
    bool asked = false, pausing = false;
    double t0 = nb_comm_clock();
    for (unsigned spins = 1; r->impl; spins++) {
        bool done = false;
        if ((st = k->test(c, r->impl, &done))) break;
        if (done) {
            completed(r);
            break;
        }
        /* The clock, and the other ranks' census, now and then while
         * spinning; at every test once pausing between tests. */
        if (!pausing && spins % 256) continue;
        if (k->census_listen) k->census_listen(c);
        double waited = nb_comm_clock() - r->started;
        /* Near the timeout, ask who is still there, so that the error can
         * name the rank that is gone. */
        if (!asked && k->census_ask && waited > c->timeout - census_window(c->timeout)) {
            k->census_ask(c);
            asked = true;
        }
        if (waited > c->timeout) {
            st = timed_out(c, r);
            if (k->abandon) k->abandon(c, r->impl);
            break;
        }
        /* MPI moves a nonblocking collective on only inside MPI calls, so
         * test without pause at first (a collective of a few MB takes a
         * fraction of a millisecond), but past 50 us of waiting yield
         * between tests: a rank that shares its core with the rank it waits
         * for would otherwise keep that rank from running for the rest of
         * its time slice. Past 2 ms the rank it waits for is not running
         * (another job holds its core): nap between tests, so that this
         * core goes idle and the scheduler can move that rank onto it; the
         * kind's nap sleeps until that rank moves on, where it can tell. */
        double here = nb_comm_clock() - t0;
        if (here > 5e-5) sched_yield();
        if (here > 2e-3) {
            pausing = true;
            if (!k->nap || !k->nap(c, r->impl, 1e-3)) {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
        }
    }
    untrack(r);
    nb_free(r);
    return st;
}

/* ---- all-reduces open across ops ------------------------------------------------------------ */

/* Room for one more open all-reduce of n tensors; its slot keeps the
 * buffers of the bucket that used it last step. */
static nb_comm_open *open_slot(nb_comm *c, int n)
{
    if (c->n_open == c->cap_open) {
        int cap = c->cap_open ? 2 * c->cap_open : 8;
        nb_comm_open *o = nb_realloc(c->open, (size_t)cap * sizeof *o);
        if (!o) return NULL;
        memset(o + c->cap_open, 0, (size_t)(cap - c->cap_open) * sizeof *o);
        c->open = o;
        c->cap_open = cap;
    }
    nb_comm_open *o = &c->open[c->n_open];
    if (o->cap < n) {
        nb_tensor **ts = nb_realloc(o->ts, (size_t)n * sizeof *ts);
        if (!ts) return NULL;
        o->ts = ts;
        o->cap = n;
    }
    return o;
}

nb_status nb_comm_open_allreduce(nb_comm *c, nb_tensor *const *ts, int n)
{
    nb_status st = usable(c, "all-reduce");
    if (st) return st;
    nb_comm_open *o = open_slot(c, n);
    if (!o) return nb_error(NB_ERR_NOMEM, "comm: out of memory for an open all-reduce");
    nb_dtype dt = ts[0]->dtype;
    size_t esize = nb_dtype_size(dt);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += nb_tensor_numel(ts[i]);
    char *buf = nb_tensor_data(ts[0]);
    o->packed = n > 1 && !c->reads_parts;
    if (o->packed) {
        size_t need = (size_t)(total > 0 ? total : 1) * esize;
        if (o->buf_size < need) {
            char *b = nb_malloc(need);
            if (!b) return nb_error(NB_ERR_NOMEM, "comm: out of memory for a bucket of %lld values", (long long)total);
            nb_free(o->buf);
            o->buf = b;
            o->buf_size = need;
        }
        buf = o->buf;
        int64_t at = 0;
        for (int i = 0; i < n && !st; i++) {
            memcpy(buf + at * (int64_t)esize, nb_tensor_data(ts[i]), (size_t)nb_tensor_numel(ts[i]) * esize);
            at += nb_tensor_numel(ts[i]);
        }
    }
    o->t_start = nb_comm_clock();
    o->bytes = (double)total * (double)esize;
    st = n > 1 && !o->packed ? nb_comm_allreduce_tensors(c, n, ts, ts, &o->req)
                             : nb_comm_allreduce_buffer(c, buf, total, dt, &o->req);
    if (st) return st;
    nb_comm_track(o->req);
    for (int i = 0; i < n; i++) o->ts[i] = nb_tensor_retain(ts[i]);
    o->n = n;
    c->n_open++;
    return NB_OK;
}

/* Writes a completed bucket's sums back into its tensors and lets them go. */
static void close_open(nb_comm *c, nb_comm_open *o, bool unpack)
{
    if (unpack && o->packed) {
        size_t esize = nb_dtype_size(o->ts[0]->dtype);
        const char *at = o->buf;
        for (int i = 0; i < o->n; i++) {
            size_t bytes = (size_t)nb_tensor_numel(o->ts[i]) * esize;
            memcpy(nb_tensor_data(o->ts[i]), at, bytes);
            at += bytes;
        }
    }
    for (int i = 0; i < o->n; i++) nb_tensor_release(o->ts[i]);
    o->n = 0;
}

/* Whether open all-reduce o sums one of the n tensors. */
static bool carries(const nb_comm_open *o, nb_tensor *const *ts, int n)
{
    for (int i = 0; i < o->n; i++)
        for (int j = 0; j < n; j++)
            if (o->ts[i] == ts[j]) return true;
    return false;
}

nb_status nb_comm_wait_open(nb_comm *c, nb_tensor *const *ts, int n)
{
    int upto = ts ? -1 : c->n_open - 1;
    for (int k = 0; k < c->n_open && ts; k++)
        if (carries(&c->open[k], ts, n)) upto = k;
    if (upto < 0) return NB_OK; /* completed by an earlier wait */
    double t0 = nb_comm_clock();
    nb_comm_spans spans = {t0, 0, -1, &c->stats.comm_seconds, &c->stats.overlap_seconds};
    nb_status st = NB_OK;
    for (int k = 0; k <= upto; k++) {
        nb_comm_open *o = &c->open[k];
        nb_comm_request *r = o->req;
        o->req = NULL;
        double done_at = nb_comm_done_at(r);
        /* After a failure, still complete the rest: the other ranks are in them. */
        nb_status s = nb_comm_finish(r);
        if (!s) {
            c->stats.allreduces++;
            c->stats.bytes += o->bytes;
            nb_comm_spans_add(&spans, o->t_start, done_at > 0 ? done_at : nb_comm_clock());
        }
        close_open(c, o, !s && !st);
        if (!st) st = s;
    }
    nb_comm_spans_flush(&spans);
    /* The completed slots go after the open ones, keeping their buffers
     * for the next step's buckets. */
    int done = upto + 1, left = c->n_open - done;
    nb_comm_open tmp[8];
    while (done > 0) {
        int m = done < 8 ? done : 8;
        memcpy(tmp, c->open, (size_t)m * sizeof *tmp);
        memmove(c->open, c->open + m, (size_t)(c->n_open - m) * sizeof *tmp);
        memcpy(c->open + c->n_open - m, tmp, (size_t)m * sizeof *tmp);
        done -= m;
    }
    c->n_open = left;
    c->stats.wait_seconds += nb_comm_clock() - t0;
    return st;
}

void nb_comm_note_sync(nb_comm *c, double bytes, double seconds)
{
    c->stats.allreduces++;
    c->stats.bytes += bytes;
    c->stats.comm_seconds += seconds;
    c->stats.wait_seconds += seconds;
}

void nb_comm_stats_get(const nb_comm *c, nb_comm_stats *s)
{
    if (!s) return;
    *s = c ? c->stats : (nb_comm_stats){0};
    s->hidden_fraction = s->comm_seconds > 0 ? s->overlap_seconds / s->comm_seconds : 0;
}

/* ---- the tensor calls --------------------------------------------------------------------- */

nb_status nb_comm_pack(const nb_tensor *t, void *buf)
{
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, (nb_tensor *)t);
    if (st) return st;
    memcpy(buf, nb_tensor_data(c), (size_t)nb_tensor_numel(c) * nb_dtype_size(c->dtype));
    nb_tensor_release(c);
    return NB_OK;
}

static nb_status check_tensor(const char *what, const nb_tensor *t)
{
    if (!t) return nb_error(NB_ERR_ARG, "comm: %s of a NULL tensor", what);
    if (!nb_tensor_is_contiguous(t))
        return nb_error(NB_ERR_ARG, "comm: %s of a non-contiguous tensor (make it contiguous first)", what);
    return NB_OK;
}

nb_status nb_comm_allreduce_sum_async(nb_comm *c, nb_tensor *t, nb_comm_request **req)
{
    if (!req) return nb_error(NB_ERR_ARG, "comm: all-reduce without room for the request");
    *req = NULL;
    nb_status st = check_tensor("all-reduce", t);
    return st ? st : nb_comm_allreduce_buffer(c, nb_tensor_data(t), nb_tensor_numel(t), t->dtype, req);
}

nb_status nb_comm_allreduce_sum(nb_comm *c, nb_tensor *t)
{
    nb_comm_request *r;
    nb_status st = nb_comm_allreduce_sum_async(c, t, &r);
    return st ? st : nb_comm_wait(r);
}

nb_status nb_comm_broadcast(nb_comm *c, nb_tensor *t, int root)
{
    nb_comm_request *r = NULL;
    nb_status st = check_tensor("broadcast", t);
    if (!st) st = nb_comm_broadcast_buffer(c, nb_tensor_data(t), nb_tensor_numel(t), t->dtype, root, &r);
    return st ? st : nb_comm_wait(r);
}

nb_status nb_comm_barrier(nb_comm *c)
{
    nb_status st = usable(c, "barrier");
    void *impl = NULL;
    if (!st) st = c->kind->barrier(c, &impl);
    nb_comm_request *r = NULL;
    if (!st) st = make_request(c, impl, "barrier", 0, NB_F32, &r);
    return st ? st : nb_comm_wait(r);
}

/* ---- the same-model check ------------------------------------------------------------------- */

uint64_t nb_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

/* Each rank writes its hash, as two 32-bit halves (exact in float64), into
 * its own slots of a zeroed vector; the sum over ranks is every rank's hash,
 * so one all-reduce of a fixed size tells everyone everything, however the
 * models differ. */
nb_status nb_comm_check_same(nb_comm *c, const char *what, uint64_t hash)
{
    nb_status st = usable(c, "hash check");
    if (st) return st;
    int n = c->size;
    double *v = nb_calloc((size_t)2 * (size_t)n, sizeof *v);
    if (!v) return nb_error(NB_ERR_NOMEM, "comm: out of memory for the hash check");
    v[2 * c->rank] = (double)(hash >> 32);
    v[2 * c->rank + 1] = (double)(hash & 0xffffffffu);
    nb_comm_request *r = NULL;
    st = nb_comm_allreduce_buffer(c, v, 2 * (int64_t)n, NB_F64, &r);
    if (!st) st = nb_comm_finish(r);
    bool *differs = st ? NULL : nb_calloc((size_t)n, sizeof *differs);
    if (!st && !differs) st = nb_error(NB_ERR_NOMEM, "comm: out of memory for the hash check");
    if (!st) {
        for (int k = 1; k < n; k++) differs[k] = v[2 * k] != v[0] || v[2 * k + 1] != v[1];
        char ranks[256] = "";
        int bad = list_ranks(ranks, sizeof ranks, differs, n, true);
        if (bad)
            st = nb_error(NB_ERR_ARG, "comm: rank %d of %d: %s differ across ranks: rank%s %s differ%s from rank 0's",
                          c->rank, n, what, bad > 1 ? "s" : "", ranks, bad > 1 ? "" : "s");
    }
    nb_free(differs);
    nb_free(v);
    return st;
}

/* ---- rings ---------------------------------------------------------------------------------------- */

static nb_comm single_ring0 = {
    .kind = &single_kind, .rank = 0, .size = 1, .timeout = DEFAULT_TIMEOUT, .transport = "none"};
static nb_comm *rings[NB_COMM_MAX_RINGS];

nb_status nb_comm_set_ring(int ring, nb_comm *c)
{
    if (ring < 0 || ring >= NB_COMM_MAX_RINGS)
        return nb_error(NB_ERR_ARG, "comm_set_ring: ring %d is not in [0, %d)", ring, NB_COMM_MAX_RINGS);
    rings[ring] = c;
    return NB_OK;
}

/* Ring r's communicator, or NULL: what nb_comm_ring says, without the error. */
static nb_comm *ring_at(int r) { return rings[r] ? rings[r] : r == 0 ? &single_ring0 : NULL; }

void nb_comm_wait_all_open(void)
{
    for (int r = 0; r < NB_COMM_MAX_RINGS; r++) {
        nb_comm *c = ring_at(r);
        if (c && c->n_open) nb_comm_wait_open(c, NULL, 0);
    }
}

/* What nb_comm_free does with all-reduces still open (a program that
 * failed between its start and wait ops): their requests go to the kind to
 * keep until it is freed (the transport may still hold the buffers), and
 * only then are the tensors and buffers let go. */
static void abandon_open(nb_comm *c)
{
    for (int k = 0; k < c->n_open; k++) {
        nb_comm_request *r = c->open[k].req;
        if (!r) continue;
        if (r->impl && c->kind->abandon) c->kind->abandon(c, r->impl);
        untrack(r);
        nb_free(r);
        c->open[k].req = NULL;
    }
}

static void free_open(nb_comm *c)
{
    for (int k = 0; k < c->n_open; k++) close_open(c, &c->open[k], false);
    for (int k = 0; k < c->cap_open; k++) {
        nb_free(c->open[k].ts);
        nb_free(c->open[k].buf);
    }
    nb_free(c->open);
}

nb_comm *nb_comm_ring(int ring)
{
    if (ring < 0 || ring >= NB_COMM_MAX_RINGS) {
        nb_error(NB_ERR_ARG, "comm: ring %d is not in [0, %d)", ring, NB_COMM_MAX_RINGS);
        return NULL;
    }
    nb_comm *c = ring_at(ring);
    if (c) return c;
    nb_error(NB_ERR_NOT_FOUND, "comm: no communicator is set for ring %d (nb_comm_set_ring)", ring);
    return NULL;
}
