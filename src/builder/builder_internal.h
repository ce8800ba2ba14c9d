/* The builder and what a backend provides. A backend turns emitted ops into
 * something: OpDescs (src/program/record.c) or computed tensors
 * (src/eager/eager_builder.c). The builder itself knows no op and no
 * backend: it checks arguments, keeps the first error and calls the vtable. */
#ifndef NABLA_BUILDER_INTERNAL_H
#define NABLA_BUILDER_INTERNAL_H

#include "nabla/builder.h"

struct nb_state_spec;

/* What differs between backends. The builder never names one. */
typedef struct nb_builder_backend {
    const char *name;
    nb_value_kind kind; /* the values it makes and takes */
    /* Emits op `type`, whose definition the backend looks up. n_out < 0 asks
     * for one value per declared output slot (out has room for NB_MAX_SLOTS). */
    nb_status (*emit)(nb_builder *b, const char *type, int n_in, const nb_value *in, int n_attrs, const nb_attr *attrs,
                      int n_out, nb_value *out);
    nb_var_info (*info)(const nb_builder *b, nb_value v);
    /* A fresh layer name for `prefix` ("fc" -> "fc_0"). */
    nb_status (*unique_name)(nb_builder *b, const char *prefix, char *buf, size_t size);
    /* The model's state: a parameter or persistent var made once as `spec`
     * says, and found by its name after (nb_builder_state). */
    nb_value (*state)(nb_builder *b, const struct nb_state_spec *spec);
    /* nb_emit_into: emit, with some outputs written back into state. */
    nb_status (*emit_into)(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                           const nb_value *into);
    /* A value's name for error messages, or NULL where values have none. */
    const char *(*name_of)(nb_value v);
    void (*destroy)(nb_builder *b);
} nb_builder_backend;

/* What nb_param, nb_persistable_var and their _from forms ask a backend
 * for: a var `name` that outlives a step, a trainable parameter or state
 * (running statistics, counters). It starts as a copy of `value` when that
 * is given, else as the output of initialiser op `init_type` with `attrs`
 * (the backend adds shape and dtype). Asked again for the same name, the
 * backend hands back the var it made, if it agrees in dtype, shape and kind. */
typedef struct nb_state_spec {
    const char *what; /* "parameter" or "persistable var", for messages */
    const char *name;
    nb_dtype dtype;
    int ndim;
    const int64_t *shape;
    bool trainable;
    const char *init_type;
    int n_attrs;
    const nb_attr *attrs;
    const nb_tensor *value;
} nb_state_spec;

/* The state var of `spec` (made now, or the one made before under its
 * name); NB_NONE, with the builder's error set, when it cannot be. */
nb_value nb_builder_state(nb_builder *b, const nb_state_spec *spec);

/* As nb_emit, but each output i whose into[i] is a state value (not
 * NB_NONE) is written back into it, as batch_norm's running statistics are:
 * a program names that output after the state var, so the op updates it in
 * place; an eager builder copies the output into the state tensor. */
nb_status nb_emit_into(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                       const nb_value *into);

/* The elements of v where the builder has computed them already (an eager
 * builder's tensors, which a shape or axes input may be read from at build
 * time); NULL where they are known only when a program runs. */
const nb_tensor *nb_value_known(const nb_builder *b, nb_value v);

/* A value's name, for error messages: a var's name, or "" where values
 * have none (tensors). */
const char *nb_value_label(const nb_builder *b, nb_value v);

struct nb_builder {
    const nb_builder_backend *backend;
    nb_status status;
    char error[1024];
    /* Where a record builder (and vmap's batching builder in front of one)
     * appends ops: its programs, block and role (src/program/record.h).
     * NULL for an eager builder; the builder reads no more of it. */
    struct nb_record_site *site;
    void *state; /* backend-specific */
    /* NULL, or how this builder records loops and branches itself (vmap's
     * batching builder masks them: src/transforms/vmap_control.c). The
     * control helpers, which define the struct, call it; the builder never
     * does. */
    const struct nb_control_forms *control;
};

static inline nb_value nb_value_make(void *p, nb_value_kind kind)
{
    nb_value v = {p, p ? kind : NB_VALUE_NONE};
    return v;
}

/* NB_OK if v is NB_NONE or a value of b's kind; else an error naming `what`
 * (the call and the argument). */
nb_status nb_builder_check_value(const nb_builder *b, nb_value v, const char *what);

/* The assign_value attribute that holds a copy of value's elements in C
 * order: "fp_values" (doubles) for a float tensor, else "int_values"
 * (int64). *vals, which the attribute points into, is the caller's to free
 * with nb_free once the attribute has been used. */
nb_status nb_values_attr(const nb_tensor *value, void **vals, nb_attr *attr);

/* Sets up the common fields of a new builder. */
nb_status nb_builder_init(nb_builder **out, const nb_builder_backend *backend);
/* Records st (with the thread's error text) as the builder's first error. */
nb_status nb_builder_record_error(nb_builder *b, nb_status st);

#endif
