/* vmap of loops and branches, against the examples one by one. Eagerly the
 * helpers are C control flow, masked under vmap; on a record builder they
 * record while, cond, recurrent and net ops whose sub-blocks hold batched
 * ops. A branch on a batched predicate runs both branches and each example
 * takes its own's outputs; a loop whose condition is batched runs until the
 * last example's is false, the others keeping their values. The programs'
 * gradients (nb_gradients through the control ops) are checked against
 * per-example gradients from the eager tape. */
#include <string.h>
#include "vmap_util.h"

static nb_status br_then(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_tanh(b, in[0]);
    return nb_builder_status(b);
}

static nb_status f_branch(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value pred = nb_greater(b, nb_reduce_sum(b, in[0], 0, NULL, false), nb_fill_constant(b, NB_F64, 0, NULL, 0));
    nb_branches br = {br_then, br_then, NULL};
    return nb_cond(b, pred, &br, NB_VALUES(in[0]), 1, out);
}

static nb_status loop_cond(nb_builder *b, const nb_value *carry, nb_value *pred, void *ctx)
{
    (void)ctx;
    *pred = nb_less(b, carry[0], nb_fill_constant(b, NB_F64, 0, NULL, 3));
    return nb_builder_status(b);
}

static nb_status loop_body(nb_builder *b, const nb_value *carry, nb_value *next, void *ctx)
{
    (void)ctx;
    next[0] = nb_scale(b, carry[0], 1, 1);
    return nb_builder_status(b);
}

/* x * (a shared counter counted to 3 by a loop) */
static nb_status f_shared_loop(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value n;
    nb_status st = nb_while_loop(b, loop_cond, loop_body, NULL, NB_VALUES(nb_fill_constant(b, NB_F64, 0, NULL, 0)), &n);
    if (st) return st;
    out[0] = nb_mul(b, in[0], n);
    return nb_builder_status(b);
}

static nb_status br_else(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_scale(b, nb_square(b, in[0]), -2, 0);
    return nb_builder_status(b);
}

static nb_status f_branches(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value pred = nb_greater(b, nb_reduce_sum(b, in[0], 0, NULL, false), nb_fill_constant(b, NB_F64, 0, NULL, 0));
    nb_branches br = {br_then, br_else, NULL};
    return nb_cond(b, pred, &br, NB_VALUES(in[0]), 1, out);
}

/* counts c up by one while c < x[0] (a trip count per example), then c * x */
static nb_status count_cond(nb_builder *b, const nb_value *carry, nb_value *pred, void *ctx)
{
    (void)ctx;
    const int64_t first[1] = {0}, one[1] = {1};
    *pred = nb_less(b, carry[0], nb_slice(b, carry[1], 1, first, first, one));
    return nb_builder_status(b);
}

static nb_status count_body(nb_builder *b, const nb_value *carry, nb_value *next, void *ctx)
{
    (void)ctx;
    next[0] = nb_scale(b, carry[0], 1, 1);
    next[1] = carry[1];
    return nb_builder_status(b);
}

static nb_status f_count(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value fin[2];
    nb_value c0 = nb_fill_constant(b, NB_F64, 1, (const int64_t[]){1}, 0);
    nb_status st = nb_while_loop(b, count_cond, count_body, NULL, NB_VALUES(c0, in[0]), fin);
    if (st) return st;
    out[0] = nb_mul(b, in[0], fin[0]);
    return nb_builder_status(b);
}

