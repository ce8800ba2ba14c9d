/* Gradient rules of the conv and norm families beyond what `nabla
 * gradcheck` covers: programs whose shapes are unknown (-1) when the rules
 * are built (a batch dim, the image size) give the gradients that the same
 * program with known shapes gives, in float64 and in float32; the rules ask
 * the fused grad ops for no more than they need; the statistics outputs of
 * the norms carry no gradient; and max pooling's second order needs the
 * pooled size at build time, or says so.
 *
 * Gradients are seeded through nb_gradients' target_grads, so that these
 * tests need no rules but this family's. */
#include <stdlib.h>
#include "test.h"
#include "grad_compare.h"
#include "nabla/autodiff.h"
#include "nabla/ops.h"

#define MAX_IN 5

typedef struct spec {
    const char *name, *op;
    int n_in;
    int ndim[MAX_IN];                   /* -1: an absent optional input */
    int64_t shape[MAX_IN][NB_MAX_DIMS]; /* the shapes fed */
    int64_t build[MAX_IN][NB_MAX_DIMS]; /* the shapes declared: -1 where unknown */
    double lo[MAX_IN], hi[MAX_IN];      /* input ranges; both 0: [-1, 1] */
    unsigned no_grad;                   /* bit k: input k takes no gradient */
    unsigned targets;                   /* bit k: output k is seeded (0: output 0 only) */
    int n_attrs;
    nb_attr attrs[6];
} spec;

#define D(...) {__VA_ARGS__}
#define ATTRS(...) .n_attrs = (int)(sizeof((nb_attr[]){__VA_ARGS__}) / sizeof(nb_attr)), .attrs = {__VA_ARGS__}
#define BN_IN(xn, xs, xb, c)                                                                      \
    .n_in = 5, .ndim = {xn, 1, 1, 1, 1}, .shape = {xs, D(c), D(c), D(c), D(c)},                  \
    .build = {xb, D(c), D(c), D(c), D(c)}, .lo = {0, 0.5, 0, 0, 0.5}, .hi = {0, 1.5, 0, 0, 2}, \
    .no_grad = (1u << 3) | (1u << 4)

/* Attributes as constant initialisers (NB_ATTR_* make compound literals). */
#define A_INT(nm, v) {(nm), {.type = NB_ATTR_INT, .i = (v)}}
#define A_BOOL(nm, v) {(nm), {.type = NB_ATTR_BOOL, .b = (v)}}
#define A_STR(nm, v) {(nm), {.type = NB_ATTR_STRING, .s = (v)}}
#define A_INTS(nm, ...) {(nm), {.type = NB_ATTR_INTS, .n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                .ints = (const int64_t[]){__VA_ARGS__}}}

