/* Gradient-check cases of the attention family. The forward op's rule
 * emits the fused gradient op, whose own rules (composite ones) give the
 * second order; the gradient op has cases of its own too, with arbitrary
 * LSE and Delta, since it is a function of them as given. */
#include "cases.h"

#define A_BOOL(nm, v)  {(nm), {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_FLOAT(nm, v) {(nm), {.type = NB_ATTR_FLOAT, .f = (v)}}
#define A_INT(nm, v)   {(nm), {.type = NB_ATTR_INT, .i = (v)}}

#define N_ATTRS(...) (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr))

/* Q, K, V and an optional mask. */
#define SDPA(name_, q_, k_, v_, mask_, ...)                                                             \
    {.op = "scaled_dot_product_attention", .name = (name_), .n_in = 4, .in = {q_, k_, v_, mask_},     \
     .n_attrs = N_ATTRS(__VA_ARGS__), .attrs = {__VA_ARGS__}}
#define SDPA0(name_, q_, k_, v_, mask_)                                                                 \
    {.op = "scaled_dot_product_attention", .name = (name_), .n_in = 4, .in = {q_, k_, v_, mask_}}

/* (Q, K, V, Mask?, LSE, Key, DOut, Delta) with lead dims [2], T 3, S 4,
 * D 2, Dv 3. */
#define SDPA_GRAD(name_, mask_, ...)                                                                         \
    {.op = "scaled_dot_product_attention_grad", .name = (name_), .n_in = 8,                                   \
     .in = {GC_F(2, 3, 2), GC_F(2, 4, 2), GC_F(2, 4, 3), mask_, GC_F_RANGE(0.5, 1.5, 2, 3),                   \
            GC_INTS(NB_I64, 0, 1000, 2), GC_F(2, 3, 3), GC_F(2, 3)},                                          \
     .n_attrs = N_ATTRS(__VA_ARGS__), .attrs = {__VA_ARGS__}}

const nb_gradcheck_case nb_gc_attention[] = {
    SDPA0("[T 3, D 2] without leading dims", GC_F(3, 2), GC_F(3, 2), GC_F(3, 2), GC_ABSENT),
    SDPA0("[2, 3, 4] self-sized", GC_F(2, 3, 4), GC_F(2, 3, 4), GC_F(2, 3, 4), GC_ABSENT),
    SDPA0("[B 2, H 2]: T 3, S 5, D 4, Dv 3", GC_F(2, 2, 3, 4), GC_F(2, 2, 5, 4), GC_F(2, 2, 5, 3), GC_ABSENT),
    SDPA("causal [1, 2, 4, 3]", GC_F(1, 2, 4, 3), GC_F(1, 2, 4, 3), GC_F(1, 2, 4, 2), GC_ABSENT,
         A_BOOL("causal", true)),
    SDPA("causal, fewer queries than keys", GC_F(2, 3, 2), GC_F(2, 5, 2), GC_F(2, 5, 2), GC_ABSENT,
         A_BOOL("causal", true)),
    SDPA("additive mask [T, S]", GC_F(2, 3, 2), GC_F(2, 4, 2), GC_F(2, 4, 3), GC_F(3, 4)),
    SDPA("mask [2, 1, T, S] over heads, causal, scale 0.7", GC_F(2, 2, 3, 2), GC_F(2, 2, 3, 2), GC_F(2, 2, 3, 2),
         GC_F(2, 1, 3, 3), A_BOOL("causal", true), A_FLOAT("scale", 0.7)),
    SDPA("dropout 0.3, seeded", GC_F(2, 4, 3), GC_F(2, 5, 3), GC_F(2, 5, 2), GC_ABSENT, A_FLOAT("dropout_prob", 0.3),
         A_INT("seed", 11)),
    SDPA("dropout 0.4, causal, drawn from the generator", GC_F(1, 2, 4, 2), GC_F(1, 2, 4, 2), GC_F(1, 2, 4, 2),
         GC_ABSENT, A_FLOAT("dropout_prob", 0.4), A_BOOL("causal", true)),
    SDPA("dropout with is_test: none", GC_F(2, 3, 2), GC_F(2, 3, 2), GC_F(2, 3, 2), GC_ABSENT,
         A_FLOAT("dropout_prob", 0.5), A_BOOL("is_test", true)),

    SDPA("2 heads side by side: Q [2, 3, 4], V [2, 5, 6]", GC_F(2, 3, 4), GC_F(2, 5, 4), GC_F(2, 5, 6), GC_ABSENT,
         A_INT("heads", 2)),
    SDPA("2 heads side by side, causal, mask [2, T, S], dropout 0.3", GC_F(1, 4, 4), GC_F(1, 4, 4), GC_F(1, 4, 2),
         GC_F(2, 4, 4), A_INT("heads", 2), A_BOOL("causal", true), A_FLOAT("dropout_prob", 0.3), A_INT("seed", 5)),

    SDPA_GRAD("grad op", GC_ABSENT, A_FLOAT("scale", 0)),
    SDPA_GRAD("grad op, causal, mask", GC_F(3, 4), A_BOOL("causal", true)),
    SDPA_GRAD("grad op, dropout 0.3", GC_ABSENT, A_FLOAT("dropout_prob", 0.3), A_FLOAT("scale", 0.9)),
    {.op = "scaled_dot_product_attention_grad",
     .name = "grad op, 2 heads side by side, dropout 0.2",
     .n_in = 8,
     .in = {GC_F(2, 3, 4), GC_F(2, 4, 4), GC_F(2, 4, 6), GC_ABSENT, GC_F_RANGE(0.5, 1.5, 2, 2, 3),
            GC_INTS(NB_I64, 0, 1000, 2), GC_F(2, 3, 6), GC_F(2, 2, 3)},
     .n_attrs = 2,
     .attrs = {A_INT("heads", 2), A_FLOAT("dropout_prob", 0.2)}},
    {.op = NULL},
};
