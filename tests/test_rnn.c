/* Recurrent layers (nabla/recurrent.h): the simple RNN, LSTM and GRU cells
 * and sequence layers against PyTorch's outputs and gradients (reference
 * numbers from tests/ref/rnn_torch_ref.py, pasted into
 * tests/ref/rnn_torch_ref.h), both against finite differences in float64,
 * the sequence layer against the cell unrolled by hand, parameters (names,
 * shapes, torch's initialisation, found again eagerly), and the errors.
 * Both forms: eager (the scan a C loop on the tape) and static (a program
 * whose sequence is one `recurrent` op, differentiated by nb_gradients). */
#include "grad_compare.h"
#include "layer_test_util.h"
#include "nabla/eager.h"
#include "nabla/gradcheck.h"
#include "nabla/recurrent.h"
#include "ref/rnn_torch_ref.h"

enum { I = RNN_REF_I, H = RNN_REF_H, B = RNN_REF_B, TT = RNN_REF_T };

/* The reference script's inputs: element i of input number k. */
static double ref_value(int k, int64_t i) { return 0.6 * sin(0.7 * (double)i + 1.3 * k + 0.1); }

static nb_tensor *ref_tensor(int k, int ndim, const int64_t *shape)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, NB_F64, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, ref_value(k, i));
    return t;
}

static void set_all(nb_tensor *t, double v)
{
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, v);
}

static void ref_fill(nb_tensor *t, int k)
{
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, ref_value(k, i));
}

/* Checks every element of t against want[0..numel) (relative tolerance). */
static void check_values(const char *what, const nb_tensor *t, const double *want, double tol)
{
    CHECK(t != NULL);
    if (!t) return;
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
        double d = fabs(nb_tensor_get(t, i) - want[i]) / (1 + fabs(want[i]));
        if (d > worst || isnan(d)) worst = d, at = i;
    }
    if (!(worst <= tol))
        fprintf(stderr, "  %s: element %lld is %.17g, PyTorch's %.17g\n", what, (long long)at, nb_tensor_get(t, at),
                want[at]);
    CHECK(worst <= tol);
}

/* One reference case of tests/ref/rnn_torch_ref.h. */
typedef struct ref_case {
    const char *name;
    nb_rnn_kind kind;
    bool seq;
    const double *out[3];    /* cell: h', c'; sequence: all h, h_n, c_n */
    const double *dparam[4]; /* w_ih, w_hh, b_ih, b_hh */
    const double *din[3];    /* x, h, c */
} ref_case;

static const ref_case ref_cases[] = {
    {"rnn cell",
     NB_RNN_TANH,
     false,
     {rnn_cell_out0},
     {rnn_cell_dw_ih, rnn_cell_dw_hh, rnn_cell_db_ih, rnn_cell_db_hh},
     {rnn_cell_dx, rnn_cell_dh}},
    {"rnn sequence",
     NB_RNN_TANH,
     true,
     {rnn_seq_out0, rnn_seq_out1},
     {rnn_seq_dw_ih, rnn_seq_dw_hh, rnn_seq_db_ih, rnn_seq_db_hh},
     {rnn_seq_dx, rnn_seq_dh}},
    {"lstm cell",
     NB_RNN_LSTM,
     false,
     {lstm_cell_out0, lstm_cell_out1},
     {lstm_cell_dw_ih, lstm_cell_dw_hh, lstm_cell_db_ih, lstm_cell_db_hh},
     {lstm_cell_dx, lstm_cell_dh, lstm_cell_dc}},
    {"lstm sequence",
     NB_RNN_LSTM,
     true,
     {lstm_seq_out0, lstm_seq_out1, lstm_seq_out2},
     {lstm_seq_dw_ih, lstm_seq_dw_hh, lstm_seq_db_ih, lstm_seq_db_hh},
     {lstm_seq_dx, lstm_seq_dh, lstm_seq_dc}},
    {"gru cell",
     NB_RNN_GRU,
     false,
     {gru_cell_out0},
     {gru_cell_dw_ih, gru_cell_dw_hh, gru_cell_db_ih, gru_cell_db_hh},
     {gru_cell_dx, gru_cell_dh}},
    {"gru sequence",
     NB_RNN_GRU,
     true,
     {gru_seq_out0, gru_seq_out1},
     {gru_seq_dw_ih, gru_seq_dw_hh, gru_seq_db_ih, gru_seq_db_hh},
     {gru_seq_dx, gru_seq_dh}},
};
#define N_REF_CASES ((int)(sizeof ref_cases / sizeof *ref_cases))

/* The cell or sequence of case c on x and state; its outputs in out[]
 * (h' then c' for a cell; all h, h_n, c_n for a sequence); the count. */
static int run_case(nb_builder *b, const ref_case *c, const nb_rnn_params *p, nb_value x, const nb_value *state,
                    nb_value *out)
{
    const int n = nb_rnn_state_count(c->kind);
    if (c->seq) {
        CHECK_OK(nb_rnn_sequence(b, p, x, state, &out[0], out + 1));
        return n + 1;
    }
    CHECK_OK(nb_rnn_cell(b, p, x, state, out));
    return n;
}

