/* The shared-memory all-reduce (comm_mpi_shm.h says how it works). */
#include "comm_internal.h"

#ifdef NABLA_HAVE_MPI

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "comm_mpi_shm.h"
#include "nabla/device.h"

#define SLOT_BYTES ((size_t)4 << 20) /* per rank: a 1.6 MB bucket is one chunk */
#define HEADER 256                   /* the counters, a cache line each */
#define ALIGN 64                     /* MPI aligns a rank's part to 8 bytes only */
#define PART (ALIGN + HEADER + SLOT_BYTES)

/* The head of each rank's part of the window: the last chunk (numbered
 * from 1, the same on every rank) it has copied into its slot, and the
 * last it has summed (after which it reads no slot of that chunk again). */
typedef struct counters {
    _Alignas(64) _Atomic int64_t in;
    _Alignas(64) _Atomic int64_t out;
} counters;
_Static_assert(sizeof(counters) <= HEADER, "the counters fit the header");

struct nb_shm_op {
    char *buf;
    int64_t n, at; /* values; the first of the current chunk */
    size_t esize;
    nb_dtype dtype;
    int phase;     /* of the current chunk */
    int64_t chunk; /* its number, once it has one */
    bool done;
    nb_shm_op *next; /* in the queue */
};

struct nb_shm {
    MPI_Win win;
    int rank, size;
    counters **ctr; /* every rank's, in the window */
    char **slot;
    int64_t chunks; /* chunks started */
    nb_shm_op *head, *tail;
};

static bool wanted(void)
{
    const char *e = getenv("NABLA_COMM_SHM");
    return !(e && !strcmp(e, "0"));
}

