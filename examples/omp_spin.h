/* Idle OpenMP threads that do not spin for long.
 *
 * GNU OpenMP reads its wait policy once, when it loads: by default a thread
 * that finishes its share of a parallel loop spins for about 300000 rounds
 * before it sleeps. Between the many short parallel regions of a training
 * step that spinning costs the thread doing the serial work dearly: on this
 * two-core machine a transformer step takes 227 ms with it and 126 ms with
 * GOMP_SPINCOUNT=30000 (PyTorch's OpenMP threads, the same libgomp, pay it
 * too). An example that is about to train sets that value, unless the user
 * chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT), and runs itself again
 * so that libgomp sees it. A program of your own does best to start with
 * the variable set. */
#ifndef NABLA_EXAMPLES_OMP_SPIN_H
#define NABLA_EXAMPLES_OMP_SPIN_H

#include <stdlib.h>
#include <unistd.h>

static inline void example_shorten_omp_spin(char **argv)
{
#if defined(_OPENMP) && defined(__linux__)
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "30000", 1) == 0) execv("/proc/self/exe", argv);
    /* The exec failed: run on as we are. */
#else
    (void)argv;
#endif
}

#endif
