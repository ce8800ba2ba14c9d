/* Recurrent cells: the parameters of a simple RNN, LSTM or GRU, and one
 * time step, PyTorch's equations (see nabla/recurrent.h). */
#include <math.h>
#include <string.h>
#include "rnn_internal.h"

const char *nb_rnn_kind_name(nb_rnn_kind kind)
{
    switch (kind) {
    case NB_RNN_TANH: return "rnn";
    case NB_RNN_LSTM: return "lstm";
    case NB_RNN_GRU: return "gru";
    }
    return "?";
}

int nb_rnn_state_count(nb_rnn_kind kind) { return kind == NB_RNN_LSTM ? 2 : 1; }

int nb_rnn_gate_count(nb_rnn_kind kind)
{
    switch (kind) {
    case NB_RNN_TANH: return 1;
    case NB_RNN_LSTM: return 4;
    case NB_RNN_GRU: return 3;
    }
    return 0;
}

static bool kind_valid(nb_rnn_kind kind) { return kind == NB_RNN_TANH || kind == NB_RNN_LSTM || kind == NB_RNN_GRU; }

void nb_rnn_label(const nb_rnn_params *p, const char *what, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s", p && kind_valid(p->kind) ? nb_rnn_kind_name(p->kind) : "recurrent", what);
}

const char *nb_rnn_var_label(nb_builder *b, nb_value v, char *buf, size_t size)
{
    const char *name = nb_value_label(b, v);
    if (!*name) return "";
    snprintf(buf, size, " %s", name);
    return buf;
}

nb_status nb_rnn_params_new(nb_rnn_params *out, nb_builder *b, nb_rnn_kind kind, int64_t input_size, int64_t hidden,
                            const nb_rnn_opts *opts)
{
    static const nb_rnn_opts none = {0};
    if (!b) return nb_error(NB_ERR_ARG, "recurrent layer: NULL builder");
    if (!out) return nb_builder_fail(b, NB_ERR_ARG, "recurrent layer: NULL output for the parameters");
    memset(out, 0, sizeof *out);
    nb_status st = nb_builder_status(b);
    if (st) return st;
    if (!opts) opts = &none;
    const nb_dtype dtype = opts->dtype;
    if (!kind_valid(kind)) return nb_builder_fail(b, NB_ERR_ARG, "recurrent layer: unknown kind %d", (int)kind);
    const char *kn = nb_rnn_kind_name(kind);
    if (!nb_dtype_is_float(dtype))
        return nb_builder_fail(b, NB_ERR_DTYPE, "%s: parameters must be float32 or float64, not %s", kn,
                               nb_dtype_name(dtype));
    if (input_size < 1 || hidden < 1)
        return nb_builder_fail(b, NB_ERR_ARG, "%s: input size %lld and hidden size %lld must both be at least 1", kn,
                               (long long)input_size, (long long)hidden);
    char name[NB_LAYER_NAME_MAX], pname[NB_LAYER_NAME_MAX + 8];
    if (!nb_layer_name(b, kn, opts->name, name, sizeof name)) return nb_builder_status(b);
    /* The names follow from the layer's alone (not from fresh counters), so
     * that an eager layer of the same name finds these parameters again. */
    const int64_t gh = nb_rnn_gate_count(kind) * hidden;
    const double bound = 1.0 / sqrt((double)hidden);
    const nb_init w_init = nb_init_or(opts->w_init, nb_init_uniform(-bound, bound));
    const nb_init b_init = nb_init_or(opts->b_init, nb_init_uniform(-bound, bound));
    snprintf(pname, sizeof pname, "%s.w_0", name);
    out->w_ih = nb_param(b, pname, dtype, 2, (int64_t[]){gh, input_size}, w_init);
    snprintf(pname, sizeof pname, "%s.w_1", name);
    out->w_hh = nb_param(b, pname, dtype, 2, (int64_t[]){gh, hidden}, w_init);
    if (!opts->no_bias) {
        snprintf(pname, sizeof pname, "%s.b_0", name);
        out->b_ih = nb_param(b, pname, dtype, 1, &gh, b_init);
        snprintf(pname, sizeof pname, "%s.b_1", name);
        out->b_hh = nb_param(b, pname, dtype, 1, &gh, b_init);
    }
    if ((st = nb_builder_status(b))) {
        memset(out, 0, sizeof *out);
        return st;
    }
    out->kind = kind;
    out->reverse = opts->reverse;
    out->input_size = input_size;
    out->hidden = hidden;
    return NB_OK;
}

bool nb_rnn_params_ok(nb_builder *b, const nb_rnn_params *p, const char *what)
{
    if (!b || nb_builder_status(b)) return false;
    if (p && kind_valid(p->kind) && p->input_size >= 1 && p->hidden >= 1 && !nb_is_none(p->w_ih) &&
        !nb_is_none(p->w_hh) && nb_is_none(p->b_ih) == nb_is_none(p->b_hh))
        return true;
    nb_builder_fail(b, NB_ERR_ARG,
                    "recurrent %s: the parameters are missing or incomplete (make them with "
                    "nb_rnn_params_new)",
                    what);
    return false;
}