/* sum_j sum(out_j * fill(7 + j)), the reference script's loss. */
static nb_value ref_loss(nb_builder *b, int n, const nb_value *out, nb_tensor **weights)
{
    nb_value terms[3];
    for (int j = 0; j < n; j++) {
        nb_var_info oi = nb_value_info(b, out[j]);
        int64_t shape[NB_MAX_DIMS];
        for (int d = 0; d < oi.ndim; d++) shape[d] = oi.shape[d] >= 0 ? oi.shape[d] : (d == 0 && oi.ndim == 3 ? TT : B);
        weights[j] = ref_tensor(7 + j, oi.ndim, shape);
        nb_value w = nb_builder_is_eager(b) ? nb_eager_value(b, weights[j])
                                            : nb_data(b, (const char *[]){"w0", "w1", "w2"}[j], NB_F64, oi.ndim, shape);
        terms[j] = nb_reduce_sum(b, nb_mul(b, out[j], w), 0, NULL, false);
    }
    return n == 1 ? terms[0] : nb_sum(b, n, terms);
}

/* The reference input x: [T, B, I] for a sequence, [B, I] for a cell. */
static nb_tensor *ref_input(const ref_case *c)
{
    return c->seq ? ref_tensor(4, 3, S(TT, B, I)) : ref_tensor(4, 2, S(B, I));
}

/* ---- against PyTorch, eagerly ----------------------------------------------------- */

static void eager_case(const ref_case *c)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_rnn_params p;
    CHECK_OK(nb_rnn_params_new(&p, b, c->kind, I, H, &(nb_rnn_opts){.dtype = NB_F64}));
    nb_value pv[4] = {p.w_ih, p.w_hh, p.b_ih, p.b_hh};
    for (int k = 0; k < 4; k++) ref_fill(nb_eager_tensor(pv[k]), k);
    const int n_state = nb_rnn_state_count(c->kind);
    nb_tensor *in[3] = {ref_input(c), ref_tensor(5, 2, S(B, H)), ref_tensor(6, 2, S(B, H))};
    for (int k = 0; k < 3; k++) CHECK_OK(nb_tensor_set_requires_grad(in[k], true));
    nb_value state[2] = {nb_eager_value(b, in[1]), nb_eager_value(b, in[2])};
    nb_value out[3] = {NB_NONE, NB_NONE, NB_NONE};
    nb_tensor *weights[3] = {NULL, NULL, NULL};
    int n_out = run_case(b, c, &p, nb_eager_value(b, in[0]), state, out);
    nb_value loss = ref_loss(b, n_out, out, weights);
    CHECK_OK(nb_builder_status(b));
    if (!nb_builder_status(b)) {
        nb_tensor *l = nb_eager_tensor(loss);
        CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
        char what[96];
        for (int j = 0; j < n_out; j++) {
            snprintf(what, sizeof what, "%s, output %d", c->name, j);
            check_values(what, nb_eager_tensor(out[j]), c->out[j], 1e-12);
        }
        static const char *pn[4] = {"w_ih", "w_hh", "b_ih", "b_hh"}, *xn[3] = {"x", "h", "c"};
        for (int k = 0; k < 4; k++) {
            snprintf(what, sizeof what, "%s, gradient of %s", c->name, pn[k]);
            check_values(what, nb_tensor_grad(nb_eager_tensor(pv[k])), c->dparam[k], 1e-12);
        }
        for (int k = 0; k < 1 + n_state; k++) {
            snprintf(what, sizeof what, "%s, gradient of %s", c->name, xn[k]);
            check_values(what, nb_tensor_grad(in[k]), c->din[k], 1e-12);
        }
    }
    release_all(in[0], in[1], in[2], NULL);
    for (int j = 0; j < 3; j++) nb_tensor_release(weights[j]);
    nb_builder_free(b);
}

static void test_eager_matches_pytorch(void)
{
    for (int i = 0; i < N_REF_CASES; i++) eager_case(&ref_cases[i]);
}

/* ---- against PyTorch, in a static program ------------------------------------------- */

/* The program of case c: data x, h, c (unknown batch, and unknown time for
 * a sequence), the parameters set to the reference values in the scope.
 * False when it could not be built (the failure counted). */
typedef struct static_case {
    model m;
    nb_rnn_params p;
    nb_value loss, out[3];
    int n_out, n_state;
    nb_feed feeds[6];
    int n_feeds;
    nb_tensor *weights[3];
} static_case;

/* What gradcheck differentiates with respect to: the four weights, x, then
 * the cell's state (h, and c for an LSTM; n_wrt says how many are used). */
static void wrt_names(const static_case *s, const char *wrt[7])
{
    const char *names[7] = {nb_value_name(s->p.w_ih),
                            nb_value_name(s->p.w_hh),
                            nb_value_name(s->p.b_ih),
                            nb_value_name(s->p.b_hh),
                            "x",
                            "h",
                            "c"};
    memcpy(wrt, names, sizeof names);
}

