/* Recurrent layers over a time-major sequence: the cell as the step of
 * nb_scan (see nabla/recurrent.h). */
#include "rnn_internal.h"
#include "nabla/control.h"

/* The step of the scan: the cell on x_t [B, I] and the carried state; the
 * step's output is h.
 *
 * The input half of the cell, x_t W_ih^T + b_ih, does not depend on the
 * state and could be computed for all steps at once before the scan, as one
 * product (cuDNN does). It is not: an eager scan slices its sequences step
 * by step, and the backward of each slice is a gradient of the whole
 * sequence, so slicing the [T, B, G*H] projection cost more than the big
 * product saved (char_rnn's LSTM step: 180 ms, not 60; x [T, B, I] is
 * G*H/I times smaller). With the slices taken by one split instead, it
 * still saved nothing measurable. */
static nb_status scan_step(nb_builder *b, const nb_value *carry, const nb_value *x_t, nb_value *next, nb_value *y_t,
                           void *ctx)
{
    nb_status st = nb_rnn_cell(b, ctx, x_t[0], carry, next);
    y_t[0] = next[0];
    return st;
}

nb_status nb_rnn_sequence(nb_builder *b, const nb_rnn_params *p, nb_value x, const nb_value *init, nb_value *ys,
                          nb_value *final)
{
    if (!b) return nb_error(NB_ERR_ARG, "recurrent sequence: NULL builder");
    if (!nb_rnn_params_ok(b, p, "sequence")) return nb_builder_status(b);
    char who[64];
    nb_rnn_label(p, "sequence", who, sizeof who);
    if (!ys) return nb_builder_fail(b, NB_ERR_ARG, "%s: NULL output for the hidden states", who);
    *ys = NB_NONE;
    const int n = nb_rnn_state_count(p->kind);
    nb_value s0[NB_RNN_MAX_STATES], last[NB_RNN_MAX_STATES] = {NB_NONE, NB_NONE};
    if (!nb_rnn_check_input(b, p, who, x, 3) || !nb_rnn_states_or_zeros(b, p, who, init, x, 1, s0))
        return nb_builder_status(b);
    /* The step is the cell itself, and the scan says so: an exporter can
     * then write it as the format's own op (ONNX's LSTM, GRU or RNN). */
    nb_scan_form form = {nb_rnn_kind_name(p->kind), NB_VALUES(p->w_ih, p->w_hh, p->b_ih, p->b_hh)};
    nb_status st = nb_scan_cell(b, scan_step, (void *)p,
                                &(nb_scan_io){.init = NB_VALUES_N(n, s0),
                                              .xs = NB_VALUES_N(1, &x),
                                              .n_ys = 1,
                                              .ys = ys,
                                              .final = last,
                                              .reverse = p->reverse},
                                &form);
    if (!st && final)
        for (int k = 0; k < n; k++) final[k] = last[k];
    return st;
}

/* Parameters for x [T, B, I] and the sequence from init; every step's h
 * (and the final state in final[0..n), when final is not NULL). */
static nb_value sequence_layer(nb_builder *b, nb_rnn_kind kind, nb_value x, const nb_value *init, int64_t hidden,
                               const nb_rnn_opts *opts, nb_value *final)
{
    nb_var_info xi;
    if (!nb_rnn_layer_input(b, kind, x, 3, &xi)) return NB_NONE;
    nb_rnn_params p;
    nb_value ys = NB_NONE;
    nb_rnn_opts o = opts ? *opts : (nb_rnn_opts){0};
    o.dtype = xi.dtype;
    if (nb_rnn_params_new(&p, b, kind, xi.shape[2], hidden, &o) || nb_rnn_sequence(b, &p, x, init, &ys, final))
        return NB_NONE;
    return ys;
}

/* A sequence layer whose state is h alone. */
static nb_value h_sequence_layer(nb_builder *b, nb_rnn_kind kind, nb_value x, nb_value h0, int64_t hidden,
                                 const nb_rnn_opts *opts, nb_value *h_n)
{
    nb_value fin[1] = {NB_NONE};
    nb_value ys = sequence_layer(b, kind, x, &h0, hidden, opts, fin);
    if (h_n) *h_n = fin[0];
    return ys;
}

nb_value nb_layer_rnn(nb_builder *b, nb_value x, nb_value h0, int64_t hidden, const nb_rnn_opts *opts, nb_value *h_n)
{
    return h_sequence_layer(b, NB_RNN_TANH, x, h0, hidden, opts, h_n);
}

nb_value nb_layer_gru(nb_builder *b, nb_value x, nb_value h0, int64_t hidden, const nb_rnn_opts *opts, nb_value *h_n)
{
    return h_sequence_layer(b, NB_RNN_GRU, x, h0, hidden, opts, h_n);
}

nb_value nb_layer_lstm(nb_builder *b, nb_value x, const nb_value *init, int64_t hidden, const nb_rnn_opts *opts,
                       nb_value *final)
{
    nb_value fin[2] = {NB_NONE, NB_NONE};
    nb_value ys = sequence_layer(b, NB_RNN_LSTM, x, init, hidden, opts, fin);
    if (final) final[0] = fin[0], final[1] = fin[1];
    return ys;
}
