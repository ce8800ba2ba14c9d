/* Gradient-check cases of the creation family: only assign is
 * differentiable. */
#include "cases.h"

const nb_gradcheck_case nb_gc_creation[] = {
    {.op = "assign", .name = "[2, 3]", .n_in = 1, .in = {GC_F(2, 3)}},
    {.op = "assign", .name = "scalar", .n_in = 1, .in = {GC_SCALAR}},
    {.op = "assign", .name = "[1, 4, 1]", .n_in = 1, .in = {GC_F(1, 4, 1)}},
    {.op = NULL},
};