static bool static_case_init(static_case *s, const ref_case *c)
{
    memset(s, 0, sizeof *s);
    model_init(&s->m);
    nb_builder *b = s->m.b;
    s->n_state = nb_rnn_state_count(c->kind);
    nb_value x = nb_data(b, "x", NB_F64, c->seq ? 3 : 2, c->seq ? S(-1, -1, I) : S(-1, I));
    nb_value state[2] = {nb_data(b, "h", NB_F64, 2, S(-1, H)), NB_NONE};
    if (s->n_state == 2) state[1] = nb_data(b, "c", NB_F64, 2, S(-1, H));
    CHECK_OK(nb_rnn_params_new(&s->p, b, c->kind, I, H, &(nb_rnn_opts){.dtype = NB_F64}));
    if (c->seq) {
        CHECK_OK(nb_rnn_sequence(b, &s->p, x, state, &s->out[0], s->out + 1));
        s->n_out = s->n_state + 1;
    } else {
        CHECK_OK(nb_rnn_cell(b, &s->p, x, state, s->out));
        s->n_out = s->n_state;
    }
    s->loss = ref_loss(b, s->n_out, s->out, s->weights);
    CHECK_OK(nb_builder_status(b));
    CHECK_OK(model_startup(&s->m));
    if (nb_builder_status(b)) return false;
    nb_value pv[4] = {s->p.w_ih, s->p.w_hh, s->p.b_ih, s->p.b_hh};
    for (int k = 0; k < 4; k++) {
        nb_tensor *t = nb_scope_find(s->m.scope, nb_value_name(pv[k]));
        CHECK(t != NULL);
        if (t) ref_fill(t, k);
    }
    static const char *names[] = {"x", "h", "c"}, *wnames[] = {"w0", "w1", "w2"};
    s->feeds[s->n_feeds++] = (nb_feed){names[0], ref_input(c)};
    for (int k = 0; k < s->n_state; k++)
        s->feeds[s->n_feeds++] = (nb_feed){names[1 + k], ref_tensor(5 + k, 2, S(B, H))};
    for (int j = 0; j < s->n_out; j++) s->feeds[s->n_feeds++] = (nb_feed){wnames[j], s->weights[j]};
    return true;
}

static void static_case_free(static_case *s)
{
    for (int i = 0; i < s->n_feeds; i++)
        if (i < 1 + s->n_state) nb_tensor_release(s->feeds[i].tensor);
    for (int j = 0; j < 3; j++) nb_tensor_release(s->weights[j]);
    model_free(&s->m);
}

static void static_case_check(const ref_case *c)
{
    static_case s;
    if (!static_case_init(&s, c)) {
        static_case_free(&s);
        return;
    }
    const char *wrt[7];
    wrt_names(&s, wrt);
    const int n_wrt = 5 + s.n_state;
    /* A sequence is one recurrent op (the time loop is not unrolled). */
    CHECK(count_ops_of(s.m.main, "recurrent") == (c->seq ? 1 : 0));
    const char *loss = nb_value_name(s.loss);
    nb_backward_result r;
    REQUIRE_OK(nb_gradients(s.m.main, NB_NAMES_N(1, &loss), NB_NAMES_N(n_wrt, wrt), NULL, &r));
    const char *fetch[10];
    int n_fetch = 0;
    for (int j = 0; j < s.n_out; j++) fetch[n_fetch++] = nb_value_name(s.out[j]);
    for (int k = 0; k < n_wrt; k++) fetch[n_fetch++] = r.grads[k];
    nb_tensor *got[10] = {NULL};
    CHECK_OK(
        nb_executor_run(s.m.ex, s.m.main, s.m.scope, NB_FEEDS_N(s.n_feeds, s.feeds), NB_NAMES_N(n_fetch, fetch), got));
    char what[96];
    for (int j = 0; j < s.n_out; j++) {
        snprintf(what, sizeof what, "static %s, output %d", c->name, j);
        check_values(what, got[j], c->out[j], 1e-12);
    }
    for (int k = 0; k < n_wrt; k++) {
        snprintf(what, sizeof what, "static %s, gradient of %s", c->name, wrt[k]);
        check_values(what, got[s.n_out + k], k < 4 ? c->dparam[k] : c->din[k - 4], 1e-12);
    }
    for (int i = 0; i < n_fetch; i++) nb_tensor_release(got[i]);
    nb_backward_result_free(&r);
    static_case_free(&s);
}

static void test_static_cells_match_pytorch(void)
{
    for (int i = 0; i < N_REF_CASES; i++)
        if (!ref_cases[i].seq) static_case_check(&ref_cases[i]);
}

/* Unknown T and B while the program is built, one recurrent op. */
static void test_static_sequences_match_pytorch(void)
{
    for (int i = 0; i < N_REF_CASES; i++)
        if (ref_cases[i].seq) static_case_check(&ref_cases[i]);
}

/* ---- finite differences --------------------------------------------------------------- */

/* Every gradient of every cell and sequence (parameters, x, h, c) against
 * central differences of the static program, in float64. */
static void test_gradients_match_finite_differences(void)
{
    for (int i = 0; i < N_REF_CASES; i++) {
        const ref_case *c = &ref_cases[i];
        static_case s;
        if (static_case_init(&s, c)) {
            const char *wrt[7];
            wrt_names(&s, wrt);
            nb_gradcheck_report rep;
            CHECK_OK(nb_gradcheck_program(s.m.main, nb_value_name(s.loss), NB_NAMES_N(5 + s.n_state, wrt), s.m.scope,
                                          &(nb_gradcheck_opts){.feeds = NB_FEEDS_N(s.n_feeds, s.feeds)}, &rep));
            const int gh = nb_rnn_gate_count(c->kind) * H;
            CHECK(rep.checked == gh * (I + H + 2) + (c->seq ? TT : 1) * B * I + s.n_state * B * H);
            CHECK(rep.failed == 0);
            if (rep.failed) fprintf(stderr, "  %s: worst %s\n", c->name, rep.worst);
        }
        static_case_free(&s);
    }
}