nb_status nb_shm_new(MPI_Comm comm, nb_shm **out)
{
    *out = NULL;
    int size, rank, node_size = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm node = MPI_COMM_NULL;
    if (size < 2 || MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return NB_OK; /* the same on every rank */
    MPI_Comm_size(node, &node_size);
    if (node_size != size) { /* on every rank alike: some rank is elsewhere */
        MPI_Comm_free(&node);
        return NB_OK;
    }
    /* From here every rank makes the same collective calls, a rank that
     * cannot or will not take part with a window of its own of size 0, and
     * the last one says whether all can. */
    nb_shm *s = nb_calloc(1, sizeof *s);
    if (s) {
        s->ctr = nb_calloc((size_t)size, sizeof *s->ctr);
        s->slot = nb_calloc((size_t)size, sizeof *s->slot);
    }
    int ok = s && s->ctr && s->slot && wanted();
    MPI_Info info = MPI_INFO_NULL;
    if (MPI_Info_create(&info) == MPI_SUCCESS) /* each rank's part in pages of its own */
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
    MPI_Win win = MPI_WIN_NULL;
    char *base = NULL;
    bool have_win = MPI_Win_allocate_shared(ok ? (MPI_Aint)PART : 0, 1, info, node, &base, &win) == MPI_SUCCESS;
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    ok = ok && have_win;
    for (int q = 0; q < size && ok; q++) {
        MPI_Aint bytes;
        int unit;
        char *p;
        if (MPI_Win_shared_query(win, q, &bytes, &unit, &p) != MPI_SUCCESS || bytes < (MPI_Aint)PART) ok = 0;
        else { /* the same offset in every process, which maps whole pages */
            p += (ALIGN - (uintptr_t)p % ALIGN) % ALIGN;
            s->ctr[q] = (counters *)p;
            s->slot[q] = p + HEADER;
        }
    }
    bool locked = ok && MPI_Win_lock_all(MPI_MODE_NOCHECK, win) == MPI_SUCCESS;
    if (locked) {
        counters *mine = s->ctr[rank];
        atomic_store(&mine->in, 0);
        atomic_store(&mine->out, 0);
    }
    /* Also the barrier after which every rank's counters read zero. */
    int mine = locked, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    MPI_Comm_free(&node);
    if (!all) {
        if (locked) MPI_Win_unlock_all(win);
        if (have_win) MPI_Win_free(&win);
        if (s) {
            nb_free(s->ctr);
            nb_free(s->slot);
            nb_free(s);
        }
        return NB_OK;
    }
    s->win = win;
    s->rank = rank;
    s->size = size;
    *out = s;
    return NB_OK;
}

void nb_shm_free(nb_shm *s, bool alone)
{
    if (!s) return;
    for (nb_shm_op *o = s->head, *next; o; o = next) {
        next = o->next;
        nb_free(o);
    }
    if (!alone) {
        MPI_Win_unlock_all(s->win);
        MPI_Win_free(&s->win);
    }
    nb_free(s->ctr);
    nb_free(s->slot);
    nb_free(s);
}

nb_status nb_shm_allreduce(nb_shm *s, void *buf, int64_t n, nb_dtype dt, nb_shm_op **out)
{
    nb_shm_op *o = nb_calloc(1, sizeof *o);
    if (!o) return nb_error(NB_ERR_NOMEM, "comm (MPI): out of memory for an all-reduce");
    *o = (nb_shm_op){.buf = buf, .n = n, .esize = nb_dtype_size(dt), .dtype = dt};
    if (s->tail) s->tail->next = o;
    else s->head = o;
    s->tail = o;
    *out = o;
    return NB_OK;
}

/* Whether every rank's counter at `field` has reached chunk k. */
static bool all_reached(const nb_shm *s, size_t field, int64_t k)
{
    for (int q = 0; q < s->size; q++)
        if (atomic_load_explicit((_Atomic int64_t *)((char *)s->ctr[q] + field), memory_order_acquire) < k)
            return false;
    return true;
}

static void publish(nb_shm *s, size_t field, int64_t k)
{
    atomic_store_explicit((_Atomic int64_t *)((char *)s->ctr[s->rank] + field), k, memory_order_release);
}

/* out[i] = the sum over the ranks of their values, in rank order, for i
 * in [0, len): the same operands in the same order on every rank, so the
 * same bits. This rank's own values are out's, which equal its slot's. */
static void sum_all(nb_shm *s, nb_dtype dt, int64_t len, char *out)
{
    int N = s->size, me = s->rank;
    if (dt == NB_F64) {
        double *o = (double *)out;
        for (int64_t i = 0; i < len; i++) {
            double v = me == 0 ? o[i] : ((const double *)s->slot[0])[i];
            for (int q = 1; q < N; q++) v += q == me ? o[i] : ((const double *)s->slot[q])[i];
            o[i] = v;
        }
        return;
    }
    float *o = (float *)out;
    if (N == 2) { /* the common case, in a loop the compiler vectorises */
        const float *peer = (const float *)s->slot[1 - me];
        if (me == 0)
            for (int64_t i = 0; i < len; i++) o[i] = o[i] + peer[i];
        else
            for (int64_t i = 0; i < len; i++) o[i] = peer[i] + o[i];
        return;
    }
    for (int64_t i = 0; i < len; i++) {
        float v = me == 0 ? o[i] : ((const float *)s->slot[0])[i];
        for (int q = 1; q < N; q++) v += q == me ? o[i] : ((const float *)s->slot[q])[i];
        o[i] = v;
    }
}

/* Moves op (the queue's head) on as far as the other ranks allow. */
static void advance(nb_shm *s, nb_shm_op *o)
{
    size_t slot_values = SLOT_BYTES / o->esize;
    while (o->at < o->n) {
        int64_t len = o->n - o->at < (int64_t)slot_values ? o->n - o->at : (int64_t)slot_values;
        char *chunk = o->buf + o->at * (int64_t)o->esize;
        if (o->phase == 0) {
            int64_t k = s->chunks + 1;
            if (!all_reached(s, offsetof(counters, out), k - 1)) return; /* a slot still being read */
            o->chunk = s->chunks = k;
            memcpy(s->slot[s->rank], chunk, (size_t)len * o->esize);
            publish(s, offsetof(counters, in), k);
            o->phase = 1;
        }
        if (!all_reached(s, offsetof(counters, in), o->chunk)) return;
        sum_all(s, o->dtype, len, chunk);
        publish(s, offsetof(counters, out), o->chunk);
        o->at += len;
        o->phase = 0;
    }
    o->done = true;
}

bool nb_shm_test(nb_shm *s, nb_shm_op *op)
{
    while (s->head && !op->done) {
        nb_shm_op *h = s->head;
        advance(s, h);
        if (!h->done) break;
        s->head = h->next;
        if (!s->head) s->tail = NULL;
    }
    if (!op->done) return false;
    nb_free(op);
    return true;
}

void nb_shm_abandon(nb_shm *s, nb_shm_op *op)
{
    (void)s;
    (void)op; /* stays queued; nb_shm_free frees it */
}

#endif
