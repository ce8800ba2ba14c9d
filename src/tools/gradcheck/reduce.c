/* Gradient-check cases of the reduce family. Random inputs in [-1, 1] have
 * no ties (max/min) with probability one; reduce_prod's inputs stay away
 * from 0, where its rule divides by X. argmax/argmin have no gradient. */
#include "cases.h"

#define AXES(...) .n_attrs = 1, .attrs = {NB_ATTR_INTS("axes", __VA_ARGS__)}
#define AXES_KEEP(...) .n_attrs = 2, .attrs = {NB_ATTR_INTS("axes", __VA_ARGS__), NB_ATTR_BOOL("keepdim", true)}
#define KEEP .n_attrs = 1, .attrs = {NB_ATTR_BOOL("keepdim", true)}

/* The same cases for every reduction over axes; LO/HI bound the inputs
 * (0, 0: [-1, 1]). */
#define REDUCE_CASES(OP, LO, HI)                                                                              \
    {.op = OP, .name = "[3,4] axis 1", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 4)}, AXES(1)},                \
    {.op = OP, .name = "[3,4] axis 0 (leading)", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 4)}, AXES(0)},      \
    {.op = OP, .name = "[3,4] axis -1 keepdim", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 4)}, AXES_KEEP(-1)}, \
    {.op = OP, .name = "[2,3,4] middle axis", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)}, AXES(1)},      \
    {.op = OP, .name = "[2,3,4] axes 0,2", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)}, AXES(0, 2)},      \
    {.op = OP, .name = "[2,3,4] axes -1,0 keepdim", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)},           \
     AXES_KEEP(-1, 0)},                                                                                      \
    {.op = OP, .name = "[2,3,4] axes 0,1 (leading run)", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)},     \
     AXES(0, 1)},                                                                                            \
    {.op = OP, .name = "[2,3,4] axes -2,-1", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)}, AXES(-2, -1)},  \
    {.op = OP, .name = "[2,3,4] all axes (0-d)", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)}},             \
    {.op = OP, .name = "[2,3,4] all axes keepdim", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)}, KEEP},     \
    {.op = OP, .name = "[2,3,4] axes 0,1,2 listed", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)},          \
     AXES(0, 1, 2)},                                                                                         \
    {.op = OP, .name = "[3,1,4] size-1 axis", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 1, 4)}, AXES(1)},      \
    {.op = OP, .name = "[5] vector", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 5)}},                              \
    {.op = OP, .name = "0-d input", .n_in = 1, .in = {{.dtype = NB_F64, .ndim = 0, .lo = LO, .hi = HI}}}

/* Products of mixed signs, none near 0. */
static const double prod_mixed[12] = {0.8, -1.2, 0.6, 1.4, -0.7, 1.1, -0.9, 0.5, 1.3, -1.5, 0.75, -0.65};

const nb_gradcheck_case nb_gc_reduce[] = {
    REDUCE_CASES("reduce_sum", 0, 0),
    REDUCE_CASES("reduce_mean", 0, 0),
    REDUCE_CASES("reduce_max", 0, 0),
    REDUCE_CASES("reduce_min", 0, 0),
    REDUCE_CASES("reduce_prod", 0.5, 1.5),
    {.op = "reduce_prod", .name = "[3,4] mixed signs axis 1", .n_in = 1,
     .in = {{.dtype = NB_F64, .ndim = 2, .shape = {3, 4}, .fill = NB_GC_VALUES, .values = prod_mixed}}, AXES(1)},
    {.op = "reduce_prod", .name = "[3,4] mixed signs all axes", .n_in = 1,
     .in = {{.dtype = NB_F64, .ndim = 2, .shape = {3, 4}, .fill = NB_GC_VALUES, .values = prod_mixed}}},
    {.op = "reduce_prod", .name = "[2,3,4] negative axes -1,0", .n_in = 1, .in = {GC_F_RANGE(-1.5, -0.5, 2, 3, 4)},
     AXES(-1, 0)},
    REDUCE_CASES("logsumexp", 0, 0),
    {.op = "logsumexp", .name = "[2,5] large values", .n_in = 1, .in = {GC_F_RANGE(20, 30, 2, 5)}, AXES(-1)},

    {.op = "sum", .name = "one input", .n_in = 1, .in = {GC_F(2, 3)}},
    {.op = "sum", .name = "two inputs", .n_in = 2, .in = {GC_F(2, 3), GC_F(2, 3)}},
    {.op = "sum", .name = "three [2,3,4] inputs", .n_in = 3, .in = {GC_F(2, 3, 4), GC_F(2, 3, 4), GC_F(2, 3, 4)}},
    {.op = "sum", .name = "0-d inputs", .n_in = 2, .in = {GC_SCALAR, GC_SCALAR}},

    {.op = "sum_to", .name = "[2,3,4] to [3,1]", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(3, 1)}},
    {.op = "sum_to", .name = "[2,3,4] to [4]", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(4)}},
    {.op = "sum_to", .name = "[2,3,4] to [2,1,4]", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(2, 1, 4)}},
    {.op = "sum_to", .name = "[2,3] to 0-d", .n_in = 2, .in = {GC_F(2, 3), GC_SCALAR}},
    {.op = "sum_to", .name = "[2,3] to [2,3] (no-op)", .n_in = 2, .in = {GC_F(2, 3), GC_F(2, 3)}},
    {.op = NULL},
};