/* sum(x * c(x) + branch(x)): a loss through batched control flow */
static nb_status f_count_sum(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value counted, branched;
    nb_status st = f_count(b, in, &counted, ctx);
    if (!st) st = f_branches(b, in, &branched, ctx);
    if (st) return st;
    out[0] = nb_reduce_sum(b, nb_add(b, counted, branched), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_count_grad(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    return grads_of(b, f_count_sum, 1, 1, in, out, ctx);
}

/* a branch on a predicate shared by the examples, over batched values */
static nb_status f_shared_pred(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value pred = nb_greater(b, nb_reduce_sum(b, in[1], 0, NULL, false), nb_fill_constant(b, NB_F64, 0, NULL, 0));
    nb_branches br = {br_then, br_else, NULL};
    return nb_cond(b, pred, &br, NB_VALUES(in[0]), 1, out);
}

/* h' = tanh(h * w + x_t), y_t = 2 h', over the rows of x [4, 3] */
static nb_status rnn_step(nb_builder *b, const nb_value *carry, const nb_value *x_t, nb_value *next, nb_value *y_t,
                          void *ctx)
{
    const nb_value *w = ctx;
    next[0] = nb_tanh(b, nb_add(b, nb_mul(b, carry[0], *w), x_t[0]));
    y_t[0] = nb_scale(b, next[0], 2, 0);
    return nb_builder_status(b);
}

static nb_status f_scan(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value w = in[1], h0 = nb_fill_constant(b, NB_F64, 1, S(3), 0.5);
    nb_scan_io io = {NB_VALUES(h0), NB_VALUES(in[0]), 1, &out[0], &out[1], false};
    return nb_scan(b, rnn_step, &w, &io);
}

static nb_status f_scan_sum(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value o[2];
    nb_status st = f_scan(b, in, o, ctx);
    if (st) return st;
    out[0] = nb_add(b, nb_reduce_sum(b, o[0], 0, NULL, false), nb_reduce_sum(b, nb_square(b, o[1]), 0, NULL, false));
    return nb_builder_status(b);
}

static nb_status f_scan_grad(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    return grads_of(b, f_scan_sum, 2, 1, in, out, ctx);
}

static nb_status net_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_mul(b, nb_tanh(b, in[0]), in[1]);
    out[1] = nb_reduce_sum(b, in[1], 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_net(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    return nb_net(b, net_fn, NULL, NB_VALUES(in[0], in[1]), 2, out);
}

/* a vmap inside: per example [2, 3], mapped again over its rows */
static nb_status f_nested_count(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_function cnt = {f_count, 1, 1, NULL};
    return nb_vmap_emit(b, &cnt, NULL, in, out);
}

/* a predicate that is not one bool */
static nb_status bad_cond(nb_builder *b, const nb_value *carry, nb_value *pred, void *ctx)
{
    (void)ctx;
    *pred = carry[0];
    return nb_builder_status(b);
}

static nb_status f_bad_loop(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    return nb_while_loop(b, bad_cond, count_body, NULL, NB_VALUES(in[0], in[0]), out);
}

static nb_status f_direct(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value res[2];
    nb_status st = nb_emit(b, "net", NB_VALUES(in[0]), NB_ATTRS(NB_ATTR_BLOCK("sub_block", 0)), 2, res);
    out[0] = res[1];
    return st;
}

/* How many ops of `type` block 0 of p holds. */
static int count_ops(nb_program *p, const char *type)
{
    int n = 0;
    nb_block *g = nb_program_global_block(p);
    for (int i = 0; i < g->n_ops; i++) n += !strcmp(g->ops[i]->def->name, type);
    return n;
}

/* f recorded by nb_vmap_emit into a program (with the batch size unknown,
 * -1, when `unknown`) and run by the executor equals eager nb_vmap; the
 * program holds `n_ctl` ops of type `ctl`. With `grads` (the eager
 * per-example gradients of f's first output, a scalar, with respect to its
 * first input, batched at 0), nb_gradients of the sum over the batch equals
 * them. */
static void check_program(const nb_function *f, nb_tensor *const *in, const int *in_axes, bool unknown, const char *ctl,
                          int n_ctl, const nb_function *grads)
{
    nb_tensor *want[4] = {0}, *got = NULL;
    nb_vmap_opts o = {.in_axes = in_axes};
    REQUIRE_OK(nb_vmap(f, &o, in, want));
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value v[4], out[4];
    nb_feed feeds[4];
    char names[4][16];
    for (int i = 0; i < f->n_in; i++) {
        int64_t shape[NB_MAX_DIMS];
        memcpy(shape, in[i]->shape, sizeof(int64_t) * (size_t)in[i]->ndim);
        if (unknown && in_axes[i] != NB) shape[in_axes[i] < 0 ? in_axes[i] + in[i]->ndim : in_axes[i]] = -1;
        snprintf(names[i], sizeof names[i], "x%d", i);
        v[i] = nb_data(b, names[i], NB_F64, in[i]->ndim, shape);
        feeds[i] = (nb_feed){names[i], in[i]};
    }
    nb_status st = nb_vmap_emit(b, f, &o, v, out);
    CHECK_OK(st);
    if (st) fprintf(stderr, "  %s\n", nb_builder_error(b));
    CHECK(count_ops(p, ctl) == n_ctl);
    nb_executor *ex;
    nb_scope *scope;
    REQUIRE_OK(nb_executor_new(&ex));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    for (int k = 0; k < f->n_out && !st; k++) {
        CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS_N(f->n_in, feeds), NB_NAMES(nb_value_name(out[k])), &got));
        bool ok = got && nb_tensor_allclose(got, want[k], 1e-12, 1e-12);
        if (!ok && got) nb_tensor_print(got, stderr), nb_tensor_print(want[k], stderr);
        CHECK(ok);
        nb_tensor_release(got);
        got = NULL;
    }
    if (grads && !st) {
        nb_tensor *g_want = NULL;
        REQUIRE_OK(nb_vmap(grads, &o, in, &g_want));
        nb_value total = nb_reduce_sum(b, out[0], 0, NULL, false);
        nb_backward_result r = {0};
        CHECK_OK(nb_gradients(p, NB_NAMES(nb_value_name(total)), NB_NAMES("x0"), NULL, &r));
        if (r.n_grads == 1 && r.grads[0]) {
            CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS_N(f->n_in, feeds), NB_NAMES(r.grads[0]), &got));
            bool ok = got && nb_tensor_allclose(got, g_want, 1e-10, 1e-10);
            if (!ok && got) nb_tensor_print(got, stderr), nb_tensor_print(g_want, stderr);
            CHECK(ok);
        } else CHECK(!"no gradient for x0");
        nb_backward_result_free(&r);
        release_all(got, g_want, NULL);
    }
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(p);
    for (int k = 0; k < f->n_out; k++) nb_tensor_release(want[k]);
}

