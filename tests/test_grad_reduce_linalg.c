/* Gradient rules of the reduce and linalg families beyond what `nabla
 * gradcheck` covers: programs whose shapes are unknown (-1) when the rules
 * are built (a batch dim, say) must give the gradients that the same
 * program with known shapes gives, in float64 and in float32; the rules
 * stay lean (no needless unsqueeze, sum_to or run-time count); and fc's
 * one shape a reshape cannot restore is a clear error. */
#include <stdlib.h>
#include "test.h"
#include "grad_compare.h"
#include "nabla/autodiff.h"
#include "nabla/ops.h"

#define MAX_IN 3

typedef struct spec {
    const char *name, *op;
    int n_in;
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][NB_MAX_DIMS]; /* the shapes fed */
    int64_t build[MAX_IN][NB_MAX_DIMS]; /* the shapes declared: -1 where unknown */
    int n_attrs;
    nb_attr attrs[4];
    double lo, hi;     /* input range; both 0: [-1, 1] */
    bool no_grad_last; /* the last input takes no gradient (sum_to's Like) */
} spec;

#define IN1(n0, s0, b0) .n_in = 1, .ndim = {n0}, .shape = {s0}, .build = {b0}
#define IN2(n0, s0, b0, n1, s1, b1) .n_in = 2, .ndim = {n0, n1}, .shape = {s0, s1}, .build = {b0, b1}
#define IN3(n0, s0, b0, n1, s1, b1, n2, s2, b2) \
    .n_in = 3, .ndim = {n0, n1, n2}, .shape = {s0, s1, s2}, .build = {b0, b1, b2}
#define D(...) {__VA_ARGS__}
#define AXES(...) .n_attrs = 1, .attrs = {NB_ATTR_INTS("axes", __VA_ARGS__)}
#define AXES_KEEP(...) .n_attrs = 2, .attrs = {NB_ATTR_INTS("axes", __VA_ARGS__), NB_ATTR_BOOL("keepdim", true)}
#define FC(ncd, act) .n_attrs = 2, .attrs = {NB_ATTR_INT("in_num_col_dims", ncd), NB_ATTR_STRING("activation", act)}