/* ---- the sequence is the cell unrolled ------------------------------------------------- */

static double pseudo(int k, int64_t i) { return 0.9 * sin(1.7 * (double)i + 0.31 * k * k + 0.5); }

static nb_tensor *pseudo_tensor(int k, int ndim, const int64_t *shape)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, NB_F64, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, pseudo(k, i));
    CHECK_OK(nb_tensor_set_requires_grad(t, true));
    return t;
}

enum { UT = 5, UB = 3, UI = 4, UH = 6 };

/* Runs the sequence (by_hand false: nb_layer_*; true: the cell in a C
 * loop), backward of a fixed weighting of all its outputs; returns the
 * outputs and every gradient as new references in res[]: ys, final
 * state(s), then the gradients of the 4 parameters, x, h0 (and c0). */
static int unroll_run(nb_rnn_kind kind, bool by_hand, bool reverse, nb_tensor **res)
{
    nb_builder *b;
    if (nb_builder_new_eager(&b)) return 0;
    const int n = nb_rnn_state_count(kind);
    nb_tensor *x = pseudo_tensor(1, 3, S(UT, UB, UI)), *h0 = pseudo_tensor(2, 2, S(UB, UH)),
              *c0 = pseudo_tensor(3, 2, S(UB, UH));
    nb_rnn_opts o = {.name = "seq", .dtype = NB_F64};
    nb_rnn_params p;
    CHECK_OK(nb_rnn_params_new(&p, b, kind, UI, UH, &o));
    nb_value pv[4] = {p.w_ih, p.w_hh, p.b_ih, p.b_hh};
    nb_value init[2] = {nb_eager_value(b, h0), nb_eager_value(b, c0)}, fin[2] = {NB_NONE, NB_NONE}, ys = NB_NONE;
    nb_value xv = nb_eager_value(b, x);
    if (!by_hand && !reverse) {
        /* The layer, given the name of the parameters made above, finds them. */
        if (kind == NB_RNN_LSTM) ys = nb_layer_lstm(b, xv, init, UH, &o, fin);
        else if (kind == NB_RNN_GRU) ys = nb_layer_gru(b, xv, init[0], UH, &o, &fin[0]);
        else ys = nb_layer_rnn(b, xv, init[0], UH, &o, &fin[0]);
    } else if (!by_hand) {
        p.reverse = true;
        CHECK_OK(nb_rnn_sequence(b, &p, xv, init, &ys, fin));
    } else {
        nb_value hs[UT], cur[2] = {init[0], init[1]};
        for (int i = 0; i < UT; i++) {
            int64_t t = reverse ? UT - 1 - i : i, axis = 0, end = t + 1;
            nb_value x_t = nb_squeeze(b, nb_slice(b, xv, 1, &axis, &t, &end), 1, &axis);
            nb_value next[2] = {NB_NONE, NB_NONE};
            CHECK_OK(nb_rnn_cell(b, &p, x_t, cur, next));
            hs[t] = next[0];
            cur[0] = next[0], cur[1] = next[1];
        }
        ys = nb_stack(b, UT, hs, 0);
        fin[0] = cur[0], fin[1] = cur[1];
    }
    nb_value outs[3] = {ys, fin[0], fin[1]}, terms[3];
    nb_tensor *w[3] = {pseudo_tensor(4, 3, S(UT, UB, UH)), pseudo_tensor(5, 2, S(UB, UH)),
                       pseudo_tensor(6, 2, S(UB, UH))};
    for (int j = 0; j <= n; j++)
        terms[j] = nb_reduce_sum(b, nb_mul(b, outs[j], nb_eager_value(b, w[j])), 0, NULL, false);
    nb_value loss = nb_sum(b, n + 1, terms);
    int count = 0;
    CHECK_OK(nb_builder_status(b));
    if (!nb_builder_status(b)) {
        nb_tensor *l = nb_eager_tensor(loss);
        CHECK_OK(nb_backward(NB_TENSORS(l), NULL, 0));
        for (int j = 0; j <= n; j++) res[count++] = nb_tensor_retain(nb_eager_tensor(outs[j]));
        for (int k = 0; k < 4; k++) res[count++] = nb_tensor_retain(nb_tensor_grad(nb_eager_tensor(pv[k])));
        nb_tensor *ins[3] = {x, h0, c0};
        for (int k = 0; k <= n; k++) res[count++] = nb_tensor_retain(nb_tensor_grad(ins[k]));
    }
    release_all(x, h0, c0, w[0], w[1], w[2], NULL);
    nb_builder_free(b);
    return count;
}

