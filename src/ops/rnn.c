/* The recurrent family: lstm_cell, an LSTM's gates as one op, and its fused
 * gradient lstm_cell_grad.
 *
 * Gates [..., 4H] are the pre-activations of the input, forget, cell and
 * output gates (i, f, g, o: torch's order), C [..., H] the cell state:
 *
 *     C' = sigmoid(f) C + sigmoid(i) tanh(g),   H' = sigmoid(o) tanh(C')
 *
 * Written with primitives this is eleven ops forward and some twenty-five
 * backward, each a pass over a small tensor and, in a loop's step block, a
 * scope entry of its own: a fifth of the LSTM's training step. The gradient
 * op is a function of its inputs as given (C' included, not recomputed), so
 * the composite rules of both ops are exact, and give every order. */
#include <string.h>
#include "nabla/ops.h"
#include "composite.h"
#include "infer_check.h"
#include "op_internal.h"

static void set_out(nb_op_ctx *ctx, int slot, const nb_var_info *like)
{
    if (nb_out_count(ctx, slot) < 1) return;
    *nb_out_info(ctx, slot, 0) = *like;
}

/* Gates [..., 4H] and a state [..., H] of one dtype and leading shape. */
static nb_status check_gates(const nb_op_ctx *ctx, const nb_var_info *gates, const char *slot, const nb_var_info *c)
{
    nb_status st;
    if ((st = nb_check_float(ctx, "Gates", gates)) || (st = nb_check_same_dtype(ctx, slot, c, "Gates", gates)))
        return st;
    bool ok = gates->ndim >= 1 && c->ndim == gates->ndim;
    for (int d = 0; ok && d + 1 < c->ndim; d++)
        ok = c->shape[d] < 0 || gates->shape[d] < 0 || c->shape[d] == gates->shape[d];
    int last = c->ndim - 1;
    if (ok && last >= 0 && c->shape[last] >= 0 && gates->shape[last] >= 0)
        ok = gates->shape[last] == 4 * c->shape[last];
    if (!ok) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE,
                        "%s: Gates %s and %s %s must be [..., 4H] and [..., H] with the same leading dims", ctx->label,
                        nb_info_shape(a, gates), slot, nb_info_shape(b, c));
    }
    return NB_OK;
}

static nb_status lstm_cell_infer(nb_op_ctx *ctx)
{
    const nb_var_info *gates = nb_in_info(ctx, 0, 0), *c = nb_in_info(ctx, 1, 0);
    nb_status st = check_gates(ctx, gates, "C", c);
    if (st) return st;
    set_out(ctx, 0, c);
    set_out(ctx, 1, c);
    return NB_OK;
}

/* lstm_cell_grad(Gates, C, COut, DH, DCOut) -> DGates, DC. */
static nb_status lstm_cell_grad_infer(nb_op_ctx *ctx)
{
    const nb_var_info *gates = nb_in_info(ctx, 0, 0);
    static const char *const names[] = {"C", "COut", "DH", "DCOut"};
    for (int s = 1; s <= 4; s++) {
        nb_status st = check_gates(ctx, gates, names[s - 1], nb_in_info(ctx, s, 0));
        if (st) return st;
    }
    set_out(ctx, 0, gates);
    set_out(ctx, 1, nb_in_info(ctx, 1, 0));
    return NB_OK;
}

/* ---- rules ------------------------------------------------------------------------ */

#define E1(c, type, a) nb_cmp_emit((c), (type), 1, (nb_value[]){a}, 0, NULL)
#define E2(c, type, a, b_) nb_cmp_emit((c), (type), 2, (nb_value[]){a, b_}, 0, NULL)

/* The size H of the last dim of C, which the rules slice Gates by; they
 * cannot be written for an H unknown when the program is built. */
static int64_t hidden_of(nb_composite *c, nb_value state, int *last)
{
    nb_builder *b = nb_cmp_builder(c);
    nb_var_info ci = nb_value_info(b, state);
    *last = ci.ndim - 1;
    int64_t h = *last >= 0 ? ci.shape[*last] : -1;
    if (h < 0) nb_builder_fail(b, NB_ERR_SHAPE, "lstm_cell: its rules need the hidden size (C's last dim) known");
    return h;
}

/* The activated gates i, f, g, o of Gates: each a slice of the last dim. */
static void activated(nb_composite *c, nb_value gates, int last, int64_t h, nb_value *act)
{
    for (int k = 0; k < 4; k++) {
        nb_attr a[3] = {NB_ATTR_INTS_N("axes", 1, (int64_t[]){last}), NB_ATTR_INTS_N("starts", 1, (int64_t[]){k * h}),
                        NB_ATTR_INTS_N("ends", 1, (int64_t[]){(k + 1) * h})};
        act[k] = E1(c, k == 2 ? "tanh" : "sigmoid", nb_cmp_emit(c, "slice", 1, (nb_value[]){gates}, 3, a));
    }
}

/* The four gates' parts put side by side again: each padded with zeros to
 * its place in the last dim, and summed. */
static nb_value side_by_side(nb_composite *c, const nb_value *part, int last, int64_t h)
{
    nb_value sum = NB_NONE;
    for (int k = 0; k < 4; k++) {
        int64_t pads[2 * NB_MAX_DIMS] = {0};
        pads[2 * last] = k * h;
        pads[2 * last + 1] = (3 - k) * h;
        nb_attr a[1] = {NB_ATTR_INTS_N("paddings", 2 * (last + 1), pads)};
        nb_value p = nb_cmp_emit(c, "pad", 1, (nb_value[]){part[k]}, 1, a);
        sum = k ? E2(c, "add", sum, p) : p;
    }
    return sum;
}

