/* Gradient-check cases of the nn family.
 *
 * Probabilities (cross_entropy) stay in (0.05, 1) so that -log X is smooth
 * and away from the kernel's clamp. softmax_with_cross_entropy and embedding
 * emit fused gradient ops (softmax_with_cross_entropy_grad, embedding_grad),
 * which have rules of their own and cases of their own, so the second order
 * of both is checked too. Dropout is random, but every evaluation reseeds
 * it, so its mask is the same throughout a check. */
#include "cases.h"

#define A_INT(nm, v)   {(nm), {.type = NB_ATTR_INT, .i = (v)}}
#define A_BOOL(nm, v)  {(nm), {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_FLOAT(nm, v) {(nm), {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_STR(nm, v)   {(nm), {.type = NB_ATTR_STRING, .s = (v)}}

/* An input holding exactly `vals` (an array), e.g. labels or ids. */
#define GC_VALS(dt, vals, ...) {.dtype = (dt), .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                .shape = {__VA_ARGS__}, .fill = NB_GC_VALUES, .values = (vals)}
/* A 0-d float input drawn from [lo, hi). */
#define GC_F_SCALAR_RANGE(lo_, hi_) {.dtype = NB_F64, .ndim = 0, .lo = (lo_), .hi = (hi_)}
/* A 0-d integer input drawn from [lo, hi]. */
#define GC_INT_SCALAR(dt, lo_, hi_) {.dtype = (dt), .ndim = 0, .fill = NB_GC_INTS, .lo = (lo_), .hi = (hi_)}

/* Hard labels of 5 rows with two of them ignored (the default ignore_index). */
static const double labels_ignored[] = {0, -100, 3, 2, -100};
/* The same in a [2, 3] grid of rows for a class axis in the middle. */
static const double labels_ignored_2x3[] = {1, -100, 0, 2, 3, -100};
/* Ids with repeats (rows 1 and 4 are taken several times) and the padding row 2. */
static const double ids_repeated[] = {1, 4, 1, 0, 4, 1, 5};
static const double ids_padded[] = {2, 0, 2, 3, 1, 3};

#define SOFTMAX_CASES(OP)                                                                                        \
    {.op = OP, .name = "[2,3,4] axis 0", .n_in = 1, .in = {GC_F_RANGE(-2, 2, 2, 3, 4)}, .n_attrs = 1,          \
     .attrs = {A_INT("axis", 0)}},                                                                               \
    {.op = OP, .name = "[2,3,4] axis 1", .n_in = 1, .in = {GC_F_RANGE(-2, 2, 2, 3, 4)}, .n_attrs = 1,          \
     .attrs = {A_INT("axis", 1)}},                                                                               \
    {.op = OP, .name = "[2,3,4] axis -1", .n_in = 1, .in = {GC_F_RANGE(-2, 2, 2, 3, 4)}, .n_attrs = 1,         \
     .attrs = {A_INT("axis", -1)}},                                                                              \
    {.op = OP, .name = "[2,3,4] axis -2", .n_in = 1, .in = {GC_F_RANGE(-2, 2, 2, 3, 4)}, .n_attrs = 1,         \
     .attrs = {A_INT("axis", -2)}},                                                                              \
    {.op = OP, .name = "[3,5] default axis", .n_in = 1, .in = {GC_F_RANGE(-3, 3, 3, 5)}},                       \
    {.op = OP, .name = "[6] axis 0", .n_in = 1, .in = {GC_F(6)}, .n_attrs = 1, .attrs = {A_INT("axis", 0)}},   \
    {.op = OP, .name = "[4,1] one class", .n_in = 1, .in = {GC_F(4, 1)}},                                       \
    {.op = OP, .name = "0-d axis 0", .n_in = 1, .in = {GC_SCALAR}, .n_attrs = 1, .attrs = {A_INT("axis", 0)}}, \
    {.op = OP, .name = "0-d axis -1", .n_in = 1, .in = {GC_SCALAR}}

