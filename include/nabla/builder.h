/* nabla/builder.h: one interface for emitting ops, two backends.
 *
 * Layers, gradient rules and user code emit ops through an nb_builder
 * without knowing what happens to them. The record backend appends an OpDesc
 * to a block of a static program (values are vars); the eager backend (see
 * nabla/eager.h) runs the kernel at once (values are tensors).
 *
 * A builder keeps the first error it meets: later emits do nothing and return
 * that error, and their outputs are NB_NONE, so model-building code checks
 * nb_builder_status() once at the end. */
#ifndef NABLA_BUILDER_H
#define NABLA_BUILDER_H

#include "nabla/export.h"

#include <stdbool.h>
#include <stddef.h>
#include "nabla/attr.h"
#include "nabla/status.h"
#include "nabla/tensor.h"

NB_BEGIN_DECLS

/* Dtype and shape of a value; at build time a dimension may be -1 (unknown). */
typedef struct nb_var_info {
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
} nb_var_info;

/* Which part of a training program an op belongs to (as Fluid's op_role). */
typedef enum nb_op_role {
    NB_ROLE_FORWARD = 0,
    NB_ROLE_BACKWARD,
    NB_ROLE_OPTIMIZE,
    NB_ROLE_LOSS, /* the loss op and the op seeding loss@GRAD */
    NB_ROLE_STARTUP
} nb_op_role;

/* A value flowing between ops: a var of a program (record builders) or a
 * tensor (eager builders). The kind travels with it, so that a value handed
 * to a builder of the other kind, or to a call of the other mode
 * (nb_value_name, nb_eager_tensor), is an error naming the call rather than
 * a var read as a tensor. */
typedef enum nb_value_kind {
    NB_VALUE_NONE = 0,
    NB_VALUE_VAR,   /* p is an nb_var */
    NB_VALUE_TENSOR /* p is an nb_tensor */
} nb_value_kind;

typedef struct nb_value {
    void *p;
    nb_value_kind kind;
} nb_value;

#ifdef __cplusplus
#define NB_NONE (nb_value())
#else
#define NB_NONE ((nb_value){0})
#endif
static inline bool nb_is_none(nb_value v) { return v.p == 0; }

/* A list of values (nb_emit's inputs, a loop's carried values):
 * NB_VALUES(x, y) in C, nb_values{n, array} in C++. */
typedef struct nb_values {
    int n;
    const nb_value *v;
} nb_values;
/* The array behind the list is a compound literal, which lives only until
 * the end of the enclosing block: pass the list to a call, or keep it in a
 * variable used only inside that block (one made in an `if` and used after
 * it points at dead stack). */
#define NB_VALUES(...) ((nb_values){(int)(sizeof((nb_value[]){__VA_ARGS__}) / sizeof(nb_value)), (nb_value[]){__VA_ARGS__}})
#define NB_VALUES_N(count, array) ((nb_values){(count), (array)})
#define NB_NO_VALUES ((nb_values){0, 0})

typedef struct nb_builder nb_builder;

/* Flags of the gradient calls (nb_backward, nb_autograd_grad, nb_gradients,
 * nb_grad), as PyTorch's keyword arguments and JAX's has_aux. */
enum {
    NB_RETAIN_GRAPH = 1 << 0, /* keep the tape for another backward pass */
    NB_CREATE_GRAPH = 1 << 1, /* record the backward pass, for gradients of gradients (implies retaining) */
    NB_ALLOW_UNUSED = 1 << 2, /* an input the outputs do not depend on gets no gradient, not an error */
    NB_HAS_AUX = 1 << 3       /* nb_grad: outputs after the first are auxiliary values, handed back */
};

NB_API void nb_builder_free(nb_builder *b);

NB_API nb_status nb_builder_status(const nb_builder *b);  /* the first error, or NB_OK */
NB_API const char *nb_builder_error(const nb_builder *b); /* its message, or "" */
/* Records an error found by code that uses the builder (a layer checking its
 * arguments, say); returns the builder's status. */
NB_API nb_status nb_builder_fail(nb_builder *b, nb_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
NB_API void nb_builder_clear_error(nb_builder *b);

NB_API bool nb_builder_is_eager(const nb_builder *b);
/* Role given to the ops emitted from now on. */
NB_API void nb_builder_set_role(nb_builder *b, nb_op_role role);
NB_API nb_op_role nb_builder_role(const nb_builder *b);

/* A fresh name for a layer ("fc" -> "fc_0", "fc_1", ...): from the program
 * in a record builder; from the builder's own counters in an eager one,
 * which restart at every nb_eager_release_values so that each step of an
 * eager model names its layers (and so finds its parameters) alike. */
NB_API nb_status nb_builder_unique_name(nb_builder *b, const char *prefix, char *buf, size_t size);

/* Emits op `type`. `in` lists inputs in slot order as nb_op_run does (NB_NONE
 * for an absent optional slot); `n_out` outputs are written to `out` (the
 * count a variadic output slot gets is what remains):
 *
 *     nb_value parts[2];
 *     nb_emit(b, "split", NB_VALUES(x), NB_ATTRS(NB_ATTR_INT("axis", 1)), 2, parts);  (two equal halves) */
NB_API nb_status nb_emit(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out);
/* The same for an op whose outputs after the first are not wanted. */
NB_API nb_value nb_emit1(nb_builder *b, const char *type, nb_values in, nb_attrs attrs);

/* Dtype and shape of a value (-1 for unknown dims in a program). */
NB_API nb_var_info nb_value_info(const nb_builder *b, nb_value v);

/* Parameters are made with nb_param (nabla/init.h), in both modes. A builder
 * that records a program is made by nb_builder_new_record (nabla/program.h);
 * an eager one by nb_builder_new_eager (nabla/eager.h). */

NB_END_DECLS

#endif
