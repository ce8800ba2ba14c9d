/* The MPI kind of communicator: MPI_COMM_WORLD through MPI-3's nonblocking
 * collectives (MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier), so that comm.c can
 * wait with a timeout and the eager DDP can overlap all-reduces with the
 * backward pass. Built when CMake found MPI (NABLA_HAVE_MPI); otherwise
 * nb_comm_init_mpi says so. */
#include "comm_internal.h"

#ifdef NABLA_HAVE_MPI

#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include "nabla/device.h"

typedef struct mpi_impl {
    MPI_Comm comm;
    bool finalize; /* we initialised MPI, so nb_comm_free finalises it */
} mpi_impl;

/* An MPI error code as an nb_status carrying MPI's own message. */
static nb_status mpi_failed(int rc, const char *call, int rank)
{
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = snprintf(msg, sizeof msg, "error %d", rc);
    msg[len < 0 ? 0 : len] = '\0';
    return nb_error(NB_ERR_IO, "comm (MPI): %s failed on rank %d: %s", call, rank, msg);
}

static MPI_Comm comm_of(nb_comm *c) { return ((mpi_impl *)c->impl)->comm; }

/* A request on the heap, as comm.c holds the kind's requests by pointer. */
static nb_status new_request(MPI_Request **out)
{
    *out = nb_malloc(sizeof **out);
    return *out ? NB_OK : nb_error(NB_ERR_NOMEM, "comm (MPI): out of memory for a request");
}

static nb_status too_long(int64_t n, const char *what)
{
    return nb_error(NB_ERR_UNSUPPORTED, "comm (MPI): %s of %lld elements; MPI counts stop at %d", what, (long long)n,
                    INT_MAX);
}

static nb_status mpi_allreduce(nb_comm *c, void *buf, int64_t n, nb_dtype dt, void **req)
{
    if (n > INT_MAX) return too_long(n, "all-reduce");
    MPI_Request *r;
    nb_status st = new_request(&r);
    if (st) return st;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dt == NB_F64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, comm_of(c), r);
    if (rc != MPI_SUCCESS) {
        nb_free(r);
        return mpi_failed(rc, "MPI_Iallreduce", c->rank);
    }
    *req = r;
    return NB_OK;
}

static nb_status mpi_broadcast(nb_comm *c, void *buf, int64_t bytes, int root, void **req)
{
    if (bytes > INT_MAX) return too_long(bytes, "broadcast (bytes)");
    MPI_Request *r;
    nb_status st = new_request(&r);
    if (st) return st;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, comm_of(c), r);
    if (rc != MPI_SUCCESS) {
        nb_free(r);
        return mpi_failed(rc, "MPI_Ibcast", c->rank);
    }
    *req = r;
    return NB_OK;
}

static nb_status mpi_barrier(nb_comm *c, void **req)
{
    MPI_Request *r;
    nb_status st = new_request(&r);
    if (st) return st;
    int rc = MPI_Ibarrier(comm_of(c), r);
    if (rc != MPI_SUCCESS) {
        nb_free(r);
        return mpi_failed(rc, "MPI_Ibarrier", c->rank);
    }
    *req = r;
    return NB_OK;
}

static nb_status mpi_test(nb_comm *c, void *req, bool *done)
{
    int flag = 0;
    int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_failed(rc, "MPI_Test", c->rank);
    *done = flag != 0;
    if (*done) nb_free(req);
    return NB_OK;
}

static void mpi_free(nb_comm *c)
{
    mpi_impl *m = c->impl;
    if (!m) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m->finalize && !finalized) MPI_Finalize();
    nb_free(m);
}

static const nb_comm_impl_ops mpi_kind = {"mpi", mpi_allreduce, mpi_broadcast, mpi_barrier, mpi_test, mpi_free};

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
        st = nb_comm_alloc(out, &mpi_kind, rank, size);
    }
    if (st) {
        if (m && m->finalize) MPI_Finalize();
        nb_free(m);
        return st;
    }
    (*out)->impl = m;
    return NB_OK;
}

#else

bool nb_comm_have_mpi(void) { return false; }

nb_status nb_comm_init_mpi(nb_comm **out, bool *initialised_here)
{
    if (out) *out = NULL;
    if (initialised_here) *initialised_here = false;
    return nb_error(NB_ERR_UNSUPPORTED, "comm_init_mpi: this nabla was built without MPI (install libopenmpi-dev "
                                        "and openmpi-bin, then configure again)");
}

#endif