#define REDUCTION_CASES(OP, LABEL_LO, LABEL_HI)                                                                  \
    {.op = OP, .name = "[3,4] mean", .n_in = 2, .in = {GC_F_RANGE(-2, 2, 3, 4), GC_F_RANGE(LABEL_LO, LABEL_HI, 3, 4)}, \
     .n_attrs = 1, .attrs = {A_STR("reduction", "mean")}},                                                       \
    {.op = OP, .name = "[3,4] default (mean)", .n_in = 2,                                                        \
     .in = {GC_F_RANGE(-2, 2, 3, 4), GC_F_RANGE(LABEL_LO, LABEL_HI, 3, 4)}},                                     \
    {.op = OP, .name = "[3,4] sum", .n_in = 2, .in = {GC_F_RANGE(-2, 2, 3, 4), GC_F_RANGE(LABEL_LO, LABEL_HI, 3, 4)}, \
     .n_attrs = 1, .attrs = {A_STR("reduction", "sum")}},                                                        \
    {.op = OP, .name = "[3,4] none", .n_in = 2, .in = {GC_F_RANGE(-2, 2, 3, 4), GC_F_RANGE(LABEL_LO, LABEL_HI, 3, 4)}, \
     .n_attrs = 1, .attrs = {A_STR("reduction", "none")}},                                                       \
    {.op = OP, .name = "[2,3,2] mean", .n_in = 2,                                                                \
     .in = {GC_F_RANGE(-2, 2, 2, 3, 2), GC_F_RANGE(LABEL_LO, LABEL_HI, 2, 3, 2)}, .n_attrs = 1,                  \
     .attrs = {A_STR("reduction", "mean")}},                                                                     \
    {.op = OP, .name = "[7] sum", .n_in = 2, .in = {GC_F_RANGE(-2, 2, 7), GC_F_RANGE(LABEL_LO, LABEL_HI, 7)},    \
     .n_attrs = 1, .attrs = {A_STR("reduction", "sum")}},                                                        \
    {.op = OP, .name = "0-d mean", .n_in = 2, .in = {GC_SCALAR, GC_F_SCALAR_RANGE(LABEL_LO, LABEL_HI)},                \
     .n_attrs = 1, .attrs = {A_STR("reduction", "mean")}},                                                       \
    {.op = OP, .name = "0-d none", .n_in = 2, .in = {GC_SCALAR, GC_F_SCALAR_RANGE(LABEL_LO, LABEL_HI)},                \
     .n_attrs = 1, .attrs = {A_STR("reduction", "none")}}

#define DROPOUT_CASE(NAME, P, TEST, MODE, SEED)                                                                  \
    {.op = "dropout", .name = NAME, .n_in = 1, .in = {GC_F(4, 5)}, .n_attrs = 4,                                 \
     .attrs = {A_FLOAT("dropout_prob", P), A_BOOL("is_test", TEST), A_STR("mode", MODE), A_INT("seed", SEED)}}

