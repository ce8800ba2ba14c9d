/* The builder and what a backend provides. A backend turns emitted ops into
 * something: OpDescs (src/program/record.c) or computed tensors
 * (src/eager/eager_builder.c). The builder itself knows no op and no
 * backend: it checks arguments, keeps the first error and calls the vtable. */
#ifndef NABLA_BUILDER_INTERNAL_H
#define NABLA_BUILDER_INTERNAL_H

#include "nabla/builder.h"

/* What differs between backends. The builder never names one. */
typedef struct nb_builder_backend {
    const char *name;
    nb_value_kind kind; /* the values it makes and takes */
    /* Emits op `type`, whose definition the backend looks up. n_out < 0 asks
     * for one value per declared output slot (out has room for NB_MAX_SLOTS). */
    nb_status (*emit)(nb_builder *b, const char *type, int n_in, const nb_value *in, int n_attrs,
                      const nb_attr *attrs, int n_out, nb_value *out);
    nb_var_info (*info)(const nb_builder *b, nb_value v);
    /* A fresh layer name for `prefix` ("fc" -> "fc_0"). */
    nb_status (*unique_name)(nb_builder *b, const char *prefix, char *buf, size_t size);
    void (*destroy)(nb_builder *b);
} nb_builder_backend;

struct nb_builder {
    const nb_builder_backend *backend;
    nb_status status;
    char error[1024];
    nb_program *program; /* record backend */
    nb_program *startup;
    nb_block *block;
    nb_op_role role;
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
