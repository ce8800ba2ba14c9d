/* The typed calls of nabla/ops.h that the ops without one gained (conv2d,
 * pool2d, batch_norm, layer_norm, pad, index_select, cumsum, topk,
 * gather_elements, scatter_elements, logical_xor, reshape_as, increment,
 * fill_constant_batch_size_like, truncated_gaussian_random): each against
 * nb_emit with the attribute names, so that every option reaches its
 * attribute; hand-computed values; the same call in a program (record
 * builder and executor); under nb_vmap and nb_grad; and the errors. */
#include <stdlib.h>
#include "test.h"
#include "nabla/layers.h"

#include "vmap_util.h"

enum { NO_GRAD = 1, NO_VMAP = 2 };

/* One op two ways: its typed call, and nb_emit with the attributes spelled
 * out, on inputs `in` (in[0] is what vmap batches and grad differentiates). */
typedef struct tcase {
    const char *name;
    nb_fn typed, emitted;
    int n_in;
    nb_tensor *in[5];
    unsigned flags;
} tcase;

#define FN(name) static nb_status name(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
#define DONE     \
    (void)ctx;   \
    return nb_builder_status(b)
/* A call whose one expression is the output. */
#define ONE(name, expr) \
    FN(name)            \
    {                   \
        out[0] = expr;  \
        DONE;           \
    }

/* ---- the calls and their nb_emit twins --------------------------------------------- */

static const nb_conv2d_op_opts conv_o = {.strides = {2, 1}, .paddings = {1, 0, 2, 1}, .dilations = {1, 2}};
ONE(conv_typed, nb_conv2d(b, in[0], in[1], in[2], &conv_o))
ONE(conv_emitted,
    nb_emit1(b, "conv2d", NB_VALUES(in[0], in[1], in[2]),
             NB_ATTRS(NB_ATTR_INTS("strides", 2, 1), NB_ATTR_INTS("paddings", 1, 0, 2, 1),
                      NB_ATTR_INTS("dilations", 1, 2), NB_ATTR_INT("groups", 1))))
ONE(conv_groups_typed, nb_conv2d(b, in[0], in[1], NB_NONE, &(nb_conv2d_op_opts){.groups = 2}))
ONE(conv_groups_emitted, nb_emit1(b, "conv2d", NB_VALUES(in[0], in[1]), NB_ATTRS(NB_ATTR_INT("groups", 2))))
FN(pool_max_typed)
{
    out[0] = nb_pool2d(b, in[0], NULL, S(2, 2), NULL); /* stride: the window */
    DONE;
}
ONE(pool_max_emitted,
    nb_emit1(b, "pool2d", NB_VALUES(in[0]), NB_ATTRS(NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("strides", 2, 2))))
FN(pool_avg_typed)
{
    nb_pool2d_op_opts o = {.strides = {1, 2}, .paddings = {1, 1, 0, 1}, .ceil_mode = true, .count_include_pad = true};
    out[0] = nb_pool2d(b, in[0], "avg", S(3, 2), &o);
    DONE;
}
ONE(pool_avg_emitted,
    nb_emit1(b, "pool2d", NB_VALUES(in[0]),
             NB_ATTRS(NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 3, 2), NB_ATTR_INTS("strides", 1, 2),
                      NB_ATTR_INTS("paddings", 1, 1, 0, 1), NB_ATTR_BOOL("ceil_mode", true),
                      NB_ATTR_BOOL("exclusive", false))))
ONE(pool_global_typed, nb_pool2d(b, in[0], "avg", NULL, &(nb_pool2d_op_opts){.global = true}))
ONE(pool_global_emitted,
    nb_emit1(b, "pool2d", NB_VALUES(in[0]),
             NB_ATTRS(NB_ATTR_STRING("pooling_type", "avg"), NB_ATTR_INTS("ksize", 1, 1),
                      NB_ATTR_BOOL("global_pooling", true))))
