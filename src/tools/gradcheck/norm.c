/* Gradient-check cases of the norm family. The rules emit batch_norm_grad
 * and layer_norm_grad, fused ops whose own rules (composite ones) give the
 * second order, checked here too, and which have cases of their own. Only Y
 * enters the loss (loss_outputs = 1): the other outputs are
 * statistics, which carry no gradient by definition (see ops/norm_grad.c). */
#include "cases.h"

/* Attributes as constant initialisers (the NB_ATTR_* macros make compound
 * literals, which a static table cannot hold). */
#define A_INT(nm, v)   {(nm), {.type = NB_ATTR_INT, .i = (v)}}
#define A_BOOL(nm, v)  {(nm), {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_FLOAT(nm, v) {(nm), {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_STR(nm, v)   {(nm), {.type = NB_ATTR_STRING, .s = (v)}}
#define A_INTS(nm, ...) {(nm), {.type = NB_ATTR_INTS, .n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                .ints = (const int64_t[]){__VA_ARGS__}}}

#define BN(name_, x_, c_, mean_, var_, ...)                                                          \
    {.op = "batch_norm", .name = (name_), .n_in = 5,                                               \
     .in = {x_, GC_F_RANGE(0.5, 1.5, c_), GC_F(c_), mean_, var_},                                  \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__},   \
     .loss_outputs = 1}

#define LN(name_, x_, scale_, bias_, ...)                                                            \
    {.op = "layer_norm", .name = (name_), .n_in = 3, .in = {x_, scale_, bias_},                    \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__},   \
     .loss_outputs = 1}

/* The fused gradient ops on their own: statistics inputs (no gradient) hold
 * arbitrary values in training (the ops recompute them from X) and positive
 * ones where they are used. */
#define BNG(name_, x_, c_, n_extra, ...)                                                              \
    {.op = "batch_norm_grad", .name = (name_), .n_in = 5 + (n_extra),                                 \
     .in = {x_, GC_F_RANGE(0.5, 1.5, c_), GC_F(c_), GC_F_RANGE(0.5, 1.5, c_), x_, GC_F(c_),          \
            GC_F_RANGE(0.5, 2, c_)},                                                                  \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

#define LNG(name_, x_, scale_, rows_, ...)                                                            \
    {.op = "layer_norm_grad", .name = (name_), .n_in = 5,                                              \
     .in = {x_, scale_, GC_F(rows_), GC_F_RANGE(0.5, 1.5, rows_), x_},                                \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

const nb_gradcheck_case nb_gc_norm[] = {
    /* batch_norm(X, Scale, Bias, Mean, Variance); Mean and Variance take no
     * gradient; in training they only feed MeanOut/VarianceOut. */
    BN("train 2-D [4, 3]", GC_F(4, 3), 3, GC_F(3), GC_F_RANGE(0.5, 2, 3), A_FLOAT("momentum", 0.9)),
    BN("train 4-D [2, 3, 2, 3]", GC_F(2, 3, 2, 3), 3, GC_F(3), GC_F_RANGE(0.5, 2, 3), A_FLOAT("momentum", 0.9)),
    BN("train 3-D [3, 2, 4], epsilon 0.1", GC_F(3, 2, 4), 2, GC_F(2), GC_F_RANGE(0.5, 2, 2), A_FLOAT("epsilon", 0.1)),
    BN("train 4-D, one value per plane [5, 2, 1, 1]", GC_F(5, 2, 1, 1), 2, GC_F(2), GC_F_RANGE(0.5, 2, 2),
       A_FLOAT("momentum", 0.5)),
    BN("is_test 2-D [3, 4]", GC_F(3, 4), 4, GC_F(4), GC_F_RANGE(0.5, 2, 4), A_BOOL("is_test", true)),
    BN("is_test 4-D [2, 3, 2, 2]", GC_F(2, 3, 2, 2), 3, GC_F(3), GC_F_RANGE(0.5, 2, 3), A_BOOL("is_test", true)),
    BN("use_global_stats 4-D [2, 2, 3, 2]", GC_F(2, 2, 3, 2), 2, GC_F(2), GC_F_RANGE(0.5, 2, 2),
       A_BOOL("use_global_stats", true)),
    {.op = "batch_norm",
     .name = "is_test, every output in the loss (the statistics are constants)",
     .n_in = 5,
     .in = {GC_F(2, 3, 2, 2), GC_F(3), GC_F(3), GC_F(3), GC_F_RANGE(0.5, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_BOOL("is_test", true)}},

    /* layer_norm(X, Scale?, Bias?) over dims [begin_norm_axis, ndim). */
    LN("axis 1, Scale and Bias flat", GC_F(2, 3, 4), GC_F(12), GC_F(12), A_INT("begin_norm_axis", 1)),
    LN("axis 2, Scale and Bias flat", GC_F(2, 3, 4), GC_F(4), GC_F(4), A_INT("begin_norm_axis", 2)),
    LN("axis 1, Scale and Bias as the normalised dims", GC_F(2, 3, 4), GC_F(3, 4), GC_F(3, 4),
       A_INT("begin_norm_axis", 1)),
    LN("axis -1, 2-D", GC_F(3, 5), GC_F(5), GC_F(5), A_INT("begin_norm_axis", -1)),
    LN("axis 2 of 4-D, no Scale or Bias", GC_F(2, 2, 2, 3), GC_ABSENT, GC_ABSENT, A_INT("begin_norm_axis", 2)),
    LN("axis 1, Scale only", GC_F(3, 4), GC_F(4), GC_ABSENT, A_INT("begin_norm_axis", 1)),
    LN("axis 1, Bias only, flat", GC_F(2, 6), GC_ABSENT, GC_F(6), A_INT("begin_norm_axis", 1)),
    LN("axis 1, Bias only, as the normalised dims", GC_F(2, 2, 3), GC_ABSENT, GC_F(2, 3), A_INT("begin_norm_axis", 1)),
    LN("axis 1, epsilon 0.1", GC_F(2, 5), GC_F(5), GC_F(5), A_FLOAT("epsilon", 0.1)),

    BNG("train [4, 3]", GC_F(4, 3), 3, 0, A_FLOAT("epsilon", 1e-5)),
    BNG("train [2, 3, 2, 2]", GC_F(2, 3, 2, 2), 3, 0, A_FLOAT("epsilon", 0.1)),
    BNG("is_test with the running statistics [2, 2, 3]", GC_F(2, 2, 3), 2, 2, A_BOOL("is_test", true)),
    BNG("use_global_stats with the saved statistics [3, 2]", GC_F(3, 2), 2, 0, A_BOOL("use_global_stats", true)),
    LNG("axis 1 [2, 6], Scale", GC_F(2, 6), GC_F(6), 2, A_INT("begin_norm_axis", 1)),
    LNG("axis 2 [2, 3, 4], Scale [4]", GC_F(2, 3, 4), GC_F(4), 6, A_INT("begin_norm_axis", 2)),
    LNG("axis 1 [3, 4], no Scale", GC_F(3, 4), GC_ABSENT, 3, A_INT("begin_norm_axis", 1)),
    {.op = NULL},
};