static void test_eager(void)
{
    nb_tensor *x = R(1, 4, 3), *out[1] = {0};
    nb_function lp = {f_shared_loop, 1, 1, NULL}, brs = {f_branches, 1, 1, NULL}, cnt = {f_count, 1, 1, NULL};
    nb_tensor *xs = T(NB_F64, S(4, 3), 0.5, -1.0, 0.2, -3.0, 1.0, 0.5, 2.3, 0.0, 0.0, 4.1, 0.1, 0.1);
    check_vmap(&brs, &xs, (int[]){0}, 0, 1e-12);
    check_vmap(&cnt, &xs, (int[]){0}, 0, 1e-12);
    nb_function cg = {f_count_grad, 1, 1, NULL};
    check_vmap(&cg, &xs, (int[]){0}, 0, 1e-12); /* vmap of grad through the masked loop */
    REQUIRE_OK(nb_vmap(&cnt, NULL, &xs, out));
    /* trip counts 1, 0, 3 and 5: c is ceil(x[0]) clamped below at 0 */
    CHECK(out[0] && fabs(nb_tensor_get(out[0], 0) - 0.5) < 1e-12 && fabs(nb_tensor_get(out[0], 3) + 0.0) < 1e-12 &&
          fabs(nb_tensor_get(out[0], 6) - 3 * 2.3) < 1e-12 && fabs(nb_tensor_get(out[0], 11) - 5 * 0.1) < 1e-12);
    nb_tensor_release(out[0]);
    REQUIRE_OK(nb_vmap(&lp, NULL, &x, out));
    CHECK(fabs(nb_tensor_get(out[0], 0) - 3 * nb_tensor_get(x, 0)) < 1e-12);
    nb_tensor_release(out[0]);
    nb_tensor *seq = R(2, 5, 4, 3), *w = R(3, 3);
    nb_function sc = {f_scan, 2, 2, NULL}, nt = {f_net, 2, 2, NULL}, sp = {f_shared_pred, 2, 1, NULL};
    check_vmap(&sc, (nb_tensor *[]){seq, w}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&nt, (nb_tensor *[]){x, w}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&sp, (nb_tensor *[]){x, w}, (int[]){0, NB}, 0, 1e-12);
    release_all(x, xs, seq, w, NULL);
}

