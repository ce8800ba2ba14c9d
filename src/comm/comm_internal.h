/* The communicator's insides: one struct, and the small interface each kind
 * (single process, MPI) implements. Every collective is started, then
 * tested until it completes; comm.c does the waiting, with the timeout, so
 * a kind only says how to start and how to test. */
#ifndef NABLA_COMM_INTERNAL_H
#define NABLA_COMM_INTERNAL_H

#include <stdatomic.h>
#include "nabla/comm.h"

typedef struct nb_comm_impl_ops {
    const char *name;
    /* Each starts a collective and sets *req to the kind's request, or to
     * NULL when it completed at once. */
    nb_status (*allreduce_sum)(nb_comm *c, void *buf, int64_t n, nb_dtype dt, void **req);
    nb_status (*broadcast)(nb_comm *c, void *buf, int64_t bytes, int root, void **req);
    nb_status (*barrier)(nb_comm *c, void **req);
    /* Sets *done; once done, the request is gone. */
    nb_status (*test)(nb_comm *c, void *req, bool *done);
    void (*free)(nb_comm *c);
    /* The census that names a lost rank (NULL for a kind whose collectives
     * cannot hang): census_ask asks every other rank whether it is there;
     * census_listen answers the ranks that asked, and sets c->heard[q] to
     * the time rank q last asked or answered. Both are best effort: an
     * error only means that rank is not heard from. */
    void (*census_ask)(nb_comm *c);
    void (*census_listen)(nb_comm *c);
    /* A request that timed out: the kind keeps it until free, since the
     * transport may still hold its buffers (NULL: nothing to keep). */
    void (*abandon)(nb_comm *c, void *req);
    /* Pauses a wait for req until it may have moved on, or for `seconds`;
     * false when it cannot tell (comm.c then sleeps a moment between
     * tests; NULL: it always does). */
    bool (*nap)(nb_comm *c, void *req, double seconds);
    /* nb_comm_reduce_scatter_parts's (NULL: the kind has none). */
    nb_status (*allreduce_parts)(nb_comm *c, int n, const void *const *src, void *const *dst, const int64_t *counts,
                                 nb_dtype dt, int64_t keep_lo, int64_t keep_hi, void **req);
} nb_comm_impl_ops;

/* An all-reduce a static program's c_allreduce_start left open for its
 * c_allreduce_wait: the tensors it sums (retained), and the buffer they are
 * packed into when there are several and the transport cannot sum them
 * where they lie (kept for the next step's bucket). */
typedef struct nb_comm_open {
    nb_comm_request *req; /* NULL once waited for */
    nb_tensor **ts;
    int n, cap;
    bool packed; /* into buf, the sums to be unpacked */
    char *buf;
    size_t buf_size;
    double t_start, bytes;
} nb_comm_open;

struct nb_comm {
    const nb_comm_impl_ops *kind;
    void *impl;
    int rank, size;
    double timeout;
    const char *transport; /* nb_comm_transport's answer */
    bool reads_parts;      /* nb_comm_allreduce_parts works */
    bool broken;           /* a collective timed out: the ranks no longer agree on what comes next */
    double *heard;         /* size entries: when each rank was last heard from in a census (nb_comm_clock) */
    void *staging;         /* nb_comm_staging's buffer */
    size_t staging_size;
    nb_comm_open *open; /* c_allreduce_start's, in start order: n_open in use, cap_open made */
    int n_open, cap_open;
    nb_comm_stats stats; /* of the collective ops */
};

struct nb_comm_request {
    nb_comm *c;
    void *impl;       /* the kind's request, NULL once complete */
    const char *what; /* "all-reduce", ... for errors */
    int64_t n;
    nb_dtype dtype;
    double started;
    double done_at; /* when a test saw it complete; 0 before */
    bool tracked;   /* in the list nb_comm_progress tests */
};

/* A new communicator of `kind` (impl set by the caller). */
nb_status nb_comm_alloc(nb_comm **out, const nb_comm_impl_ops *kind, int rank, int size);

/* The buffer versions of the collectives, as collective kernels call them:
 * n elements of dt at buf. */
nb_status nb_comm_allreduce_buffer(nb_comm *c, void *buf, int64_t n, nb_dtype dt, nb_comm_request **req);
nb_status nb_comm_broadcast_buffer(nb_comm *c, void *buf, int64_t n, nb_dtype dt, int root, nb_comm_request **req);
/* An all-reduce of values spread over n parts, where c->reads_parts (the
 * shared-memory transport; NB_ERR_UNSUPPORTED elsewhere): counts[i]
 * values read from src[i], their sums written to dst[i] (src[i] itself or
 * memory apart from every src), with no buffer between. The sources may be
 * read and the destinations written at any time until the request
 * completes. */
