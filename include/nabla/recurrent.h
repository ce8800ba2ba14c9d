/* nabla/recurrent.h: recurrent layers: a simple RNN (tanh), LSTM and GRU,
 * each as a cell (one time step) and as a sequence layer over time.
 *
 *     nb_value final[2];                                  // x: [T, B, I], time-major
 *     nb_value ys = nb_layer_lstm(b, x, NULL, 128, NULL, final);
 *     // ys: [T, B, 128], every step's h; final: h_n, c_n [B, 128], the last step's state
 *
 * The equations, gate order and parameters are PyTorch's nn.RNNCell,
 * nn.LSTMCell and nn.GRUCell (bias on), with gx = x W_ih^T + b_ih and
 * gh = h W_hh^T + b_hh:
 *
 *   rnn    h' = tanh(gx + gh)
 *   lstm   [i, f, g, o] = gx + gh, split in four along the features;
 *          c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
 *   gru    [r_x, z_x, n_x] = gx, [r_h, z_h, n_h] = gh;  r = sigmoid(r_x + r_h),
 *          z = sigmoid(z_x + z_h), n = tanh(n_x + r * n_h);  h' = (1 - z) * n + z * h
 *
 * Parameters, in PyTorch's layout (so that torch's weight_ih, weight_hh,
 * bias_ih and bias_hh copy over as they are): with G = 1, 4, 3 gates for
 * rnn, lstm and gru, "<layer>.w_0" is W_ih [G*H, I], "<layer>.w_1" W_hh
 * [G*H, H], "<layer>.b_0" b_ih [G*H] and "<layer>.b_1" b_hh [G*H]. (Unlike
 * nb_layer_fc's [in, out] weight: the rows of W_ih are the gates, in
 * torch's order.) All four are drawn from U(-1/sqrt(H), 1/sqrt(H)), as
 * torch does. Layer names are fresh "rnn_k", "lstm_k", "gru_k" unless
 * opts.name says otherwise; the parameter names follow from the layer name
 * alone, so in an eager builder a layer given the name of an earlier one
 * (or called again after nb_eager_release_values) uses its parameters. In
 * a program a name can be given once (the parameters are vars of that
 * name); to run one set of parameters several times (a cell unrolled by
 * hand, a sampling loop), make them with nb_rnn_params_new and call
 * nb_rnn_cell or nb_rnn_sequence with them.
 *
 * States are [B, H] (an LSTM has two, h and c, in that order). An initial
 * state given as NB_NONE is zeros, as torch's hx=None.
 *
 * The sequence layers are nb_scan (nabla/control.h) over the time axis:
 * the parameters are made once, outside the scan, and every step runs the
 * cell on them. In an eager builder the scan is a C loop on the tape; in a
 * record builder it is one `recurrent` op with the step in its sub-block,
 * which names the cell and its weights (nb_scan_cell), so that
 * nb_onnx_export writes it as ONNX's LSTM, GRU or RNN.
 *
 * Parameters need known sizes: I (x's last dim) must be known when the
 * layer is built; T and B may be -1 in a program. */
#ifndef NABLA_RECURRENT_H
#define NABLA_RECURRENT_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/init.h"

NB_BEGIN_DECLS

typedef enum nb_rnn_kind {
    NB_RNN_TANH, /* nn.RNNCell (nonlinearity tanh) */
    NB_RNN_LSTM, /* nn.LSTMCell */
    NB_RNN_GRU   /* nn.GRUCell */
} nb_rnn_kind;

/* "rnn", "lstm", "gru" ("?" for anything else): the layers' name prefixes. */
NB_API const char *nb_rnn_kind_name(nb_rnn_kind kind);
/* How many states the cell carries: 2 for an LSTM (h, c), else 1 (h). */
NB_API int nb_rnn_state_count(nb_rnn_kind kind);
/* Gates per cell: 1, 4, 3. */
NB_API int nb_rnn_gate_count(nb_rnn_kind kind);

