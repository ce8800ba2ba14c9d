/* Gradient-check cases of the built-in ops, one table per op family, each
 * ending with an entry whose op is NULL. Every op with a VJP rule needs at
 * least one case: `nabla gradcheck` fails an op it cannot check. */
#ifndef NABLA_GRADCHECK_CASES_H
#define NABLA_GRADCHECK_CASES_H

#include "nabla/gradcheck.h"

/* Shorthands for case tables. */
#define GC_F(...) {.dtype = NB_F64, .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .shape = {__VA_ARGS__}}
#define GC_F_RANGE(lo_, hi_, ...) {.dtype = NB_F64, .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                   .shape = {__VA_ARGS__}, .lo = (lo_), .hi = (hi_)}
#define GC_SCALAR {.dtype = NB_F64, .ndim = 0}
#define GC_INTS(dt, lo_, hi_, ...) {.dtype = (dt), .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                    .shape = {__VA_ARGS__}, .fill = NB_GC_INTS, .lo = (lo_), .hi = (hi_)}
#define GC_ABSENT {.absent = true}
/* A case of one input with one or more attributes, counted from the list:
 * GC_ATTR_CASE("clip", "min only", GC_F(3, 4), attribute, ...). */
#define GC_ATTR_CASE(op_, name_, in_, ...)                                                          \
    {.op = (op_), .name = (name_), .n_in = 1, .in = {in_},                                          \
     .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}}

extern const nb_gradcheck_case nb_gc_elementwise[];
extern const nb_gradcheck_case nb_gc_compare[];
extern const nb_gradcheck_case nb_gc_reduce[];
extern const nb_gradcheck_case nb_gc_linalg[];
extern const nb_gradcheck_case nb_gc_shape[];
extern const nb_gradcheck_case nb_gc_nn[];
extern const nb_gradcheck_case nb_gc_conv[];
extern const nb_gradcheck_case nb_gc_norm[];
extern const nb_gradcheck_case nb_gc_rnn[];
extern const nb_gradcheck_case nb_gc_attention[];
extern const nb_gradcheck_case nb_gc_creation[];
extern const nb_gradcheck_case nb_gc_collective[];

#endif
