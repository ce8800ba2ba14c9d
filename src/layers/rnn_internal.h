/* What the recurrent cells (rnn_cell.c) and sequences (rnn_seq.c) share:
 * the argument checks. */
#ifndef NABLA_RNN_INTERNAL_H
#define NABLA_RNN_INTERNAL_H

#include "layer_internal.h"
#include "nabla/recurrent.h"

#define NB_RNN_MAX_STATES 2

/* "lstm cell", "gru sequence", ...: how errors name the layer. */
void nb_rnn_label(const nb_rnn_params *p, const char *what, char *buf, size_t size);

/* " <var name>" of a value in a program, "" for an eager tensor (which has
 * none), for error messages: "input%s has shape ...". */
const char *nb_rnn_var_label(nb_builder *b, nb_value v, char *buf, size_t size);

/* Whether p was filled by nb_rnn_params_new (a builder error otherwise). */
bool nb_rnn_params_ok(nb_builder *b, const nb_rnn_params *p, const char *what);

/* What a layer (which makes its parameters) needs of its input x: present,
 * float, `ndim` dims ([B, I] for a cell, [T, B, I] for a sequence) and I
 * known; *xi receives x's info. */
bool nb_rnn_layer_input(nb_builder *b, nb_rnn_kind kind, nb_value x, int ndim, nb_var_info *xi);

/* Checks that x has `ndim` dims and the layer's input size in the last one;
 * `who` names the layer in the error. */
bool nb_rnn_check_input(nb_builder *b, const nb_rnn_params *p, const char *who, nb_value x, int ndim);

/* The state entries, each checked to be [B, H] (B from `batch`, -1 if
 * unknown) or replaced by zeros of that shape made from `like` (whose dim
 * like_batch_axis is B) when NB_NONE or when `state` is NULL. */
bool nb_rnn_states_or_zeros(nb_builder *b, const nb_rnn_params *p, const char *who, const nb_value *state,
                            nb_value like, int like_batch_axis, nb_value *out);

#endif