typedef struct nb_rnn_opts {
    const char *name;       /* layer name (default: a fresh "<kind>_k") */
    bool no_bias;           /* torch's bias=False: no b_ih, b_hh */
    bool reverse;           /* sequences run from the last step to the first */
    nb_init w_init, b_init; /* default: U(-1/sqrt(hidden), 1/sqrt(hidden)), torch's */
    nb_dtype dtype;         /* nb_rnn_params_new: the parameters' float dtype (default float32); layers take x's */
} nb_rnn_opts;

/* The parameters of one recurrent layer. */
typedef struct nb_rnn_params {
    nb_rnn_kind kind;
    int64_t input_size, hidden;
    nb_value w_ih, w_hh; /* [G*H, I], [G*H, H] */
    nb_value b_ih, b_hh; /* [G*H], or NB_NONE with no_bias */
    bool reverse;        /* nb_rnn_sequence runs time backwards */
} nb_rnn_params;

/* Creates the parameters of a layer (in an eager builder: finds them when
 * the builder already holds them under those names) of float dtype
 * opts->dtype. opts may be NULL. Errors go to the builder, and are
 * returned. */
NB_API nb_status nb_rnn_params_new(nb_rnn_params *out, nb_builder *b, nb_rnn_kind kind, int64_t input_size,
                                   int64_t hidden, const nb_rnn_opts *opts);

/* ---- the building blocks: cells and sequences over given parameters ------ */

/* One step of the cell: x [B, I] and state[0..n) (n = nb_rnn_state_count;
 * [B, H] each, NB_NONE for zeros) give next[0..n). */
NB_API nb_status nb_rnn_cell(nb_builder *b, const nb_rnn_params *p, nb_value x, const nb_value *state, nb_value *next);

/* The cell over a time-major sequence x [T, B, I] (p->reverse: from
 * t = T-1 down to 0), from init[0..n) (NULL, or NB_NONE entries: zeros):
 * *ys [T, B, H] receives h after every step, in time order; final[0..n)
 * (may be NULL) the state after the last one. Built on nb_scan. */
NB_API nb_status nb_rnn_sequence(nb_builder *b, const nb_rnn_params *p, nb_value x, const nb_value *init, nb_value *ys,
                                 nb_value *final);

/* ---- layers: parameters and cell (or sequence) in one call --------------- */

/* x [B, I], h [B, H] (or NB_NONE) -> h' [B, H]. */
NB_API nb_value nb_layer_rnn_cell(nb_builder *b, nb_value x, nb_value h, int64_t hidden, const nb_rnn_opts *opts);
NB_API nb_value nb_layer_gru_cell(nb_builder *b, nb_value x, nb_value h, int64_t hidden, const nb_rnn_opts *opts);
/* x [B, I], state {h, c} ([B, H] each, NB_NONE entries or a NULL state:
 * zeros) -> h' [B, H]; *c_next (may be NULL) receives c'. */
NB_API nb_value nb_layer_lstm_cell(nb_builder *b, nb_value x, const nb_value *state, int64_t hidden,
                                   const nb_rnn_opts *opts, nb_value *c_next);

/* x [T, B, I] -> every step's h, [T, B, H]; *h_n, which may be NULL,
 * receives the final state [B, H]. h0 may be NB_NONE: zeros. The LSTM takes
 * {h0, c0} in init (NULL: zeros) and gives {h_n, c_n} in final (may be
 * NULL). */
NB_API nb_value nb_layer_rnn(nb_builder *b, nb_value x, nb_value h0, int64_t hidden, const nb_rnn_opts *opts,
                             nb_value *h_n);
NB_API nb_value nb_layer_gru(nb_builder *b, nb_value x, nb_value h0, int64_t hidden, const nb_rnn_opts *opts,
                             nb_value *h_n);
NB_API nb_value nb_layer_lstm(nb_builder *b, nb_value x, const nb_value *init, int64_t hidden, const nb_rnn_opts *opts,
                              nb_value *final);

NB_END_DECLS

#endif