const nb_gradcheck_case nb_gc_nn[] = {
    /* ---- softmax, log_softmax ---- */
    SOFTMAX_CASES("softmax"),
    SOFTMAX_CASES("log_softmax"),

    /* ---- softmax_with_cross_entropy ---- */
    {.op = "softmax_with_cross_entropy",
     .name = "[4,5] labels [4,1]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 4, 5), GC_INTS(NB_I64, 0, 4, 4, 1)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[4,5] labels [4] int32",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 4, 5), GC_INTS(NB_I32, 0, 4, 4)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[2,3,4] axis 1, labels [2,1,4]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 3, 4), GC_INTS(NB_I64, 0, 2, 2, 1, 4)},
     .n_attrs = 1,
     .attrs = {A_INT("axis", 1)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[2,3,4] axis -2, labels [2,4]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 3, 4), GC_INTS(NB_I32, 0, 2, 2, 4)},
     .n_attrs = 1,
     .attrs = {A_INT("axis", -2)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[3,4] axis 0, labels [1,4]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 3, 4), GC_INTS(NB_I64, 0, 2, 1, 4)},
     .n_attrs = 1,
     .attrs = {A_INT("axis", 0)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[2,2,5] labels [2,2,1]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 2, 5), GC_INTS(NB_I64, 0, 4, 2, 2, 1)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[5] label [1]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 5), GC_INTS(NB_I64, 0, 4, 1)}},
    {.op = "softmax_with_cross_entropy",
     .name = "[5] 0-d label",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 5), GC_INT_SCALAR(NB_I64, 0, 4)}},
    {.op = "softmax_with_cross_entropy",
     .name = "soft labels [3,4]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 3, 4), GC_F_RANGE(0, 1, 3, 4)},
     .n_attrs = 1,
     .attrs = {A_BOOL("soft_label", true)}},
    {.op = "softmax_with_cross_entropy",
     .name = "soft labels [2,3,4] axis 1",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 3, 4), GC_F_RANGE(0, 1, 2, 3, 4)},
     .n_attrs = 2,
     .attrs = {A_BOOL("soft_label", true), A_INT("axis", 1)}},
    {.op = "softmax_with_cross_entropy",
     .name = "ignore_index -100 in labels [5]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 5, 4), GC_VALS(NB_I64, labels_ignored, 5)}},
    {.op = "softmax_with_cross_entropy",
     .name = "ignore_index -100, axis 1, labels [2,1,3]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 4, 3), GC_VALS(NB_I32, labels_ignored_2x3, 2, 1, 3)},
     .n_attrs = 1,
     .attrs = {A_INT("axis", 1)}},
    {.op = "softmax_with_cross_entropy",
     .name = "ignore_index 2 (a class) in labels [6,1]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 6, 4), GC_INTS(NB_I64, 0, 3, 6, 1)},
     .n_attrs = 1,
     .attrs = {A_INT("ignore_index", 2)}},

    /* Only Softmax in the loss: the rule is the softmax composition alone, so
     * its second order is checked; only Loss: the fused op alone. */
    {.op = "softmax_with_cross_entropy",
     .name = "only Softmax used, [4,5]",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 4, 5), GC_INTS(NB_I64, 0, 4, 4, 1)},
     .loss_outputs = 1 << 0},
    {.op = "softmax_with_cross_entropy",
     .name = "only Softmax used, soft labels [2,3,4] axis 1",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 3, 4), GC_F_RANGE(0, 1, 2, 3, 4)},
     .n_attrs = 2,
     .attrs = {A_BOOL("soft_label", true), A_INT("axis", 1)},
     .loss_outputs = 1 << 0},
    {.op = "softmax_with_cross_entropy",
     .name = "only Loss used, [3,4] axis 0",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 3, 4), GC_INTS(NB_I32, 0, 2, 1, 4)},
     .n_attrs = 1,
     .attrs = {A_INT("axis", 0)},
     .loss_outputs = 1 << 1},

    /* ---- softmax_with_cross_entropy_grad (Softmax, Label, DLoss) ----
     * Its rules serve second derivatives and forward over reverse. It is
     * affine in Softmax, so any values do. */
    {.op = "softmax_with_cross_entropy_grad",
     .name = "[4,5] labels [4,1]",
     .n_in = 3,
     .in = {GC_F_RANGE(0, 1, 4, 5), GC_INTS(NB_I64, 0, 4, 4, 1), GC_F(4, 1)}},
    {.op = "softmax_with_cross_entropy_grad",
     .name = "[2,3,4] axis 1, labels [2,4] int32",
     .n_in = 3,
     .in = {GC_F_RANGE(0, 1, 2, 3, 4), GC_INTS(NB_I32, 0, 2, 2, 4), GC_F(2, 1, 4)},
     .n_attrs = 1,
     .attrs = {A_INT("axis", 1)}},
    {.op = "softmax_with_cross_entropy_grad",
     .name = "soft labels [3,4]",
     .n_in = 3,
     .in = {GC_F_RANGE(0, 1, 3, 4), GC_F_RANGE(0, 1, 3, 4), GC_F(3, 1)},
     .n_attrs = 1,
     .attrs = {A_BOOL("soft_label", true)}},
    {.op = "softmax_with_cross_entropy_grad",
     .name = "ignore_index -100 in labels [5]",
     .n_in = 3,
     .in = {GC_F_RANGE(0, 1, 5, 4), GC_VALS(NB_I64, labels_ignored, 5), GC_F(5, 1)}},

    /* ---- cross_entropy ---- */
    {.op = "cross_entropy",
     .name = "[4,5] labels [4,1]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 4, 5), GC_INTS(NB_I64, 0, 4, 4, 1)}},
    {.op = "cross_entropy",
     .name = "[4,5] labels [4] int32",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 4, 5), GC_INTS(NB_I32, 0, 4, 4)}},
    {.op = "cross_entropy",
     .name = "[2,3,4] labels [2,3,1]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 2, 3, 4), GC_INTS(NB_I64, 0, 3, 2, 3, 1)}},
    {.op = "cross_entropy",
     .name = "[2,3,4] labels [2,3]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 2, 3, 4), GC_INTS(NB_I32, 0, 3, 2, 3)}},
    {.op = "cross_entropy",
     .name = "[5] label [1]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 5), GC_INTS(NB_I64, 0, 4, 1)}},
    {.op = "cross_entropy",
     .name = "[5] 0-d label",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 5), GC_INT_SCALAR(NB_I32, 0, 4)}},
    {.op = "cross_entropy",
     .name = "soft labels [3,4]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 3, 4), GC_F_RANGE(0, 1, 3, 4)},
     .n_attrs = 1,
     .attrs = {A_BOOL("soft_label", true)}},
    {.op = "cross_entropy",
     .name = "soft labels [2,2,3]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 2, 2, 3), GC_F_RANGE(0, 1, 2, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_BOOL("soft_label", true)}},
    {.op = "cross_entropy",
     .name = "ignore_index -100 in labels [5]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 5, 4), GC_VALS(NB_I64, labels_ignored, 5)}},
    {.op = "cross_entropy",
     .name = "ignore_index -100 in labels [5,1] int32",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 5, 4), GC_VALS(NB_I32, labels_ignored, 5, 1)}},
    {.op = "cross_entropy",
     .name = "ignore_index 1 (a class) in labels [6,1]",
     .n_in = 2,
     .in = {GC_F_RANGE(0.05, 1, 6, 3), GC_INTS(NB_I64, 0, 2, 6, 1)},
     .n_attrs = 1,
     .attrs = {A_INT("ignore_index", 1)}},

    /* ---- mse_loss (both inputs take gradients), bce_with_logits ---- */
    REDUCTION_CASES("mse_loss", -2, 2),
    REDUCTION_CASES("bce_with_logits", 0, 1),
    {.op = "bce_with_logits",
     .name = "[3,4] hard 0/1 labels, mean",
     .n_in = 2,
     .in = {GC_F_RANGE(-3, 3, 3, 4), GC_INTS(NB_F64, 0, 1, 3, 4)}},
    {.op = "bce_with_logits",
     .name = "[3,4] hard 0/1 labels, none",
     .n_in = 2,
     .in = {GC_F_RANGE(-3, 3, 3, 4), GC_INTS(NB_F64, 0, 1, 3, 4)},
     .n_attrs = 1,
     .attrs = {A_STR("reduction", "none")}},

    /* ---- dropout ---- */
    DROPOUT_CASE("train upscale_in_train p=0.3", 0.3, false, "upscale_in_train", 0),
    DROPOUT_CASE("train upscale_in_train p=0.5 seeded", 0.5, false, "upscale_in_train", 17),
    DROPOUT_CASE("train downgrade_in_infer p=0.4", 0.4, false, "downgrade_in_infer", 0),
    DROPOUT_CASE("train downgrade_in_infer p=0.5 seeded", 0.5, false, "downgrade_in_infer", 23),
    DROPOUT_CASE("train p=0", 0.0, false, "upscale_in_train", 0),
    DROPOUT_CASE("test upscale_in_train p=0.3", 0.3, true, "upscale_in_train", 0),
    DROPOUT_CASE("test downgrade_in_infer p=0.3", 0.3, true, "downgrade_in_infer", 0),
    {.op = "dropout", .name = "0-d train default attrs", .n_in = 1, .in = {GC_SCALAR}},
    GC_ATTR_CASE("dropout", "[2,3,2] train", GC_F(2, 3, 2), A_FLOAT("dropout_prob", 0.25)),

    /* ---- embedding ---- */
    {.op = "embedding",
     .name = "W [6,3], repeated ids [7]",
     .n_in = 2,
     .in = {GC_F(6, 3), GC_VALS(NB_I64, ids_repeated, 7)}},
    {.op = "embedding", .name = "W [5,4], ids [2,3] int32", .n_in = 2, .in = {GC_F(5, 4), GC_INTS(NB_I32, 0, 4, 2, 3)}},
    {.op = "embedding",
     .name = "padding_idx 2, ids [2,3] with repeats",
     .n_in = 2,
     .in = {GC_F(4, 3), GC_VALS(NB_I64, ids_padded, 2, 3)},
     .n_attrs = 1,
     .attrs = {A_INT("padding_idx", 2)}},
    {.op = "embedding",
     .name = "padding_idx 0, ids [6,1] int32",
     .n_in = 2,
     .in = {GC_F(4, 2), GC_VALS(NB_I32, ids_padded, 6, 1)},
     .n_attrs = 1,
     .attrs = {A_INT("padding_idx", 0)}},
    {.op = "embedding", .name = "0-d id", .n_in = 2, .in = {GC_F(3, 4), GC_INT_SCALAR(NB_I64, 0, 2)}},

    /* ---- embedding_grad (Ids, DOut, W): W gives only the shape ---- */
    {.op = "embedding_grad",
     .name = "W [6,3], repeated ids [7]",
     .n_in = 3,
     .in = {GC_VALS(NB_I64, ids_repeated, 7), GC_F(7, 3), GC_F(6, 3)}},
    {.op = "embedding_grad",
     .name = "padding_idx 2, ids [2,3] with repeats",
     .n_in = 3,
     .in = {GC_VALS(NB_I64, ids_padded, 2, 3), GC_F(2, 3, 3), GC_F(4, 3)},
     .n_attrs = 1,
     .attrs = {A_INT("padding_idx", 2)}},

    {.op = NULL},
};