static const spec specs[] = {
    {"conv2d [-1, 2, 5, 5], strides 2, paddings 1, bias", "conv2d", .n_in = 3, .ndim = {4, 4, 1},
     .shape = {D(2, 2, 5, 5), D(3, 2, 3, 3), D(3)}, .build = {D(-1, 2, 5, 5), D(3, 2, 3, 3), D(3)},
     ATTRS(A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1))},
    {"conv2d [-1, 4, -1, -1], groups 2, dilations 2", "conv2d", .n_in = 2, .ndim = {4, 4},
     .shape = {D(2, 4, 6, 5), D(4, 2, 2, 2)}, .build = {D(-1, 4, -1, -1), D(4, 2, 2, 2)},
     ATTRS(A_INT("groups", 2), A_INTS("dilations", 2, 2))},
    {"conv2d_grad [-1, 2, 4, 4] (second order of conv2d)", "conv2d_grad", .n_in = 3, .ndim = {4, 4, 4},
     .shape = {D(2, 2, 4, 4), D(3, 2, 3, 3), D(2, 3, 2, 2)}, .build = {D(-1, 2, 4, 4), D(3, 2, 3, 3), D(-1, 3, 2, 2)},
     .targets = 7, ATTRS(A_INTS("paddings", 0, 1, 1, 0), A_INTS("strides", 2, 2))},
    {"pool2d max [-1, 2, -1, -1], 3x3, strides 2, paddings 1", "pool2d", .n_in = 1, .ndim = {4},
     .shape = {D(2, 2, 5, 5)}, .build = {D(-1, 2, -1, -1)},
     ATTRS(A_STR("pooling_type", "max"), A_INTS("ksize", 3, 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1))},
    {"pool2d avg [-1, 2, 5, 5], ceil_mode, not exclusive", "pool2d", .n_in = 1, .ndim = {4}, .shape = {D(2, 2, 5, 5)},
     .build = {D(-1, 2, 5, 5)},
     ATTRS(A_STR("pooling_type", "avg"), A_INTS("ksize", 2, 2), A_INTS("strides", 2, 2), A_BOOL("ceil_mode", true),
           A_BOOL("exclusive", false))},
    {"pool2d_grad max [-1, 2, 5, 5], 3x3 overlapping (second order of pool2d)", "pool2d_grad", .n_in = 3,
     .ndim = {4, 4, 4}, .shape = {D(2, 2, 5, 5), D(2, 2, 3, 3), D(2, 2, 3, 3)},
     .build = {D(-1, 2, 5, 5), D(-1, 2, 3, 3), D(-1, 2, 3, 3)},
     ATTRS(A_STR("pooling_type", "max"), A_INTS("ksize", 3, 3), A_INTS("strides", 2, 2), A_INTS("paddings", 1, 1))},
    {"pool2d_grad max global [-1, 2, -1, -1]", "pool2d_grad", .n_in = 3, .ndim = {4, 4, 4},
     .shape = {D(2, 2, 3, 4), D(2, 2, 1, 1), D(2, 2, 1, 1)},
     .build = {D(-1, 2, -1, -1), D(-1, 2, 1, 1), D(-1, 2, 1, 1)},
     ATTRS(A_STR("pooling_type", "max"), A_INTS("ksize", 1, 1), A_BOOL("global_pooling", true))},
    {"pool2d_grad avg [-1, 2, -1, -1]", "pool2d_grad", .n_in = 3, .ndim = {4, 4, 4},
     .shape = {D(2, 2, 4, 4), D(2, 2, 2, 2), D(2, 2, 2, 2)},
     .build = {D(-1, 2, -1, -1), D(-1, 2, -1, -1), D(-1, 2, -1, -1)},
     ATTRS(A_STR("pooling_type", "avg"), A_INTS("ksize", 2, 2), A_INTS("strides", 2, 2))},
    {"batch_norm train [-1, 3, 2, -1]", "batch_norm", BN_IN(4, D(2, 3, 2, 2), D(-1, 3, 2, -1), 3)},
    {"batch_norm train [-1, 3]", "batch_norm", BN_IN(2, D(4, 3), D(-1, 3), 3)},
    {"batch_norm is_test [-1, 3, 2, 2]", "batch_norm", BN_IN(4, D(2, 3, 2, 2), D(-1, 3, 2, 2), 3),
     ATTRS(A_BOOL("is_test", true))},
    {"layer_norm [-1, 3, 4], axis 1, Scale and Bias [3, 4]", "layer_norm", .n_in = 3, .ndim = {3, 2, 2},
     .shape = {D(2, 3, 4), D(3, 4), D(3, 4)}, .build = {D(-1, 3, 4), D(3, 4), D(3, 4)},
     ATTRS(A_INT("begin_norm_axis", 1))},
    {"layer_norm [-1, -1, 4], axis -1, Bias only", "layer_norm", .n_in = 3, .ndim = {3, -1, 1},
     .shape = {D(2, 3, 4), D(0), D(4)}, .build = {D(-1, -1, 4), D(0), D(4)}, ATTRS(A_INT("begin_norm_axis", -1))},
    {"layer_norm [-1, 2, 3], axis 1, Bias only as [2, 3]", "layer_norm", .n_in = 3, .ndim = {3, -1, 2},
     .shape = {D(2, 2, 3), D(0), D(2, 3)}, .build = {D(-1, 2, 3), D(0), D(2, 3)}, ATTRS(A_INT("begin_norm_axis", 1))},
};

static unsigned targets_of(const spec *s) { return s->targets ? s->targets : 1u; }

/* Emits the spec's op with inputs declared as `shapes`; returns its outputs. */
static int emit_spec(nb_builder *b, const spec *s, bool dynamic, nb_dtype dt, nb_value *out)
{
    static const char *const names[MAX_IN] = {"x0", "x1", "x2", "x3", "x4"};
    nb_value in[MAX_IN];
    for (int k = 0; k < s->n_in; k++)
        in[k] = s->ndim[k] < 0 ? NB_NONE : nb_data(b, names[k], dt, s->ndim[k], dynamic ? s->build[k] : s->shape[k]);
    int n_out = nb_op_num_outputs(nb_op_find(s->op));
    nb_emit(b, s->op, NB_VALUES_N(s->n_in, in), NB_ATTRS_N(s->n_attrs, s->attrs), n_out, out);
    return n_out;
}