/* Y, and the updated running statistics folded in, so that all three count. */
static nb_value bn_all(nb_builder *b, nb_value y, nb_value mean, nb_value var)
{
    nb_value m = nb_unsqueeze(b, mean, 3, S(0, 2, 3)), v = nb_unsqueeze(b, var, 3, S(0, 2, 3));
    return nb_add(b, y, nb_add(b, m, nb_scale(b, v, 10, 0)));
}
FN(bn_typed)
{
    nb_batch_norm_stats r = {in[3], in[4]};
    nb_value y = nb_batch_norm(b, in[0], in[1], in[2], &r, &(nb_batch_norm_op_opts){.momentum = 0.5, .epsilon = 1e-3});
    out[0] = bn_all(b, y, r.mean, r.variance);
    DONE;
}
FN(bn_emitted)
{
    nb_value o[5];
    if (nb_emit(b, "batch_norm", NB_VALUES(in[0], in[1], in[2], in[3], in[4]),
                NB_ATTRS(NB_ATTR_FLOAT("momentum", 0.5), NB_ATTR_FLOAT("epsilon", 1e-3)), 5, o))
        return nb_builder_status(b);
    out[0] = bn_all(b, o[0], o[1], o[2]);
    DONE;
}
FN(bn_test_typed)
{
    nb_batch_norm_stats r = {in[3], in[4]};
    out[0] = nb_batch_norm(b, in[0], in[1], in[2], &r, &(nb_batch_norm_op_opts){.is_test = true});
    DONE;
}
FN(bn_test_emitted)
{
    nb_value o[5];
    if (nb_emit(b, "batch_norm", NB_VALUES(in[0], in[1], in[2], in[3], in[4]), NB_ATTRS(NB_ATTR_BOOL("is_test", true)),
                5, o))
        return nb_builder_status(b);
    out[0] = o[0];
    DONE;
}
ONE(ln_typed, nb_layer_norm(b, in[0], in[1], in[2], 1, 1e-3))
ONE(ln_emitted,
    nb_emit1(b, "layer_norm", NB_VALUES(in[0], in[1], in[2]),
             NB_ATTRS(NB_ATTR_INT("begin_norm_axis", 1), NB_ATTR_FLOAT("epsilon", 1e-3))))
ONE(ln_plain_typed, nb_layer_norm(b, in[0], NB_NONE, NB_NONE, 2, 0))
ONE(ln_plain_emitted, nb_emit1(b, "layer_norm", NB_VALUES(in[0]), NB_ATTRS(NB_ATTR_INT("begin_norm_axis", 2))))
ONE(pad_typed, nb_pad(b, in[0], 4, S(1, 0, 2, 1), 7, NULL))
ONE(pad_emitted,
    nb_emit1(b, "pad", NB_VALUES(in[0]), NB_ATTRS(NB_ATTR_INTS("paddings", 1, 0, 2, 1), NB_ATTR_FLOAT("pad_value", 7))))
ONE(pad_reflect_typed, nb_pad(b, in[0], 4, S(1, 1, 2, 0), 0, "reflect"))
ONE(pad_reflect_emitted,
    nb_emit1(b, "pad", NB_VALUES(in[0]),
             NB_ATTRS(NB_ATTR_INTS("paddings", 1, 1, 2, 0), NB_ATTR_STRING("mode", "reflect"))))
ONE(isel_typed, nb_index_select(b, in[0], in[1], 1))
ONE(isel_emitted, nb_emit1(b, "index_select", NB_VALUES(in[0], in[1]), NB_ATTRS(NB_ATTR_INT("dim", 1))))
ONE(cumsum_typed, nb_cumsum(b, in[0], -1, NB_CUMSUM_EXCLUSIVE | NB_CUMSUM_REVERSE))
ONE(cumsum_emitted,
    nb_emit1(b, "cumsum", NB_VALUES(in[0]),
             NB_ATTRS(NB_ATTR_INT("axis", -1), NB_ATTR_BOOL("exclusive", true), NB_ATTR_BOOL("reverse", true))))