static void test_sequence_equals_cell_unrolled(void)
{
    for (int kind = NB_RNN_TANH; kind <= NB_RNN_GRU; kind++)
        for (int reverse = 0; reverse <= 1; reverse++) {
            nb_tensor *a[10] = {NULL}, *h[10] = {NULL};
            int na = unroll_run((nb_rnn_kind)kind, false, reverse, a);
            int nh = unroll_run((nb_rnn_kind)kind, true, reverse, h);
            CHECK(na == nh && na == 2 * nb_rnn_state_count((nb_rnn_kind)kind) + 6);
            for (int i = 0; i < na && i < nh; i++) {
                char what[64];
                snprintf(what, sizeof what, "%s%s", nb_rnn_kind_name((nb_rnn_kind)kind), reverse ? " reversed" : "");
                gc_check_same(what, i, h[i], a[i], 1e-12, "sequence layer against the cell unrolled by hand");
            }
            for (int i = 0; i < 10; i++) release_all(a[i], h[i], NULL);
        }
}

/* A missing initial state is zeros. */
static void test_missing_initial_state_is_zeros(void)
{
    for (int kind = NB_RNN_TANH; kind <= NB_RNN_GRU; kind++) {
        nb_builder *b;
        REQUIRE_OK(nb_builder_new_eager(&b));
        nb_rnn_params p;
        CHECK_OK(nb_rnn_params_new(&p, b, (nb_rnn_kind)kind, UI, UH, &(nb_rnn_opts){.dtype = NB_F64}));
        nb_tensor *x = pseudo_tensor(1, 3, S(UT, UB, UI)), *z;
        REQUIRE_OK(nb_tensor_new(&z, NB_F64, 2, S(UB, UH)));
        set_all(z, 0);
        nb_value xv = nb_eager_value(b, x), zeros[2] = {nb_eager_value(b, z), nb_eager_value(b, z)};
        nb_value ya, yb, fa[2] = {NB_NONE, NB_NONE}, fb[2] = {NB_NONE, NB_NONE};
        CHECK_OK(nb_rnn_sequence(b, &p, xv, NULL, &ya, fa));
        CHECK_OK(nb_rnn_sequence(b, &p, xv, zeros, &yb, fb));
        gc_check_same("zero init", 0, nb_eager_tensor(yb), nb_eager_tensor(ya), 0, "ys");
        gc_check_same("zero init", 1, nb_eager_tensor(fb[0]), nb_eager_tensor(fa[0]), 0, "h_n");
        /* And in a cell: a NB_NONE state, or none given. */
        nb_value x0 = nb_squeeze(b, nb_slice(b, xv, 1, S(0), S(0), S(1)), 1, S(0));
        nb_value na[2] = {NB_NONE, NB_NONE}, nz[2] = {NB_NONE, NB_NONE};
        CHECK_OK(nb_rnn_cell(b, &p, x0, NULL, na));
        CHECK_OK(nb_rnn_cell(b, &p, x0, zeros, nz));
        gc_check_same("zero init", 2, nb_eager_tensor(nz[0]), nb_eager_tensor(na[0]), 0, "cell h'");
        release_all(x, z, NULL);
        nb_builder_free(b);
    }
}

/* ---- parameters ------------------------------------------------------------------------- */

/* Names "<layer>.w_0" W_ih [G*H, I], ".w_1" W_hh [G*H, H], ".b_0", ".b_1"
 * [G*H], all U(-1/sqrt(H), 1/sqrt(H)), in a program and eagerly. */
static void check_param(nb_builder *b, nb_value v, const char *name, int ndim, const int64_t *shape, double bound,
                        nb_tensor *t)
{
    nb_var_info vi = nb_value_info(b, v);
    CHECK(nb_shape_equal(vi.ndim, vi.shape, ndim, shape));
    if (!nb_builder_is_eager(b)) CHECK_STR(nb_value_name(v), name);
    else CHECK(nb_eager_find_param(b, name) == nb_eager_tensor(v));
    if (!t) return;
    double lo = 1, hi = -1;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
        double e = nb_tensor_get(t, i);
        lo = e < lo ? e : lo, hi = e > hi ? e : hi;
    }
    CHECK(lo >= -bound && hi <= bound);           /* in the range ... */
    CHECK(lo < -0.5 * bound && hi > 0.5 * bound); /* ... and spread over it */
}

static void check_params(nb_builder *b, nb_scope *scope, const nb_rnn_params *p, const char *layer, int64_t gh,
                         int64_t in, int64_t hidden)
{
    const double bound = 1 / sqrt((double)hidden);
    nb_value pv[4] = {p->w_ih, p->w_hh, p->b_ih, p->b_hh};
    static const char *suffix[4] = {"w_0", "w_1", "b_0", "b_1"};
    const int64_t *shapes[4] = {S(gh, in), S(gh, hidden), S(gh), S(gh)};
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%s", layer, suffix[k]);
        nb_tensor *t = scope ? nb_scope_find(scope, name) : nb_eager_tensor(pv[k]);
        check_param(b, pv[k], name, k < 2 ? 2 : 1, shapes[k], bound, t);
    }
}