/* The gradients of sum_k <out_k, W_k> over the targeted outputs, for fixed
 * W_k, with the shapes declared as given (`dynamic`: with their -1s) in
 * dtype dt. grads[k] is NULL for an input without one. */
static nb_status gradients(const spec *s, bool dynamic, nb_dtype dt, nb_tensor **grads)
{
    static const char *const names[MAX_IN] = {"x0", "x1", "x2", "x3", "x4"};
    static const char *const wnames[NB_MAX_SLOTS] = {"w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"};
    nb_program *p = NULL, *q = NULL;
    nb_builder *b = NULL, *qb = NULL;
    nb_scope *scope = NULL;
    nb_prepared *pp = NULL;
    nb_backward_result r = {0};
    nb_tensor *feeds[MAX_IN + NB_MAX_SLOTS] = {0};
    const char *feed_names[MAX_IN + NB_MAX_SLOTS];
    int n_feed = 0;
    for (int k = 0; k < s->n_in; k++) grads[k] = NULL;
    nb_status st = nb_program_new(&p);
    if (!st) st = nb_builder_new_record(&b, p, NULL);
    if (!st) st = nb_program_new(&q);
    if (!st) st = nb_builder_new_record(&qb, q, NULL);
    if (!st) st = nb_scope_new(&scope, NULL);
    if (st) goto done;
    nb_value out[NB_MAX_SLOTS], known[NB_MAX_SLOTS];
    const int n_out = emit_spec(b, s, dynamic, dt, out);
    emit_spec(qb, s, false, dt, known); /* the run-time shapes of the outputs */
    if ((st = nb_builder_status(b)) || (st = nb_builder_status(qb))) goto done;
    const char *targets[NB_MAX_SLOTS], *target_grads[NB_MAX_SLOTS];
    int n_targets = 0;
    for (int k = 0; k < n_out; k++) {
        if (!(targets_of(s) >> k & 1)) continue;
        /* W_k: declared with the output's build-time shape, fed with its
         * run-time one. */
        nb_var_info oi = nb_value_info(b, out[k]), ki = nb_value_info(qb, known[k]);
        nb_data(b, wnames[k], dt, oi.ndim, oi.shape);
        targets[n_targets] = nb_value_name(out[k]);
        target_grads[n_targets++] = wnames[k];
        feed_names[s->n_in + k] = wnames[k];
        feeds[s->n_in + k] = gc_filled(dt, ki.ndim, ki.shape, 10 + k, 0, 0);
    }
    const char *wrt[MAX_IN];
    int n_wrt = 0, wrt_input[MAX_IN];
    for (int k = 0; k < s->n_in; k++)
        if (s->ndim[k] >= 0 && !(s->no_grad >> k & 1)) wrt_input[n_wrt] = k, wrt[n_wrt++] = names[k];
    if ((st = nb_gradients(p, NB_NAMES_N(n_targets, targets), NB_NAMES_N(n_wrt, wrt),
                           &(nb_gradients_opts){.target_grads = target_grads, .flags = NB_ALLOW_UNUSED}, &r)))
        goto done;
    nb_tensor *fv[MAX_IN + NB_MAX_SLOTS];
    for (int k = 0; k < s->n_in; k++) {
        if (s->ndim[k] < 0) continue;
        feeds[k] = gc_filled(dt, s->ndim[k], s->shape[k], k, s->lo[k], s->hi[k]);
        feed_names[k] = names[k];
    }
    for (int k = 0; k < s->n_in + n_out; k++)
        if (feeds[k]) fv[n_feed] = feeds[k], feed_names[n_feed++] = feed_names[k];
    const char *fetch[MAX_IN];
    int n_fetch = 0;
    for (int k = 0; k < n_wrt; k++)
        if (r.grads[k]) fetch[n_fetch++] = r.grads[k];
    nb_tensor *got[MAX_IN] = {0};
    if ((st = nb_prepare(&pp, p, 0, NB_NAMES_N(n_feed, feed_names), NB_NAMES_N(n_fetch, fetch)))) goto done;
    if ((st = nb_prepared_run(pp, scope, fv, got))) goto done;
    for (int k = 0, j = 0; k < n_wrt; k++)
        if (r.grads[k]) grads[wrt_input[k]] = got[j++];
done:
    for (int k = 0; k < MAX_IN + NB_MAX_SLOTS; k++) nb_tensor_release(feeds[k]);
    nb_prepared_free(pp);
    nb_backward_result_free(&r);
    nb_scope_free(scope);
    nb_builder_free(qb);
    nb_program_free(q);
    nb_builder_free(b);
    nb_program_free(p);
    return st;
}

