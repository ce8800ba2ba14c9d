/* Gradient-check cases of the conv family. conv2d and pool2d emit
 * conv2d_grad and pool2d_grad, whose rules emit conv2d, conv2d_grad, pool2d
 * and pool2d_grad again: every order is checked.
 *
 * The *_grad cases feed Out and DOut unrelated to X. pool2d_grad's max
 * then finds no element equal to Out and takes each window's first
 * maximum, just as it does for the Out of pool2d; uniform random values
 * leave no ties, so its gradients in X and Out are zero. */
#include "cases.h"

/* Attributes as constant initialisers (the NB_ATTR_* macros make compound
 * literals, which a static table cannot hold). */
#define A_INT(nm, v)   {(nm), {.type = NB_ATTR_INT, .i = (v)}}
#define A_BOOL(nm, v)  {(nm), {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_FLOAT(nm, v) {(nm), {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_STR(nm, v)   {(nm), {.type = NB_ATTR_STRING, .s = (v)}}
#define A_INTS(nm, ...) {(nm), {.type = NB_ATTR_INTS, .n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                .ints = (const int64_t[]){__VA_ARGS__}}}

#define CONV(name_, x_, f_, b_, ...)                                                               \
    {.op = "conv2d", .name = (name_), .n_in = 3, .in = {x_, f_, b_},                             \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

/* conv2d_grad(Input, Filter, DOutput), asking for n_out_ outputs. */
#define CONV_GRAD(name_, x_, f_, dy_, n_out_, ...)                                                 \
    {.op = "conv2d_grad", .name = (name_), .n_in = 3, .in = {x_, f_, dy_}, .n_out = (n_out_),    \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

/* pool2d_grad(X, Out, DOut), Out and DOut shaped out_. */
#define POOL_GRAD(name_, x_, out_, ...)                                                             \
    {.op = "pool2d_grad", .name = (name_), .n_in = 3, .in = {x_, out_, out_},                    \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

#define POOL(name_, x_, ...)                                                                       \
    {.op = "pool2d", .name = (name_), .n_in = 1, .in = {x_},                                     \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

const nb_gradcheck_case nb_gc_conv[] = {
    /* conv2d: Input [N, C, H, W], Filter [M, C/groups, kh, kw], Bias [M]. */
    CONV("3x3, bias", GC_F(2, 2, 5, 5), GC_F(3, 2, 3, 3), GC_F(3), A_INT("groups", 1)),
    CONV("3x3, no bias", GC_F(2, 2, 4, 5), GC_F(2, 2, 3, 3), GC_ABSENT, A_INT("groups", 1)),
    CONV("strides 2, paddings 1", GC_F(2, 2, 6, 6), GC_F(3, 2, 3, 3), GC_F(3), A_INTS("strides", 2, 2),
         A_INTS("paddings", 1, 1)),
    CONV("strides 2 leaving a row and a column out", GC_F(2, 2, 6, 5), GC_F(2, 2, 3, 2), GC_ABSENT,
         A_INTS("strides", 2, 2)),
    CONV("strides [1, 2], paddings [2, 0]", GC_F(2, 2, 4, 6), GC_F(2, 2, 3, 3), GC_F(2), A_INTS("strides", 1, 2),
         A_INTS("paddings", 2, 0)),
    CONV("asymmetric paddings [1, 0, 2, 1]", GC_F(2, 2, 5, 4), GC_F(3, 2, 3, 3), GC_F(3),
         A_INTS("paddings", 1, 0, 2, 1)),
    CONV("asymmetric paddings [0, 2, 1, 0], strides 2", GC_F(1, 3, 5, 5), GC_F(2, 3, 2, 3), GC_ABSENT,
         A_INTS("paddings", 0, 2, 1, 0), A_INTS("strides", 2, 2)),
    CONV("dilations 2, paddings 2", GC_F(2, 2, 6, 6), GC_F(2, 2, 3, 3), GC_F(2), A_INTS("dilations", 2, 2),
         A_INTS("paddings", 2, 2)),
    CONV("dilations [2, 1], strides [1, 2]", GC_F(1, 2, 6, 6), GC_F(3, 2, 2, 3), GC_ABSENT, A_INTS("dilations", 2, 1),
         A_INTS("strides", 1, 2)),
    CONV("groups 2", GC_F(2, 4, 4, 4), GC_F(4, 2, 3, 3), GC_F(4), A_INT("groups", 2)),
    CONV("groups 2, 6 filters, strides 2, paddings 1", GC_F(1, 4, 5, 5), GC_F(6, 2, 3, 3), GC_ABSENT,
         A_INT("groups", 2), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1)),
    CONV("depthwise", GC_F(2, 3, 5, 5), GC_F(3, 1, 3, 3), GC_F(3), A_INT("groups", 3), A_INTS("paddings", 1, 1)),
    CONV("depthwise, multiplier 2, no bias", GC_F(2, 2, 4, 4), GC_F(4, 1, 2, 2), GC_ABSENT, A_INT("groups", 2)),
    CONV("1x1", GC_F(2, 3, 3, 3), GC_F(2, 3, 1, 1), GC_F(2), A_INT("groups", 1)),
    CONV("kernel as big as the input", GC_F(2, 2, 3, 3), GC_F(2, 2, 3, 3), GC_F(2), A_INT("groups", 1)),

    /* pool2d over X [N, C, H, W]. Uniform random values: no ties in a window. */
    POOL("max 2x2, strides 2", GC_F(2, 2, 4, 4), A_STR("pooling_type", "max"), A_INTS("ksize", 2, 2),
         A_INTS("strides", 2, 2)),
    POOL("max 3x3 overlapping, paddings 1", GC_F(2, 2, 5, 5), A_STR("pooling_type", "max"), A_INTS("ksize", 3, 3),
         A_INTS("paddings", 1, 1)),
    POOL("max 3x2, strides [2, 1], paddings [1, 0, 0, 1]", GC_F(2, 2, 5, 4), A_STR("pooling_type", "max"),
         A_INTS("ksize", 3, 2), A_INTS("strides", 2, 1), A_INTS("paddings", 1, 0, 0, 1)),
    POOL("max ceil_mode", GC_F(2, 2, 5, 5), A_STR("pooling_type", "max"), A_INTS("ksize", 2, 2),
         A_INTS("strides", 2, 2), A_BOOL("ceil_mode", true)),
    POOL("max global", GC_F(2, 3, 4, 5), A_STR("pooling_type", "max"), A_INTS("ksize", 1, 1),
         A_BOOL("global_pooling", true)),
    POOL("avg 2x2, strides 2", GC_F(2, 2, 4, 4), A_STR("pooling_type", "avg"), A_INTS("ksize", 2, 2),
         A_INTS("strides", 2, 2)),
    POOL("avg 3x3, paddings 1, exclusive", GC_F(2, 2, 5, 5), A_STR("pooling_type", "avg"), A_INTS("ksize", 3, 3),
         A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1), A_BOOL("exclusive", true)),
    POOL("avg 3x3, paddings 1, not exclusive", GC_F(2, 2, 5, 5), A_STR("pooling_type", "avg"), A_INTS("ksize", 3, 3),
         A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1), A_BOOL("exclusive", false)),
    POOL("avg asymmetric paddings [0, 1, 1, 0], not exclusive", GC_F(2, 2, 4, 4), A_STR("pooling_type", "avg"),
         A_INTS("ksize", 2, 2), A_INTS("paddings", 0, 1, 1, 0), A_BOOL("exclusive", false)),
    POOL("avg ceil_mode, exclusive", GC_F(2, 2, 5, 5), A_STR("pooling_type", "avg"), A_INTS("ksize", 2, 2),
         A_INTS("strides", 2, 2), A_BOOL("ceil_mode", true)),
    POOL("avg ceil_mode, paddings 1, not exclusive", GC_F(2, 2, 6, 6), A_STR("pooling_type", "avg"),
         A_INTS("ksize", 3, 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1), A_BOOL("ceil_mode", true),
         A_BOOL("exclusive", false)),
    POOL("avg global", GC_F(2, 3, 4, 5), A_STR("pooling_type", "avg"), A_INTS("ksize", 1, 1),
         A_BOOL("global_pooling", true)),

    /* conv2d_grad: DOutput shaped like the convolution's output. */
    CONV_GRAD("3x3", GC_F(2, 2, 5, 5), GC_F(3, 2, 3, 3), GC_F(2, 3, 3, 3), 0, A_INT("groups", 1)),
    CONV_GRAD("strides 2, paddings 1", GC_F(2, 2, 6, 6), GC_F(3, 2, 3, 3), GC_F(2, 3, 3, 3), 0, A_INTS("strides", 2, 2),
              A_INTS("paddings", 1, 1)),
    CONV_GRAD("strides 2 leaving a row and a column out", GC_F(1, 2, 6, 5), GC_F(2, 2, 3, 2), GC_F(1, 2, 2, 2), 0,
              A_INTS("strides", 2, 2)),
    CONV_GRAD("asymmetric paddings [1, 0, 2, 1]", GC_F(1, 2, 5, 4), GC_F(2, 2, 3, 3), GC_F(1, 2, 4, 5), 0,
              A_INTS("paddings", 1, 0, 2, 1)),
    CONV_GRAD("dilations 2, paddings 1", GC_F(1, 2, 6, 6), GC_F(2, 2, 3, 3), GC_F(1, 2, 4, 4), 0,
              A_INTS("dilations", 2, 2), A_INTS("paddings", 1, 1)),
    CONV_GRAD("groups 2", GC_F(2, 4, 4, 4), GC_F(4, 2, 3, 3), GC_F(2, 4, 2, 2), 0, A_INT("groups", 2)),
    CONV_GRAD("depthwise, strides 2, paddings 1", GC_F(1, 3, 5, 5), GC_F(3, 1, 3, 3), GC_F(1, 3, 3, 3), 0,
              A_INT("groups", 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1)),
    CONV_GRAD("DInput only", GC_F(1, 2, 4, 4), GC_F(2, 2, 2, 2), GC_F(1, 2, 3, 3), 1, A_INT("groups", 1)),
    CONV_GRAD("DInput and DFilter", GC_F(1, 2, 4, 4), GC_F(3, 2, 2, 2), GC_F(1, 3, 5, 3), 2, A_INTS("paddings", 1, 0)),

    /* pool2d_grad: Out and DOut shaped like the pooled output. */
    POOL_GRAD("avg 3x3, strides 2, paddings 1, exclusive", GC_F(2, 2, 5, 5), GC_F(2, 2, 3, 3),
              A_STR("pooling_type", "avg"), A_INTS("ksize", 3, 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1)),
    POOL_GRAD("avg ceil_mode, paddings 1, not exclusive", GC_F(1, 2, 6, 6), GC_F(1, 2, 4, 4),
              A_STR("pooling_type", "avg"), A_INTS("ksize", 3, 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1),
              A_BOOL("ceil_mode", true), A_BOOL("exclusive", false)),
    POOL_GRAD("avg global", GC_F(1, 2, 3, 4), GC_F(1, 2, 1, 1), A_STR("pooling_type", "avg"), A_INTS("ksize", 1, 1),
              A_BOOL("global_pooling", true)),
    POOL_GRAD("max 2x2, strides 2 (windows apart)", GC_F(2, 2, 4, 4), GC_F(2, 2, 2, 2), A_STR("pooling_type", "max"),
              A_INTS("ksize", 2, 2), A_INTS("strides", 2, 2)),
    POOL_GRAD("max 3x3, paddings 1 (windows overlap)", GC_F(1, 2, 5, 5), GC_F(1, 2, 5, 5), A_STR("pooling_type", "max"),
              A_INTS("ksize", 3, 3), A_INTS("paddings", 1, 1)),
    POOL_GRAD("max 3x3, strides 2, paddings 1, ceil_mode", GC_F(1, 2, 6, 6), GC_F(1, 2, 4, 4),
              A_STR("pooling_type", "max"), A_INTS("ksize", 3, 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1),
              A_BOOL("ceil_mode", true)),
    POOL_GRAD("max 3x2, strides [2, 1], paddings [1, 0, 0, 1]", GC_F(1, 2, 5, 4), GC_F(1, 2, 2, 4),
              A_STR("pooling_type", "max"), A_INTS("ksize", 3, 2), A_INTS("strides", 2, 1),
              A_INTS("paddings", 1, 0, 0, 1)),
    POOL_GRAD("max global", GC_F(2, 2, 3, 3), GC_F(2, 2, 1, 1), A_STR("pooling_type", "max"), A_INTS("ksize", 1, 1),
              A_BOOL("global_pooling", true)),
    {.op = NULL},
};
