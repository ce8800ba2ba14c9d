/* The builder and what a backend provides. A backend turns emitted ops into
 * something: OpDescs (record.c) or computed tensors (the eager backend). */
#ifndef NABLA_BUILDER_INTERNAL_H
#define NABLA_BUILDER_INTERNAL_H

#include "nabla/builder.h"

typedef struct nb_builder_backend {
    const char *name;
    nb_status (*emit)(nb_builder *b, const nb_op_def *def, int n_in, const nb_value *in, int n_attrs,
                      const nb_attr *attrs, int n_out, nb_value *out);
    nb_var_info (*info)(const nb_builder *b, nb_value v);
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
};

/* Sets up the common fields of a new builder. */
nb_status nb_builder_init(nb_builder **out, const nb_builder_backend *backend);
/* Records st (with the thread's error text) as the builder's first error. */
nb_status nb_builder_record_error(nb_builder *b, nb_status st);

extern const nb_builder_backend nb_record_backend;

/* The eager builder's layer names (src/eager/eager_builder.c). */
nb_status nb_eager_layer_name(nb_builder *b, const char *prefix, char *buf, size_t size);

#endif