static void test_unknown_dims_match_known(void)
{
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const spec *s = &specs[i];
        nb_tensor *ref[MAX_IN], *dyn[MAX_IN], *f32[MAX_IN];
        nb_status a = gradients(s, false, NB_F64, ref), b = gradients(s, true, NB_F64, dyn),
                  c = gradients(s, true, NB_F32, f32);
        if (a || b || c) fprintf(stderr, "  %s: %s\n", s->name, nb_last_error());
        CHECK_OK(a);
        CHECK_OK(b);
        CHECK_OK(c);
        int n_grads = 0;
        for (int k = 0; k < s->n_in; k++) {
            if (!a) n_grads += ref[k] != NULL;
            if (!a && !b) gc_check_same(s->name, k, ref[k], dyn[k], 1e-12, "unknown dims, float64");
            if (!a && !c) {
                gc_check_same(s->name, k, ref[k], f32[k], 1e-4, "unknown dims, float32");
                CHECK(!f32[k] || f32[k]->dtype == NB_F32);
            }
        }
        CHECK(a || n_grads > 0);
        for (int k = 0; k < s->n_in; k++) {
            if (!a) nb_tensor_release(ref[k]);
            if (!b) nb_tensor_release(dyn[k]);
            if (!c) nb_tensor_release(f32[k]);
        }
    }
}

/* Builds op(inputs) with the given shapes (ndim -1: absent), takes the
 * gradient of output `target` for the inputs in `wrt_mask`, and returns the
 * program (NULL on failure, then *st says why). */
static nb_program *backward_of(const char *op, int n_in, const int *ndim, const int64_t (*shape)[NB_MAX_DIMS],
                               int n_attrs, const nb_attr *attrs, int target, unsigned wrt_mask, nb_status *st)
{
    static const char *const names[MAX_IN] = {"x0", "x1", "x2", "x3", "x4"};
    nb_program *p;
    nb_builder *b;
    if ((*st = nb_program_new(&p))) return NULL;
    if ((*st = nb_builder_new_record(&b, p, NULL))) {
        nb_program_free(p);
        return NULL;
    }
    nb_value in[MAX_IN], out[NB_MAX_SLOTS];
    for (int k = 0; k < n_in; k++) in[k] = ndim[k] < 0 ? NB_NONE : nb_data(b, names[k], NB_F64, ndim[k], shape[k]);
    nb_emit(b, op, NB_VALUES_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), nb_op_num_outputs(nb_op_find(op)), out);
    const char *wrt[MAX_IN];
    int n_wrt = 0;
    for (int k = 0; k < n_in; k++)
        if (wrt_mask >> k & 1) wrt[n_wrt++] = names[k];
    nb_backward_result r;
    const char *t = nb_value_name(out[target]);
    if (!(*st = nb_builder_status(b)) &&
        !(*st = nb_gradients(p, NB_NAMES_N(1, &t), NB_NAMES_N(n_wrt, wrt),
                             &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r)))
        nb_backward_result_free(&r);
    nb_builder_free(b);
    if (*st) {
        nb_program_free(p);
        return NULL;
    }
    return p;
}

/* The backward op of `type` in p, and how many there are. */
static const nb_op *grad_op(nb_program *p, const char *type, int *count)
{
    const nb_op *found = NULL;
    *count = 0;
    if (!p) return NULL;
    nb_block *blk = nb_program_global_block(p);
    for (int i = 0; i < blk->n_ops; i++)
        if (blk->ops[i]->role == NB_ROLE_BACKWARD && !strcmp(blk->ops[i]->def->name, type)) {
            found = blk->ops[i];
            ++*count;
        }
    return found;
}