/* s (1 - s), the derivative of a sigmoid from its value; 1 - t^2, of a tanh. */
static nb_value dsigmoid(nb_composite *c, nb_value s)
{
    nb_attr a[2] = {NB_ATTR_FLOAT("scale", -1), NB_ATTR_FLOAT("bias", 1)};
    return E2(c, "mul", s, nb_cmp_emit(c, "scale", 1, (nb_value[]){s}, 2, a));
}

static nb_value dtanh(nb_composite *c, nb_value t)
{
    nb_attr a[2] = {NB_ATTR_FLOAT("scale", -1), NB_ATTR_FLOAT("bias", 1)};
    return nb_cmp_emit(c, "scale", 1, (nb_value[]){E2(c, "mul", t, t)}, 2, a);
}

static nb_status lstm_cell_composite(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y)
{
    (void)g;
    int last;
    int64_t h = hidden_of(c, x[1], &last);
    if (h < 0) return nb_builder_status(nb_cmp_builder(c));
    nb_value a[4];
    activated(c, x[0], last, h, a);
    nb_value c1 = E2(c, "add", E2(c, "mul", a[1], x[1]), E2(c, "mul", a[0], a[2]));
    y[0] = E2(c, "mul", a[3], E1(c, "tanh", c1));
    y[1] = c1;
    return nb_builder_status(nb_cmp_builder(c));
}

/* With T = tanh(COut) and S = DCOut + DH o (1 - T^2):
 *   DGates = [S g i(1-i), S C f(1-f), S i (1-g^2), DH T o(1-o)],  DC = S f. */
static nb_status lstm_cell_grad_composite(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y)
{
    (void)g;
    nb_builder *b = nb_cmp_builder(c);
    int last;
    int64_t h = hidden_of(c, x[1], &last);
    if (h < 0) return nb_builder_status(b);
    nb_value a[4];
    activated(c, x[0], last, h, a);
    nb_value t = E1(c, "tanh", x[2]), dh = x[3];
    nb_value s = E2(c, "add", x[4], E2(c, "mul", E2(c, "mul", dh, a[3]), dtanh(c, t)));
    nb_value dg[4] = {
        E2(c, "mul", E2(c, "mul", s, a[2]), dsigmoid(c, a[0])),
        E2(c, "mul", E2(c, "mul", s, x[1]), dsigmoid(c, a[1])),
        E2(c, "mul", E2(c, "mul", s, a[0]), dtanh(c, a[2])),
        E2(c, "mul", E2(c, "mul", dh, t), dsigmoid(c, a[3])),
    };
    y[0] = side_by_side(c, dg, last, h);
    y[1] = E2(c, "mul", s, a[1]);
    return nb_builder_status(b);
}

static nb_status lstm_cell_vjp(nb_builder *b, nb_grad_ctx *g)
{
    if (nb_is_none(nb_grad_dy(g, 0, 0)) && nb_is_none(nb_grad_dy(g, 1, 0))) return NB_OK;
    if (!nb_grad_wants_dx(g, 0, 0) && !nb_grad_wants_dx(g, 1, 0)) return NB_OK;
    nb_value in[5] = {nb_grad_x(g, 0, 0), nb_grad_x(g, 1, 0), nb_grad_y(g, 1, 0), nb_grad_dy_or_zeros(b, g, 0, 0),
                      nb_grad_dy_or_zeros(b, g, 1, 0)};
    nb_value out[2];
    if (nb_emit(b, "lstm_cell_grad", NB_VALUES_N(5, in), NB_NO_ATTRS, 2, out)) return nb_builder_status(b);
    nb_grad_set_dx(g, 0, 0, out[0]);
    nb_grad_set_dx(g, 1, 0, out[1]);
    return nb_builder_status(b);
}

static nb_status lstm_cell_jvp(nb_builder *b, nb_grad_ctx *g) { return nb_composite_jvp(b, g, lstm_cell_composite); }
static nb_status lstm_cell_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_vjp(b, g, lstm_cell_grad_composite);
}
static nb_status lstm_cell_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_jvp(b, g, lstm_cell_grad_composite);
}

static const nb_op_def op_lstm_cell = {
    .name = "lstm_cell",
    .doc = "An LSTM's gates: from Gates [..., 4H] (i, f, g, o pre-activations) and C [..., H], "
           "COut = sigmoid(f) C + sigmoid(i) tanh(g) and H = sigmoid(o) tanh(COut)",
    .inputs = {{"Gates", 0}, {"C", 0}},
    .outputs = {{"H", 0}, {"COut", 0}},
    .infer = lstm_cell_infer,
    .grad_uses_inputs = (1u << 0) | (1u << 1),
    .grad_uses_outputs = 1u << 1,
    .vjp = lstm_cell_vjp,
    .jvp = lstm_cell_jvp,
    .flags = NB_OP_WRITES_ALL,
};

static const nb_op_def op_lstm_cell_grad = {
    .name = "lstm_cell_grad",
    .doc = "DGates and DC of lstm_cell from DH and DCOut, with COut as given",
    .inputs = {{"Gates", 0}, {"C", 0}, {"COut", 0}, {"DH", 0}, {"DCOut", 0}},
    .outputs = {{"DGates", 0}, {"DC", 0}},
    .infer = lstm_cell_grad_infer,
    .grad_uses_inputs = 0x1f,
    .vjp = lstm_cell_grad_vjp,
    .jvp = lstm_cell_grad_jvp,
    .flags = NB_OP_WRITES_ALL,
};

const nb_op_def *const nb_ops_rnn[] = {&op_lstm_cell, &op_lstm_cell_grad, NULL};