static void test_parameters_names_shapes_and_init(void)
{
    model m;
    model_init(&m);
    nb_builder *e;
    REQUIRE_OK(nb_builder_new_eager(&e));
    nb_eager_set_seed(e, 3);
    nb_program_set_seed(m.startup, 3);
    nb_value xs = nb_data(m.b, "x", NB_F32, 3, S(-1, -1, 20));
    nb_tensor *xt;
    REQUIRE_OK(nb_tensor_new(&xt, NB_F32, 3, S(2, 3, 20)));
    set_all(xt, 0.5);
    nb_value xe = nb_eager_value(e, xt);
    nb_rnn_params ps[3], pe[3];
    for (int kind = 0; kind < 3; kind++) {
        CHECK_OK(nb_rnn_params_new(&ps[kind], m.b, (nb_rnn_kind)kind, 20, 30, &(nb_rnn_opts){.dtype = NB_F32}));
        CHECK_OK(nb_rnn_params_new(&pe[kind], e, (nb_rnn_kind)kind, 20, 30, &(nb_rnn_opts){.dtype = NB_F32}));
    }
    CHECK_OK(model_startup(&m));
    for (int kind = 0; kind < 3; kind++) {
        char layer[16];
        snprintf(layer, sizeof layer, "%s_0", nb_rnn_kind_name((nb_rnn_kind)kind));
        const int64_t gh = nb_rnn_gate_count((nb_rnn_kind)kind) * 30;
        check_params(m.b, m.scope, &ps[kind], layer, gh, 20, 30);
        check_params(e, NULL, &pe[kind], layer, gh, 20, 30);
    }
    /* A second layer gets the next name; no_bias leaves the biases out. */
    nb_value fin[2] = {NB_NONE, NB_NONE}, hn, cn;
    nb_value ys = nb_layer_lstm(m.b, xs, NULL, 7, &(nb_rnn_opts){.no_bias = true}, fin);
    hn = fin[0], cn = fin[1];
    CHECK_OK(nb_builder_status(m.b));
    if (!nb_builder_status(m.b)) {
        nb_var_info yi = nb_value_info(m.b, ys), hi = nb_value_info(m.b, hn), ci = nb_value_info(m.b, cn);
        CHECK(nb_shape_equal(yi.ndim, yi.shape, 3, S(-1, -1, 7)));
        CHECK(nb_shape_equal(hi.ndim, hi.shape, 2, S(-1, 7)) && nb_shape_equal(ci.ndim, ci.shape, 2, S(-1, 7)));
    }
    nb_block *g = nb_program_global_block(m.main);
    CHECK(nb_block_find_var(g, "lstm_1.w_0") && nb_block_find_var(g, "lstm_1.w_1"));
    CHECK(!nb_block_find_var(g, "lstm_1.b_0") && !nb_block_find_var(g, "lstm_1.b_1"));
    ys = nb_layer_lstm(e, xe, NULL, 7, &(nb_rnn_opts){.no_bias = true}, fin);
    hn = fin[0], cn = fin[1];
    CHECK_OK(nb_builder_status(e));
    CHECK(nb_eager_find_param(e, "lstm_1.w_0") && !nb_eager_find_param(e, "lstm_1.b_0"));
    CHECK(nb_eager_param_count(e) == 14);
    if (!nb_builder_status(e)) {
        CHECK(nb_shape_equal(nb_eager_tensor(ys)->ndim, nb_eager_tensor(ys)->shape, 3, S(2, 3, 7)));
        CHECK(nb_shape_equal(nb_eager_tensor(cn)->ndim, nb_eager_tensor(cn)->shape, 2, S(3, 7)));
    }
    nb_tensor_release(xt);
    nb_builder_free(e);
    model_free(&m);
}

/* Without biases the layer computes what it does with zero biases. */
static void test_no_bias_is_zero_bias(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = pseudo_tensor(1, 3, S(UT, UB, UI));
    nb_value xv = nb_eager_value(b, x);
    for (int kind = NB_RNN_TANH; kind <= NB_RNN_GRU; kind++) {
        nb_rnn_params a, z;
        CHECK_OK(nb_rnn_params_new(&a, b, (nb_rnn_kind)kind, UI, UH, &(nb_rnn_opts){.no_bias = true, .dtype = NB_F64}));
        CHECK_OK(nb_rnn_params_new(&z, b, (nb_rnn_kind)kind, UI, UH, &(nb_rnn_opts){.dtype = NB_F64}));
        if (nb_builder_status(b)) break;
        CHECK(nb_is_none(a.b_ih) && nb_is_none(a.b_hh));
        nb_tensor_copy_into(nb_eager_tensor(z.w_ih), nb_eager_tensor(a.w_ih));
        nb_tensor_copy_into(nb_eager_tensor(z.w_hh), nb_eager_tensor(a.w_hh));
        set_all(nb_eager_tensor(z.b_ih), 0);
        set_all(nb_eager_tensor(z.b_hh), 0);
        nb_value ya = NB_NONE, yz = NB_NONE;
        CHECK_OK(nb_rnn_sequence(b, &a, xv, NULL, &ya, NULL));
        CHECK_OK(nb_rnn_sequence(b, &z, xv, NULL, &yz, NULL));
        gc_check_same("no bias", kind, nb_eager_tensor(yz), nb_eager_tensor(ya), 0, "ys");
    }
    nb_tensor_release(x);
    nb_builder_free(b);
}

/* An eager layer finds its parameters again on the next step, and one
 * given another layer's name uses that layer's. */
