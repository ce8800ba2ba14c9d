/* nabla/rng.h: the seeded random generator behind every random op.
 *
 * A counter-based generator (Philox-like mixing of a 64-bit key and counter),
 * so that a stream is fully determined by (seed, position) and runs are
 * reproducible across machines. */
#ifndef NABLA_RNG_H
#define NABLA_RNG_H

#include "nabla/export.h"

#include <stdint.h>

NB_BEGIN_DECLS

typedef struct nb_rng {
    uint64_t key;
    uint64_t counter;
} nb_rng;

NB_API void nb_rng_seed(nb_rng *r, uint64_t seed);
NB_API uint64_t nb_rng_u64(nb_rng *r);
/* Uniform in [0, 1), with 53 random bits. */
NB_API double nb_rng_uniform(nb_rng *r);
/* Standard normal (Box-Muller). */
NB_API double nb_rng_normal(nb_rng *r);

NB_END_DECLS

#endif