bool nb_rnn_check_input(nb_builder *b, const nb_rnn_params *p, const char *who, nb_value x, int ndim)
{
    if (!nb_layer_ok(b, who, 1, &x)) return false;
    nb_var_info xi = nb_value_info(b, x);
    char s[NB_SHAPE_STR_MAX], vl[NB_LAYER_NAME_MAX];
    if (xi.ndim != ndim || (xi.shape[ndim - 1] >= 0 && xi.shape[ndim - 1] != p->input_size)) {
        nb_builder_fail(b, NB_ERR_SHAPE,
                        "%s: input%s has shape %s; it must be %s with %lld features (the layer's "
                        "input size)",
                        who, nb_rnn_var_label(b, x, vl, sizeof vl), nb_shape_str(s, sizeof s, xi.ndim, xi.shape),
                        ndim == 3 ? "[T, B, I]" : "[B, I]", (long long)p->input_size);
        return false;
    }
    nb_var_info wi = nb_value_info(b, p->w_ih);
    if (xi.dtype != wi.dtype) {
        nb_builder_fail(b, NB_ERR_DTYPE, "%s: input%s is %s but the parameters are %s", who,
                        nb_rnn_var_label(b, x, vl, sizeof vl), nb_dtype_name(xi.dtype), nb_dtype_name(wi.dtype));
        return false;
    }
    return true;
}

bool nb_rnn_states_or_zeros(nb_builder *b, const nb_rnn_params *p, const char *who, const nb_value *state,
                            nb_value like, int like_batch_axis, nb_value *out)
{
    static const char *names[NB_RNN_MAX_STATES] = {"h", "c"};
    const int n = nb_rnn_state_count(p->kind);
    nb_var_info li = nb_value_info(b, like);
    const int64_t batch = li.shape[like_batch_axis];
    char s[NB_SHAPE_STR_MAX], vl[NB_LAYER_NAME_MAX];
    for (int k = 0; k < n; k++) {
        nb_value v = state ? state[k] : NB_NONE;
        if (nb_is_none(v)) {
            /* Zeros [B, H], B taken from `like` when the step runs (it may
             * be unknown while a program is built). */
            nb_attr a[] = {NB_ATTR_INTS("shape", 1, p->hidden), NB_ATTR_INT("dtype", li.dtype),
                           NB_ATTR_INT("input_dim_idx", like_batch_axis)};
            out[k] = nb_emit1(b, "fill_constant_batch_size_like", NB_VALUES(like), NB_ATTRS_N(3, a));
            continue;
        }
        nb_var_info vi = nb_value_info(b, v);
        bool ok = vi.ndim == 2 && (vi.shape[1] < 0 || vi.shape[1] == p->hidden) &&
            (vi.shape[0] < 0 || batch < 0 || vi.shape[0] == batch);
        if (!ok) {
            nb_builder_fail(b, NB_ERR_SHAPE, "%s: state %s%s has shape %s; it must be [B, H] = [%lld, %lld]", who,
                            names[k], nb_rnn_var_label(b, v, vl, sizeof vl),
                            nb_shape_str(s, sizeof s, vi.ndim, vi.shape), (long long)batch, (long long)p->hidden);
            return false;
        }
        if (vi.dtype != li.dtype) {
            nb_builder_fail(b, NB_ERR_DTYPE, "%s: state %s%s is %s but the input is %s", who, names[k],
                            nb_rnn_var_label(b, v, vl, sizeof vl), nb_dtype_name(vi.dtype), nb_dtype_name(li.dtype));
            return false;
        }
        out[k] = v;
    }
    return !nb_builder_status(b);
}

/* x W^T + bias (bias may be NB_NONE): torch's layout, rows of W are outputs. */
static nb_value linear(nb_builder *b, nb_value x, nb_value w, nb_value bias)
{
    nb_value y = nb_matmul(b, x, w, NB_TRANSPOSE_Y);
    return nb_is_none(bias) ? y : nb_add(b, y, bias);
}

/* The gates as one op (lstm_cell, src/ops/rnn.c): i, f, g, o. */
static void lstm_gates(nb_builder *b, nb_value gx, nb_value gh, nb_value c, nb_value *next)
{
    next[0] = nb_lstm_cell(b, nb_add(b, gx, gh), c, &next[1]);
}

static void gru_gates(nb_builder *b, nb_value gx, nb_value gh, nb_value h, nb_value *next)
{
    nb_value x3[3] = {NB_NONE, NB_NONE, NB_NONE}, h3[3] = {NB_NONE, NB_NONE, NB_NONE};
    nb_split(b, gx, 1, 3, x3); /* r, z, n */
    nb_split(b, gh, 1, 3, h3);
    nb_value r = nb_sigmoid(b, nb_add(b, x3[0], h3[0]));
    nb_value z = nb_sigmoid(b, nb_add(b, x3[1], h3[1]));
    nb_value n = nb_tanh(b, nb_add(b, x3[2], nb_mul(b, r, h3[2])));
    /* (1 - z) * n + z * h, written as n + z * (h - n): three ops, not four. */
    next[0] = nb_add(b, n, nb_mul(b, z, nb_sub(b, h, n)));
}

