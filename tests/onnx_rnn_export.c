/* What tests/test_onnx_rnn_export.sh asks of nabla: its own recurrent
 * layers (nb_layer_lstm, nb_layer_gru, nb_layer_rnn) exported as ONNX's
 * LSTM, GRU and RNN (issue 42).
 *
 *   onnx_rnn_export DIR
 *
 * builds each case below as a static program (x [T, B, I] = [5, -1, 3],
 * hidden 4; B is 2 when it runs), runs it on pseudo-random inputs, and
 * writes DIR/<case>/<case>.onnx (nb_onnx_export), the inputs
 * DIR/<case>/in<i>.npy in the graph's order and nabla's outputs
 * DIR/<case>/nabla_out<j>.npy, as tests/onnx_ort.js reads them. Then it
 * imports each export again (nb_onnx_import, which unrolls ONNX's recurrent
 * ops into nabla's primitives) and runs it on the same inputs: the numbers
 * must agree. It also checks that a scan of a step of one's own is refused,
 * naming the op. Prints a line a case, and exits 1 on any failure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "nabla/nabla.h"
#include "layer_test_util.h"

#define STEPS 5
#define BATCH 2
#define INPUT 3
#define HIDDEN 4
#define MAX_OUT 4
#define REIMPORT_TOLERANCE 1e-5

typedef enum { ONE, BIDIR, STACK } shape_kind;

typedef struct rnn_case {
    const char *name;
    nb_rnn_kind kind;
    bool init, reverse, no_bias;
    shape_kind shape; /* one layer; a forward and a reverse layer concatenated; an LSTM under a GRU */
} rnn_case;

static const rnn_case cases[] = {
    {"lstm", NB_RNN_LSTM, false, false, false, ONE},
    {"lstm_init", NB_RNN_LSTM, true, false, false, ONE},
    {"lstm_reverse_init", NB_RNN_LSTM, true, true, false, ONE},
    {"lstm_no_bias", NB_RNN_LSTM, true, false, true, ONE},
    {"gru", NB_RNN_GRU, false, false, false, ONE},
    {"gru_init", NB_RNN_GRU, true, false, false, ONE},
    {"gru_reverse", NB_RNN_GRU, false, true, false, ONE},
    {"rnn_init", NB_RNN_TANH, true, false, false, ONE},
    {"rnn_reverse", NB_RNN_TANH, false, true, false, ONE},
    {"lstm_bidirectional", NB_RNN_LSTM, true, false, false, BIDIR},
    {"lstm_gru_stacked", NB_RNN_LSTM, true, false, false, STACK},
};

/* model_init's, which says through its checks what failed. */
static nb_status model_new(model *m)
{
    model_init(m);
    return m->ex ? NB_OK : NB_ERR_NOMEM;
}

/* Values in (-1, 1), different for every (k, i). */
static nb_tensor *pseudo(int k, int ndim, const int64_t *shape)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, NB_F32, ndim, shape)) return NULL;
    for (int64_t i = 0, n = nb_tensor_numel(t); i < n; i++) nb_tensor_set(t, i, sin(1.3 * (double)i + 2.1 * k + 0.4));
    return t;
}

/* The states of one layer: data vars h0 (c0) when the case gives them. */
static void states(nb_builder *b, const rnn_case *c, const char *prefix, int n, nb_value *init)
{
    init[0] = init[1] = NB_NONE;
    for (int k = 0; c->init && k < n; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s%s", prefix, k ? "c0" : "h0");
        init[k] = nb_data(b, name, NB_F32, 2, (int64_t[]){-1, HIDDEN});
    }
}

/* One layer of `kind` over x: every step's h; final[0..n) its last state. */
static nb_value layer(nb_builder *b, const rnn_case *c, nb_rnn_kind kind, nb_value x, const char *prefix, bool reverse,
                      nb_value *final)
{
    nb_value init[2];
    states(b, c, prefix, nb_rnn_state_count(kind), init);
    nb_rnn_opts o = {.reverse = reverse, .no_bias = c->no_bias};
    if (kind == NB_RNN_LSTM) return nb_layer_lstm(b, x, init, HIDDEN, &o, final);
    if (kind == NB_RNN_GRU) return nb_layer_gru(b, x, init[0], HIDDEN, &o, final);
    return nb_layer_rnn(b, x, init[0], HIDDEN, &o, final);
}

