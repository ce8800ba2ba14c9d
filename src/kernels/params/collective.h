/* Parameters of the collective ops (src/ops/collective.c), which every
 * provider of their kernels reads. */
#ifndef NABLA_KERNELS_PARAMS_COLLECTIVE_H
#define NABLA_KERNELS_PARAMS_COLLECTIVE_H

#include <stdint.h>

typedef struct nb_collective_params {
    int ring;       /* nb_comm_ring(ring) runs it */
    int root;       /* c_broadcast: the rank whose values everyone gets */
    uint64_t check; /* c_broadcast: nonzero, the hash every rank must agree on first */
} nb_collective_params;

#endif