static void test_eager_layers_find_their_parameters(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = pseudo_tensor(1, 3, S(UT, UB, UI));
    nb_tensor *first[2] = {NULL, NULL};
    for (int step = 0; step < 2; step++) {
        nb_value xv = nb_eager_value(b, x), hn;
        nb_value ys = nb_layer_gru(b, xv, NB_NONE, UH, NULL, &hn);
        nb_value x0 = nb_squeeze(b, nb_slice(b, xv, 1, S(0), S(0), S(1)), 1, S(0));
        nb_value h1 = nb_layer_gru_cell(b, x0, NB_NONE, UH, &(nb_rnn_opts){.name = "gru_0"});
        CHECK_OK(nb_builder_status(b));
        if (nb_builder_status(b)) break;
        /* The cell named like the layer ran its first step. */
        nb_value y0 = nb_squeeze(b, nb_slice(b, ys, 1, S(0), S(0), S(1)), 1, S(0));
        gc_check_same("named cell", step, nb_eager_tensor(y0), nb_eager_tensor(h1), 1e-14, "first step");
        nb_tensor *w = nb_eager_find_param(b, "gru_0.w_0"), *bh = nb_eager_find_param(b, "gru_0.b_1");
        if (step == 0) first[0] = w, first[1] = bh;
        else CHECK(w == first[0] && bh == first[1]);
        CHECK(nb_eager_param_count(b) == 4);
        nb_eager_release_values(b);
    }
    nb_tensor_release(x);
    nb_builder_free(b);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_errors_name_the_layer_and_shapes(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x2 = pseudo_tensor(1, 2, S(UB, UI)), *x3 = pseudo_tensor(2, 3, S(UT, UB, UI));
    nb_tensor *h5 = pseudo_tensor(3, 2, S(UB, UH - 1)), *hb = pseudo_tensor(4, 2, S(UB + 1, UH));
    nb_tensor *xi, *h32;
    REQUIRE_OK(nb_tensor_new(&xi, NB_I64, 3, S(UT, UB, UI)));
    REQUIRE_OK(nb_tensor_new(&h32, NB_F32, 2, S(UB, UH)));
    nb_rnn_params p, none;
    memset(&none, 0, sizeof none);
    REQUIRE_OK(nb_rnn_params_new(&p, b, NB_RNN_LSTM, UI, UH, &(nb_rnn_opts){.dtype = NB_F64}));
    nb_value v2 = nb_eager_value(b, x2), v3 = nb_eager_value(b, x3), out[2], ys;

    CHECK_ERR(nb_rnn_sequence(b, &p, v2, NULL, &ys, NULL), NB_ERR_SHAPE,
              "lstm sequence: input has shape [3, 4]; it must be [T, B, I] with 4 features");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_cell(b, &p, v3, NULL, out), NB_ERR_SHAPE,
              "lstm cell: input has shape [5, 3, 4]; it must be [B, I]");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_cell(b, &p, v2, (nb_value[]){nb_eager_value(b, h5), NB_NONE}, out), NB_ERR_SHAPE,
              "lstm cell: state h has shape [3, 5]; it must be [B, H] = [3, 6]");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_sequence(b, &p, v3, (nb_value[]){NB_NONE, nb_eager_value(b, hb)}, &ys, NULL), NB_ERR_SHAPE,
              "lstm sequence: state c has shape [4, 6]; it must be [B, H] = [3, 6]");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_cell(b, &p, v2, (nb_value[]){nb_eager_value(b, h32), NB_NONE}, out), NB_ERR_DTYPE,
              "lstm cell: state h is float32 but the input is float64");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_cell(b, &none, v2, NULL, out), NB_ERR_ARG, "make them with nb_rnn_params_new");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_params_new(&p, b, NB_RNN_GRU, UI, 0, &(nb_rnn_opts){.dtype = NB_F64}), NB_ERR_ARG,
              "gru: input size 4 and hidden size 0 must both be at least 1");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_params_new(&p, b, NB_RNN_GRU, UI, 3, &(nb_rnn_opts){.dtype = NB_I64}), NB_ERR_DTYPE,
              "gru: parameters must be float");
    nb_builder_clear_error(b);
    CHECK_ERR(nb_rnn_params_new(&p, b, (nb_rnn_kind)7, UI, 3, &(nb_rnn_opts){.dtype = NB_F64}), NB_ERR_ARG,
              "unknown kind 7");
    nb_builder_clear_error(b);

    /* The layers: NB_NONE and the error kept in the builder. */
    CHECK(nb_is_none(nb_layer_rnn(b, nb_eager_value(b, xi), NB_NONE, 4, NULL, NULL)));
    CHECK_ERR(nb_builder_status(b), NB_ERR_DTYPE, "rnn: input is int64; it takes float32 or float64");
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_layer_gru(b, v2, NB_NONE, 4, NULL, NULL)));
    CHECK_ERR(nb_builder_status(b), NB_ERR_SHAPE, "gru: input has shape [3, 4]; it must be time-major [T, B, I]");
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_layer_lstm_cell(b, NB_NONE, (nb_value[]){NB_NONE, NB_NONE}, 4, NULL, NULL)));
    CHECK_ERR(nb_builder_status(b), NB_ERR_ARG, "lstm: input 0 is NB_NONE");
    /* A builder that failed does nothing more. */
    CHECK(nb_is_none(nb_layer_rnn_cell(b, v2, NB_NONE, 4, NULL)));
    CHECK_ERR(nb_builder_status(b), NB_ERR_ARG, "lstm: input 0 is NB_NONE");
    nb_builder_clear_error(b);
    release_all(x2, x3, h5, hb, xi, h32, NULL);
    nb_builder_free(b);

    /* In a program: vars named, and a layer name used twice. */
    model m;
    model_init(&m);
    nb_value xs = nb_data(m.b, "seq_in", NB_F32, 3, S(-1, -1, 8));
    CHECK(nb_is_none(nb_layer_rnn_cell(m.b, xs, NB_NONE, 4, NULL)));
    CHECK_ERR(nb_builder_status(m.b), NB_ERR_SHAPE, "rnn cell: input seq_in has shape [-1, -1, 8]; it must be [B, I]");
    nb_builder_clear_error(m.b);
    nb_value x1 = nb_data(m.b, "step_in", NB_F32, 2, S(-1, 8));
    nb_layer_rnn_cell(m.b, x1, NB_NONE, 4, &(nb_rnn_opts){.name = "enc"});
    CHECK_OK(nb_builder_status(m.b));
    nb_layer_rnn_cell(m.b, x1, NB_NONE, 4, &(nb_rnn_opts){.name = "enc"});
    CHECK_ERR(nb_builder_status(m.b), NB_ERR_ARG, "parameter enc.w_0: a var of that name already exists");
    model_free(&m);
}