/* The case's program; its outputs' names in out[0..*n_out). */
static nb_status build(model *m, const rnn_case *c, const char **out, int *n_out)
{
    nb_builder *b = m->b;
    nb_value x = nb_data(b, "x", NB_F32, 3, (int64_t[]){STEPS, -1, INPUT}), fin[2] = {NB_NONE, NB_NONE}, ys;
    const int n = nb_rnn_state_count(c->kind);
    *n_out = 0;
    if (c->shape == ONE) {
        ys = layer(b, c, c->kind, x, "", c->reverse, fin);
    } else if (c->shape == BIDIR) {
        nb_value both[2] = {layer(b, c, c->kind, x, "fw_", false, fin), layer(b, c, c->kind, x, "bw_", true, fin)};
        ys = nb_concat(b, 2, both, 2);
    } else {
        nb_value low = layer(b, c, c->kind, x, "l0_", false, fin);
        ys = layer(b, c, NB_RNN_GRU, low, "l1_", true, fin);
    }
    nb_status st = nb_builder_status(b);
    if (st) return st;
    out[(*n_out)++] = nb_value_name(ys);
    for (int k = 0; k < (c->shape == STACK ? 1 : n); k++) out[(*n_out)++] = nb_value_name(fin[k]);
    nb_program_set_seed(m->startup, 42);
    return nb_executor_run(m->ex, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
}

/* The data vars of block 0, in the order they are declared (the graph's
 * inputs' order), each with a value. */
static int inputs(nb_program *p, nb_feed *feeds, int max)
{
    const nb_block *g = nb_program_global_block(p);
    int n = 0;
    for (int i = 0; i < g->n_vars && n < max; i++) {
        const nb_var *v = g->vars[i];
        if (!v->is_data) continue;
        int64_t shape[NB_MAX_DIMS];
        for (int d = 0; d < v->ndim; d++) shape[d] = v->shape[d] < 0 ? BATCH : v->shape[d];
        feeds[n] = (nb_feed){v->name, pseudo(n, v->ndim, shape)};
        n++;
    }
    return n;
}

static double max_diff(const nb_tensor *a, const nb_tensor *b)
{
    if (!a || !b || !nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return INFINITY;
    double worst = 0;
    for (int64_t i = 0, n = nb_tensor_numel(a); i < n; i++) {
        double d = fabs(nb_tensor_get(a, i) - nb_tensor_get(b, i));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* The export at `path` imported into a program and run on the feeds (named
 * as the graph's inputs, which keep the vars' names): the largest
 * difference from `want`. */
static double reimport(const char *path, int n_feeds, const nb_feed *feeds, int n_out, nb_tensor *const *want)
{
    model m;
    nb_value outs[MAX_OUT];
    const char *names[MAX_OUT];
    nb_tensor *got[MAX_OUT] = {0};
    int n = 0;
    double worst = INFINITY;
    if (model_new(&m) || nb_onnx_import(path, m.b, NB_NO_VALUES, MAX_OUT, outs, &n) || n != n_out ||
        nb_executor_run(m.ex, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL)) {
        fprintf(stderr, "  re-import of %s: %s (%d outputs)\n", path, nb_last_error(), n);
        goto done;
    }
    for (int j = 0; j < n; j++) names[j] = nb_value_name(outs[j]);
    if (nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(n_feeds, feeds), NB_NAMES_N(n, names), got)) {
        fprintf(stderr, "  re-imported %s: %s\n", path, nb_last_error());
        goto done;
    }
    worst = 0;
    for (int j = 0; j < n; j++) worst = fmax(worst, max_diff(got[j], want[j]));
done:
    for (int j = 0; j < n_out; j++) nb_tensor_release(got[j]);
    model_free(&m);
    return worst;
}

static bool save(const char *dir, const char *what, int i, nb_tensor *t)
{
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/%s%d.npy", dir, what, i);
    if (!nb_npy_save(path, t)) return true;
    fprintf(stderr, "  %s: %s\n", path, nb_last_error());
    return false;
}

static bool run_case(const char *root, const rnn_case *c)
{
    model m;
    const char *out[MAX_OUT];
    nb_feed feeds[8] = {{0}};
    nb_tensor *got[MAX_OUT] = {0};
    int n_out = 0, n_feeds = 0;
    char dir[4096], path[4200];
    bool ok = false;
    snprintf(dir, sizeof dir, "%.4000s/%s", root, c->name);
    snprintf(path, sizeof path, "%s/%s.onnx", dir, c->name);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "  %s: cannot make the folder\n", dir);
        return false;
    }
    if (model_new(&m) || build(&m, c, out, &n_out)) {
        fprintf(stderr, "  %s: %s\n", c->name, nb_last_error());
        goto done;
    }
    n_feeds = inputs(m.main, feeds, 8);
    if (nb_executor_run(m.ex, m.main, m.scope, NB_FEEDS_N(n_feeds, feeds), NB_NAMES_N(n_out, out), got) ||
        nb_onnx_export(m.main, m.scope, NB_NAMES_N(n_out, out), path)) {
        fprintf(stderr, "  %s: %s\n", c->name, nb_last_error());
        goto done;
    }
    ok = true;
    for (int i = 0; i < n_feeds && ok; i++) ok = save(dir, "in", i, feeds[i].tensor);
    for (int j = 0; j < n_out && ok; j++) ok = save(dir, "nabla_out", j, got[j]);
    double d = ok ? reimport(path, n_feeds, feeds, n_out, got) : INFINITY;
    ok = ok && d <= REIMPORT_TOLERANCE;
    printf("%-20s exported (%d inputs, %d outputs); re-imported into nabla: max |diff| %.2g%s\n", c->name, n_feeds,
           n_out, d, ok ? "" : "  FAILED");
done:
    for (int i = 0; i < n_feeds; i++) nb_tensor_release(feeds[i].tensor);
    for (int j = 0; j < n_out; j++) nb_tensor_release(got[j]);
    model_free(&m);
    return ok;
}

/* ---- what is refused ----------------------------------------------------------- */

/* A running sum (x_t W when ctx holds W): a scan ONNX has no op for. */
static nb_status sum_step(nb_builder *b, const nb_value *carry, const nb_value *x_t, nb_value *next, nb_value *y_t,
                          void *ctx)
{
    nb_value x = ctx ? nb_matmul(b, x_t[0], *(const nb_value *)ctx, 0) : x_t[0];
    next[0] = y_t[0] = nb_add(b, carry[0], x);
    return nb_builder_status(b);
}

/* Whether exporting fetch `name` of m fails NB_ERR_UNSUPPORTED with a
 * message holding each of the needles. */
static bool refused(model *m, const char *what, nb_value fetch, const char *root, int n, const char *const *needles)
{
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/refused.onnx", root);
    nb_status st = nb_onnx_export(m->main, m->scope, NB_NAMES(nb_value_name(fetch)), path);
    const char *msg = st ? nb_last_error() : "(exported)";
    bool ok = st == NB_ERR_UNSUPPORTED;
    for (int i = 0; i < n && ok; i++) ok = strstr(msg, needles[i]) != NULL;
    printf("%-20s refused: %s%s\n", what, msg, ok ? "" : "  FAILED");
    return ok;
}

static bool refusals(model *m, const char *root)
{
    nb_builder *b = m->b;
    nb_value x = nb_data(b, "x", NB_F32, 3, (int64_t[]){STEPS, BATCH, HIDDEN}),
             h0 = nb_data(b, "h0", NB_F32, 2, (int64_t[]){BATCH, HIDDEN});
    nb_value y = NB_NONE, fin = NB_NONE, w = nb_param(b, "w", NB_F32, 2, (int64_t[]){HIDDEN, HIDDEN}, nb_init_zeros());
    if (nb_scan(b, sum_step, NULL,
                &(nb_scan_io){.init = NB_VALUES(h0), .xs = NB_VALUES(x), .n_ys = 1, .ys = &y, .final = &fin}))
        return false;
    bool ok = refused(m, "own_scan", y, root, 3, (const char *[]){"recurrent", "nb_scan", "nb_layer_lstm"});
    /* A step that says it is an LSTM but carries one state is none. */
    nb_scan_form form = {"lstm", NB_VALUES(w, w, NB_NONE, NB_NONE)};
    if (nb_scan_cell(b, sum_step, &w,
                     &(nb_scan_io){.init = NB_VALUES(h0), .xs = NB_VALUES(x), .n_ys = 1, .ys = &y, .final = &fin},
                     &form))
        return false;
    ok &= refused(m, "false_lstm_form", y, root, 2, (const char *[]){"recurrent", "an lstm layer carries 2"});
    /* The form's weights must be values the step reads. */
    nb_status st = nb_scan_cell(
        b, sum_step, NULL, &(nb_scan_io){.init = NB_VALUES(h0), .xs = NB_VALUES(x), .n_ys = 1, .ys = &y, .final = &fin},
        &form);
    bool named = st == NB_ERR_ARG && strstr(nb_last_error(), "weight 0 'w'");
    printf("%-20s refused: %s%s\n", "unread_weights", st ? nb_last_error() : "(accepted)", named ? "" : "  FAILED");
    return ok && named;
}

static bool check_refusals(const char *root)
{
    model m;
    bool ok = !model_new(&m) && refusals(&m, root);
    if (!ok) fprintf(stderr, "  refusals: %s\n", nb_last_error());
    model_free(&m);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: onnx_rnn_export DIR\n"), 2;
    if (!nb_onnx_available()) return printf("skipped: this build has no ONNX support\n"), 0;
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) failed += !run_case(argv[1], &cases[i]);
    failed += !check_refusals(argv[1]);
    return failed ? 1 : 0;
}
