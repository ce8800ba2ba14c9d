/* nabla's recurrent layers (nabla/recurrent.h) as ONNX's LSTM, GRU and RNN
 * (their opset-7 forms, which opset 13 reads). A layer's sequence is a
 * `recurrent` op whose scan says what its step is (nb_scan_io.form, with
 * the cell's weights); such an op becomes one node. Any other scan is
 * refused: ONNX could run it only as a Scan or Loop of the step's nodes,
 * which this exporter does not write.
 *
 * The weights stay initializers as nabla holds them, in torch's layout and
 * gate order; a Gather of rows puts the gates in ONNX's order (one index
 * list serves W, R and both biases), so that the file's parameters are
 * nabla's, and re-importing them needs no reordering either. The cells
 * match ONNX's defaults (sigmoid, tanh, tanh; no peepholes, no clip), with
 * linear_before_reset = 1 for torch's GRU, whose reset gate multiplies
 * h W_hn^T + b_hn. ONNX's num_directions axis (1 here) is squeezed away:
 * Y [T, 1, B, H] becomes nabla's ys [T, B, H], Y_h and Y_c its final
 * states [B, H].
 *
 * Also fill_constant_batch_size_like, the zero state a layer starts from
 * when it is given none. */
#ifdef NABLA_HAVE_ONNX
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "onnx_export_form.h"

typedef struct cell_form {
    const char *form, *onnx;
    int gates, states;
    int order[4]; /* ONNX's gate k is torch's gate order[k] */
} cell_form;

static const cell_form cell_forms[] = {
    {"lstm", "LSTM", 4, 2, {0, 3, 1, 2}}, /* torch i f g o -> ONNX i o f c */
    {"gru", "GRU", 3, 1, {1, 0, 2}},      /* torch r z n -> ONNX z r h */
    {"rnn", "RNN", 1, 1, {0}},
};