nb_status nb_comm_allreduce_parts(nb_comm *c, int n, const void *const *src, void *const *dst, const int64_t *counts,
                                  nb_dtype dt, nb_comm_request **req);
/* The reduce-scatter of the same: this rank needs the sums of values
 * [keep_lo, keep_hi) only, of the parts taken one after another, and the
 * rest of dst stays as it was; every rank names its own range (ZeRO-1: its
 * shard), and every rank's values are still read. */
nb_status nb_comm_reduce_scatter_parts(nb_comm *c, int n, const void *const *src, void *const *dst,
                                       const int64_t *counts, nb_dtype dt, int64_t keep_lo, int64_t keep_hi,
                                       nb_comm_request **req);
/* nb_comm_allreduce_parts of n contiguous tensors of one dtype: the sums
 * of x[i] written to y[i] (x[i] itself, or a tensor apart from every x). */
nb_status nb_comm_allreduce_tensors(nb_comm *c, int n, nb_tensor *const *x, nb_tensor *const *y, nb_comm_request **req);
/* Waits for req, or returns at once when req is NULL. */
static inline nb_status nb_comm_finish(nb_comm_request *req) { return req ? nb_comm_wait(req) : NB_OK; }

/* A buffer of at least `bytes` that lives with the communicator, for a
 * caller that packs, reduces and unpacks before it returns (the
 * c_allreduce_sum kernel): reused, so that a step does not pay for fresh
 * pages every time. NULL, with an error, when out of memory. */
void *nb_comm_staging(nb_comm *c, size_t bytes);

/* Copies t's values (any strides) into buf, which holds numel elements:
 * how a bucket is packed before its all-reduce. */
nb_status nb_comm_pack(const nb_tensor *t, void *buf);

/* Seconds on a monotonic clock. */
double nb_comm_clock(void);

/* ---- moving open collectives on while the caller computes ----------------
 *
 * MPI moves a nonblocking collective on only inside MPI calls. A request
 * that should advance while its starter computes is tracked: the executor
 * calls nb_comm_progress between ops, and the GEMM between row blocks, which
 * tests every tracked request when called on the thread that tracked them
 * (MPI is initialised for one thread: workers never call it), and costs a
 * load or two otherwise. A tracked request stays tracked until waited for. */
void nb_comm_track(nb_comm_request *r);
extern _Atomic int nb_comm_tracked;        /* tracked requests not yet complete */
extern _Thread_local bool nb_comm_tracker; /* this thread tracked them */
void nb_comm_progress_tracked(void);
static inline void nb_comm_progress(void)
{
    if (nb_comm_tracker && atomic_load_explicit(&nb_comm_tracked, memory_order_relaxed)) nb_comm_progress_tracked();
}
/* When r completed, as a test or progress saw it; 0 while it has not. */
double nb_comm_done_at(const nb_comm_request *r);

/* ---- all-reduces open across ops (c_allreduce_start .. c_allreduce_wait) ----
 *
 * nb_comm_open_allreduce starts the sum of ts[0..n) (contiguous, one dtype;
 * summed where they lie through shared memory, else packed into one buffer
 * when n > 1), tracked, and returns; the caller
 * must not touch the tensors until nb_comm_wait_open of one of them (ts:
 * any of them, n of them), which completes, oldest first, every all-reduce
 * open on c up to the last that carries one of ts (all of them when ts is
 * NULL) and writes the sums back. */
nb_status nb_comm_open_allreduce(nb_comm *c, nb_tensor *const *ts, int n);
nb_status nb_comm_wait_open(nb_comm *c, nb_tensor *const *ts, int n);
/* Completes what every ring has open, results unused: how a run that failed
 * between its start and wait ops keeps the ranks in step. */
void nb_comm_wait_all_open(void);
/* What c_allreduce_sum adds to the stats: a synchronous all-reduce of
 * `bytes` that took `seconds`, all of them waited. */
void nb_comm_note_sync(nb_comm *c, double bytes, double seconds);

/* Time during which at least one of several collectives was open, and the
 * part of it before `cut` (when the compute they could hide behind ended).
 * Add the collectives' [start, done) in start order, then end. */
typedef struct nb_comm_spans {
    double cut, b, e;
    double *total, *before;
} nb_comm_spans;
static inline void nb_comm_spans_flush(nb_comm_spans *s)
{
    if (s->e <= s->b) return;
    *s->total += s->e - s->b;
    double end = s->e < s->cut ? s->e : s->cut;
    if (end > s->b) *s->before += end - s->b;
}
static inline void nb_comm_spans_add(nb_comm_spans *s, double start, double done)
{
    if (start > s->e) {
        nb_comm_spans_flush(s);
        s->b = start;
        s->e = done;
    } else if (done > s->e) s->e = done;
}

#endif