/* topk's values plus its indices (as floats), so that both count. */
FN(topk_typed)
{
    nb_value idx = NB_NONE, v = nb_topk(b, in[0], 2, 0, false, &idx);
    out[0] = nb_add(b, v, nb_cast(b, idx, NB_F64));
    DONE;
}
FN(topk_emitted)
{
    nb_value o[2];
    if (nb_emit(b, "topk", NB_VALUES(in[0]),
                NB_ATTRS(NB_ATTR_INT("k", 2), NB_ATTR_INT("axis", 0), NB_ATTR_BOOL("largest", false)), 2, o))
        return nb_builder_status(b);
    out[0] = nb_add(b, o[0], nb_cast(b, o[1], NB_F64));
    DONE;
}
ONE(gel_typed, nb_gather_elements(b, in[0], in[1], 1))
ONE(gel_emitted, nb_emit1(b, "gather_elements", NB_VALUES(in[0], in[1]), NB_ATTRS(NB_ATTR_INT("axis", 1))))
ONE(sel_typed, nb_scatter_elements(b, in[0], in[1], in[2], 1, "add"))
ONE(sel_emitted,
    nb_emit1(b, "scatter_elements", NB_VALUES(in[0], in[1], in[2]),
             NB_ATTRS(NB_ATTR_INT("axis", 1), NB_ATTR_STRING("reduction", "add"))))
ONE(xor_typed, nb_logical_xor(b, nb_greater(b, in[0], in[1]), nb_less(b, in[0], nb_scale(b, in[1], 0.5, 0))))
ONE(xor_emitted,
    nb_emit1(b, "logical_xor", NB_VALUES(nb_greater(b, in[0], in[1]), nb_less(b, in[0], nb_scale(b, in[1], 0.5, 0))),
             NB_NO_ATTRS))
ONE(rsa_typed, nb_reshape_as(b, in[0], in[1]))
ONE(rsa_emitted, nb_emit1(b, "reshape_as", NB_VALUES(in[0], in[1]), NB_NO_ATTRS))
ONE(incr_typed, nb_increment(b, in[0], 2.5))
ONE(incr_emitted, nb_emit1(b, "increment", NB_VALUES(in[0]), NB_ATTRS(NB_ATTR_FLOAT("step", 2.5))))
ONE(fcbsl_typed, nb_fill_constant_batch_size_like(b, in[0], NB_F64, 2, S(-1, 4), 3.5))
ONE(fcbsl_emitted,
    nb_emit1(b, "fill_constant_batch_size_like", NB_VALUES(in[0]),
             NB_ATTRS(NB_ATTR_INTS("shape", -1, 4), NB_ATTR_INT("dtype", NB_F64), NB_ATTR_FLOAT("value", 3.5))))

/* ---- the checks ------------------------------------------------------------------------ */

static nb_status run_eager(nb_fn fn, int n_in, nb_tensor *const *in, nb_tensor **out)
{
    nb_function f = {fn, n_in, 1, NULL};
    return run_once(&f, in, out);
}

/* The typed call in a program: inputs fed by name, the output fetched. */
static nb_tensor *run_program(const tcase *c)
{
    nb_program *main = NULL;
    nb_builder *b = NULL;
    nb_scope *scope = NULL;
    nb_executor *ex = NULL;
    nb_tensor *got = NULL;
    nb_value in[5], out[1] = {NB_NONE};
    nb_feed feeds[5];
    char names[5][16];
    CHECK_OK(nb_program_new(&main));
    CHECK_OK(nb_builder_new_record(&b, main, NULL));
    CHECK_OK(nb_scope_new(&scope, NULL));
    CHECK_OK(nb_executor_new(&ex));
    for (int i = 0; i < c->n_in; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        in[i] = nb_data(b, names[i], c->in[i]->dtype, c->in[i]->ndim, c->in[i]->shape);
        feeds[i] = (nb_feed){names[i], c->in[i]};
    }
    nb_status st = c->typed(b, in, out, NULL);
    if (!st) st = nb_builder_status(b);
    if (st) fprintf(stderr, "  %s in a program: %s\n", c->name, nb_builder_error(b));
    CHECK(!st);
    if (!st) {
        const char *name = nb_value_name(out[0]);
        CHECK_OK(nb_executor_run(ex, main, scope, NB_FEEDS_N(c->n_in, feeds), NB_NAMES_N(1, &name), &got));
    }
    nb_executor_free(ex);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(main);
    return got;
}

