/* nabla/batch_rule.h: the interface of vmap's batching rules
 * (nb_op_def.batch), at the op layer, where the rules are written and the
 * eager engine calls them; nb_vmap itself is in nabla/vmap.h.
 *
 * A rule sees the op through an nb_batch_ctx: its attributes, its physical
 * inputs and where their batch dims are, and emits through the builder it is
 * given ops on those physical values (the builder runs them, or records
 * them). It writes each physical output and its batch dim. */
#ifndef NABLA_BATCH_RULE_H
#define NABLA_BATCH_RULE_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/op.h"

NB_BEGIN_DECLS

typedef struct nb_batch_ctx {
    const nb_op_def *def;
    const nb_attr_value *attrs; /* the op's, in def order, defaults filled in */
    int n_in;                   /* inputs as emitted: slot order, NB_NONE for an absent optional slot */
    const nb_value *x;          /* physical inputs */
    const int *x_bdim;          /* the batch dim of each in x, or -1 (the same for every example) */
    const nb_var_info *x_info;  /* logical (per-example) dtype and shape of each input */
    const nb_var_info *y_info;  /* logical dtype and shape of each output, as inferred */
    int64_t batch;              /* the batch size (-1 in a program where it is not known) */
    int n_out;
    nb_value *y; /* the rule's physical outputs ... */
    int *y_bdim; /* ... and their batch dims (-1: not batched) */
} nb_batch_ctx;

NB_END_DECLS

#endif
