/* The shared-memory all-reduce (comm_mpi_shm.h says how it works). */
#define _GNU_SOURCE /* syscall, for the futex */
#include "comm_internal.h"

#ifdef NABLA_HAVE_MPI

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
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
/* Rank 0's part also holds the doorbell a waiting rank sleeps on: every
 * publish rings it, and wakes the sleepers when there are any. */
typedef struct bell {
    _Alignas(64) _Atomic uint32_t rung;
    _Atomic uint32_t sleepers;
} bell;
_Static_assert(sizeof(counters) + sizeof(bell) <= HEADER, "the counters and the bell fit the header");

/* counts[i] values read from src[i], their sums written to dst[i]. */
typedef struct part {
    const char *src;
    char *dst;
    int64_t n;
} part;

/* Where a chunk begins: part p, value `off` of it. */
typedef struct cursor {
    int p;
    int64_t off;
} cursor;

struct nb_shm_op {
    part *parts;
    int n_parts;
    cursor cur;               /* at the current chunk */
    int64_t n, at;            /* values in all; the first of the current chunk */
    int64_t keep_lo, keep_hi; /* the values this rank sums */
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
    bell *bell;     /* in rank 0's part */
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
            if (q == 0) s->bell = (bell *)(p + sizeof(counters));
            s->slot[q] = p + HEADER;
        }
    }
    bool locked = ok && MPI_Win_lock_all(MPI_MODE_NOCHECK, win) == MPI_SUCCESS;
    if (locked) {
        counters *mine = s->ctr[rank];
        atomic_store(&mine->in, 0);
        atomic_store(&mine->out, 0);
        if (rank == 0) {
            atomic_store(&s->bell->rung, 0);
            atomic_store(&s->bell->sleepers, 0);
        }
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

nb_status nb_shm_allreduce(nb_shm *s, int n_parts, const void *const *src, void *const *dst, const int64_t *counts,
                           nb_dtype dt, int64_t keep_lo, int64_t keep_hi, nb_shm_op **out)
{
    /* The op and its parts in one block. */
    nb_shm_op *o = nb_calloc(1, sizeof *o + (size_t)n_parts * sizeof(part));
    if (!o) return nb_error(NB_ERR_NOMEM, "comm (MPI): out of memory for an all-reduce");
    *o = (nb_shm_op){.parts = (part *)(o + 1),
                     .n_parts = n_parts,
                     .esize = nb_dtype_size(dt),
                     .dtype = dt,
                     .keep_lo = keep_lo,
                     .keep_hi = keep_hi};
    for (int i = 0; i < n_parts; i++) {
        o->parts[i] = (part){src[i], dst[i], counts[i]};
        o->n += counts[i];
    }
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
    atomic_fetch_add(&s->bell->rung, 1);
#ifdef __linux__
    if (atomic_load(&s->bell->sleepers)) syscall(SYS_futex, &s->bell->rung, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
}

/* out[i] = the sum over the ranks of their slots' values from `at` on,
 * in rank order, for i in [0, len): the same operands in the same order on
 * every rank, so the same bits. */
static void sum_slots(nb_shm *s, nb_dtype dt, int64_t at, int64_t len, char *out)
{
    int N = s->size;
    if (dt == NB_F64) {
        double *o = (double *)out;
        for (int64_t i = 0; i < len; i++) {
            double v = ((const double *)s->slot[0])[at + i];
            for (int q = 1; q < N; q++) v += ((const double *)s->slot[q])[at + i];
            o[i] = v;
        }
        return;
    }
    float *o = (float *)out;
    if (N == 2) { /* the common case, in a loop the compiler vectorises */
        const float *x = (const float *)s->slot[0] + at, *y = (const float *)s->slot[1] + at;
        for (int64_t i = 0; i < len; i++) o[i] = x[i] + y[i];
        return;
    }
    for (int64_t i = 0; i < len; i++) {
        float v = ((const float *)s->slot[0])[at + i];
        for (int q = 1; q < N; q++) v += ((const float *)s->slot[q])[at + i];
        o[i] = v;
    }
}

/* The chunk of `len` values from cursor c on, a piece of one part at a
 * time: into this rank's slot (in), or summed out of every slot where
 * this rank keeps them. Returns the cursor after it. */
static cursor walk(nb_shm *s, const nb_shm_op *o, cursor c, int64_t len, bool in)
{
    size_t es = o->esize;
    for (int64_t done = 0; done < len;) {
        while (o->parts[c.p].n == c.off) c = (cursor){c.p + 1, 0}; /* the next part with values left */
        const part *p = &o->parts[c.p];
        int64_t k = p->n - c.off < len - done ? p->n - c.off : len - done;
        if (in) memcpy(s->slot[s->rank] + done * (int64_t)es, p->src + c.off * (int64_t)es, (size_t)k * es);
        else {
            int64_t first = o->at + done; /* the op's value at the piece's start */
            int64_t lo = o->keep_lo > first ? o->keep_lo - first : 0;
            int64_t hi = o->keep_hi < first + k ? o->keep_hi - first : k;
            if (lo < hi) sum_slots(s, o->dtype, done + lo, hi - lo, p->dst + (c.off + lo) * (int64_t)es);
        }
        c.off += k;
        done += k;
    }
    return c;
}

/* Moves op (the queue's head) on as far as the other ranks allow. */
static void advance(nb_shm *s, nb_shm_op *o)
{
    size_t slot_values = SLOT_BYTES / o->esize;
    while (o->at < o->n) {
        int64_t len = o->n - o->at < (int64_t)slot_values ? o->n - o->at : (int64_t)slot_values;
        if (o->phase == 0) {
            int64_t k = s->chunks + 1;
            if (!all_reached(s, offsetof(counters, out), k - 1)) return; /* a slot still being read */
            o->chunk = s->chunks = k;
            walk(s, o, o->cur, len, true);
            publish(s, offsetof(counters, in), k);
            o->phase = 1;
        }
        if (!all_reached(s, offsetof(counters, in), o->chunk)) return;
        o->cur = walk(s, o, o->cur, len, false);
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

/* Whether the queue's head can move on now. */
static bool movable(const nb_shm *s)
{
    const nb_shm_op *o = s->head;
    if (!o) return true;
    if (o->phase == 0) return all_reached(s, offsetof(counters, out), s->chunks);
    return all_reached(s, offsetof(counters, in), o->chunk);
}

void nb_shm_nap(nb_shm *s, double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
#ifdef __linux__
    /* The ring is read before the counters are, and a publish stores its
     * counter before it rings, so a publish this misses rings after the
     * read, and the futex does not sleep. */
    uint32_t seen = atomic_load(&s->bell->rung);
    atomic_fetch_add(&s->bell->sleepers, 1);
    if (!movable(s)) syscall(SYS_futex, &s->bell->rung, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub(&s->bell->sleepers, 1);
#else
    if (!movable(s)) nanosleep(&ts, NULL);
#endif
}

void nb_shm_abandon(nb_shm *s, nb_shm_op *op)
{
    (void)s;
    (void)op; /* stays queued; nb_shm_free frees it */
}

#endif
