/* Gradient-check cases of the linalg family: matmul in every layout it
 * accepts (transposes, alpha, 1-D operands, batches that broadcast) and fc
 * with and without bias, for each in_num_col_dims path and activation. */
#include "cases.h"

#define MM(TX, TY) .n_attrs = 2, .attrs = {NB_ATTR_BOOL("transpose_x", TX), NB_ATTR_BOOL("transpose_y", TY)}
#define MM_ALPHA(TX, TY, A)                                                                                  \
    .n_attrs = 3, .attrs = {NB_ATTR_BOOL("transpose_x", TX), NB_ATTR_BOOL("transpose_y", TY),               \
                            NB_ATTR_FLOAT("alpha", A)}
#define FC(NCD, ACT) .n_attrs = 2, .attrs = {NB_ATTR_INT("in_num_col_dims", NCD), NB_ATTR_STRING("activation", ACT)}

const nb_gradcheck_case nb_gc_linalg[] = {
    {.op = "matmul", .name = "[3,4] x [4,5]", .n_in = 2, .in = {GC_F(3, 4), GC_F(4, 5)}},
    {.op = "matmul", .name = "transpose_x [4,3] x [4,5]", .n_in = 2, .in = {GC_F(4, 3), GC_F(4, 5)}, MM(true, false)},
    {.op = "matmul", .name = "transpose_y [3,4] x [5,4]", .n_in = 2, .in = {GC_F(3, 4), GC_F(5, 4)}, MM(false, true)},
    {.op = "matmul", .name = "both transposed [4,3] x [5,4]", .n_in = 2, .in = {GC_F(4, 3), GC_F(5, 4)},
     MM(true, true)},
    {.op = "matmul", .name = "alpha 0.5", .n_in = 2, .in = {GC_F(3, 4), GC_F(4, 5)}, MM_ALPHA(false, false, 0.5)},
    {.op = "matmul", .name = "alpha -2, both transposed", .n_in = 2, .in = {GC_F(4, 3), GC_F(5, 4)},
     MM_ALPHA(true, true, -2.0)},
    {.op = "matmul", .name = "[4] x [4,5]", .n_in = 2, .in = {GC_F(4), GC_F(4, 5)}},
    {.op = "matmul", .name = "[4] x [5,4] transpose_y", .n_in = 2, .in = {GC_F(4), GC_F(5, 4)}, MM(true, true)},
    {.op = "matmul", .name = "[3,4] x [4]", .n_in = 2, .in = {GC_F(3, 4), GC_F(4)}},
    {.op = "matmul", .name = "[4,3] x [4] transpose_x, alpha 3", .n_in = 2, .in = {GC_F(4, 3), GC_F(4)},
     MM_ALPHA(true, false, 3.0)},
    {.op = "matmul", .name = "[4] x [4] (0-d)", .n_in = 2, .in = {GC_F(4), GC_F(4)}},
    {.op = "matmul", .name = "[4] x [2,4,5]", .n_in = 2, .in = {GC_F(4), GC_F(2, 4, 5)}},
    {.op = "matmul", .name = "[2,3,4] x [4]", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(4)}},
    {.op = "matmul", .name = "[2,3,4] x [2,4,5]", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(2, 4, 5)}},
    {.op = "matmul", .name = "[2,4,3] x [2,5,4] both transposed", .n_in = 2, .in = {GC_F(2, 4, 3), GC_F(2, 5, 4)},
     MM(true, true)},
    {.op = "matmul", .name = "[2,3,4] x [4,5] (shared Y)", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(4, 5)}},
    {.op = "matmul", .name = "[2,3,4] x [5,4] shared Y transposed", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(5, 4)},
     MM(false, true)},
    {.op = "matmul", .name = "[2,4,3] x [4,5] transpose_x", .n_in = 2, .in = {GC_F(2, 4, 3), GC_F(4, 5)},
     MM(true, false)},
    {.op = "matmul", .name = "[3,4] x [2,4,5] (shared X)", .n_in = 2, .in = {GC_F(3, 4), GC_F(2, 4, 5)}},
    {.op = "matmul", .name = "[2,1,3,4] x [3,4,5] broadcast", .n_in = 2, .in = {GC_F(2, 1, 3, 4), GC_F(3, 4, 5)}},
    {.op = "matmul", .name = "[1,3,4] x [2,4,5] broadcast", .n_in = 2, .in = {GC_F(1, 3, 4), GC_F(2, 4, 5)}},
    {.op = "matmul", .name = "[2,1,4,3] x [3,5,4] broadcast, transposed, alpha", .n_in = 2,
     .in = {GC_F(2, 1, 4, 3), GC_F(3, 5, 4)}, MM_ALPHA(true, true, 0.5)},
    {.op = "matmul", .name = "[2,3,4] x [2,1,4,5] broadcast", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(2, 1, 4, 5)}},

    {.op = "fc", .name = "[3,4] x [4,5]", .n_in = 2, .in = {GC_F(3, 4), GC_F(4, 5)}},
    {.op = "fc", .name = "[3,4] x [4,5] + [5]", .n_in = 3, .in = {GC_F(3, 4), GC_F(4, 5), GC_F(5)}},
    {.op = "fc", .name = "[3,4] x [4,5] + [1,5]", .n_in = 3, .in = {GC_F(3, 4), GC_F(4, 5), GC_F(1, 5)}},
    {.op = "fc", .name = "[2,3,4] in_num_col_dims 2", .n_in = 3, .in = {GC_F(2, 3, 4), GC_F(4, 5), GC_F(5)},
     FC(2, "")},
    {.op = "fc", .name = "[2,3,4] in_num_col_dims 2, bias [1,5]", .n_in = 3,
     .in = {GC_F(2, 3, 4), GC_F(4, 5), GC_F(1, 5)}, FC(2, "")},
    {.op = "fc", .name = "[2,3,4] in_num_col_dims 1", .n_in = 3, .in = {GC_F(2, 3, 4), GC_F(12, 5), GC_F(5)}},
    {.op = "fc", .name = "[2,3,2,2] in_num_col_dims 2", .n_in = 3, .in = {GC_F(2, 3, 2, 2), GC_F(4, 5), GC_F(5)},
     FC(2, "")},
    {.op = "fc", .name = "relu", .n_in = 3, .in = {GC_F(3, 4), GC_F(4, 5), GC_F(5)}, FC(1, "relu")},
    {.op = "fc", .name = "sigmoid", .n_in = 3, .in = {GC_F(3, 4), GC_F(4, 5), GC_F(5)}, FC(1, "sigmoid")},
    {.op = "fc", .name = "tanh", .n_in = 3, .in = {GC_F(3, 4), GC_F(4, 5), GC_F(5)}, FC(1, "tanh")},
    {.op = "fc", .name = "tanh, no bias, [2,3,4] in_num_col_dims 2", .n_in = 2, .in = {GC_F(2, 3, 4), GC_F(4, 5)},
     FC(2, "tanh")},
    {.op = "fc", .name = "sigmoid, [2,3,4] in_num_col_dims 1", .n_in = 3, .in = {GC_F(2, 3, 4), GC_F(12, 5), GC_F(5)},
     FC(1, "sigmoid")},
    {.op = "fc", .name = "relu, [2,3,4] in_num_col_dims 2, bias [1,5]", .n_in = 3,
     .in = {GC_F(2, 3, 4), GC_F(4, 5), GC_F(1, 5)}, FC(2, "relu")},
    {.op = NULL},
};
