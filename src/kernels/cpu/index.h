/* CPU kernels that move elements by an index tensor: gather (index_select),
 * scatter_add (its gradient) and one_hot. Index buffers are int32 or int64
 * (`idx64`); callers check them with nb_cpu_index_check first, so the loops
 * here trust every index. The kernels of the index ops (index.c) run them;
 * the table in shape.c lists those. */
#ifndef NABLA_KERNELS_CPU_INDEX_H
#define NABLA_KERNELS_CPU_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nabla/dtype.h"
#include "nabla/kernel.h"

/* True if all `count` indices lie in [0, n); otherwise false, with the
 * position and value of the first one that does not. */
bool nb_cpu_index_check(const void *idx, bool idx64, int64_t count, int64_t n, int64_t *bad_pos,
                        int64_t *bad_value);

/* src viewed as [outer, n, inner] elements of elsize bytes; dst as
 * [outer, nidx, inner] with dst[o, i, :] = src[o, idx[i], :]. */
void nb_cpu_gather(void *dst, const void *src, const void *idx, bool idx64, int64_t nidx, int64_t outer,
                   int64_t n, int64_t inner, size_t elsize);

/* out viewed as [outer, n, inner], upd as [outer, nidx, inner]:
 * out[o, idx[i], :] += upd[o, i, :], summed in order of i (so results do not
 * depend on the thread count). Returns false for a dtype other than
 * float32/float64/int32/int64. */
bool nb_cpu_scatter_add(nb_dtype dt, void *out, const void *upd, const void *idx, bool idx64, int64_t nidx,
                        int64_t outer, int64_t n, int64_t inner);

/* out viewed as [count, depth] of dtype dt: all zero but out[i, idx[i]] = 1. */
void nb_cpu_one_hot(nb_dtype dt, void *out, const void *idx, bool idx64, int64_t count, int64_t depth);

extern const nb_kernel_def nb_cpu_kernel_gather, nb_cpu_kernel_index_select, nb_cpu_kernel_scatter_add,
    nb_cpu_kernel_one_hot;

#endif
