/* What nb_vmap's eager and record halves share (private). */
#ifndef NABLA_VMAP_INTERNAL_H
#define NABLA_VMAP_INTERNAL_H

#include "nabla/vmap.h"

#define NB_VMAP_MAX_IO 16

nb_status nb_vmap_check_fn(const nb_function *f, const char *who);
/* f run on the logical values, with an error text that names vmap and the
 * status when f fails without setting one. */
nb_status nb_vmap_call(nb_builder *b, const nb_function *f, const nb_value *in, nb_value *out);
/* Each input's batch axis (made non-negative; -1 when not batched) and the
 * batch size they agree on (-1 when unknown in a program), or an error
 * naming the input, the axis and the shapes. */
nb_status nb_vmap_in_axes(const nb_function *f, const nb_vmap_opts *opts, const nb_var_info *in, int *axes,
                          int64_t *batch);
/* Output k's batch axis in its phys_ndim dims (made non-negative). */
nb_status nb_vmap_out_axis(const nb_vmap_opts *opts, int k, int phys_ndim, int *axis);
/* v, the same for every example, broadcast along a new batch axis. */
nb_value nb_vmap_broadcast(nb_builder *b, nb_value v, int64_t batch, int axis);
/* nb_vmap_emit on a record builder (vmap_record.c). */
nb_status nb_vmap_record(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in,
                         nb_value *out);

/* The batching builder's side, for vmap_control.c: the builder behind it,
 * the batch size (-1 when not known), a value's batch dim (-1: shared). */
nb_builder *nb_vmap_inner(const nb_builder *vb);
int64_t nb_vmap_batch(const nb_builder *vb);
int nb_vmap_bdim(const nb_builder *vb, nb_value v);
nb_status nb_vmap_set_bdim(nb_builder *vb, nb_value v, int bdim);
/* v, shared by the examples, broadcast along a new batch dim 0 on the
 * builder behind vb: to the batch size, or where that is not known (-1 in a
 * program) to that of a batched input of the vmap. */
nb_value nb_vmap_broadcast_front(nb_builder *vb, nb_value v);
/* How a batching builder records loops and branches (vmap_control.c). */
extern const struct nb_control_forms nb_vmap_control_forms;

#endif
