/* CPU kernels that move elements by an index tensor: gather (index_select),
 * scatter_add (its gradient) and one_hot (index.c). They check every index
 * before their loops, which then trust it; the table in shape.c lists them. */
#ifndef NABLA_KERNELS_CPU_INDEX_H
#define NABLA_KERNELS_CPU_INDEX_H

#include "nabla/kernel.h"

extern const nb_kernel_def nb_cpu_kernel_gather, nb_cpu_kernel_index_select, nb_cpu_kernel_scatter_add,
    nb_cpu_kernel_one_hot;

#endif
