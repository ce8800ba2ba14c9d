/* The MPI kind of communicator: MPI_COMM_WORLD, every collective started
 * nonblocking, so that comm.c can wait with a timeout and the eager DDP can
 * overlap all-reduces with the backward pass. Built when CMake found MPI
 * (NABLA_HAVE_MPI); otherwise nb_comm_init_mpi says so.
 *
 * The all-reduce is our own ring over nonblocking sends and receives (as
 * Horovod and NCCL do it): the buffer is cut into one segment per rank; in
 * N-1 steps each rank passes a segment to its right neighbour and adds the
 * one from its left (reduce-scatter), so each segment ends up summed on one
 * rank, then N-1 more steps pass the sums round (all-gather). Each rank
 * sends and receives 2(N-1)/N of the buffer, the least possible, and every
 * rank ends with the very same bits. MPI_Iallreduce measured twice as slow
 * here (its schedule copies through fresh temporary buffers on every
 * call). Ranks that all share one machine all-reduce through shared
 * memory instead (comm_mpi_shm.h), which moves the bytes at several times
 * the speed. Broadcast and barrier are MPI's (MPI_Ibcast, MPI_Ibarrier).
 *
 * The census that names a lost rank is point-to-point messages on two tags
 * of their own, above the ring's: a query to every other rank, answered by
 * whichever ranks are in a wait. MPI cannot cancel a send to a rank that is
 * gone, so each rank keeps one query and one answer in flight per peer at
 * most. */
#include "comm_internal.h"

#ifdef NABLA_HAVE_MPI

#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include "nabla/device.h"
#include "comm_mpi_shm.h"

typedef struct mpi_impl {
    MPI_Comm comm;
    bool finalize; /* we initialised MPI, so nb_comm_free finalises it */
    unsigned seq;  /* all-reduces started: their tags, the same on every rank */
    void *spare;   /* a ring's scratch kept for the next one */
    size_t spare_size;
    MPI_Request *census;       /* 2 * size: the query to rank q at [q], the answer to it at [size + q] */
    struct mpi_req *abandoned; /* requests that timed out, kept until mpi_free */
    nb_shm *shm;               /* the all-reduce through shared memory, when every rank is here */
} mpi_impl;

#define TAG_RING_END 32000 /* ring tags are below */
#define TAG_QUERY 32001
#define TAG_ANSWER 32002

/* A request of this kind: one MPI request, a ring all-reduce, or one
 * through shared memory. */
typedef struct mpi_req {
    MPI_Request r[2];
    bool ring;
    nb_shm_op *shm;
    /* the ring */
    char *buf, *scratch;
    size_t scratch_size, esize;
    nb_dtype dtype;
    int64_t n;
    int step, tag;        /* steps 0..N-2 reduce-scatter, N-1..2N-3 all-gather */
    struct mpi_req *next; /* in the list of abandoned ones */
} mpi_req;

/* An MPI error code as an nb_status carrying MPI's own message. */
static nb_status mpi_failed(int rc, const char *call, int rank)
{
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = snprintf(msg, sizeof msg, "error %d", rc);
    msg[len < 0 ? 0 : len] = '\0';
    return nb_error(NB_ERR_IO, "comm (MPI): %s failed on rank %d: %s", call, rank, msg);
}

static mpi_impl *impl_of(nb_comm *c) { return c->impl; }

static nb_status new_request(mpi_req **out)
{
    *out = nb_calloc(1, sizeof **out);
    return *out ? NB_OK : nb_error(NB_ERR_NOMEM, "comm (MPI): out of memory for a request");
}

static void free_request(nb_comm *c, mpi_req *q)
{
    mpi_impl *m = impl_of(c);
    if (q->scratch && q->scratch_size > m->spare_size) {
        nb_free(m->spare);
        m->spare = q->scratch;
        m->spare_size = q->scratch_size;
    } else nb_free(q->scratch);
    nb_free(q);
}

static nb_status too_long(int64_t n, const char *what)
{
    return nb_error(NB_ERR_UNSUPPORTED, "comm (MPI): %s of %lld elements; MPI counts stop at %d", what, (long long)n,
                    INT_MAX);
}

/* ---- the ring all-reduce ------------------------------------------------------------ */

static int64_t seg_begin(const mpi_req *q, int size, int k) { return q->n * k / size; }

