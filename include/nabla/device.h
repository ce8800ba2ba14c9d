/* nabla/device.h: where memory comes from.
 *
 * Every allocation nabla makes goes through one allocator, which a program
 * may replace (as Lua's lua_Alloc or SQLite's SQLITE_CONFIG_MALLOC): to count
 * or cap memory, to use an arena, or to fail the k-th allocation in a test.
 * Tensor storage is allocated per device, through that device's allocator;
 * the CPU's takes 64-byte-aligned blocks from the hook below. A future GPU
 * device adds an allocator of its own and kernels registered for it
 * (nabla/kernel.h); nothing else changes. */
#ifndef NABLA_DEVICE_H
#define NABLA_DEVICE_H

#include "nabla/export.h"
#include <stddef.h>

NB_BEGIN_DECLS

typedef enum nb_device { NB_DEVICE_CPU = 0, NB_DEVICE_COUNT } nb_device;

NB_API const char *nb_device_name(nb_device d); /* "cpu" */

/* The allocation hook. `ud` is passed back to each function. realloc and
 * free get NULL and pointers that malloc or realloc returned; a NULL return
 * from malloc or realloc is an allocation failure, which nabla reports as
 * NB_ERR_NOMEM. */
typedef struct nb_allocator {
    void *(*malloc)(void *ud, size_t size);
    void *(*realloc)(void *ud, void *p, size_t size);
    void (*free)(void *ud, void *p);
    void *ud;
} nb_allocator;

/* Replaces the allocator (NULL restores the C library's). Set it before
 * anything else is made: memory is freed through the allocator in force
 * when it is freed. The registries of ops and kernels, built on first use,
 * stay allocated for the life of the process. */
NB_API void nb_set_allocator(const nb_allocator *a);
/* The allocator in force (the C library's unless one was set). */
NB_API nb_allocator nb_get_allocator(void);

/* Through the allocator in force; nb_free frees what nabla handed out to be
 * freed by its caller (strings, arrays, buffers: the function says so). */
NB_API void *nb_malloc(size_t size);
NB_API void *nb_calloc(size_t n, size_t size); /* zeroed; NULL if n * size overflows */
NB_API void *nb_realloc(void *p, size_t size);
NB_API void nb_free(void *p);
NB_API char *nb_strdup(const char *s);
NB_API char *nb_strndup(const char *s, size_t n);

/* Device memory for tensor storage: on the CPU, 64-byte aligned, at least 64
 * bytes, not zeroed. Large blocks (256 KiB and up) that are freed are kept,
 * up to 512 MiB, for the next request of the same size, as PyTorch's caching
 * allocators do: a training step asks for the same tensors every time. */
NB_API void *nb_device_alloc(nb_device d, size_t size);
NB_API void nb_device_free(nb_device d, void *p);
/* Hands the kept blocks back to the allocator (torch.cuda.empty_cache): the
 * large ones, and the small ones (tensors and tape nodes, up to 1 KiB, at
 * most 16 MiB a thread, kept only under the C library's allocator) that the
 * calling thread keeps. nb_set_allocator does this before it switches. */
NB_API void nb_device_empty_cache(void);

/* ---- CPU threads -----------------------------------------------------------
 *
 * The CPU kernels split large work over a team of threads of nabla's own:
 * NABLA_NUM_THREADS of them, else OMP_NUM_THREADS, else the least of the
 * CPUs this process may run on (its affinity mask), its cgroup's CPU quota
 * and, under MPI with several ranks on the node (Open MPI's
 * OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS), this rank's part of
 * them; in that last case, unless the launcher bound the rank already, the
 * first thread to use the team and the team's threads are bound to the
 * rank's cores. The caller counts as one. A kernel's pieces go to whichever
 * thread is running, so a thread the system has descheduled (another
 * program holds its core) holds nothing up: the calling thread does its
 * pieces. Between runs an idle thread spins for 0.1 ms (5 us on a machine
 * found busy), then sleeps, so a team costs nothing while the program does
 * other work. One run at a time: work started while another thread holds
 * the team runs on its own thread. */
NB_API int nb_num_threads(void);
/* Sets the team's size for the runs that start after the call, clipped to
 * [1, 256] (1: every kernel on the calling thread). */
NB_API void nb_set_num_threads(int n);

/* ---- subnormal numbers -----------------------------------------------------
 *
 * Kernels run with subnormal numbers (below 1.2e-38 in float32, 2.2e-308 in
 * float64) flushed to zero, as results and as operands, as TensorFlow's and
 * XLA's do: on x86 each instruction that meets one costs a hundred cycles or
 * more, and training makes them (a softmax's far tail, and its gradient in
 * every product below it; one of the conv net's weight updates took 40 to
 * 120 ms in place of 1). The mode is set when a run of nabla's starts (an
 * op, a prepared program) and the caller's restored when it returns, so the
 * caller's own arithmetic is untouched; the team's threads take it from the
 * run. NABLA_FLUSH_DENORMALS=0 keeps subnormals (IEEE 754 gradual underflow
 * throughout). x86 (MXCSR FTZ and DAZ) and AArch64 (FPCR.FZ); elsewhere the
 * CPU's mode is left alone. */

NB_END_DECLS

#endif