static void test_fused_ops_asked_for_what_is_needed(void)
{
    nb_status st;
    int n;
    const int64_t conv[MAX_IN][NB_MAX_DIMS] = {{-1, 2, 5, 5}, {3, 2, 3, 3}, {3}};
    /* Input alone: DInput only. Filter: DInput and DFilter (outputs come in
     * order). Bias: all three. */
    nb_program *p = backward_of("conv2d", 3, (int[]){4, 4, 1}, conv, 0, NULL, 0, 1u << 0, &st);
    CHECK_OK(st);
    const nb_op *op = grad_op(p, "conv2d_grad", &n);
    CHECK(n == 1 && op && nb_op_n_outputs(op) == 1);
    nb_program_free(p);
    p = backward_of("conv2d", 3, (int[]){4, 4, 1}, conv, 0, NULL, 0, 1u << 1, &st);
    op = grad_op(p, "conv2d_grad", &n);
    CHECK(n == 1 && op && nb_op_n_outputs(op) == 2);
    nb_program_free(p);
    p = backward_of("conv2d", 3, (int[]){4, 4, 1}, conv, 0, NULL, 0, 7, &st);
    op = grad_op(p, "conv2d_grad", &n);
    CHECK(n == 1 && op && nb_op_n_outputs(op) == 3);
    nb_program_free(p);
    /* Without Bias, no DBias. */
    p = backward_of("conv2d", 3, (int[]){4, 4, -1}, conv, 0, NULL, 0, 3, &st);
    op = grad_op(p, "conv2d_grad", &n);
    CHECK(n == 1 && op && nb_op_n_outputs(op) == 2);
    /* It carries every attribute of the forward op. */
    nb_program_free(p);
    nb_attr ca[] = {NB_ATTR_INTS("strides", 2, 1), NB_ATTR_INTS("paddings", 1, 0, 2, 1),
                    NB_ATTR_INTS("dilations", 1, 2), NB_ATTR_INT("groups", 1)};
    p = backward_of("conv2d", 2, (int[]){4, 4}, conv, 4, ca, 0, 3, &st);
    CHECK_OK(st);
    op = grad_op(p, "conv2d_grad", &n);
    if (op) {
        CHECK(nb_op_attr(op, "strides")->n == 2 && nb_op_attr(op, "strides")->ints[0] == 2);
        CHECK(nb_op_attr(op, "paddings")->n == 4 && nb_op_attr(op, "paddings")->ints[2] == 2);
        CHECK(nb_op_attr(op, "dilations")->ints[1] == 2);
    }
    nb_program_free(p);

    /* batch_norm: with global statistics the running Mean and Variance go in
     * too; in training the saved ones do. */
    const int64_t bn[MAX_IN][NB_MAX_DIMS] = {{-1, 3}, {3}, {3}, {3}, {3}};
    const int bnd[MAX_IN] = {2, 1, 1, 1, 1};
    nb_attr test_mode[] = {NB_ATTR_BOOL("is_test", true)}, global[] = {NB_ATTR_BOOL("use_global_stats", true)};
    p = backward_of("batch_norm", 5, bnd, bn, 1, test_mode, 0, 1u << 0, &st);
    CHECK_OK(st);
    op = grad_op(p, "batch_norm_grad", &n);
    CHECK(n == 1 && op && nb_op_n_inputs(op) == 7 && nb_op_n_outputs(op) == 1);
    nb_program_free(p);
    p = backward_of("batch_norm", 5, bnd, bn, 1, global, 0, 7, &st);
    op = grad_op(p, "batch_norm_grad", &n);
    CHECK(n == 1 && op && nb_op_n_inputs(op) == 7 && nb_op_n_outputs(op) == 3);
    CHECK(op && nb_op_attr(op, "use_global_stats")->b);
    nb_program_free(p);
    p = backward_of("batch_norm", 5, bnd, bn, 0, NULL, 0, 1u << 1, &st);
    op = grad_op(p, "batch_norm_grad", &n);
    CHECK(n == 1 && op && nb_op_n_inputs(op) == 5 && nb_op_n_outputs(op) == 2);
    nb_program_free(p);

    /* layer_norm without Scale: Bias as the normalised dims gets its flat
     * DBias reshaped; a flat one does not. */
    const int64_t ln[MAX_IN][NB_MAX_DIMS] = {{-1, 2, 3}, {0}, {2, 3}};
    nb_attr axis1[] = {NB_ATTR_INT("begin_norm_axis", 1)};
    p = backward_of("layer_norm", 3, (int[]){3, -1, 2}, ln, 1, axis1, 0, 5, &st);
    CHECK_OK(st);
    grad_op(p, "reshape", &n);
    CHECK(n == 1);
    nb_program_free(p);
    const int64_t lnf[MAX_IN][NB_MAX_DIMS] = {{-1, 2, 3}, {6}, {6}};
    p = backward_of("layer_norm", 3, (int[]){3, 1, 1}, lnf, 1, axis1, 0, 7, &st);
    CHECK_OK(st);
    grad_op(p, "reshape", &n);
    CHECK(n == 0);
    op = grad_op(p, "layer_norm_grad", &n);
    CHECK(n == 1 && op && nb_op_n_outputs(op) == 3);
    nb_program_free(p);
}

