/* A counter-based generator: each draw hashes (key, counter) with two rounds
 * of a strong 64-bit mixer, so any position of any stream can be computed
 * directly and streams from different seeds do not overlap in practice. */
#include <math.h>
#include "nabla/rng.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void nb_rng_seed(nb_rng *r, uint64_t seed)
{
    r->key = mix64(seed + 0x9e3779b97f4a7c15ULL);
    r->counter = 0;
}

uint64_t nb_rng_u64(nb_rng *r)
{
    uint64_t c = r->counter++;
    return mix64(mix64(c ^ r->key) + r->key);
}

double nb_rng_uniform(nb_rng *r) { return (double)(nb_rng_u64(r) >> 11) * 0x1.0p-53; }

double nb_rng_normal(nb_rng *r)
{
    double u1 = nb_rng_uniform(r), u2 = nb_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