/* From gx = x W_ih^T + b_ih and the state: h W_hh^T + b_hh and the gates. */
static nb_status recurrent_part(nb_builder *b, const nb_rnn_params *p, nb_value gx, const nb_value *state,
                                nb_value *next)
{
    nb_value gh = linear(b, state[0], p->w_hh, p->b_hh);
    switch (p->kind) {
    case NB_RNN_TANH: next[0] = nb_tanh(b, nb_add(b, gx, gh)); break;
    case NB_RNN_LSTM: lstm_gates(b, gx, gh, state[1], next); break;
    case NB_RNN_GRU: gru_gates(b, gx, gh, state[0], next); break;
    }
    return nb_builder_status(b);
}

nb_status nb_rnn_cell(nb_builder *b, const nb_rnn_params *p, nb_value x, const nb_value *state, nb_value *next)
{
    if (!b) return nb_error(NB_ERR_ARG, "recurrent cell: NULL builder");
    if (!nb_rnn_params_ok(b, p, "cell")) return nb_builder_status(b);
    char who[64];
    nb_rnn_label(p, "cell", who, sizeof who);
    if (!next) return nb_builder_fail(b, NB_ERR_ARG, "%s: NULL output for the next state", who);
    nb_value s[NB_RNN_MAX_STATES];
    if (!nb_rnn_check_input(b, p, who, x, 2) || !nb_rnn_states_or_zeros(b, p, who, state, x, 0, s))
        return nb_builder_status(b);
    return recurrent_part(b, p, linear(b, x, p->w_ih, p->b_ih), s, next);
}

/* ---- the cell layers ---------------------------------------------------------------- */

bool nb_rnn_layer_input(nb_builder *b, nb_rnn_kind kind, nb_value x, int ndim, nb_var_info *xi)
{
    const char *kn = nb_rnn_kind_name(kind);
    if (!nb_layer_ok(b, kn, 1, &x) || !nb_layer_need_float(b, kn, x, xi)) return false;
    if (xi->ndim == ndim && xi->shape[ndim - 1] >= 0) return true;
    char s[NB_SHAPE_STR_MAX], vl[NB_LAYER_NAME_MAX];
    nb_builder_fail(b, NB_ERR_SHAPE,
                    "%s%s: input%s has shape %s; it must be %s with I known (the weights' size "
                    "needs it)",
                    kn, ndim == 2 ? " cell" : "", nb_rnn_var_label(b, x, vl, sizeof vl),
                    nb_shape_str(s, sizeof s, xi->ndim, xi->shape), ndim == 2 ? "[B, I]" : "time-major [T, B, I]");
    return false;
}

/* Parameters for x [B, I] and one step from `state`; h' (and c' in
 * *c_next), or NB_NONE with the error in the builder. */
static nb_value cell_layer(nb_builder *b, nb_rnn_kind kind, nb_value x, const nb_value *state, int64_t hidden,
                           const nb_rnn_opts *opts, nb_value *c_next)
{
    nb_var_info xi;
    if (!nb_rnn_layer_input(b, kind, x, 2, &xi)) return NB_NONE;
    nb_rnn_params p;
    nb_value next[NB_RNN_MAX_STATES] = {NB_NONE, NB_NONE};
    nb_rnn_opts o = opts ? *opts : (nb_rnn_opts){0};
    o.dtype = xi.dtype;
    if (nb_rnn_params_new(&p, b, kind, xi.shape[1], hidden, &o) || nb_rnn_cell(b, &p, x, state, next)) return NB_NONE;
    if (c_next) *c_next = next[1];
    return next[0];
}

nb_value nb_layer_rnn_cell(nb_builder *b, nb_value x, nb_value h, int64_t hidden, const nb_rnn_opts *opts)
{
    return cell_layer(b, NB_RNN_TANH, x, &h, hidden, opts, NULL);
}

nb_value nb_layer_gru_cell(nb_builder *b, nb_value x, nb_value h, int64_t hidden, const nb_rnn_opts *opts)
{
    return cell_layer(b, NB_RNN_GRU, x, &h, hidden, opts, NULL);
}

nb_value nb_layer_lstm_cell(nb_builder *b, nb_value x, const nb_value *state, int64_t hidden, const nb_rnn_opts *opts,
                            nb_value *c_next)
{
    if (c_next) *c_next = NB_NONE;
    return cell_layer(b, NB_RNN_LSTM, x, state ? state : (nb_value[]){NB_NONE, NB_NONE}, hidden, opts, c_next);
}
