/* Gradient-check cases of the collective family. They run on ring 0's
 * default, the single-process communicator, where an all-reduce is the
 * identity; the multi-process sums are checked by tests/test_mpi.sh. */
#include "cases.h"

const nb_gradcheck_case nb_gc_collective[] = {
    {.op = "c_allreduce_sum", .name = "one [2, 3]", .n_in = 1, .in = {GC_F(2, 3)}},
    {.op = "c_allreduce_sum",
     .name = "a bucket of three",
     .n_in = 3,
     .n_out = 3,
     .in = {GC_F(4), GC_F(2, 2), GC_SCALAR}},
    {.op = NULL},
};