static const spec specs[] = {
    {"mean, all axes of [-1, 3]", "reduce_mean", IN1(2, D(4, 3), D(-1, 3))},
    {"mean, axis 0 of [-1, 3], keepdim", "reduce_mean", IN1(2, D(4, 3), D(-1, 3)), AXES_KEEP(0)},
    {"mean, axes 0,1 of [2, -1, -1]", "reduce_mean", IN1(3, D(2, 4, 3), D(2, -1, -1)), AXES(0, 1)},
    {"mean, known axis 1 of [-1, 3]", "reduce_mean", IN1(2, D(4, 3), D(-1, 3)), AXES(1)},
    {"mean, axes -1,0 of [-1, 3, -1]", "reduce_mean", IN1(3, D(2, 3, 4), D(-1, 3, -1)), AXES(-1, 0)},
    {"sum, axis -1 of [-1, -1]", "reduce_sum", IN1(2, D(4, 3), D(-1, -1)), AXES(-1)},
    {"max, axis 0 of [-1, 3]", "reduce_max", IN1(2, D(4, 3), D(-1, 3)), AXES(0)},
    {"min, axes 0,2 of [-1, 3, -1], keepdim", "reduce_min", IN1(3, D(2, 3, 4), D(-1, 3, -1)), AXES_KEEP(0, 2)},
    {"prod, axis 1 of [-1, 3]", "reduce_prod", IN1(2, D(4, 3), D(-1, 3)), AXES(1), .lo = 0.5, .hi = 1.5},
    {"logsumexp, axis 1 of [-1, -1, 4]", "logsumexp", IN1(3, D(2, 3, 4), D(-1, -1, 4)), AXES(1)},
    {"sum_to [-1, 3, 4] -> [3, 1]", "sum_to", IN2(3, D(2, 3, 4), D(-1, 3, 4), 2, D(3, 1), D(3, 1)),
     .no_grad_last = true},
    {"sum of two [-1, 3]", "sum", IN2(2, D(4, 3), D(-1, 3), 2, D(4, 3), D(-1, 3))},
    {"matmul [-1, 3, 4] x [4, 5]", "matmul", IN2(3, D(2, 3, 4), D(-1, 3, 4), 2, D(4, 5), D(4, 5))},
    {"matmul [-1, -1, 3, 4] x [-1, 4, 5] broadcast", "matmul",
     IN2(4, D(2, 1, 3, 4), D(-1, -1, 3, 4), 3, D(3, 4, 5), D(-1, 4, 5))},
    {"matmul [-1, 3, 4] x [4]", "matmul", IN2(3, D(2, 3, 4), D(-1, 3, 4), 1, D(4), D(4))},
    {"matmul [4] x [-1, 4, 5]", "matmul", IN2(1, D(4), D(4), 3, D(2, 4, 5), D(-1, 4, 5))},
    {"matmul [-1, 4, 3] x [-1, 5, 4], transposed, alpha", "matmul",
     IN2(3, D(2, 4, 3), D(-1, 4, 3), 3, D(2, 5, 4), D(-1, 5, 4)), .n_attrs = 3,
     .attrs = {NB_ATTR_BOOL("transpose_x", true), NB_ATTR_BOOL("transpose_y", true), NB_ATTR_FLOAT("alpha", 0.5)}},
    {"fc [-1, 3, 2] in_num_col_dims 1, relu", "fc", IN3(3, D(4, 3, 2), D(-1, 3, 2), 2, D(6, 5), D(6, 5), 1, D(5), D(5)),
     FC(1, "relu")},
    {"fc [-1, -1, 4] in_num_col_dims 2, sigmoid, bias [1, 5]", "fc",
     IN3(3, D(2, 3, 4), D(-1, -1, 4), 2, D(4, 5), D(4, 5), 2, D(1, 5), D(1, 5)), FC(2, "sigmoid")},
    {"fc [-1, 3, 2, 2] in_num_col_dims 2, tanh", "fc", IN2(4, D(2, 3, 2, 2), D(-1, 3, 2, 2), 2, D(4, 5), D(4, 5)),
     FC(2, "tanh")},
    {"fc [-1, 3, -1] in_num_col_dims 1", "fc", IN3(3, D(2, 3, 4), D(-1, 3, -1), 2, D(12, 5), D(12, 5), 1, D(5), D(5)),
     FC(1, "")},
    {"fc [-1, -1, 2, 2] in_num_col_dims 2, W [-1, 5]", "fc",
     IN2(4, D(2, 3, 2, 2), D(-1, -1, 2, 2), 2, D(4, 5), D(-1, 5)), FC(2, "")},
};

/* The gradients of <op(inputs), W> for a fixed W, with the shapes declared
 * as given (`dynamic`: with their -1s) in dtype dt. grads[k] is NULL for an
 * input without one. */
