/* Gradient-check cases of the shape family. Every op here is linear in its
 * differentiable inputs, so the gradient of a gradient is zero; the second
 * order run still builds and runs the rules of the ops each rule emits
 * (reshape_as, pad_grad and scatter_add have cases of their own). */
#include "cases.h"

/* Attributes as constant initialisers (the NB_ATTR_* macros make compound
 * literals, which a static table cannot hold). */
#define A_INT(nm, v)   {(nm), {.type = NB_ATTR_INT, .i = (v)}}
#define A_FLOAT(nm, v) {(nm), {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_STR(nm, v)   {(nm), {.type = NB_ATTR_STRING, .s = (v)}}
#define A_INTS(nm, ...) {(nm), {.type = NB_ATTR_INTS, .n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                .ints = (const int64_t[]){__VA_ARGS__}}}
#define A_INTS_EMPTY(nm) {(nm), {.type = NB_ATTR_INTS, .n = 0, .ints = 0}}

/* A 1-D index tensor holding exactly these values (repeats included). */
#define GC_IDX(dt, ...) {.dtype = (dt), .ndim = 1, .shape = {(int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double))}, \
                         .fill = NB_GC_VALUES, .values = (const double[]){__VA_ARGS__}}

#define N_ATTRS(...) (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr))

/* An op of one input X. */
#define CASE1(op_, name_, x_, ...) \
    {.op = (op_), .name = (name_), .n_in = 1, .in = {x_}, .n_attrs = N_ATTRS(__VA_ARGS__), .attrs = {__VA_ARGS__}}
#define CASE1_NOATTR(op_, name_, x_) {.op = (op_), .name = (name_), .n_in = 1, .in = {x_}}
/* Ops of two or three inputs, or variadic ones (concat, stack). */
#define CASE2(op_, name_, x_, y_, ...) \
    {.op = (op_), .name = (name_), .n_in = 2, .in = {x_, y_}, .n_attrs = N_ATTRS(__VA_ARGS__), .attrs = {__VA_ARGS__}}
#define CASE2_NOATTR(op_, name_, x_, y_) {.op = (op_), .name = (name_), .n_in = 2, .in = {x_, y_}}
#define CASE3(op_, name_, x_, y_, z_, ...)                                                          \
    {.op = (op_), .name = (name_), .n_in = 3, .in = {x_, y_, z_}, .n_attrs = N_ATTRS(__VA_ARGS__), \
     .attrs = {__VA_ARGS__}}
/* split into n_out_ pieces. */
#define SPLIT(name_, x_, n_out_, ...)                                                                \
    {.op = "split", .name = (name_), .n_in = 1, .in = {x_}, .n_out = (n_out_), .n_attrs = N_ATTRS(__VA_ARGS__), \
     .attrs = {__VA_ARGS__}}