/* lstm_cell's kernels against the same gates written with primitive ops:
 * both dtypes, an odd H (vector tails), rows split over the team, and the
 * errors for shapes that do not match. */
static void test_lstm_cell_op_matches_primitives(void)
{
    for (int d = 0; d < 2; d++) {
        nb_dtype dt = d ? NB_F64 : NB_F32;
        const int64_t rows = 300, h = 37;
        nb_builder *b;
        REQUIRE_OK(nb_builder_new_eager(&b));
        nb_tensor *gt, *ct;
        REQUIRE_OK(nb_tensor_new(&gt, dt, 2, S(rows, 4 * h)));
        REQUIRE_OK(nb_tensor_new(&ct, dt, 2, S(rows, h)));
        for (int64_t i = 0; i < rows * 4 * h; i++) nb_tensor_set(gt, i, 4 * sin(0.7 * (double)i));
        for (int64_t i = 0; i < rows * h; i++) nb_tensor_set(ct, i, 2 * cos(0.3 * (double)i));
        nb_value gates = nb_eager_value(b, gt), c = nb_eager_value(b, ct), c1;
        nb_value h1 = nb_lstm_cell(b, gates, c, &c1);
        nb_value g[4];
        REQUIRE_OK(nb_split(b, gates, 1, 4, g));
        nb_value want_c =
            nb_add(b, nb_mul(b, nb_sigmoid(b, g[1]), c), nb_mul(b, nb_sigmoid(b, g[0]), nb_tanh(b, g[2])));
        nb_value want_h = nb_mul(b, nb_sigmoid(b, g[3]), nb_tanh(b, want_c));
        REQUIRE_OK(nb_builder_status(b));
        double tol = d ? 1e-14 : 2e-6, worst = 0;
        const nb_tensor *got[2] = {nb_eager_tensor(h1), nb_eager_tensor(c1)},
                        *want[2] = {nb_eager_tensor(want_h), nb_eager_tensor(want_c)};
        for (int k = 0; k < 2; k++) {
            CHECK(nb_shape_equal(got[k]->ndim, got[k]->shape, 2, S(rows, h)));
            for (int64_t i = 0; i < rows * h; i++) {
                double e = fabs(nb_tensor_get(got[k], i) - nb_tensor_get(want[k], i));
                if (e > worst) worst = e;
            }
        }
        if (!(worst <= tol)) fprintf(stderr, "  %s: lstm_cell differs by %g\n", nb_dtype_name(dt), worst);
        CHECK(worst <= tol);
        nb_tensor *bad;
        REQUIRE_OK(nb_tensor_new(&bad, dt, 2, S(rows, h + 1)));
        nb_value out[2];
        CHECK_ERR(nb_emit(b, "lstm_cell", NB_VALUES(gates, nb_eager_value(b, bad)), NB_NO_ATTRS, 2, out), NB_ERR_SHAPE,
                  "lstm_cell: Gates [300, 148] and C [300, 38] must be [..., 4H] and [..., H]");
        release_all(gt, ct, bad, NULL);
        nb_builder_free(b);
    }
}

int main(void)
{
    RUN(test_lstm_cell_op_matches_primitives);
    RUN(test_eager_matches_pytorch);
    RUN(test_static_cells_match_pytorch);
    RUN(test_static_sequences_match_pytorch);
    RUN(test_gradients_match_finite_differences);
    RUN(test_sequence_equals_cell_unrolled);
    RUN(test_missing_initial_state_is_zeros);
    RUN(test_parameters_names_shapes_and_init);
    RUN(test_no_bias_is_zero_bias);
    RUN(test_eager_layers_find_their_parameters);
    RUN(test_errors_name_the_layer_and_shapes);
    return test_report();
}