/* sum(f(in)^2), differentiated with respect to in[0]. */
typedef struct {
    nb_fn f;
    int n_in;
} loss_ctx;

static nb_status f_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const loss_ctx *l = ctx;
    nb_value y[1] = {NB_NONE};
    nb_status st = l->f(b, in, y, NULL);
    if (st) return st;
    out[0] = nb_reduce_sum(b, nb_square(b, y[0]), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_tensor *grad_of(nb_fn fn, int n_in, nb_tensor *const *in)
{
    loss_ctx l = {fn, n_in};
    nb_function f = {f_loss, n_in, 1, &l};
    nb_tensor *g = NULL;
    CHECK_OK(nb_grad(&f, in, &(nb_grad_opts){.n_argnums = 1, .argnums = (int[]){0}}, &g, NULL));
    return g;
}

static bool same(const char *what, const tcase *c, const nb_tensor *got, const nb_tensor *want)
{
    bool ok = got && want && got->dtype == want->dtype && nb_tensor_allclose(got, want, 1e-12, 1e-12);
    if (!ok) fprintf(stderr, "  %s: %s differs\n", c->name, what);
    CHECK(ok);
    return ok;
}

/* The typed call equals nb_emit eagerly and in a program, and is batched
 * (in[0] over 3 examples) and differentiated alike. */
static void check_case(const tcase *c)
{
    nb_tensor *typed = NULL, *emitted = NULL, *prog = NULL;
    CHECK_OK(run_eager(c->typed, c->n_in, c->in, &typed));
    CHECK_OK(run_eager(c->emitted, c->n_in, c->in, &emitted));
    same("the typed call against nb_emit", c, typed, emitted);
    prog = run_program(c);
    same("the program against the eager call", c, prog, typed);
    if (!(c->flags & NO_VMAP)) {
        nb_tensor *x = c->in[0], *xs = NULL, *bin[5];
        int64_t shape[NB_MAX_DIMS + 1] = {3};
        memcpy(shape + 1, x->shape, (size_t)x->ndim * sizeof *shape);
        CHECK_OK(nb_tensor_new(&xs, x->dtype, x->ndim + 1, shape));
        for (int64_t i = 0; i < nb_tensor_numel(xs); i++)
            nb_tensor_set(xs, i, nb_tensor_get(x, i % nb_tensor_numel(x)) * (1 + (double)(i / nb_tensor_numel(x)) / 4));
        int axes[5] = {0, NB, NB, NB, NB};
        for (int i = 0; i < c->n_in; i++) bin[i] = i ? c->in[i] : xs;
        nb_function f = {c->typed, c->n_in, 1, NULL};
        check_vmap(&f, bin, axes, 0, 1e-12);
        nb_tensor_release(xs);
    }
    if (!(c->flags & NO_GRAD)) {
        nb_tensor *gt = grad_of(c->typed, c->n_in, c->in), *ge = grad_of(c->emitted, c->n_in, c->in);
        same("the gradient against nb_emit's", c, gt, ge);
        CHECK(gt && nb_tensor_numel(gt) == nb_tensor_numel(c->in[0]));
        release_all(gt, ge, NULL);
    }
    release_all(typed, emitted, prog, NULL);
}

static void test_against_emit(void)
{
    nb_tensor *img = R(1, 2, 3, 5, 6), *filt = R(2, 4, 3, 3, 2), *fb = R(3, 4), *img4 = R(4, 2, 4, 5, 5);
    nb_tensor *filt_g = R(5, 6, 2, 3, 3), *bx = R(6, 4, 3, 2, 2), *bs = R(7, 3), *bb = R(8, 3), *bm = R(9, 3);
    nb_tensor *bv = T(NB_F64, S(3), 0.5, 1.5, 2), *lx = R(10, 3, 4, 5), *ls = R(11, 20), *lb = R(12, 20);
    nb_tensor *m = R(13, 3, 4), *m2 = R(14, 3, 4), *isel = T(NB_I64, S(3), 3, 0, 3), *flat = R(15, 12);
    nb_tensor *gi = T(NB_I64, S(3, 2), 0, 3, 2, 2, 1, 0), *upd = R(16, 3, 2), *cnt = T(NB_F64, S(1), 4);
    const tcase cases[] = {
        {"conv2d", conv_typed, conv_emitted, 3, {img, filt, fb}, 0},
        {"conv2d groups", conv_groups_typed, conv_groups_emitted, 2, {img4, filt_g}, 0},
        {"pool2d max", pool_max_typed, pool_max_emitted, 1, {img}, 0},
        {"pool2d avg", pool_avg_typed, pool_avg_emitted, 1, {img}, 0},
        {"pool2d global", pool_global_typed, pool_global_emitted, 1, {img}, 0},
        {"batch_norm", bn_typed, bn_emitted, 5, {bx, bs, bb, bm, bv}, 0},
        {"batch_norm is_test", bn_test_typed, bn_test_emitted, 5, {bx, bs, bb, bm, bv}, 0},
        {"layer_norm", ln_typed, ln_emitted, 3, {lx, ls, lb}, 0},
        {"layer_norm plain", ln_plain_typed, ln_plain_emitted, 1, {lx}, 0},
        {"pad", pad_typed, pad_emitted, 1, {m}, 0},
        {"pad reflect", pad_reflect_typed, pad_reflect_emitted, 1, {m}, 0},
        {"index_select", isel_typed, isel_emitted, 2, {m, isel}, 0},
        {"cumsum", cumsum_typed, cumsum_emitted, 1, {m}, 0},
        {"topk", topk_typed, topk_emitted, 1, {m}, 0},
        {"gather_elements", gel_typed, gel_emitted, 2, {m, gi}, 0},
        {"scatter_elements", sel_typed, sel_emitted, 3, {m, gi, upd}, 0},
        {"logical_xor", xor_typed, xor_emitted, 2, {m, m2}, NO_GRAD},
        {"reshape_as", rsa_typed, rsa_emitted, 2, {m, flat}, 0},
        {"increment", incr_typed, incr_emitted, 1, {cnt}, NO_GRAD | NO_VMAP},
        {"fill_constant_batch_size_like", fcbsl_typed, fcbsl_emitted, 1, {m}, NO_GRAD},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    release_all(img, filt, fb, img4, filt_g, bx, bs, bb, bm, bv, lx, ls, lb, m, m2, isel, flat, gi, upd, cnt, NULL);
}

/* t as a value of b, which keeps it. */
static nb_value ev(nb_builder *b, nb_tensor *t)
{
    nb_value v = nb_eager_value(b, t);
    nb_tensor_release(t);
    return v;
}

/* ---- values worked by hand --------------------------------------------------------------- */

static void test_values(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *img = T(NB_F64, S(1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), *ones = T(NB_F64, S(1, 1, 2, 2), 1, 1, 1, 1);
    nb_value x = nb_eager_value(b, img), w = nb_eager_value(b, ones);
    /* window sums, and with a row of padding on top (stride 1) */
    CHECK_TENSOR(nb_eager_tensor(nb_conv2d(b, x, w, NB_NONE, NULL)), S(1, 1, 2, 2), 1e-12, 12, 16, 24, 28);
    CHECK_TENSOR(nb_eager_tensor(nb_conv2d(b, x, w, NB_NONE, &(nb_conv2d_op_opts){.paddings = {1, 0, 0, 0}})),
                 S(1, 1, 3, 2), 1e-12, 3, 5, 12, 16, 24, 28);
    CHECK_TENSOR(nb_eager_tensor(nb_pool2d(b, x, "max", S(2, 2), &(nb_pool2d_op_opts){.strides = {1, 1}})),
                 S(1, 1, 2, 2), 1e-12, 5, 6, 8, 9);
    CHECK_TENSOR(nb_eager_tensor(nb_pool2d(b, x, "avg", S(2, 2), &(nb_pool2d_op_opts){.ceil_mode = true})),
                 S(1, 1, 2, 2), 1e-12, 3, 4.5, 7.5, 9); /* exclusive: a window the edge cuts averages what it holds */
    nb_value m = ev(b, T(NB_F64, S(2, 3), 1, 2, 3, 4, 5, 6));
    CHECK_TENSOR(nb_eager_tensor(nb_pad(b, m, 4, S(1, 0, 0, 1), -1, NULL)), S(3, 4), 1e-12, -1, -1, -1, -1, 1, 2, 3, -1,
                 4, 5, 6, -1);
    CHECK_TENSOR(nb_eager_tensor(nb_pad(b, m, 4, S(0, 0, 1, 1), 0, "edge")), S(2, 5), 1e-12, 1, 1, 2, 3, 3, 4, 4, 5, 6,
                 6);
    nb_value idx = ev(b, T(NB_I64, S(2), 2, 0));
    CHECK_TENSOR(nb_eager_tensor(nb_index_select(b, m, idx, 1)), S(2, 2), 1e-12, 3, 1, 6, 4);
    CHECK_TENSOR(nb_eager_tensor(nb_index_select(b, m, idx, -1)), S(2, 2), 1e-12, 3, 1, 6, 4);
    CHECK_TENSOR(nb_eager_tensor(nb_cumsum(b, m, 1, 0)), S(2, 3), 1e-12, 1, 3, 6, 4, 9, 15);
    CHECK_TENSOR(nb_eager_tensor(nb_cumsum(b, m, 1, NB_CUMSUM_REVERSE)), S(2, 3), 1e-12, 6, 5, 3, 15, 11, 6);
    CHECK_TENSOR(nb_eager_tensor(nb_cumprod(b, m, -1, NB_SCAN_EXCLUSIVE)), S(2, 3), 1e-12, 1, 1, 2, 1, 4, 20);
    nb_value ti = NB_NONE;
    CHECK_TENSOR(nb_eager_tensor(nb_topk(b, m, 2, -1, true, &ti)), S(2, 2), 1e-12, 3, 2, 6, 5);
    CHECK_TENSOR(nb_eager_tensor(ti), S(2, 2), 0, 2, 1, 2, 1);
    CHECK_TENSOR(nb_eager_tensor(nb_increment(b, ev(b, T(NB_F64, S(1), 3)), 2)), S(1), 0, 5);
    /* batch_norm's running statistics: momentum * running + (1 - momentum) * the batch's (unbiased variance) */
    nb_value bx = ev(b, T(NB_F64, S(2, 1), 1, 3));
    nb_batch_norm_stats r = {ev(b, T(NB_F64, S(1), 0)), ev(b, T(NB_F64, S(1), 1))};
    nb_value one = ev(b, T(NB_F64, S(1), 1)), zero = ev(b, T(NB_F64, S(1), 0));
    nb_value y = nb_batch_norm(b, bx, one, zero, &r, &(nb_batch_norm_op_opts){.epsilon = 1e-12});
    CHECK_OK(nb_builder_status(b));
    CHECK_TENSOR(nb_eager_tensor(y), S(2, 1), 1e-9, -1, 1);
    CHECK_TENSOR(nb_eager_tensor(r.mean), S(1), 1e-12, 0.1 * 2);
    CHECK_TENSOR(nb_eager_tensor(r.variance), S(1), 1e-12, 0.9 + 0.1 * 2);
    /* truncated normal: within 2 std of the mean */
    nb_tensor *t = nb_eager_tensor(nb_truncated_gaussian_random(b, NB_F32, 2, S(50, 40), 3, 0.5));
    CHECK(t && t->dtype == NB_F32 && nb_tensor_numel(t) == 2000);
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; t && i < nb_tensor_numel(t); i++) {
        double v = nb_tensor_get(t, i);
        lo = fmin(lo, v), hi = fmax(hi, v), sum += v;
    }
    CHECK(lo >= 2 - 1e-6 && hi <= 4 + 1e-6 && hi - lo > 1.5 && fabs(sum / 2000 - 3) < 0.05);
    CHECK_OK(nb_builder_status(b));
    release_all(img, ones, NULL);
    nb_builder_free(b);
}

/* ---- errors name the op and the shapes ---------------------------------------------------- */

static nb_status emitted_status(nb_builder *b)
{
    nb_status st = nb_builder_status(b);
    nb_builder_clear_error(b);
    return st;
}

static void test_errors(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = R(1, 1, 3, 4, 4), *w = R(2, 2, 2, 3, 3), *m = R(3, 2, 3);
    nb_value xv = nb_eager_value(b, x), wv = nb_eager_value(b, w), mv = nb_eager_value(b, m);
    CHECK(nb_is_none(nb_conv2d(b, xv, wv, NB_NONE, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_SHAPE,
              "Input has shape [1, 3, 4, 4] (3 channels) but Filter has shape [2, 2, 3, 3]");
    CHECK(nb_is_none(nb_conv2d(b, xv, nb_eager_value(b, x), NB_NONE, &(nb_conv2d_op_opts){.strides = {-1, 1}})));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "conv2d: attribute strides must lie in [1,");
    CHECK(nb_is_none(nb_pool2d(b, xv, "max", NULL, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "pool2d: ksize is NULL; it is needed unless opts->global");
    CHECK(nb_is_none(nb_pool2d(b, xv, "median", S(2, 2), NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "pooling_type must be \"max\" or \"avg\", got \"median\"");
    CHECK(nb_is_none(nb_batch_norm(b, xv, mv, mv, NULL, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "batch_norm: the running statistics are NULL");
    nb_batch_norm_stats r = {mv, mv};
    CHECK(nb_is_none(nb_batch_norm(b, xv, mv, mv, &r, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_SHAPE, "batch_norm: Scale has shape [2, 3] but X's channels need [3]");
    CHECK(nb_value_name(r.mean) == nb_value_name(mv)); /* left as it was */
    CHECK(nb_is_none(nb_layer_norm(b, mv, NB_NONE, NB_NONE, 5, 0)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "begin_norm_axis 5 is out of range for X of shape [2, 3]");
    CHECK(nb_is_none(nb_pad(b, mv, 2, S(1, 1), 0, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "pad: paddings [1, 1] has 2 entries but X of shape [2, 3] needs 4");
    CHECK(nb_is_none(nb_pad(b, mv, 4, S(1, 1, 1, 1), 0, "wrap")));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "mode \"wrap\" is not one of constant, reflect, edge");
    CHECK(nb_is_none(nb_index_select(b, mv, mv, 0)));
    CHECK_ERR(emitted_status(b), NB_ERR_DTYPE, "index_select: Index must be int32 or int64, got float64");
    CHECK(nb_is_none(nb_topk(b, mv, 4, 1, true, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "topk: k = 4 is not in [0, 3], the size of axis 1 of X (shape [2, 3])");
    CHECK(nb_is_none(nb_scatter_elements(b, mv, ev(b, T(NB_I64, S(2, 1), 0, 1)), mv, 1, "max")));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "reduction \"max\" is not one of none, add, mul");
    CHECK(nb_is_none(nb_scatter_elements(b, mv, ev(b, T(NB_I64, S(2, 1), 0, 1)), mv, 1, NULL)));
    CHECK_ERR(emitted_status(b), NB_ERR_ARG, "scatter_elements: reduction \"\" is not one of none, add, mul");
    CHECK(nb_is_none(nb_reshape_as(b, mv, xv)));
    CHECK_ERR(emitted_status(b), NB_ERR_SHAPE,
              "reshape_as: X of shape [2, 3] (6 elements) cannot take the shape [1, 3, 4, 4]");
    release_all(x, w, m, NULL);
    nb_builder_free(b);
}

int main(void)
{
    RUN(test_against_emit);
    RUN(test_values);
    RUN(test_errors);
    return test_report();
}
