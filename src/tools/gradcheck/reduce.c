/* Gradient-check cases of the reduce family. Random inputs in [-1, 1] have
 * no ties (max/min) with probability one; reduce_prod's inputs stay away
 * from 0, where its rule divides by X. argmax/argmin have no gradient.
 * The scans (nabla/scan_ops.h), topk, gather_elements and scatter_elements
 * sit here too: the ops along one axis. */
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

/* Attributes as constant initialisers, and index tensors of given values. */
#define A_INT(nm, v) {(nm), {.type = NB_ATTR_INT, .i = (v)}}
#define A_BOOL(nm, v) {(nm), {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_STR(nm, v) {(nm), {.type = NB_ATTR_STRING, .s = (v)}}
#define N_ATTRS(...) (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr))
#define ATTRS(...) .n_attrs = N_ATTRS(__VA_ARGS__), .attrs = {__VA_ARGS__}
#define IDX2(dt, r, c, ...) {.dtype = (dt), .ndim = 2, .shape = {(r), (c)}, .fill = NB_GC_VALUES, \
                             .values = (const double[]){__VA_ARGS__}}
#define IDX3(dt, a, b, c, ...) {.dtype = (dt), .ndim = 3, .shape = {(a), (b), (c)}, .fill = NB_GC_VALUES, \
                                .values = (const double[]){__VA_ARGS__}}

/* The same cases for every scan: each direction, with and without the
 * element itself; LO/HI bound the inputs (0, 0: [-1, 1]). */
#define SCAN_CASES(OP, LO, HI)                                                                                 \
    {.op = OP, .name = "[3,4] axis 1", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 4)}, ATTRS(A_INT("axis", 1))},  \
    {.op = OP, .name = "[3,4] axis 0 exclusive", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 4)},                 \
     ATTRS(A_INT("axis", 0), A_BOOL("exclusive", true))},                                                      \
    {.op = OP, .name = "[3,4] axis -1 reverse", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 3, 4)},                  \
     ATTRS(A_INT("axis", -1), A_BOOL("reverse", true))},                                                       \
    {.op = OP, .name = "[2,3,4] middle axis exclusive reverse", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 2, 3, 4)}, \
     ATTRS(A_INT("axis", 1), A_BOOL("exclusive", true), A_BOOL("reverse", true))},                             \
    {.op = OP, .name = "[5] vector", .n_in = 1, .in = {GC_F_RANGE(LO, HI, 5)}}

/* Products of mixed signs, none near 0. */
static const double prod_mixed[12] = {0.8, -1.2, 0.6, 1.4, -0.7, 1.1, -0.9, 0.5, 1.3, -1.5, 0.75, -0.65};

const nb_gradcheck_case nb_gc_reduce[] = {
    REDUCE_CASES("reduce_sum", 0, 0),
    REDUCE_CASES("reduce_mean", 0, 0),
    REDUCE_CASES("reduce_max", 0, 0),
    REDUCE_CASES("reduce_min", 0, 0),
    REDUCE_CASES("reduce_prod", 0.5, 1.5),
    {.op = "reduce_prod",
     .name = "[3,4] mixed signs axis 1",
     .n_in = 1,
     .in = {{.dtype = NB_F64, .ndim = 2, .shape = {3, 4}, .fill = NB_GC_VALUES, .values = prod_mixed}},
     AXES(1)},
    {.op = "reduce_prod",
     .name = "[3,4] mixed signs all axes",
     .n_in = 1,
     .in = {{.dtype = NB_F64, .ndim = 2, .shape = {3, 4}, .fill = NB_GC_VALUES, .values = prod_mixed}}},
    {.op = "reduce_prod",
     .name = "[2,3,4] negative axes -1,0",
     .n_in = 1,
     .in = {GC_F_RANGE(-1.5, -0.5, 2, 3, 4)},
     AXES(-1, 0)},
    REDUCE_CASES("logsumexp", 0, 0),
    {.op = "logsumexp", .name = "[2,5] large values", .n_in = 1, .in = {GC_F_RANGE(20, 30, 2, 5)}, AXES(-1)},

    SCAN_CASES("cumsum", 0, 0),
    /* cumprod's rules divide by X: away from 0, either sign. */
    SCAN_CASES("cumprod", 0.5, 1.5),
    {.op = "cumprod",
     .name = "[2,3,4] negative, middle axis reverse",
     .n_in = 1,
     .in = {GC_F_RANGE(-1.5, -0.5, 2, 3, 4)},
     ATTRS(A_INT("axis", 1), A_BOOL("reverse", true))},

    /* topk: random values have no ties; Indices carry no gradient. */
    {.op = "topk", .name = "[3,5] k 2 last axis", .n_in = 1, .in = {GC_F(3, 5)}, ATTRS(A_INT("k", 2))},
    {.op = "topk",
     .name = "[4,3] k 3 axis 0 smallest",
     .n_in = 1,
     .in = {GC_F(4, 3)},
     ATTRS(A_INT("k", 3), A_INT("axis", 0), A_BOOL("largest", false))},
    {.op = "topk",
     .name = "[2,5,3] k 5 (all) middle axis",
     .n_in = 1,
     .in = {GC_F(2, 5, 3)},
     ATTRS(A_INT("k", 5), A_INT("axis", 1))},

    /* gather_elements: repeated indices add up in the gradient; negative
     * ones count from the end. */
    {.op = "gather_elements",
     .name = "[3,4] Index [3,2] axis 1, repeats",
     .n_in = 2,
     .in = {GC_F(3, 4), IDX2(NB_I64, 3, 2, 0, 0, 3, 1, 2, -1)},
     ATTRS(A_INT("axis", 1))},
    {.op = "gather_elements",
     .name = "[3,4] int32 Index [2,4] axis 0",
     .n_in = 2,
     .in = {GC_F(3, 4), IDX2(NB_I32, 2, 4, 2, 0, 1, -3, 0, 0, 2, 1)},
     ATTRS(A_INT("axis", 0))},
    {.op = "gather_elements",
     .name = "[2,3,2] Index [2,2,2] axis -2",
     .n_in = 2,
     .in = {GC_F(2, 3, 2), IDX3(NB_I64, 2, 2, 2, 2, 1, 0, 0, 1, 2, 2, 2)},
     ATTRS(A_INT("axis", -2))},

    /* scatter_elements: none with distinct targets, add with repeats, mul
     * with updates away from 0. */
    {.op = "scatter_elements",
     .name = "none [3,4] Index [2,4] axis 0",
     .n_in = 3,
     .in = {GC_F(3, 4), IDX2(NB_I64, 2, 4, 0, 2, 1, 0, 2, 0, -1, 1), GC_F(2, 4)},
     ATTRS(A_INT("axis", 0))},
    {.op = "scatter_elements",
     .name = "add [3,4] Index [3,2] axis 1, repeats",
     .n_in = 3,
     .in = {GC_F(3, 4), IDX2(NB_I64, 3, 2, 1, 1, 0, 3, 2, -2), GC_F(3, 2)},
     ATTRS(A_INT("axis", 1), A_STR("reduction", "add"))},
    {.op = "scatter_elements",
     .name = "mul [3,4] Index [2,3] axis 0, repeats",
     .n_in = 3,
     .in = {GC_F(3, 4), IDX2(NB_I32, 2, 3, 1, 0, 2, 1, 2, 2), GC_F_RANGE(0.5, 1.5, 2, 3)},
     ATTRS(A_INT("axis", 0), A_STR("reduction", "mul"))},

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