static nb_status gradients(const spec *s, bool dynamic, nb_dtype dt, nb_tensor **grads)
{
    nb_program *p = NULL;
    nb_builder *b = NULL;
    nb_scope *scope = NULL;
    nb_prepared *pp = NULL;
    nb_backward_result r = {0};
    nb_tensor *feeds[MAX_IN + 1] = {0};
    const char *names[MAX_IN + 1] = {"x0", "x1", "x2", "w"};
    for (int k = 0; k < s->n_in; k++) grads[k] = NULL;
    nb_status st = nb_program_new(&p);
    if (!st) st = nb_builder_new_record(&b, p, NULL);
    if (!st) st = nb_scope_new(&scope, NULL);
    if (st) goto done;
    nb_value in[MAX_IN], out;
    for (int k = 0; k < s->n_in; k++) in[k] = nb_data(b, names[k], dt, s->ndim[k], dynamic ? s->build[k] : s->shape[k]);
    nb_emit(b, s->op, NB_VALUES_N(s->n_in, in), NB_ATTRS_N(s->n_attrs, s->attrs), 1, &out);
    if ((st = nb_builder_status(b))) goto done;
    /* W: declared with Out's build-time shape, fed with its run-time one
     * (that of the program with known shapes). */
    nb_var_info oi = nb_value_info(b, out);
    nb_var_info known = oi;
    if (dynamic) {
        nb_program *q;
        nb_builder *qb;
        if ((st = nb_program_new(&q))) goto done;
        if (!(st = nb_builder_new_record(&qb, q, NULL))) {
            nb_value qin[MAX_IN], qout;
            for (int k = 0; k < s->n_in; k++) qin[k] = nb_data(qb, names[k], dt, s->ndim[k], s->shape[k]);
            nb_emit(qb, s->op, NB_VALUES_N(s->n_in, qin), NB_ATTRS_N(s->n_attrs, s->attrs), 1, &qout);
            if (!(st = nb_builder_status(qb))) known = nb_value_info(qb, qout);
            nb_builder_free(qb);
        }
        nb_program_free(q);
        if (st) goto done;
    }
    nb_data(b, "w", dt, oi.ndim, oi.shape);
    const char *target = nb_value_name(out), *target_grad = "w";
    const char *wrt[MAX_IN];
    int n_wrt = s->n_in - (s->no_grad_last ? 1 : 0);
    for (int k = 0; k < n_wrt; k++) wrt[k] = names[k];
    if ((st = nb_gradients(p, NB_NAMES_N(1, &target), NB_NAMES_N(n_wrt, wrt),
                           &(nb_gradients_opts){.target_grads = &target_grad, .flags = NB_ALLOW_UNUSED}, &r)))
        goto done;
    for (int k = 0; k < s->n_in; k++) feeds[k] = gc_filled(dt, s->ndim[k], s->shape[k], k, s->lo, s->hi);
    feeds[s->n_in] = gc_filled(dt, known.ndim, known.shape, 9, 0, 0);
    names[s->n_in] = "w";
    const char *fetch[MAX_IN];
    int n_fetch = 0;
    for (int k = 0; k < n_wrt; k++)
        if (r.grads[k]) fetch[n_fetch++] = r.grads[k];
    nb_tensor *got[MAX_IN] = {0};
    if ((st = nb_prepare(&pp, p, 0, NB_NAMES_N(s->n_in + 1, names), NB_NAMES_N(n_fetch, fetch)))) goto done;
    if ((st = nb_prepared_run(pp, scope, feeds, got))) goto done;
    for (int k = 0, j = 0; k < n_wrt; k++)
        if (r.grads[k]) grads[k] = got[j++];
done:
    for (int k = 0; k <= s->n_in; k++) nb_tensor_release(feeds[k]);
    nb_prepared_free(pp);
    nb_backward_result_free(&r);
    nb_scope_free(scope);
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
        for (int k = 0; k < s->n_in; k++) {
            if (!a && !b) gc_check_same(s->name, k, ref[k], dyn[k], 1e-12, "unknown dims, float64");
            if (!a && !c) {
                gc_check_same(s->name, k, ref[k], f32[k], 1e-4, "unknown dims, float32");
                CHECK(!f32[k] || f32[k]->dtype == NB_F32);
            }
        }
        for (int k = 0; k < s->n_in; k++) {
            if (!a) nb_tensor_release(ref[k]);
            if (!b) nb_tensor_release(dyn[k]);
            if (!c) nb_tensor_release(f32[k]);
        }
    }
}

/* How many ops of `type` the rule of a lone forward op emits. */
static int rule_ops(const char *op, int n_in, const int *ndim, const int64_t (*shape)[NB_MAX_DIMS], int n_attrs,
                    const nb_attr *attrs, const char *type)
{
    nb_program *p;
    nb_builder *b;
    if (nb_program_new(&p)) return -1;
    if (nb_builder_new_record(&b, p, NULL)) {
        nb_program_free(p);
        return -1;
    }
    const char *names[MAX_IN] = {"x0", "x1", "x2"};
    nb_value in[MAX_IN], out;
    for (int k = 0; k < n_in; k++) in[k] = nb_data(b, names[k], NB_F64, ndim[k], shape[k]);
    nb_emit(b, op, NB_VALUES_N(n_in, in), NB_ATTRS_N(n_attrs, attrs), 1, &out);
    int n = -1;
    nb_backward_result r;
    const char *target = nb_value_name(out);
    if (!nb_builder_status(b) &&
        !nb_gradients(p, NB_NAMES_N(1, &target), NB_NAMES_N(n_in, names),
                      &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r)) {
        nb_block *blk = nb_program_global_block(p);
        n = 0;
        for (int i = 1; i < blk->n_ops; i++)
            n += blk->ops[i]->role == NB_ROLE_BACKWARD && !strcmp(blk->ops[i]->def->name, type);
        nb_backward_result_free(&r);
    }
    nb_builder_free(b);
    nb_program_free(p);
    return n;
}

