/* ONNX's recurrent ops (RNN, GRU, LSTM) as nabla ops: unrolled over the
 * sequence at import (its length is the input's static shape), each step
 * composed of matmul, add, the activations and split, so that an imported
 * recurrent net has gradients, JVPs and vmap with no op of its own. The
 * input's projection of every step is one product before the loop; the
 * recurrence is one product a step. sequence_lens masks the steps past a
 * sequence's end: the state stays as it was (so Y_h is the state at the
 * last step of each sequence, in either direction) and Y is 0 there. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

#define MAX_GATES 4
#define MAX_STEPS 4096

enum rnn_kind { RNN, GRU, LSTM };

/* An activation of the activations attribute, with its alpha and beta. */
typedef struct act {
    char name[32];
    double alpha, beta;
} act;

typedef struct rnn {
    enum rnn_kind kind;
    int gates;    /* 1, 3 or 4 */
    int n_acts;   /* activations a direction: 1, 2 or 3 */
    int dirs;     /* 1 or 2 */
    bool reverse; /* direction "reverse" (with one direction) */
    bool batch_first;
    bool linear_before_reset;
    double clip; /* 0: none */
    int64_t seq, batch, hidden;
    nb_dtype dt;
    act acts[6];
} rnn;

static bool wants_out(const ox_import *im, int k) { return k < (int)im->node->n_output && *im->node->output[k]; }