/* Posts step q->step: send one segment right, receive one from the left
 * (into scratch while reducing, in place while gathering). */
static nb_status ring_post(nb_comm *c, mpi_req *q)
{
    int N = c->size, rank = c->rank, s = q->step;
    bool reduce = s < N - 1;
    int send = reduce ? rank - s : rank + 1 - (s - (N - 1));
    int recv = reduce ? rank - s - 1 : rank - (s - (N - 1));
    send = ((send % N) + N) % N;
    recv = ((recv % N) + N) % N;
    int64_t sb = seg_begin(q, N, send), se = seg_begin(q, N, send + 1);
    int64_t rb = seg_begin(q, N, recv), re = seg_begin(q, N, recv + 1);
    MPI_Datatype t = q->dtype == NB_F64 ? MPI_DOUBLE : MPI_FLOAT;
    MPI_Comm comm = impl_of(c)->comm;
    void *into = reduce ? (void *)q->scratch : (void *)(q->buf + rb * (int64_t)q->esize);
    int rc = MPI_Irecv(into, (int)(re - rb), t, (rank + N - 1) % N, q->tag, comm, &q->r[0]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Isend(q->buf + sb * (int64_t)q->esize, (int)(se - sb), t, (rank + 1) % N, q->tag, comm, &q->r[1]);
    return rc == MPI_SUCCESS ? NB_OK : mpi_failed(rc, "MPI_Isend/MPI_Irecv", rank);
}

/* The segment received in a reduce-scatter step, added into the buffer. */
static void ring_add(nb_comm *c, mpi_req *q)
{
    int N = c->size, recv = (((c->rank - q->step - 1) % N) + N) % N;
    int64_t b = seg_begin(q, N, recv), e = seg_begin(q, N, recv + 1);
    if (q->dtype == NB_F64) {
        double *d = (double *)q->buf + b;
        const double *s = (const double *)q->scratch;
        for (int64_t i = 0; i < e - b; i++) d[i] += s[i];
    } else {
        float *d = (float *)q->buf + b;
        const float *s = (const float *)q->scratch;
        for (int64_t i = 0; i < e - b; i++) d[i] += s[i];
    }
}

/* Moves the ring on as far as the messages that have arrived allow. */
static nb_status ring_test(nb_comm *c, mpi_req *q, bool *done)
{
    int N = c->size;
    for (;;) {
        int flag = 0;
        int rc = MPI_Testall(2, q->r, &flag, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Testall", c->rank);
        if (!flag) {
            *done = false;
            return NB_OK;
        }
        if (q->step < N - 1) ring_add(c, q);
        if (++q->step == 2 * (N - 1)) {
            *done = true;
            return NB_OK;
        }
        nb_status st = ring_post(c, q);
        if (st) return st;
    }
}

/* The all-reduce of parts: only the shared-memory one reads them where
 * they lie (c->reads_parts says so). */
static nb_status mpi_allreduce_parts(nb_comm *c, int n, const void *const *src, void *const *dst, const int64_t *counts,
                                     nb_dtype dt, int64_t keep_lo, int64_t keep_hi, void **req)
{
    mpi_impl *m = impl_of(c);
    *req = NULL;
    if (!m->shm) return nb_error(NB_ERR_UNSUPPORTED, "comm (MPI): the ring all-reduces one buffer");
    mpi_req *q;
    nb_status st = new_request(&q);
    if (st) return st;
    if ((st = nb_shm_allreduce(m->shm, n, src, dst, counts, dt, keep_lo, keep_hi, &q->shm))) nb_free(q);
    else *req = q;
    return st;
}

static nb_status mpi_allreduce(nb_comm *c, void *buf, int64_t n, nb_dtype dt, void **req)
{
    if (n > INT_MAX) return too_long(n, "all-reduce");
    *req = NULL;
    if (c->size == 1 || n == 0) return NB_OK;
    mpi_impl *m = impl_of(c);
    if (m->shm) return mpi_allreduce_parts(c, 1, (const void *const *)&buf, &buf, &n, dt, 0, n, req);
    mpi_req *q;
    nb_status st = new_request(&q);
    if (st) return st;
    q->ring = true;
    q->buf = buf;
    q->n = n;
    q->dtype = dt;
    q->esize = nb_dtype_size(dt);
    q->tag = (int)(m->seq++ % (unsigned)TAG_RING_END);
    size_t need = (size_t)(n / c->size + 1) * q->esize;
    if (m->spare && m->spare_size >= need) {
        q->scratch = m->spare;
        q->scratch_size = m->spare_size;
        m->spare = NULL;
        m->spare_size = 0;
    } else if (!(q->scratch = nb_malloc(need))) {
        nb_free(q);
        return nb_error(NB_ERR_NOMEM, "comm (MPI): out of memory for an all-reduce of %lld values", (long long)n);
    } else q->scratch_size = need;
    if ((st = ring_post(c, q))) {
        free_request(c, q);
        return st;
    }
    *req = q;
    return NB_OK;
}

/* ---- broadcast and barrier: MPI's own --------------------------------------------------- */

static nb_status mpi_broadcast(nb_comm *c, void *buf, int64_t bytes, int root, void **req)
{
    if (bytes > INT_MAX) return too_long(bytes, "broadcast (bytes)");
    mpi_req *q;
    nb_status st = new_request(&q);
    if (st) return st;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, impl_of(c)->comm, &q->r[0]);
    if (rc != MPI_SUCCESS) {
        nb_free(q);
        return mpi_failed(rc, "MPI_Ibcast", c->rank);
    }
    *req = q;
    return NB_OK;
}

static nb_status mpi_barrier(nb_comm *c, void **req)
{
    mpi_req *q;
    nb_status st = new_request(&q);
    if (st) return st;
    int rc = MPI_Ibarrier(impl_of(c)->comm, &q->r[0]);
    if (rc != MPI_SUCCESS) {
        nb_free(q);
        return mpi_failed(rc, "MPI_Ibarrier", c->rank);
    }
    *req = q;
    return NB_OK;
}

static nb_status mpi_test(nb_comm *c, void *req, bool *done)
{
    mpi_req *q = req;
    nb_status st = NB_OK;
    if (q->shm) *done = nb_shm_test(impl_of(c)->shm, q->shm);
    else if (q->ring) st = ring_test(c, q, done);
    else {
        int flag = 0;
        int rc = MPI_Test(&q->r[0], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) st = mpi_failed(rc, "MPI_Test", c->rank);
        *done = flag != 0;
    }
    if (!st && *done) free_request(c, q);
    return st;
}

static bool mpi_nap(nb_comm *c, void *req, double seconds)
{
    mpi_req *q = req;
    if (q->shm) nb_shm_nap(impl_of(c)->shm, seconds);
    return q->shm != NULL; /* MPI's own requests move only inside MPI's calls */
}

/* ---- the census ---------------------------------------------------------------------------- */

/* Sends one int to rank q on `tag` through slot *req, unless the slot's
 * last send has not gone yet. */
static void census_send(nb_comm *c, int q, int tag, MPI_Request *req)
{
    static const int here = 1;
    int flag = 1;
    if (*req != MPI_REQUEST_NULL && (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag)) return;
    if (MPI_Isend(&here, 1, MPI_INT, q, tag, impl_of(c)->comm, req) != MPI_SUCCESS) *req = MPI_REQUEST_NULL;
}

static void mpi_census_ask(nb_comm *c)
{
    mpi_impl *m = impl_of(c);
    for (int q = 0; q < c->size; q++)
        if (q != c->rank) census_send(c, q, TAG_QUERY, &m->census[q]);
}

/* Takes every message on `tag` that has arrived, noting its sender, and
 * answers it when it is a query. */
static void census_take(nb_comm *c, int tag)
{
    mpi_impl *m = impl_of(c);
    for (;;) {
        int flag = 0, got;
        MPI_Status s;
        if (MPI_Iprobe(MPI_ANY_SOURCE, tag, m->comm, &flag, &s) != MPI_SUCCESS || !flag) return;
        int q = s.MPI_SOURCE;
        if (MPI_Recv(&got, 1, MPI_INT, q, tag, m->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
        if (q < 0 || q >= c->size) continue;
        c->heard[q] = nb_comm_clock();
        if (tag == TAG_QUERY) census_send(c, q, TAG_ANSWER, &m->census[c->size + q]);
    }
}

static void mpi_census_listen(nb_comm *c)
{
    census_take(c, TAG_QUERY);
    census_take(c, TAG_ANSWER);
}

static void mpi_abandon(nb_comm *c, void *req)
{
    mpi_req *q = req;
    if (q->shm) nb_shm_abandon(impl_of(c)->shm, q->shm);
    q->shm = NULL;
    q->next = impl_of(c)->abandoned;
    impl_of(c)->abandoned = q;
}

/* A ring's receive can be cancelled, which frees its buffer; its send
 * reads the caller's buffer only. MPI cannot take back a collective of its
 * own: that request is left to MPI. */
static void free_abandoned(nb_comm *c)
{
    for (mpi_req *q = impl_of(c)->abandoned, *next; q; q = next) {
        next = q->next;
        if (q->ring && q->r[0] != MPI_REQUEST_NULL) MPI_Cancel(&q->r[0]);
        for (int i = 0; q->ring && i < 2; i++)
            if (q->r[i] != MPI_REQUEST_NULL) MPI_Request_free(&q->r[i]);
        nb_free(q->scratch);
        nb_free(q);
    }
}

static void mpi_free(nb_comm *c)
{
    mpi_impl *m = c->impl;
    if (!m) return;
    free_abandoned(c);
    nb_shm_free(m->shm, c->broken); /* collective, unless a rank is gone */
    for (int i = 0; m->census && i < 2 * c->size; i++)
        if (m->census[i] != MPI_REQUEST_NULL) MPI_Request_free(&m->census[i]);
    /* After a timeout MPI_Finalize would wait for the lost rank: leave MPI
     * as it is, for the process to exit. */
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m->finalize && !finalized && !c->broken) MPI_Finalize();
    nb_free(m->census);
    nb_free(m->spare);
    nb_free(m);
}

static const nb_comm_impl_ops mpi_kind = {.name = "mpi",
                                          .allreduce_sum = mpi_allreduce,
                                          .broadcast = mpi_broadcast,
                                          .barrier = mpi_barrier,
                                          .test = mpi_test,
                                          .free = mpi_free,
                                          .census_ask = mpi_census_ask,
                                          .census_listen = mpi_census_listen,
                                          .abandon = mpi_abandon,
                                          .nap = mpi_nap,
                                          .allreduce_parts = mpi_allreduce_parts};

bool nb_comm_have_mpi(void) { return true; }

nb_status nb_comm_init_mpi(nb_comm **out, bool *initialised_here)
{
    if (!out) return nb_error(NB_ERR_ARG, "comm_init_mpi: out is NULL");
    *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return nb_error(NB_ERR_STATE, "comm_init_mpi: MPI has already been finalised");
    if (!inited) {
        int provided;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Init_thread", -1);
    }
    if (initialised_here) *initialised_here = !inited;
    mpi_impl *m = nb_calloc(1, sizeof *m);
    int rank = 0, size = 1;
    nb_status st = m ? NB_OK : nb_error(NB_ERR_NOMEM, "comm_init_mpi: out of memory");
    if (!st) {
        m->comm = MPI_COMM_WORLD;
        m->finalize = !inited;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        m->census = nb_malloc(2 * (size_t)size * sizeof *m->census);
        if (!m->census) st = nb_error(NB_ERR_NOMEM, "comm_init_mpi: out of memory");
        for (int i = 0; m->census && i < 2 * size; i++) m->census[i] = MPI_REQUEST_NULL;
    }
    if (!st) st = nb_shm_new(MPI_COMM_WORLD, &m->shm);
    if (!st) st = nb_comm_alloc(out, &mpi_kind, rank, size);
    if (st) {
        if (m) nb_shm_free(m->shm, false);
        if (m && m->finalize) MPI_Finalize();
        if (m) nb_free(m->census);
        nb_free(m);
        return st;
    }
    (*out)->impl = m;
    if (size > 1) (*out)->transport = m->shm ? "shared memory" : "ring";
    (*out)->reads_parts = m->shm != NULL;
    return NB_OK;
}

#else

bool nb_comm_have_mpi(void) { return false; }

nb_status nb_comm_init_mpi(nb_comm **out, bool *initialised_here)
{
    if (out) *out = NULL;
    if (initialised_here) *initialised_here = false;
    return nb_error(NB_ERR_UNSUPPORTED,
                    "comm_init_mpi: this nabla was built without MPI (install libopenmpi-dev "
                    "and openmpi-bin, then configure again)");
}

#endif