static nb_status refuse(const nb_op *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static nb_status refuse(const nb_op *op, const char *fmt, ...)
{
    char label[256], why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return nb_error(NB_ERR_UNSUPPORTED, "onnx export: %s %s", nb_op_label(op, label, sizeof label), why);
}

/* x with a dim of 1 (ONNX's num_directions) inserted at `axis`; and
 * squeeze_into, which takes it away again into `out`. */
static const char *unsqueeze(ox_export *e, const char *x, int64_t axis)
{
    const char *t = ox_tmp(e, x);
    NODE("Unsqueeze", t, x, ox_int64s(e, 1, &axis));
    return t;
}

static void squeeze_into(ox_export *e, const char *x, int64_t axis, const char *out)
{
    NODE("Squeeze", out, x, ox_int64s(e, 1, &axis));
}

/* The rows that put torch's gates in ONNX's order, or NULL where the two
 * orders agree (one gate). */
static const char *gate_rows(ox_export *e, const cell_form *f, int64_t hidden)
{
    if (f->gates == 1) return NULL;
    int64_t n = f->gates * hidden;
    int64_t *rows = ox_alloc(&e->a, (size_t)n * sizeof *rows);
    if (!rows) {
        e->a.failed = true;
        return NULL;
    }
    for (int k = 0; k < f->gates; k++)
        for (int64_t j = 0; j < hidden; j++) rows[k * hidden + j] = f->order[k] * hidden + j;
    return ox_int64s(e, (int)n, rows);
}

static const char *reorder(ox_export *e, const char *w, const char *rows)
{
    if (!rows) return w;
    const char *t = ox_tmp(e, w);
    ox_attr_int(e, NODE("Gather", t, w, rows), "axis", 0);
    return t;
}

/* What the node is made of: the op's cell, its x and initial states, and
 * the weights its form names, checked to have the cell's shapes. */
typedef struct cell_args {
    const cell_form *f;
    const char *x, *init[2], *w[4]; /* w_ih, w_hh, b_ih, b_hh ("" for no bias) */
    int64_t hidden;
} cell_args;

static bool is_input(const nb_op *op, const char *name)
{
    for (int k = 0; k < nb_op_in_count(op, 0); k++)
        if (!strcmp(nb_op_in_name(op, 0, k), name)) return true;
    return false;
}

static nb_status check_weights(ox_export *e, const nb_op *op, cell_args *c)
{
    static const char *const what[4] = {"W_ih", "W_hh", "b_ih", "b_hh"};
    const cell_form *f = c->f;
    const nb_var *xv = nb_block_find_var(e->blk, c->x);
    const nb_var *wh = nb_block_find_var(e->blk, c->w[1]);
    if (!xv || xv->ndim != 3 || xv->shape[2] < 0 || !wh || wh->ndim != 2 || wh->shape[1] < 1)
        return refuse(op, "(an %s layer) needs x [T, B, I] with I known and W_hh [G*H, H]", f->form);
    const int64_t H = wh->shape[1], gh = f->gates * H;
    const int64_t want[4][2] = {{gh, xv->shape[2]}, {gh, H}, {gh, 0}, {gh, 0}};
    for (int k = 0; k < 4; k++) {
        if (!*c->w[k]) continue;
        const nb_var *v = nb_block_find_var(e->blk, c->w[k]);
        int nd = k < 2 ? 2 : 1;
        bool ok = v && v->ndim == nd && v->shape[0] == want[k][0] && (nd == 1 || v->shape[1] == want[k][1]) &&
            v->dtype == xv->dtype;
        if (!ok) {
            char s[NB_SHAPE_STR_MAX];
            return refuse(op,
                          "(an %s layer of hidden size %lld over x '%s' [T, B, %lld]) has %s '%s' of shape %s; "
                          "the cell needs [%lld%s] of x's dtype",
                          f->form, (long long)H, c->x, (long long)xv->shape[2], what[k], c->w[k],
                          v ? nb_shape_str(s, sizeof s, v->ndim, v->shape) : "(none)", (long long)want[k][0],
                          nd == 2 ? (k ? ", H" : ", I") : "");
        }
    }
    c->hidden = H;
    return NB_OK;
}

static nb_status cell_args_of(ox_export *e, const nb_op *op, cell_args *c)
{
    const char *form = nb_op_attr(op, "form")->s;
    if (!form || !*form)
        return refuse(op,
                      "is a scan (nb_scan) of a step ONNX has no op for: nb_onnx_export writes the scans of "
                      "nabla's recurrent layers (nb_layer_lstm, nb_layer_gru, nb_layer_rnn, nb_rnn_sequence) "
                      "as ONNX's LSTM, GRU and RNN, and no other loop");
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof cell_forms / sizeof *cell_forms && !c->f; i++)
        if (!strcmp(cell_forms[i].form, form)) c->f = &cell_forms[i];
    if (!c->f) return refuse(op, "says its step is a '%s' cell, which has no ONNX op nabla knows", form);
    const cell_form *f = c->f;
    const nb_attr_value *mem_in = nb_op_attr(op, "mem_in"), *mem_out = nb_op_attr(op, "mem_out"),
                        *seq_in = nb_op_attr(op, "seq_in"), *seq_out = nb_op_attr(op, "seq_out"),
                        *fv = nb_op_attr(op, "form_values");
    if (mem_in->n != f->states || seq_in->n != 1 || seq_out->n != 1 || nb_op_out_count(op, 1) != f->states + 1 ||
        strcmp(seq_out->strs[0], mem_out->strs[0]) || fv->n != 4)
        return refuse(op,
                      "(form '%s') carries %d states over %d sequences into %d outputs with %d weights; an %s "
                      "layer carries %d over one sequence, its output is h and it names 4 weights",
                      form, mem_in->n, seq_in->n, seq_out->n, fv->n, form, f->states);
    for (int k = 0; k < f->states; k++) c->init[k] = nb_op_in_name(op, 0, k);
    c->x = nb_op_in_name(op, 0, f->states);
    for (int k = 0; k < 4; k++) {
        c->w[k] = fv->strs[k];
        if (*c->w[k] ? !is_input(op, c->w[k]) : k < 2)
            return refuse(op, "(form '%s') names weight %d '%s', which is not one of its inputs", form, k, c->w[k]);
    }
    if (!*c->w[2] != !*c->w[3]) return refuse(op, "(form '%s') has one bias of two", form);
    return check_weights(e, op, c);
}

