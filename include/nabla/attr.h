/* nabla/attr.h: typed operator attributes.
 *
 * An op definition declares its attributes (name, type, default); an op
 * instance carries values for them. Users pass attributes as nb_attr pairs,
 * built with the NB_ATTR_* macros:
 *
 *     nb_attr a[] = { NB_ATTR_BOOL("transpose_y", true), NB_ATTR_INTS("axes", 0, 1) };
 */
#ifndef NABLA_ATTR_H
#define NABLA_ATTR_H

#include "nabla/export.h"

#include <stdint.h>
#include <stdbool.h>

NB_BEGIN_DECLS

typedef enum nb_attr_type {
    NB_ATTR_NONE = 0,
    NB_ATTR_BOOL,
    NB_ATTR_INT,
    NB_ATTR_FLOAT,
    NB_ATTR_STRING,
    NB_ATTR_INTS,
    NB_ATTR_FLOATS,
    NB_ATTR_BLOCK,  /* index of a block of the same program */
    NB_ATTR_STRINGS /* names of vars of a sub-block, for control-flow ops */
} nb_attr_type;

typedef struct nb_attr_value {
    nb_attr_type type;
    int n; /* element count of INTS, FLOATS and STRINGS */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        const int64_t *ints;
        const double *floats;
        const char *const *strs;
        int block;
    };
} nb_attr_value;

/* A named attribute value, as passed to nb_emit() and nb_op_run(). */
typedef struct nb_attr {
    const char *name;
    nb_attr_value value;
} nb_attr;

/* A list of attributes, as calls that take several lists pass them. In C,
 * NB_ATTRS(NB_ATTR_FLOAT("alpha", 0.1), ...) makes one in place; in C++,
 * nb_attrs{n, array}. */
typedef struct nb_attrs {
    int n;
    const nb_attr *v;
} nb_attrs;
/* The array behind the list is a compound literal, which lives only until
 * the end of the enclosing block: pass the list to a call, or keep it in a
 * variable used only inside that block (one made in an `if` and used after
 * it points at dead stack). */
#define NB_ATTRS(...) ((nb_attrs){(int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), (nb_attr[]){__VA_ARGS__}})
#define NB_ATTRS_N(count, array) ((nb_attrs){(count), (array)})
#define NB_NO_ATTRS ((nb_attrs){0, 0})

#define NB_ATTR_BOOL(nm, v)   ((nb_attr){(nm), {.type = NB_ATTR_BOOL, .b = (v)}})
#define NB_ATTR_INT(nm, v)    ((nb_attr){(nm), {.type = NB_ATTR_INT, .i = (v)}})
#define NB_ATTR_FLOAT(nm, v)  ((nb_attr){(nm), {.type = NB_ATTR_FLOAT, .f = (v)}})
#define NB_ATTR_STRING(nm, v) ((nb_attr){(nm), {.type = NB_ATTR_STRING, .s = (v)}})
#define NB_ATTR_BLOCK(nm, v)  ((nb_attr){(nm), {.type = NB_ATTR_BLOCK, .block = (v)}})
/* Non-empty literal lists: NB_ATTR_INTS("axes", 0, 2). Their values are a
 * compound literal too, as short-lived as NB_ATTRS's array above. */
#define NB_ATTR_INTS(nm, ...)                                                   \
    ((nb_attr){(nm), {.type = NB_ATTR_INTS,                                     \
                      .n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                      .ints = (const int64_t[]){__VA_ARGS__}}})
#define NB_ATTR_FLOATS(nm, ...)                                                 \
    ((nb_attr){(nm), {.type = NB_ATTR_FLOATS,                                   \
                      .n = (int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), \
                      .floats = (const double[]){__VA_ARGS__}}})
/* Lists from an array (possibly empty). */
#define NB_ATTR_INTS_N(nm, count, ptr)   ((nb_attr){(nm), {.type = NB_ATTR_INTS, .n = (count), .ints = (ptr)}})
#define NB_ATTR_FLOATS_N(nm, count, ptr) ((nb_attr){(nm), {.type = NB_ATTR_FLOATS, .n = (count), .floats = (ptr)}})
#define NB_ATTR_STRINGS_N(nm, count, ptr) ((nb_attr){(nm), {.type = NB_ATTR_STRINGS, .n = (count), .strs = (ptr)}})

NB_API const char *nb_attr_type_name(nb_attr_type t);

/* Deep copy (strings and lists are duplicated) and its release. */
NB_API int nb_attr_value_copy(nb_attr_value *dst, const nb_attr_value *src);
NB_API void nb_attr_value_free(nb_attr_value *v);
/* Writes a readable form ("3", "[0, 2]", "\"relu\"") into buf. */
NB_API char *nb_attr_value_str(char *buf, unsigned long size, const nb_attr_value *v);

NB_END_DECLS

#endif
