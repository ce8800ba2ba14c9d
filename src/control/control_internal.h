/* Shared between the control-flow helpers, their ops and their rules. */
#ifndef NABLA_CONTROL_INTERNAL_H
#define NABLA_CONTROL_INTERNAL_H

#include "nabla/control.h"
#include "nabla/program.h"

#define NB_CONTROL_MAX 64 /* carried values, sequences, branch inputs and outputs */
#define NB_CONTROL_FORM_MAX 8 /* nb_scan_form.weights */

nb_status nb_control_check_same(nb_builder *b, const char *who, const char *what, int i, nb_value was, nb_value now);

/* The outer vars block `blk` reads, in order of first use, appended to
 * out[n..] (room for `cap` in all); returns the new count, or -1 when it
 * overflows. They become the inputs of the op that runs the block. */
int nb_ctl_captured(const nb_block *blk, nb_value *out, int n, int cap);

/* A block's results must be vars the block writes: v itself, or (for a
 * bound parameter or an outer value handed back as it is) an assign of it,
 * emitted into b's current block, which must be blk. */
nb_value nb_ctl_local(nb_builder *b, nb_block *blk, nb_value v);

/* nb_cond under vmap with a batched predicate (each example may take its
 * own branch): both branches run, and each example takes its own's outputs. */
nb_status nb_control_both(nb_builder *b, nb_value pred, const nb_branches *br, const nb_value *in, int n_out,
                          nb_value *out);

/* The record-builder forms: build the op and its sub-blocks. */
nb_status nb_control_record_while(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, int n_carry,
                                  const nb_value *init, nb_value *final);
nb_status nb_control_record_cond(nb_builder *b, nb_value pred, const nb_branches *br, nb_values in, int n_out,
                                 nb_value *out);
nb_status nb_control_record_scan(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io,
                                 const nb_scan_form *form);
nb_status nb_control_record_net(nb_builder *b, nb_branch_fn fn, void *ctx, int n_in, const nb_value *in, int n_out,
                                nb_value *out);

/* The same four, supplied by a builder that records control flow its own
 * way (nb_builder.control): a layer above this one, which writes them in
 * terms of the helpers on the builder behind it. Arguments are checked. */
struct nb_control_forms {
    nb_status (*while_loop)(nb_builder *b, nb_loop_cond_fn cond, nb_loop_body_fn body, void *ctx, int n_carry,
                            const nb_value *init, nb_value *final);
    nb_status (*cond)(nb_builder *b, nb_value pred, const nb_branches *br, nb_values in, int n_out, nb_value *out);
    nb_status (*scan)(nb_builder *b, nb_step_fn step, void *ctx, const nb_scan_io *io, const nb_scan_form *form);
    nb_status (*net)(nb_builder *b, nb_branch_fn fn, void *ctx, int n_in, const nb_value *in, int n_out, nb_value *out);
};

#endif