static bool known_act(const char *name)
{
    static const char *const names[] = {"Sigmoid",         "Tanh",     "Relu",   "LeakyRelu",  "Elu",
                                        "Softplus",        "Softsign", "Affine", "ScaledTanh", "HardSigmoid",
                                        "ThresholdedRelu", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

/* Whether activation `name` reads alpha, beta, and their defaults. */
static void act_params(const char *name, int *n, double *alpha, double *beta)
{
    *n = 0, *alpha = 1, *beta = 0;
    if (!strcmp(name, "LeakyRelu")) *n = 1, *alpha = 0.01;
    else if (!strcmp(name, "Elu") || !strcmp(name, "ThresholdedRelu")) *n = 1;
    else if (!strcmp(name, "Affine") || !strcmp(name, "ScaledTanh")) *n = 2;
    else if (!strcmp(name, "HardSigmoid")) *n = 2, *alpha = 0.2, *beta = 0.5;
}

static nb_value apply_act(ox_import *im, const rnn *r, const act *a, nb_value x)
{
    if (r->clip > 0) x = nb_clip(B, x, -r->clip, r->clip);
    const char *n = a->name;
    if (!strcmp(n, "Sigmoid")) return nb_sigmoid(B, x);
    if (!strcmp(n, "Tanh")) return nb_tanh(B, x);
    if (!strcmp(n, "Relu")) return nb_relu(B, x);
    if (!strcmp(n, "LeakyRelu")) return nb_leaky_relu(B, x, a->alpha);
    if (!strcmp(n, "Elu")) return nb_elu(B, x, a->alpha);
    if (!strcmp(n, "Softplus")) return nb_softplus(B, x, 1, 1e30);
    if (!strcmp(n, "Softsign")) return nb_softsign(B, x);
    if (!strcmp(n, "Affine")) return nb_scale(B, x, a->alpha, a->beta);
    if (!strcmp(n, "ScaledTanh")) return nb_scale(B, nb_tanh(B, nb_scale(B, x, a->beta, 0)), a->alpha, 0);
    if (!strcmp(n, "HardSigmoid")) return nb_clip(B, nb_scale(B, x, a->alpha, a->beta), 0, 1);
    /* ThresholdedRelu: x where x > alpha, else 0. */
    nb_value keep = nb_cast(B, nb_greater(B, x, ox_const_scalar(im, r->dt, a->alpha)), r->dt);
    return nb_mul(B, x, keep);
}

/* The attributes, and the sizes from X [seq, batch, input] (or batch first). */
static nb_status read_rnn(ox_import *im, enum rnn_kind kind, nb_value x, rnn *r)
{
    static const char *const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    *r = (rnn){.kind = kind, .gates = kind == RNN ? 1 : kind == GRU ? 3 : 4};
    r->n_acts = kind == RNN ? 1 : kind == GRU ? 2 : 3;
    const char *dir = ox_attr_s(im, "direction", "forward");
    r->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    r->reverse = !strcmp(dir, "reverse");
    if (r->dirs == 1 && !r->reverse && strcmp(dir, "forward"))
        return ox_node_error(im, NB_ERR_FORMAT, "has direction '%s', not forward, reverse or bidirectional", dir);
    r->batch_first = ox_attr_i(im, "layout", 0) != 0;
    r->linear_before_reset = ox_attr_i(im, "linear_before_reset", 0) != 0;
    r->clip = ox_attr_f(im, "clip", 0);
    if (ox_attr_i(im, "input_forget", 0))
        return ox_unsupported(im, "has input_forget=1 (coupled input and forget gates)");
    nb_var_info xi = nb_value_info(B, x);
    if (xi.ndim != 3) return ox_unsupported(im, "needs X of rank 3");
    r->seq = xi.shape[r->batch_first ? 1 : 0], r->batch = xi.shape[r->batch_first ? 0 : 1], r->dt = xi.dtype;
    if (r->seq < 0)
        return ox_unsupported(im, "has a sequence whose length only a run knows (it is unrolled at import)");
    if (r->seq > MAX_STEPS) return ox_unsupported(im, "has a sequence of more than 4096 steps to unroll");
    /* Activations: one list for both directions, forward's first. */
    const Onnx__AttributeProto *a = ox_attr(im, "activations");
    const Onnx__AttributeProto *al = ox_attr(im, "activation_alpha"), *be = ox_attr(im, "activation_beta");
    int n = r->n_acts * r->dirs;
    if (a && (int)a->n_strings != n)
        return ox_node_error(im, NB_ERR_FORMAT, "lists %zu activations; %d direction(s) need %d", a->n_strings, r->dirs,
                             n);
    size_t next_alpha = 0, next_beta = 0;
    for (int i = 0; i < n; i++) {
        act *t = &r->acts[i];
        if (a)
            snprintf(t->name, sizeof t->name, "%.*s", (int)(a->strings[i].len < 31 ? a->strings[i].len : 31),
                     (const char *)a->strings[i].data);
        else snprintf(t->name, sizeof t->name, "%s", defaults[r->n_acts - 1][i % r->n_acts]);
        if (!known_act(t->name)) return ox_node_error(im, NB_ERR_UNSUPPORTED, "has activation '%s'", t->name);
        int takes;
        act_params(t->name, &takes, &t->alpha, &t->beta);
        if (takes >= 1 && al && next_alpha < al->n_floats) t->alpha = al->floats[next_alpha++];
        if (takes >= 2 && be && next_beta < be->n_floats) t->beta = be->floats[next_beta++];
    }
    return NB_OK;
}

/* Slice [k, k + 1) of dim `axis`, with that dim dropped. */
static nb_value take(ox_import *im, nb_value v, int64_t axis, int64_t k)
{
    int64_t end = k + 1;
    return nb_squeeze(B, nb_slice(B, v, 1, &axis, &k, &end), 1, &axis);
}

/* Gate g of a [.., gates * H] value. */
static nb_value gate(ox_import *im, const rnn *r, nb_value v, int g)
{
    int64_t axis = -1, start = g * r->hidden, end = (g + 1) * r->hidden;
    return nb_slice(B, v, 1, &axis, &start, &end);
}

/* What one direction's run reads: every step's input projection xw, the
 * recurrence's weight rw, the biases wb and rb, LSTM's peepholes p and the
 * sequence lengths (each NB_NONE when absent). */
typedef struct rnn_dir {
    nb_value xw, rw, wb, rb, p, lens;
} rnn_dir;

/* One direction's run: its Y steps into ys[seq] (in time order) and the
 * last states into *h (and *c). */
static nb_status run_dir(ox_import *im, const rnn *r, int d, const rnn_dir *in_d, nb_value *h, nb_value *c,
                         nb_value *ys)
{
    const nb_value xw = in_d->xw, rw = in_d->rw, wb = in_d->wb, rb = in_d->rb, p = in_d->p, lens = in_d->lens;
    const act *f = &r->acts[d * r->n_acts], *g = f + (r->n_acts > 1), *hact = f + (r->n_acts > 2 ? 2 : 0);
    bool reverse = d == 1 || r->reverse;
    nb_value pi = NB_NONE, po = NB_NONE, pf = NB_NONE;
    if (!nb_is_none(p)) pi = gate(im, r, p, 0), po = gate(im, r, p, 1), pf = gate(im, r, p, 2);
    nb_value rbh = nb_is_none(rb) || r->kind != GRU ? NB_NONE : gate(im, r, rb, 2);
    for (int64_t step = 0; step < r->seq && !nb_builder_status(B); step++) {
        int64_t t = reverse ? r->seq - 1 - step : step;
        /* x W^T + Wb (+ Rb, except for GRU's third gate) for this step. */
        nb_value in = take(im, xw, 0, t);
        nb_value hr = nb_matmul(B, *h, rw, NB_TRANSPOSE_Y), h_new, c_new = NB_NONE;
        if (!nb_is_none(wb)) in = nb_add(B, in, wb);
        if (r->kind == RNN) {
            if (!nb_is_none(rb)) hr = nb_add(B, hr, rb);
            h_new = apply_act(im, r, f, nb_add(B, in, hr));
        } else if (r->kind == LSTM) {
            if (!nb_is_none(rb)) hr = nb_add(B, hr, rb);
            nb_value s = nb_add(B, in, hr);
            nb_value gi = gate(im, r, s, 0), go = gate(im, r, s, 1), gf = gate(im, r, s, 2), gc = gate(im, r, s, 3);
            if (!nb_is_none(p)) gi = nb_add(B, gi, nb_mul(B, pi, *c)), gf = nb_add(B, gf, nb_mul(B, pf, *c));
            nb_value it = apply_act(im, r, f, gi), ft = apply_act(im, r, f, gf), ct = apply_act(im, r, g, gc);
            c_new = nb_add(B, nb_mul(B, ft, *c), nb_mul(B, it, ct));
            if (!nb_is_none(p)) go = nb_add(B, go, nb_mul(B, po, c_new));
            h_new = nb_mul(B, apply_act(im, r, f, go), apply_act(im, r, hact, c_new));
        } else {
            /* GRU (zrh): the reset gate meets the state before R_h
             * (linear_before_reset=0) or R_h's product and its bias. */
            nb_value rzr = nb_is_none(rb) ? hr : nb_add(B, hr, rb);
            nb_value z = apply_act(im, r, f, nb_add(B, gate(im, r, in, 0), gate(im, r, rzr, 0)));
            nb_value rt = apply_act(im, r, f, nb_add(B, gate(im, r, in, 1), gate(im, r, rzr, 1)));
            nb_value rh;
            if (r->linear_before_reset) {
                rh = nb_mul(B, rt, gate(im, r, rzr, 2));
            } else {
                int64_t axis = 0, start = 2 * r->hidden, end = 3 * r->hidden;
                nb_value r_h = nb_slice(B, rw, 1, &axis, &start, &end);
                rh = nb_matmul(B, nb_mul(B, rt, *h), r_h, NB_TRANSPOSE_Y);
                if (!nb_is_none(rbh)) rh = nb_add(B, rh, rbh);
            }
            nb_value ht = apply_act(im, r, g, nb_add(B, gate(im, r, in, 2), rh));
            /* (1 - z) ht + z h = ht + z (h - ht) */
            h_new = nb_add(B, ht, nb_mul(B, z, nb_sub(B, *h, ht)));
        }
        if (!nb_is_none(lens)) {
            /* Steps past a sequence's end keep its state and give 0. */
            nb_value now = ox_const_scalar(im, nb_value_info(B, lens).dtype, (double)t);
            nb_value live = nb_cast(B, nb_less(B, now, lens), r->dt);
            int64_t col[2] = {-1, 1};
            live = nb_reshape(B, live, 2, col);
            h_new = nb_add(B, *h, nb_mul(B, live, nb_sub(B, h_new, *h)));
            if (r->kind == LSTM) c_new = nb_add(B, *c, nb_mul(B, live, nb_sub(B, c_new, *c)));
            ys[t] = nb_mul(B, live, h_new);
        } else {
            ys[t] = h_new;
        }
        *h = h_new;
        if (r->kind == LSTM) *c = c_new;
    }
    return nb_builder_status(B);
}

/* Input k's direction d ([dirs, ...] -> [...]), or NB_NONE when absent. */
static nb_value dir_in(ox_import *im, int k, int d)
{
    if (!ox_has_in(im, k)) return NB_NONE;
    nb_value v = ox_in(im, k);
    return nb_is_none(v) ? v : take(im, v, 0, d);
}

static nb_status recurrent(ox_import *im, enum rnn_kind kind)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    rnn r;
    nb_status st = read_rnn(im, kind, x, &r);
    if (st) return st;
    nb_value w = ox_in(im, 1), rr = ox_in(im, 2);
    if (nb_builder_status(B)) return nb_builder_status(B);
    nb_var_info wi = nb_value_info(B, w), ri = nb_value_info(B, rr);
    if (wi.ndim != 3 || ri.ndim != 3 || wi.shape[0] != r.dirs || ri.shape[2] < 0)
        return ox_unsupported(im, "needs W [dirs, gates * H, input] and R [dirs, gates * H, H] with H known");
    r.hidden = ri.shape[2];
    int64_t hs = ox_attr_i(im, "hidden_size", r.hidden);
    if (hs != r.hidden)
        return ox_node_error(im, NB_ERR_FORMAT, "has hidden_size %lld but R is %lld wide", (long long)hs,
                             (long long)r.hidden);
    if (r.batch_first) {
        const int64_t perm[3] = {1, 0, 2};
        x = nb_transpose(B, x, 3, perm);
    }
    nb_value lens = ox_has_in(im, 4) ? ox_in(im, 4) : NB_NONE;
    if (!nb_is_none(lens) && nb_dtype_is_float(nb_value_info(B, lens).dtype))
        return ox_unsupported(im, "has float sequence_lens");
    nb_value *ys = nb_malloc((size_t)(2 * r.seq + 1) * sizeof *ys);
    if (!ys) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    nb_value hs_out[2], cs_out[2], y_dir[2];
    const int64_t gh = r.gates * r.hidden;
    for (int d = 0; d < r.dirs && !st; d++) {
        nb_value wd = dir_in(im, 1, d), rd = dir_in(im, 2, d), bd = dir_in(im, 3, d), wb = NB_NONE, rb = NB_NONE;
        if (!nb_is_none(bd)) {
            int64_t axis = 0, s0 = 0, e0 = gh, s1 = gh, e1 = 2 * gh;
            wb = nb_slice(B, bd, 1, &axis, &s0, &e0), rb = nb_slice(B, bd, 1, &axis, &s1, &e1);
        }
        nb_value h = dir_in(im, 5, d), c = kind == LSTM ? dir_in(im, 6, d) : NB_NONE;
        nb_value p = kind == LSTM ? dir_in(im, 7, d) : NB_NONE;
        if (nb_builder_status(B)) break;
        if (nb_is_none(h) || (kind == LSTM && nb_is_none(c))) {
            if (r.batch < 0) {
                st = ox_unsupported(im, "has no initial state and a batch whose size only a run knows");
                break;
            }
            int64_t shape[2] = {r.batch, r.hidden};
            if (nb_is_none(h)) h = nb_fill_constant(B, r.dt, 2, shape, 0);
            if (kind == LSTM && nb_is_none(c)) c = nb_fill_constant(B, r.dt, 2, shape, 0);
        }
        /* Every step's input projection in one product: [seq, batch, gates * H]. */
        nb_value xw = nb_matmul(B, x, wd, NB_TRANSPOSE_Y);
        const rnn_dir in_d = {xw, rd, wb, rb, p, lens};
        if ((st = run_dir(im, &r, d, &in_d, &h, &c, ys))) break;
        hs_out[d] = h, cs_out[d] = c;
        y_dir[d] = nb_stack(B, (int)r.seq, ys, 0); /* [seq, batch, H] */
    }
    nb_free(ys);
    if (st || nb_builder_status(B)) return st ? st : nb_builder_status(B);
    /* Y [seq, dirs, batch, H] (batch first: [batch, seq, dirs, H]); Y_h and
     * Y_c [dirs, batch, H] ([batch, dirs, H]). */
    nb_value y = nb_stack(B, r.dirs, y_dir, 1), yh = nb_stack(B, r.dirs, hs_out, 0);
    nb_value yc = kind == LSTM ? nb_stack(B, r.dirs, cs_out, 0) : NB_NONE;
    if (r.batch_first) {
        const int64_t perm_y[4] = {2, 0, 1, 3}, perm_h[3] = {1, 0, 2};
        y = nb_transpose(B, y, 4, perm_y), yh = nb_transpose(B, yh, 3, perm_h);
        if (kind == LSTM) yc = nb_transpose(B, yc, 3, perm_h);
    }
    if (wants_out(im, 0) && (st = ox_out(im, 0, y))) return st;
    if (wants_out(im, 1) && (st = ox_out(im, 1, yh))) return st;
    if (kind == LSTM && wants_out(im, 2) && (st = ox_out(im, 2, yc))) return st;
    return NB_OK;
}

static nb_status i_rnn(ox_import *im) { return recurrent(im, RNN); }
static nb_status i_gru(ox_import *im) { return recurrent(im, GRU); }
static nb_status i_lstm(ox_import *im) { return recurrent(im, LSTM); }

/* clang-format off */
const ox_importer ox_imports_rnn[] = {
    OX_FN(RNN, rnn), OX_FN(GRU, gru), OX_FN(LSTM, lstm),
    {0},
};
/* clang-format on */

#endif