nb_status ox_export_recurrent(ox_export *e, const nb_op *op)
{
    cell_args c;
    nb_status st = cell_args_of(e, op, &c);
    if (st) return st;
    const cell_form *f = c.f;
    const char *rows = gate_rows(e, f, c.hidden);
    const char *in[7] = {c.x,
                         unsqueeze(e, reorder(e, c.w[0], rows), 0),
                         unsqueeze(e, reorder(e, c.w[1], rows), 0),
                         "",
                         "",
                         unsqueeze(e, c.init[0], 0),
                         f->states > 1 ? unsqueeze(e, c.init[1], 0) : NULL};
    if (*c.w[2]) {
        const char *b = ox_tmp(e, c.w[2]);
        ox_attr_int(e, NODE("Concat", b, reorder(e, c.w[2], rows), reorder(e, c.w[3], rows)), "axis", 0);
        in[3] = unsqueeze(e, b, 0);
    }
    const char *ys = nb_op_out_name(op, 1, f->states);
    const char *out[3] = {ox_tmp(e, ys), ox_tmp(e, nb_op_out_name(op, 1, 0)),
                          f->states > 1 ? ox_tmp(e, nb_op_out_name(op, 1, 1)) : NULL};
    Onnx__NodeProto *n = ox_node_outs(e, f->onnx, 5 + f->states, in, 1 + f->states, out);
    if (!n) e->a.failed = true;
    ox_attr_int(e, n, "hidden_size", c.hidden);
    if (nb_op_attr(op, "reverse")->b) ox_attr_string(e, n, "direction", "reverse");
    if (!strcmp(f->form, "gru")) ox_attr_int(e, n, "linear_before_reset", 1);
    squeeze_into(e, out[0], 1, ys);
    for (int k = 0; k < f->states; k++) squeeze_into(e, out[1 + k], 0, nb_op_out_name(op, 1, k));
    return done(e);
}

/* Out: `shape` with dim output_dim_idx taken from Input's dim input_dim_idx
 * when the graph runs (the batch size, often unknown when exported). */
nb_status ox_export_fill_batch_like(ox_export *e, const nb_op *op)
{
    const nb_attr_value *shape = nb_op_attr(op, "shape");
    const int64_t in_idx = nb_op_attr(op, "input_dim_idx")->i, out_idx = nb_op_attr(op, "output_dim_idx")->i;
    for (int i = 0; i < shape->n; i++)
        if (i != out_idx && shape->ints[i] < 0) {
            char s[NB_SHAPE_STR_MAX];
            return refuse(op, "fills shape %s, of a dim of unknown size besides the batch's (dim %lld)",
                          nb_shape_str(s, sizeof s, shape->n, shape->ints), (long long)out_idx);
        }
    const char *in = nb_op_in_name(op, 0, 0), *out = nb_op_out_name(op, 0, 0);
    const char *s = ox_tmp(e, out), *batch = ox_tmp(e, out), *parts[3];
    NODE("Shape", s, in);
    ox_attr_int(e, NODE("Gather", batch, s, ox_int64s(e, 1, &in_idx)), "axis", 0);
    int n = 0;
    if (out_idx > 0) parts[n++] = ox_int64s(e, (int)out_idx, shape->ints);
    parts[n++] = batch;
    if (out_idx + 1 < shape->n) parts[n++] = ox_int64s(e, (int)(shape->n - out_idx - 1), shape->ints + out_idx + 1);
    const char *full = batch;
    if (n > 1) {
        full = ox_tmp(e, out);
        ox_attr_int(e, ox_node(e, "Concat", n, parts, full), "axis", 0);
    }
    nb_tensor *t;
    if (nb_tensor_full(&t, (nb_dtype)nb_op_attr(op, "dtype")->i, 1, (int64_t[]){1}, nb_op_attr(op, "value")->f))
        return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    ox_attr_tensor(e, NODE("ConstantOfShape", out, full), "value", t);
    nb_tensor_release(t);
    return done(e);
}

#endif