const nb_gradcheck_case nb_gc_shape[] = {
    /* reshape: 0 copies a dim of X, -1 is inferred. */
    CASE1("reshape", "[2, 3, 4] -> [4, 6]", GC_F(2, 3, 4), A_INTS("shape", 4, 6)),
    CASE1("reshape", "[2, 3, 4] -> [0, -1]", GC_F(2, 3, 4), A_INTS("shape", 0, -1)),
    CASE1("reshape", "[6] -> [2, 1, 3]", GC_F(6), A_INTS("shape", 2, 1, 3)),
    CASE1("reshape", "scalar -> [1, 1]", GC_SCALAR, A_INTS("shape", 1, 1)),
    CASE1("reshape", "[1] -> scalar", GC_F(1), A_INTS_EMPTY("shape")),

    CASE1("flatten", "[2, 3, 4], default axes 1..-1", GC_F(2, 3, 4), A_INT("start_axis", 1)),
    CASE1("flatten", "[2, 3, 4, 1], axes 0..2", GC_F(2, 3, 4, 1), A_INT("start_axis", 0), A_INT("stop_axis", 2)),
    CASE1("flatten", "[2, 3, 2], negative axes -3..-2", GC_F(2, 3, 2), A_INT("start_axis", -3), A_INT("stop_axis", -2)),
    CASE1("flatten", "scalar -> [1]", GC_SCALAR, A_INT("start_axis", 0)),

    CASE1("squeeze", "[2, 1, 3, 1], every size-1 dim", GC_F(2, 1, 3, 1), A_INTS_EMPTY("axes")),
    CASE1("squeeze", "[2, 1, 3, 1], axes [-1]", GC_F(2, 1, 3, 1), A_INTS("axes", -1)),
    CASE1("squeeze", "[2, 3], axes [1] not of size 1 stays", GC_F(2, 3), A_INTS("axes", 1)),
    CASE1("squeeze", "[1, 1] -> scalar", GC_F(1, 1), A_INTS("axes", 0, 1)),

    CASE1("unsqueeze", "[2, 3], axes [0, -1]", GC_F(2, 3), A_INTS("axes", 0, -1)),
    CASE1("unsqueeze", "[2, 3], axes [1]", GC_F(2, 3), A_INTS("axes", 1)),
    CASE1("unsqueeze", "scalar, axes [0]", GC_SCALAR, A_INTS("axes", 0)),

    /* Like takes no gradient; only its shape matters. */
    CASE2_NOATTR("reshape_as", "[2, 6] as [3, 4]", GC_F(2, 6), GC_F(3, 4)),
    CASE2_NOATTR("reshape_as", "[6] as [2, 1, 3]", GC_F(6), GC_F(2, 1, 3)),
    CASE2_NOATTR("reshape_as", "[1, 1] as a scalar", GC_F(1, 1), GC_SCALAR),

    CASE1("transpose", "[2, 3, 4], perm [2, 0, 1]", GC_F(2, 3, 4), A_INTS("perm", 2, 0, 1)),
    CASE1("transpose", "[2, 3], perm [-1, 0]", GC_F(2, 3), A_INTS("perm", -1, 0)),
    CASE1("transpose", "[2, 3, 1, 2], perm [3, 1, 0, 2]", GC_F(2, 3, 1, 2), A_INTS("perm", 3, 1, 0, 2)),
    CASE1("transpose", "[2, 3], identity", GC_F(2, 3), A_INTS("perm", 0, 1)),
    CASE1("transpose", "scalar", GC_SCALAR, A_INTS_EMPTY("perm")),

    /* expand: broadcast dims, new leading dims, -1 keeps a dim. */
    CASE1("expand", "[3] -> [2, 3]", GC_F(3), A_INTS("shape", 2, 3)),
    CASE1("expand", "[2, 1, 3] -> [2, 4, 3]", GC_F(2, 1, 3), A_INTS("shape", 2, 4, 3)),
    CASE1("expand", "[2, 1] -> [3, -1, 2]", GC_F(2, 1), A_INTS("shape", 3, -1, 2)),
    CASE1("expand", "scalar -> [2, 2]", GC_SCALAR, A_INTS("shape", 2, 2)),
    CASE1("expand", "[2, 3] -> [2, 3], no broadcast", GC_F(2, 3), A_INTS("shape", 2, 3)),

    CASE2_NOATTR("expand_as", "[3] as [2, 3]", GC_F(3), GC_F(2, 3)),
    CASE2_NOATTR("expand_as", "[2, 1, 1] as [2, 3, 4]", GC_F(2, 1, 1), GC_F(2, 3, 4)),
    CASE2_NOATTR("expand_as", "[1] as [4]", GC_F(1), GC_F(4)),
    CASE2_NOATTR("expand_as", "scalar as [3, 1]", GC_SCALAR, GC_F(3, 1)),

    /* concat: the inputs are the variadic X. */
    CASE2("concat", "[2, 3] + [4, 3], axis 0", GC_F(2, 3), GC_F(4, 3), A_INT("axis", 0)),
    CASE3("concat", "[2, 1] + [2, 3] + [2, 2], axis -1", GC_F(2, 1), GC_F(2, 3), GC_F(2, 2), A_INT("axis", -1)),
    CASE2("concat", "[2, 3, 2] + [2, 1, 2], axis 1", GC_F(2, 3, 2), GC_F(2, 1, 2), A_INT("axis", 1)),
    CASE1("concat", "one input [3]", GC_F(3), A_INT("axis", 0)),

    /* split: equal parts or sections (one -1 inferred). */
    SPLIT("[6, 2] into 3 along 0", GC_F(6, 2), 3, A_INT("axis", 0)),
    SPLIT("[2, 5], sections [2, -1, 1], axis -1", GC_F(2, 5), 3, A_INT("axis", -1), A_INTS("sections", 2, -1, 1)),
    SPLIT("[4, 3], sections [1, 3]", GC_F(4, 3), 2, A_INT("axis", 0), A_INTS("sections", 1, 3)),
    SPLIT("[2, 3, 4] into 2 along 2", GC_F(2, 3, 4), 2, A_INT("axis", 2)),
    SPLIT("[4] into 1", GC_F(4), 1, A_INT("axis", 0)),
    /* Pieces left out of the loss get no gradient: the rule fills zeros. */
    {.op = "split",
     .name = "[2, 6] into 3 along 1, the middle one unused",
     .n_in = 1,
     .in = {GC_F(2, 6)},
     .n_out = 3,
     .n_attrs = 1,
     .attrs = {A_INT("axis", 1)},
     .loss_outputs = (1u << 0) | (1u << 2)},
    {.op = "split",
     .name = "[5, 2], sections [1, 4], only the second used",
     .n_in = 1,
     .in = {GC_F(5, 2)},
     .n_out = 2,
     .n_attrs = 2,
     .attrs = {A_INT("axis", 0), A_INTS("sections", 1, 4)},
     .loss_outputs = 1u << 1},

    CASE2("stack", "2 x [2, 3], axis 0", GC_F(2, 3), GC_F(2, 3), A_INT("axis", 0)),
    CASE3("stack", "3 x [2, 3], axis -1", GC_F(2, 3), GC_F(2, 3), GC_F(2, 3), A_INT("axis", -1)),
    CASE2("stack", "2 x [2, 3], axis 1", GC_F(2, 3), GC_F(2, 3), A_INT("axis", 1)),
    CASE2("stack", "2 scalars", GC_SCALAR, GC_SCALAR, A_INT("axis", 0)),
    CASE1("stack", "one [3], axis -2", GC_F(3), A_INT("axis", -2)),

    /* slice: Python bounds (negative, clamped), strides, empty ranges. */
    CASE1("slice", "[3, 4][1:3, -3:100]", GC_F(3, 4), A_INTS("axes", 0, 1), A_INTS("starts", 1, -3),
          A_INTS("ends", 3, 100)),
    CASE1("slice", "[2, 3, 4][..., -3:-1]", GC_F(2, 3, 4), A_INTS("axes", -1), A_INTS("starts", -3),
          A_INTS("ends", -1)),
    CASE1("slice", "[3, 5][:, 0:5:2], stride reaching the end", GC_F(3, 5), A_INTS("axes", 1), A_INTS("starts", 0),
          A_INTS("ends", 5), A_INTS("strides", 2)),
    CASE1("slice", "[2, 9][:, 1:7:3], stride with room after", GC_F(2, 9), A_INTS("axes", 1), A_INTS("starts", 1),
          A_INTS("ends", 7), A_INTS("strides", 3)),
    CASE1("slice", "[4, 7][-100:3:2, 1:-1:3], axes (1, 0)", GC_F(4, 7), A_INTS("axes", 1, 0), A_INTS("starts", 1, -100),
          A_INTS("ends", -1, 3), A_INTS("strides", 3, 2)),
    CASE1("slice", "[3, 4][2:3:5], one element, big stride", GC_F(3, 4), A_INTS("axes", 0), A_INTS("starts", 2),
          A_INTS("ends", 3), A_INTS("strides", 5)),
    CASE1("slice", "[3, 4][:, 1:2] and a no-op range on dim 0", GC_F(3, 4), A_INTS("axes", 0, 1),
          A_INTS("starts", 0, 1), A_INTS("ends", 3, 2)),
    CASE1("slice", "[3, 4][2:1, 1:3], empty", GC_F(3, 4), A_INTS("axes", 0, 1), A_INTS("starts", 2, 1),
          A_INTS("ends", 1, 3)),
    CASE1("slice", "[2, 3, 4], no axes", GC_F(2, 3, 4), A_INTS_EMPTY("axes"), A_INTS_EMPTY("starts"),
          A_INTS_EMPTY("ends")),

    /* pad: constant (any pad_value), reflect and edge. */
    CASE1("pad", "constant [2, 3], (1, 0, 0, 2), value 5", GC_F(2, 3), A_INTS("paddings", 1, 0, 0, 2),
          A_FLOAT("pad_value", 5)),
    CASE1("pad", "constant [2, 2, 2], one dim", GC_F(2, 2, 2), A_INTS("paddings", 0, 0, 2, 1, 0, 0)),
    CASE1("pad", "constant [3], no padding", GC_F(3), A_INTS("paddings", 0, 0)),
    CASE1("pad", "reflect [4], (2, 3)", GC_F(4), A_INTS("paddings", 2, 3), A_STR("mode", "reflect")),
    CASE1("pad", "reflect [3, 4], (1, 2, 2, 1)", GC_F(3, 4), A_INTS("paddings", 1, 2, 2, 1), A_STR("mode", "reflect")),
    CASE1("pad", "reflect [3, 3], borders overlapping", GC_F(3, 3), A_INTS("paddings", 2, 2, 2, 2),
          A_STR("mode", "reflect")),
    CASE1("pad", "edge [3], (2, 1)", GC_F(3), A_INTS("paddings", 2, 1), A_STR("mode", "edge")),
    CASE1("pad", "edge [2, 3], (0, 1, 3, 2)", GC_F(2, 3), A_INTS("paddings", 0, 1, 3, 2), A_STR("mode", "edge")),
    CASE1("pad", "edge [1, 2], wide", GC_F(1, 2), A_INTS("paddings", 2, 3, 1, 4), A_STR("mode", "edge")),

    /* pad_grad, the fused gradient of pad: its input is the padded shape. */
    CASE1("pad_grad", "reflect [6, 7], (1, 2, 2, 1)", GC_F(6, 7), A_INTS("paddings", 1, 2, 2, 1),
          A_STR("mode", "reflect")),
    CASE1("pad_grad", "reflect [7], (2, 2)", GC_F(7), A_INTS("paddings", 2, 2), A_STR("mode", "reflect")),
    CASE1("pad_grad", "edge [6], (2, 1)", GC_F(6), A_INTS("paddings", 2, 1), A_STR("mode", "edge")),
    CASE1("pad_grad", "edge [4, 5], (0, 2, 1, 1)", GC_F(4, 5), A_INTS("paddings", 0, 2, 1, 1), A_STR("mode", "edge")),
    CASE1("pad_grad", "constant [4, 4], (1, 0, 0, 2)", GC_F(4, 4), A_INTS("paddings", 1, 0, 0, 2)),

    /* gather, index_select: repeated indices add up in the gradient. */
    CASE2("gather", "[4, 3], Index (0, 2, 0, 3, 2)", GC_F(4, 3), GC_IDX(NB_I64, 0, 2, 0, 3, 2), A_INT("axis", 0)),
    CASE2("gather", "[2, 4, 3], int32 Index, axis 1", GC_F(2, 4, 3), GC_IDX(NB_I32, 3, 1, 1), A_INT("axis", 1)),
    CASE2("gather", "[3, 4], Index (3, 3, 1), axis -1", GC_F(3, 4), GC_IDX(NB_I64, 3, 3, 1), A_INT("axis", -1)),
    CASE2("gather", "[5], random Index", GC_F(5), GC_INTS(NB_I64, 0, 4, 6), A_INT("axis", 0)),
    CASE2("index_select", "[4, 3], Index (1, 1, 0, 3)", GC_F(4, 3), GC_IDX(NB_I64, 1, 1, 0, 3), A_INT("dim", 0)),
    CASE2("index_select", "[2, 3, 2], int32 Index, dim -2", GC_F(2, 3, 2), GC_IDX(NB_I32, 2, 0, 2, 2),
          A_INT("dim", -2)),

    /* scatter_add: gradients for X and Updates. */
    CASE3("scatter_add", "[4, 3], Index (0, 2, 0, 1, 2)", GC_F(4, 3), GC_IDX(NB_I64, 0, 2, 0, 1, 2), GC_F(5, 3),
          A_INT("axis", 0)),
    CASE3("scatter_add", "[2, 4], int32 Index (3, 3, 0), axis -1", GC_F(2, 4), GC_IDX(NB_I32, 3, 3, 0), GC_F(2, 3),
          A_INT("axis", -1)),
    CASE3("scatter_add", "[2, 3, 2], Index (1), axis 1", GC_F(2, 3, 2), GC_IDX(NB_I64, 1), GC_F(2, 1, 2),
          A_INT("axis", 1)),
    {.op = NULL},
};