static void test_program(void)
{
    nb_tensor *x = R(1, 4, 3), *seq = R(2, 5, 4, 3), *seq_t = R(4, 4, 5, 3), *w = R(3, 3), *ws = R(5, 5, 3);
    nb_tensor *xs = T(NB_F64, S(4, 3), 0.5, -1.0, 0.2, -3.0, 1.0, 0.5, 2.3, 0.0, 0.0, 4.1, 0.1, 0.1);
    nb_tensor *x2 = T(NB_F64, S(2, 2, 3), 1.5, 0.1, 0.2, 3.5, -1.0, 0.5, -2.0, 0.3, 0.1, 2.2, 0.4, 0.4);
    nb_function br = {f_branch, 1, 1, NULL}, brs = {f_branches, 1, 1, NULL}, lp = {f_shared_loop, 1, 1, NULL};
    nb_function cnt = {f_count, 1, 1, NULL}, cs = {f_count_sum, 1, 1, NULL}, cg = {f_count_grad, 1, 1, NULL};
    nb_function sc = {f_scan, 2, 2, NULL}, ss = {f_scan_sum, 2, 1, NULL}, sg = {f_scan_grad, 2, 1, NULL};
    nb_function nt = {f_net, 2, 2, NULL}, sp = {f_shared_pred, 2, 1, NULL}, nc = {f_nested_count, 1, 1, NULL};
    /* a batched predicate: both branches in line, no cond op */
    check_program(&br, &x, (int[]){0}, false, "cond", 0, NULL);
    check_program(&brs, &xs, (int[]){0}, false, "cond", 0, NULL);
    /* a shared predicate: one cond op over batched values */
    check_program(&sp, (nb_tensor *[]){x, w}, (int[]){0, NB}, false, "cond", 1, NULL);
    check_program(&sp, (nb_tensor *[]){x, w}, (int[]){0, NB}, true, "cond", 1, NULL);
    /* loops: per-example trip counts, a shared count, a batch of unknown size */
    check_program(&cnt, &xs, (int[]){0}, false, "while", 1, NULL);
    check_program(&cnt, &xs, (int[]){-1}, true, "while", 1, NULL);
    check_program(&lp, &x, (int[]){0}, true, "while", 1, NULL);
    check_program(&cs, &xs, (int[]){0}, false, "while", 1, &cg); /* and its gradient */
    /* scan: sequences batched along either axis, the weight shared or not */
    check_program(&sc, (nb_tensor *[]){seq, w}, (int[]){0, NB}, false, "recurrent", 1, NULL);
    check_program(&sc, (nb_tensor *[]){seq_t, ws}, (int[]){1, 0}, true, "recurrent", 1, NULL);
    check_program(&ss, (nb_tensor *[]){seq, w}, (int[]){0, NB}, false, "recurrent", 1, &sg);
    check_program(&nt, (nb_tensor *[]){x, w}, (int[]){0, NB}, false, "net", 1, NULL);
    /* a vmap of a vmap of a loop */
    check_program(&nc, &x2, (int[]){0}, false, "while", 1, NULL);
    release_all(x, seq, seq_t, w, ws, xs, x2, NULL);
}

static void test_errors(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value xv = nb_data(b, "x", NB_F64, 2, S(4, 3)), o[2];
    nb_function bad = {f_bad_loop, 1, 2, NULL};
    CHECK_ERR(nb_vmap_emit(b, &bad, NULL, &xv, o), NB_ERR_DTYPE,
              "predicate must be bool with one element, not float64 [3]");
    nb_builder_clear_error(b);
    /* a control-flow op emitted directly on batched values */
    nb_function direct = {f_direct, 1, 1, NULL};
    CHECK_ERR(nb_vmap_emit(b, &direct, NULL, &xv, o), NB_ERR_UNSUPPORTED, "net emitted directly on batched values");
    nb_builder_free(b);
    nb_program_free(p);
}

int main(void)
{
    RUN(test_eager);
    RUN(test_program);
    RUN(test_errors);
    return test_report();
}
