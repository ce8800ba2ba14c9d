/* The record backend's parameter maker, under nb_param (src/layers/param.c):
 * a persistable var in `main`, created in `startup` too with an op of type
 * `init_type` (attrs given) that initialises it once. With no startup
 * program the init op goes to `main` itself, as a run-once op. Tools and
 * tests that need a particular initialiser op use it directly. */
#ifndef NABLA_PROGRAM_RECORD_H
#define NABLA_PROGRAM_RECORD_H

#include "nabla/program.h"
#include "../builder/builder_internal.h"

/* Where a record builder appends: the main and startup programs, the block
 * ops go to (a sub-block while one is recorded) and the role they get. Each
 * builder has its own, so that vmap's batching builder keeps its place
 * apart from the builder behind it. */
typedef struct nb_record_site {
    nb_program *program, *startup;
    nb_block *block;
    nb_op_role role;
} nb_record_site;

/* A builder's own site, a copy of `from` (NULL: zeros); freed with the
 * builder by nb_record_site_free from its backend's destroy. */
nb_status nb_record_site_new(nb_builder *b, const nb_record_site *from);
void nb_record_site_free(nb_builder *b);

nb_value nb_create_parameter(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                             const char *init_type, int n_attrs, const nb_attr *attrs);

/* The backend's state calls (record_state.c): nb_builder_state,
 * nb_emit_into and the names of values. */
nb_value nb_record_state(nb_builder *b, const nb_state_spec *spec);
nb_status nb_record_emit_into(nb_builder *b, const char *type, nb_values in, nb_attrs attrs, int n_out, nb_value *out,
                              const nb_value *into);
const char *nb_record_name_of(nb_value v);

#endif
