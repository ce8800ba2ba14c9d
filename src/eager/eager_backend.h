/* The eager backend's calls shared between its files: eager_builder.c's
 * emit, and the state calls of eager_state.c that the backend's table
 * names. */
#ifndef NABLA_EAGER_BACKEND_H
#define NABLA_EAGER_BACKEND_H

#include "../builder/builder_internal.h"

nb_status nb_eager_emit(nb_builder *b, const char *type, int n_in, const nb_value *in, int n_attrs,
                        const nb_attr *attrs, int n_out, nb_value *out);
nb_value nb_eager_state(nb_builder *b, const nb_state_spec *spec);
nb_status nb_eager_emit_into(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                             const nb_value *into);

#endif
