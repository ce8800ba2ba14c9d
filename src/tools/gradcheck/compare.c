/* Gradient-check cases of the compare family: where (the comparisons and
 * logic ops have no gradient). Condition is a random bool tensor; X and Y
 * take gradients, summed back through every broadcast. */
#include "cases.h"

#define GC_BOOL(...) GC_INTS(NB_BOOL, 0, 1, __VA_ARGS__)
#define GC_BOOL_SCALAR {.dtype = NB_BOOL, .ndim = 0, .fill = NB_GC_INTS, .lo = 0, .hi = 1}

const nb_gradcheck_case nb_gc_compare[] = {
    {.op = "where", .name = "same shape [2,3]", .n_in = 3, .in = {GC_BOOL(2, 3), GC_F(2, 3), GC_F(2, 3)}},
    {.op = "where", .name = "[3,4] C, X [4], Y [3,1]", .n_in = 3, .in = {GC_BOOL(3, 4), GC_F(4), GC_F(3, 1)}},
    {.op = "where", .name = "C [2,1], X [1,3], Y 0-d", .n_in = 3, .in = {GC_BOOL(2, 1), GC_F(1, 3), GC_SCALAR}},
    {.op = "where", .name = "C [4,1,3], X [2,1], Y [3]", .n_in = 3, .in = {GC_BOOL(4, 1, 3), GC_F(2, 1), GC_F(3)}},
    {.op = "where", .name = "0-d C, X [2,2], Y [2,2]", .n_in = 3, .in = {GC_BOOL_SCALAR, GC_F(2, 2), GC_F(2, 2)}},
    {.op = "where", .name = "all 0-d", .n_in = 3, .in = {GC_BOOL_SCALAR, GC_SCALAR, GC_SCALAR}},
    {.op = NULL},
};