static void test_norm_statistics_carry_no_gradient(void)
{
    nb_status st;
    int n;
    /* A gradient that reaches only batch_norm's SavedMean (output 3) or
     * layer_norm's Variance (output 2) makes no gradient op. */
    const int64_t bn[MAX_IN][NB_MAX_DIMS] = {{4, 3}, {3}, {3}, {3}, {3}};
    nb_program *p = backward_of("batch_norm", 5, (int[]){2, 1, 1, 1, 1}, bn, 0, NULL, 3, 7, &st);
    CHECK_OK(st);
    grad_op(p, "batch_norm_grad", &n);
    CHECK(n == 0);
    nb_program_free(p);
    const int64_t ln[MAX_IN][NB_MAX_DIMS] = {{4, 3}, {3}, {3}};
    p = backward_of("layer_norm", 3, (int[]){2, 1, 1}, ln, 0, NULL, 2, 7, &st);
    CHECK_OK(st);
    grad_op(p, "layer_norm_grad", &n);
    CHECK(n == 0);
    nb_program_free(p);
}

static void test_max_pool_second_order_needs_sizes(void)
{
    /* pool2d_grad's rule for max pooling builds masks of the pooled grid:
     * with its size unknown at build time it says so; with it known (the
     * batch may stay unknown) it works. Average pooling needs neither. */
    nb_status st;
    int n;
    nb_attr mx[] = {NB_ATTR_STRING("pooling_type", "max"), NB_ATTR_INTS("ksize", 2, 2)};
    nb_attr avg[] = {NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 2, 2)};
    const int64_t unknown[MAX_IN][NB_MAX_DIMS] = {{-1, 2, -1, -1}, {-1, 2, -1, -1}, {-1, 2, -1, -1}};
    const int64_t known[MAX_IN][NB_MAX_DIMS] = {{-1, 2, 4, 4}, {-1, 2, 3, 3}, {-1, 2, 3, 3}};
    nb_program *p = backward_of("pool2d_grad", 3, (int[]){4, 4, 4}, unknown, 2, mx, 0, 1u << 2, &st);
    CHECK(!p);
    CHECK(st == NB_ERR_SHAPE && strstr(nb_last_error(), "pooled sizes at build time"));
    p = backward_of("pool2d_grad", 3, (int[]){4, 4, 4}, known, 2, mx, 0, 1u << 2, &st);
    CHECK_OK(st);
    /* ksize 2, strides 1: windows overlap, 2 x 2 classes of windows apart. */
    grad_op(p, "pool2d_grad", &n);
    CHECK(n == 4);
    nb_program_free(p);
    p = backward_of("pool2d_grad", 3, (int[]){4, 4, 4}, unknown, 2, avg, 0, 1u << 2, &st);
    CHECK_OK(st);
    grad_op(p, "pool2d", &n);
    CHECK(n == 1);
    nb_program_free(p);
    /* Global pooling: one window, summed whatever the image size. */
    nb_attr glob[] = {NB_ATTR_STRING("pooling_type", "max"), NB_ATTR_INTS("ksize", 1, 1),
                      NB_ATTR_BOOL("global_pooling", true)};
    const int64_t gshape[MAX_IN][NB_MAX_DIMS] = {{-1, 2, -1, -1}, {-1, 2, 1, 1}, {-1, 2, 1, 1}};
    p = backward_of("pool2d_grad", 3, (int[]){4, 4, 4}, gshape, 3, glob, 0, 1u << 2, &st);
    CHECK_OK(st);
    grad_op(p, "reduce_sum", &n);
    CHECK(n == 1);
    nb_program_free(p);
    /* X and Out only place the windows: asking for them alone emits nothing. */
    p = backward_of("pool2d_grad", 3, (int[]){4, 4, 4}, unknown, 2, mx, 0, 3, &st);
    CHECK_OK(st);
    grad_op(p, "pool2d_grad", &n);
    CHECK(n == 0);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_unknown_dims_match_known);
    RUN(test_fused_ops_asked_for_what_is_needed);
    RUN(test_norm_statistics_carry_no_gradient);
    RUN(test_max_pool_second_order_needs_sizes);
    return test_report();
}