static void test_rules_stay_lean(void)
{
    /* The bias gradient: reducing the leading axis needs no unsqueeze. */
    const int64_t bn[MAX_IN][NB_MAX_DIMS] = {{-1, 8}};
    nb_attr ax0[] = {NB_ATTR_INTS("axes", 0)};
    CHECK(rule_ops("reduce_sum", 1, (int[]){2}, bn, 1, ax0, "unsqueeze") == 0);
    CHECK(rule_ops("reduce_sum", 1, (int[]){2}, bn, 1, ax0, "expand_as") == 1);
    /* A middle axis does need one. */
    const int64_t bcd[MAX_IN][NB_MAX_DIMS] = {{2, 3, 4}};
    nb_attr ax1[] = {NB_ATTR_INTS("axes", 1)};
    CHECK(rule_ops("reduce_sum", 1, (int[]){3}, bcd, 1, ax1, "unsqueeze") == 1);
    /* The mean over known dims is a constant factor; over an unknown one it
     * counts at run time. */
    nb_attr ax_last[] = {NB_ATTR_INTS("axes", -1)};
    CHECK(rule_ops("reduce_mean", 1, (int[]){2}, bn, 1, ax_last, "ones_like") == 0);
    CHECK(rule_ops("reduce_mean", 1, (int[]){2}, bn, 1, ax_last, "scale") == 1);
    CHECK(rule_ops("reduce_mean", 1, (int[]){2}, bn, 0, NULL, "ones_like") == 1);
    CHECK(rule_ops("reduce_mean", 1, (int[]){2}, bn, 0, NULL, "slice") == 1);
    /* A batch times a shared matrix: no sum_to, one matmul per gradient. */
    const int64_t mm[MAX_IN][NB_MAX_DIMS] = {{-1, 3, 4}, {4, 5}};
    CHECK(rule_ops("matmul", 2, (int[]){3, 2}, mm, 0, NULL, "sum_to") == 0);
    CHECK(rule_ops("matmul", 2, (int[]){3, 2}, mm, 0, NULL, "matmul") == 2);
    /* Broadcast batches do need them. */
    const int64_t mb[MAX_IN][NB_MAX_DIMS] = {{2, 1, 3, 4}, {3, 4, 5}};
    CHECK(rule_ops("matmul", 2, (int[]){4, 3}, mb, 0, NULL, "sum_to") == 2);
    /* fc on a 2-D input: two matmuls and a reduce_sum, nothing reshaped. */
    const int64_t fc[MAX_IN][NB_MAX_DIMS] = {{-1, 4}, {4, 5}, {5}};
    CHECK(rule_ops("fc", 3, (int[]){2, 2, 1}, fc, 0, NULL, "matmul") == 2);
    CHECK(rule_ops("fc", 3, (int[]){2, 2, 1}, fc, 0, NULL, "reshape") == 0);
    CHECK(rule_ops("fc", 3, (int[]){2, 2, 1}, fc, 0, NULL, "flatten") == 0);
}

static void test_fc_unrestorable_shape(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    CHECK_OK(nb_builder_new_record(&b, p, NULL));
    nb_value in = nb_data(b, "in", NB_F64, 3, S(-1, -1, -1));
    nb_value w = nb_data(b, "w", NB_F64, 2, S(12, 5));
    nb_value out = nb_fc(b, in, w, NB_NONE, 1);
    CHECK_OK(nb_builder_status(b));
    nb_backward_result r;
    const char *target = nb_value_name(out), *wrt[] = {"in", "w"};
    CHECK_ERR(
        nb_gradients(p, NB_NAMES_N(1, &target), NB_NAMES_N(2, wrt), &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r),
        NB_ERR_UNSUPPORTED, "more than one unknown dim");
    /* W alone is fine. */
    CHECK_OK(nb_gradients(p, NB_NAMES_N(1, &target), NB_NAMES_N(1, wrt + 1),
                          &(nb_gradients_opts){.flags = NB_ALLOW_UNUSED}, &r));
    nb_backward_result_free(&r);
    nb_builder_free(b);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_unknown_dims_match_known);
    RUN(test_rules_stay_lean);
    RUN(test_fc_unrestorable_shape);
    return test_report();
}
