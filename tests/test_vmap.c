/* nb_vmap against loops over the batch: elementwise, matmul, fc, reduction
 * and shape ops, in_axes and out_axes (negative ones too), nested vmaps,
 * per-example gradients (vmap of nb_grad) of an MLP with cross-entropy, the
 * loop fallback of an op without a rule, and the errors. */
#include <stdlib.h>
#include "test.h"
#include "nabla/layers.h"

#include "vmap_util.h"

/* ---- elementwise ------------------------------------------------------------------ */

static nb_status f_ew(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_tanh(b, nb_add(b, nb_mul(b, in[0], in[1]), in[0]));
    out[1] = nb_sub(b, nb_exp(b, in[1]), nb_scale(b, in[0], 2, 1));
    return nb_builder_status(b);
}

static void test_elementwise_in_axes(void)
{
    nb_function f = {f_ew, 2, 2, NULL};
    nb_tensor *x = R(1, 4, 3), *y = R(2, 4, 3), *y1 = R(3, 3), *xt = R(4, 3, 4);
    check_vmap(&f, (nb_tensor *[]){x, y}, (int[]){0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, y1}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){y1, x}, (int[]){NB, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){xt, y}, (int[]){-1, 0}, 0, 1e-12);  /* batch along the last axis */
    check_vmap(&f, (nb_tensor *[]){xt, y}, (int[]){1, 0}, 1, 1e-12);   /* out_axes 1 */
    check_vmap(&f, (nb_tensor *[]){xt, y}, (int[]){1, -2}, -1, 1e-12); /* out_axes -1 */
    /* a scalar example broadcast against a vector */
    nb_tensor *s = R(5, 4);
    check_vmap(&f, (nb_tensor *[]){s, y1}, (int[]){0, NB}, 0, 1e-12);
    release_all(x, y, y1, xt, s, NULL);
}

/* ---- matmul and fc ----------------------------------------------------------------- */

static nb_status f_mm(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_matmul(b, in[0], in[1], ctx ? *(unsigned *)ctx : 0);
    return nb_builder_status(b);
}

static void test_matmul(void)
{
    nb_function f = {f_mm, 2, 1, NULL};
    nb_tensor *xs = R(1, 5, 3), *w = R(2, 3, 4), *ws = R(3, 5, 3, 4), *X = R(4, 5, 2, 3), *x1 = R(5, 3);
    nb_tensor *Xb = R(6, 5, 6, 2, 3), *wt = R(7, 5, 4, 3);
    check_vmap(&f, (nb_tensor *[]){xs, w}, (int[]){0, NB}, 0, 1e-12);  /* vector @ matrix */
    check_vmap(&f, (nb_tensor *[]){xs, ws}, (int[]){0, 0}, 0, 1e-12);  /* both batched */
    check_vmap(&f, (nb_tensor *[]){x1, ws}, (int[]){NB, 0}, 0, 1e-12); /* only Y */
    check_vmap(&f, (nb_tensor *[]){X, w}, (int[]){0, NB}, 0, 1e-12);   /* matrix rows */
    check_vmap(&f, (nb_tensor *[]){X, ws}, (int[]){0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){Xb, ws}, (int[]){0, 0}, 0, 1e-12); /* batch dims of its own */
    check_vmap(&f, (nb_tensor *[]){Xb, w}, (int[]){0, NB}, 0, 1e-12);
    nb_tensor *v = R(8, 4, 5);
    check_vmap(&f, (nb_tensor *[]){w, v}, (int[]){NB, 1}, 0, 1e-12); /* matrix @ batched vector */
    nb_tensor_release(v);
    check_vmap(&f, (nb_tensor *[]){xs, xs}, (int[]){0, 0}, 0, 1e-12); /* dot products */
    unsigned ty = 1u << 1;                                            /* NB_MATMUL_TRANSPOSE_Y's bit */
    nb_function ft = {f_mm, 2, 1, &ty};
    check_vmap(&ft, (nb_tensor *[]){X, wt}, (int[]){0, 0}, 0, 1e-12);
    /* one GEMM for the batch, wherever its dim is: Y's at 0, 1 or 2, with and without transpose_y */
    nb_tensor *X2 = R(9, 2, 3), *Y0 = R(10, 5, 3, 4), *Y1 = R(11, 3, 5, 4), *Y2 = R(12, 3, 4, 5);
    nb_tensor *T0 = R(13, 5, 4, 3), *T1 = R(14, 4, 5, 3), *T2 = R(15, 4, 3, 5), *Xm = R(16, 2, 5, 3);
    for (int d = 0; d < 3; d++) {
        check_vmap(&f, (nb_tensor *[]){X2, (nb_tensor *[]){Y0, Y1, Y2}[d]}, (int[]){NB, d}, d, 1e-12);
        check_vmap(&ft, (nb_tensor *[]){X2, (nb_tensor *[]){T0, T1, T2}[d]}, (int[]){NB, d}, 0, 1e-12);
    }
    check_vmap(&f, (nb_tensor *[]){Xm, w}, (int[]){1, NB}, 1, 1e-12); /* X's rows around the batch */
    check_vmap(&f, (nb_tensor *[]){Xm, w}, (int[]){1, NB}, -1, 1e-12);
    release_all(xs, w, ws, X, x1, Xb, wt, X2, Y0, Y1, Y2, T0, T1, T2, Xm, NULL);
}

static nb_status f_fc(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_emit1(b, "fc", NB_VALUES(in[0], in[1], in[2]), NB_ATTRS(NB_ATTR_STRING("activation", "tanh")));
    return nb_builder_status(b);
}

static void test_fc(void)
{
    nb_function f = {f_fc, 3, 1, NULL};
    nb_tensor *x = R(1, 4, 2, 3), *w = R(2, 3, 5), *bias = R(3, 5), *ws = R(4, 4, 3, 5), *bs = R(5, 4, 5);
    check_vmap(&f, (nb_tensor *[]){x, w, bias}, (int[]){0, NB, NB}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, ws, bias}, (int[]){0, 0, NB}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, w, bs}, (int[]){0, NB, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, ws, bs}, (int[]){0, 0, 0}, 0, 1e-12);
    release_all(x, w, bias, ws, bs, NULL);
}

/* ---- reductions and shape ops ------------------------------------------------------- */

static nb_status f_shapes(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value x = in[0], y = in[1]; /* x [2, 3], y [3] */
    out[0] = nb_reduce_sum(b, x, 1, S(-1), false);
    out[1] = nb_reduce_mean(b, x, 0, NULL, false);
    out[2] = nb_softmax(b, x, -1);
    out[3] = nb_log_softmax(b, x, 0);
    out[4] = nb_transpose(b, x, 2, S(1, 0));
    out[5] = nb_reshape(b, x, 2, S(3, -1));
    out[6] = nb_concat(b, 2, (nb_value[]){x, nb_unsqueeze(b, y, 1, S(0))}, 0);
    out[7] = nb_stack(b, 2, (nb_value[]){nb_reduce_max(b, x, 1, S(0), false), y}, -1);
    return nb_builder_status(b);
}

static nb_status f_shapes2(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value x = in[0], y = in[1];
    out[0] = nb_slice(b, x, 1, S(-1), S(1), S(3));
    out[1] = nb_squeeze(b, nb_unsqueeze(b, x, 2, S(0, 2)), 1, S(0));
    out[2] = nb_flatten(b, x, 0, -1);
    out[3] = nb_expand(b, nb_unsqueeze(b, y, 1, S(0)), 2, S(2, 3));
    out[4] = nb_sum_to(b, nb_mul(b, x, y), y);
    out[5] = nb_logsumexp(b, x, 1, S(1), true);
    out[6] = nb_sum(b, 2, (nb_value[]){x, nb_expand_as(b, y, x)});
    out[7] = nb_where(b, nb_greater(b, x, y), x, y);
    return nb_builder_status(b);
}

static void test_reductions_and_shapes(void)
{
    nb_function f = {f_shapes, 2, 8, NULL}, g = {f_shapes2, 2, 8, NULL};
    nb_tensor *x = R(1, 4, 2, 3), *y = R(2, 3), *ys = R(3, 4, 3), *xl = R(4, 2, 3, 4);
    check_vmap(&f, (nb_tensor *[]){x, y}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, ys}, (int[]){0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){xl, ys}, (int[]){-1, 0}, -1, 1e-12);
    nb_tensor *xm = R(5, 2, 4, 3);
    check_vmap(&f, (nb_tensor *[]){xm, y}, (int[]){1, NB}, 0, 1e-12); /* the batch in the middle */
    check_vmap(&g, (nb_tensor *[]){xm, ys}, (int[]){1, 0}, 1, 1e-12);
    nb_tensor_release(xm);
    check_vmap(&g, (nb_tensor *[]){x, y}, (int[]){0, NB}, 0, 1e-12);
    check_vmap(&g, (nb_tensor *[]){x, ys}, (int[]){0, 0}, 0, 1e-12);
    check_vmap(&g, (nb_tensor *[]){x, ys}, (int[]){NB, 0}, 0, 1e-12); /* only y: x shared */
    release_all(x, y, ys, xl, NULL);
}

/* ---- norms and attention, and their gradients (per example) ---------------------------- */

/* in: x [N=3, C=2, 4] for batch_norm; q [2, 5, 4], k, v [2, 6, 4] for attention. */
static nb_status f_norm_att(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value bn[5], scale = nb_fill_constant(b, NB_F64, 1, S(2), 1.5),
                    bias = nb_fill_constant(b, NB_F64, 1, S(2), 0.25);
    nb_value mean = nb_fill_constant(b, NB_F64, 1, S(2), 0), var = nb_fill_constant(b, NB_F64, 1, S(2), 1);
    nb_emit(b, "batch_norm", NB_VALUES(in[0], scale, bias, mean, var), NB_NO_ATTRS, 5, bn);
    out[0] = bn[0];
    out[1] = bn[1];
    out[2] = nb_scaled_dot_product_attention(b, in[1], in[2], in[3], NULL);
    return nb_builder_status(b);
}

/* The gradients of a loss of both with respect to all inputs. */
static nb_status f_norm_att_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value o[3];
    nb_status st = f_norm_att(b, in, o, ctx);
    if (st) return st;
    out[0] = nb_add(b, nb_reduce_sum(b, nb_mul(b, o[0], o[0]), 0, NULL, false),
                    nb_reduce_sum(b, nb_tanh(b, o[2]), 0, NULL, false));
    return nb_builder_status(b);
}

static nb_status f_norm_att_grads(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    return grads_of(b, f_norm_att_loss, 4, 4, in, out, ctx);
}

/* sum(tanh(layer_norm(x, scale, bias) * x)) with x [3, 2, 4] per example, normalised over its last two dims
 * (ctx: begin_norm_axis) */
static nb_status f_ln_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value y[3];
    nb_emit(b, "layer_norm", NB_VALUES(in[0], in[1], in[2]), NB_ATTRS(NB_ATTR_INT("begin_norm_axis", *(int *)ctx)), 3,
            y);
    out[0] = nb_reduce_sum(b, nb_tanh(b, nb_mul(b, y[0], in[0])), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_ln_grads(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    return grads_of(b, f_ln_loss, 3, 3, in, out, ctx);
}

/* sum(tanh(pool(conv2d(x, w, bias)))) for x [1, 2, 5, 5], w [4, 2, 3, 3] (groups 2 when ctx) */
static nb_status f_conv_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value y = nb_emit1(b, "conv2d", NB_VALUES(in[0], in[1], in[2]),
                          NB_ATTRS(NB_ATTR_INTS("paddings", 1, 1), NB_ATTR_INT("groups", ctx ? 2 : 1)));
    y = nb_emit1(b, "pool2d", NB_VALUES(y), NB_ATTRS(NB_ATTR_INTS("ksize", 2, 2), NB_ATTR_INTS("strides", 2, 2)));
    out[0] = nb_reduce_sum(b, nb_tanh(b, y), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_conv_grads(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    return grads_of(b, f_conv_loss, 3, 3, in, out, ctx);
}

static void test_conv(void)
{
    nb_tensor *x = R(1, 3, 1, 2, 5, 5), *w = R(2, 4, 2, 3, 3), *bias = R(3, 4), *ws = R(4, 3, 4, 2, 3, 3);
    nb_tensor *wg = R(5, 4, 1, 3, 3), *bs = R(6, 3, 4);
    nb_function g = {f_conv_grads, 3, 3, NULL}, gg = {f_conv_grads, 3, 3, (void *)1}, f = {f_conv_loss, 3, 1, NULL};
    check_vmap(&g, (nb_tensor *[]){x, w, bias}, (int[]){0, NB, NB}, 0, 1e-10);   /* per-example filter gradients */
    check_vmap(&g, (nb_tensor *[]){x, ws, bs}, (int[]){0, 0, 0}, 0, 1e-10);      /* a filter per example */
    check_vmap(&gg, (nb_tensor *[]){x, wg, bias}, (int[]){0, NB, NB}, 0, 1e-10); /* grouped */
    check_vmap(&f, (nb_tensor *[]){x, ws, bias}, (int[]){0, 0, NB}, 0, 1e-12);
    release_all(x, w, bias, ws, wg, bs, NULL);
}

static void test_norm_and_attention(void)
{
    /* per-example gradients of a layer norm's shared scale and bias */
    nb_tensor *lx = R(7, 5, 3, 2, 4), *ls = R(8, 2, 4), *lb = R(9, 2, 4), *ls1 = R(10, 4), *lb1 = R(11, 4);
    int one = 1, two = 2, minus1 = -1;
    nb_function lg = {f_ln_grads, 3, 3, &one}, lg2 = {f_ln_grads, 3, 3, &two}, lg0 = {f_ln_grads, 3, 3, &minus1};
    check_vmap(&lg, (nb_tensor *[]){lx, ls, lb}, (int[]){0, NB, NB}, 0, 1e-10);
    check_vmap(&lg2, (nb_tensor *[]){lx, ls1, lb1}, (int[]){0, NB, NB}, 0, 1e-10);
    check_vmap(&lg0, (nb_tensor *[]){lx, ls1, lb1}, (int[]){0, NB, NB}, 0, 1e-10);
    release_all(lx, ls, lb, ls1, lb1, NULL);

    nb_tensor *x = R(1, 3, 3, 2, 4), *q = R(2, 3, 2, 5, 4), *k = R(3, 3, 2, 6, 4), *v = R(4, 3, 2, 6, 4),
              *v1 = R(5, 2, 6, 4);
    nb_function f = {f_norm_att, 4, 3, NULL}, g = {f_norm_att_grads, 4, 4, NULL};
    check_vmap(&f, (nb_tensor *[]){x, q, k, v}, (int[]){0, 0, 0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, q, k, v1}, (int[]){0, 0, 0, NB}, 0, 1e-12);
    check_vmap(&g, (nb_tensor *[]){x, q, k, v}, (int[]){0, 0, 0, 0}, 0, 1e-10);
    check_vmap(&g, (nb_tensor *[]){x, q, k, v1}, (int[]){0, 0, 0, NB}, 0, 1e-10);
    release_all(x, q, k, v, v1, NULL);
}

/* ---- the loop fallback ------------------------------------------------------------- */

static nb_status f_scatter(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx; /* scatter_add and gather with batched indices take the loop; accuracy has no rule */
    out[0] = nb_scatter_add(b, in[0], in[1], in[2], 0);
    out[1] = nb_gather(b, in[0], in[1], 0);
    out[2] = nb_accuracy(b, nb_reshape(b, in[0], 2, S(2, 4)), in[1], 1);
    return nb_builder_status(b);
}

static void test_loop_fallback(void)
{
    const nb_op_def *def = nb_op_find("accuracy");
    CHECK(def && !def->batch);
    nb_function f = {f_scatter, 3, 3, NULL};
    nb_tensor *x = R(1, 3, 4, 2), *u = R(2, 3, 2, 2), *idx = T(NB_I64, S(3, 2), 0, 3, 1, 1, 2, 0);
    nb_tensor *idx1 = T(NB_I64, S(2), 3, 0);
    check_vmap(&f, (nb_tensor *[]){x, idx, u}, (int[]){0, 0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, idx1, u}, (int[]){0, NB, 0}, 0, 1e-12);
    release_all(x, u, idx, idx1, NULL);
}

/* ---- nesting ------------------------------------------------------------------------ */

static nb_status f_inner(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_matmul(b, nb_tanh(b, in[0]), in[1], 0);
    return nb_builder_status(b);
}

/* vmap over the rows of each example's matrix, inside vmap over examples. */
static nb_status f_nested(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_function inner = {f_inner, 2, 1, NULL};
    return nb_vmap_emit(b, &inner, &(nb_vmap_opts){.in_axes = (int[]){0, NB}, .out_axes = ctx}, in, out);
}

static void test_nested(void)
{
    nb_tensor *x = R(1, 3, 5, 4), *w = R(2, 3, 4, 2), *w1 = R(3, 4, 2);
    nb_function f = {f_nested, 2, 1, NULL};
    check_vmap(&f, (nb_tensor *[]){x, w}, (int[]){0, 0}, 0, 1e-12);
    check_vmap(&f, (nb_tensor *[]){x, w1}, (int[]){1, NB}, 0, 1e-12);
    nb_function g = {f_nested, 2, 1, (int[]){-1}};
    check_vmap(&g, (nb_tensor *[]){x, w}, (int[]){0, 0}, 2, 1e-12);
    release_all(x, w, w1, NULL);
}

/* ---- per-example gradients ---------------------------------------------------------- */

/* loss(W1, b1, W2, b2; x [4], label [1]) of a tanh MLP with cross-entropy. */
static nb_status f_loss(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value x = nb_unsqueeze(b, in[4], 1, S(0));
    nb_value h = nb_tanh(b, nb_add(b, nb_matmul(b, x, in[0], 0), in[1]));
    nb_value logits = nb_add(b, nb_matmul(b, h, in[2], 0), in[3]);
    nb_value loss = nb_softmax_with_cross_entropy(b, logits, nb_unsqueeze(b, in[5], 1, S(0)), NULL);
    out[0] = nb_reduce_sum(b, loss, 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_grads(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    return grads_of(b, f_loss, 6, 4, in, out, ctx);
}

static void test_per_example_grads(void)
{
    nb_tensor *w1 = R(1, 4, 5), *b1 = R(2, 5), *w2 = R(3, 5, 3), *b2 = R(4, 3), *x = R(5, 6, 4);
    nb_tensor *label = T(NB_I64, S(6, 1), 0, 2, 1, 1, 0, 2);
    nb_function f = {f_grads, 6, 4, NULL};
    check_vmap(&f, (nb_tensor *[]){w1, b1, w2, b2, x, label}, (int[]){NB, NB, NB, NB, 0, 0}, 0, 1e-10);
    /* and with the parameters requiring grad (an outer tape) */
    REQUIRE_OK(nb_tensor_set_requires_grad(w1, true));
    check_vmap(&f, (nb_tensor *[]){w1, b1, w2, b2, x, label}, (int[]){NB, NB, NB, NB, 0, 0}, 0, 1e-10);
    release_all(w1, b1, w2, b2, x, label, NULL);
}

/* ---- transforms of vmap: grad and jvp of a vmapped function ---------------------------- */

/* sum over examples of sum(tanh(x_e @ w)), by vmap (ctx set) or directly. */
static nb_status f_sum_vmapped(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value y;
    if (ctx) {
        nb_function inner = {f_inner, 2, 1, NULL};
        if (nb_vmap_emit(b, &inner, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, in, &y)) return nb_builder_status(b);
    } else y = nb_matmul(b, nb_tanh(b, in[0]), in[1], 0);
    out[0] = nb_reduce_sum(b, nb_tanh(b, y), 0, NULL, false);
    return nb_builder_status(b);
}

static void test_transforms_of_vmap(void)
{
    nb_tensor *x = R(1, 5, 3), *w = R(2, 3, 4), *tx = R(3, 5, 3), *tw = R(4, 3, 4);
    nb_function fv = {f_sum_vmapped, 2, 1, (void *)1}, fd = {f_sum_vmapped, 2, 1, NULL};
    nb_tensor *gv[2], *gd[2], *ov[1], *od[1], *tv[1], *td[1];
    REQUIRE_OK(nb_grad(&fv, (nb_tensor *[]){x, w}, NULL, gv, NULL)); /* grad of vmap */
    REQUIRE_OK(nb_grad(&fd, (nb_tensor *[]){x, w}, NULL, gd, NULL));
    CHECK(nb_tensor_allclose(gv[0], gd[0], 1e-12, 1e-12) && nb_tensor_allclose(gv[1], gd[1], 1e-12, 1e-12));
    REQUIRE_OK(nb_jvp(&fv, (nb_tensor *[]){x, w}, (nb_tensor *[]){tx, tw}, ov, tv)); /* jvp of vmap */
    REQUIRE_OK(nb_jvp(&fd, (nb_tensor *[]){x, w}, (nb_tensor *[]){tx, tw}, od, td));
    CHECK(nb_tensor_allclose(ov[0], od[0], 1e-12, 1e-12) && nb_tensor_allclose(tv[0], td[0], 1e-12, 1e-12));
    nb_tensor *hv = NULL, *hd = NULL; /* and a Hessian through it */
    REQUIRE_OK(nb_hessian(&fv, (nb_tensor *[]){x, w}, 1, &hv));
    REQUIRE_OK(nb_hessian(&fd, (nb_tensor *[]){x, w}, 1, &hd));
    CHECK(nb_tensor_allclose(hv, hd, 1e-10, 1e-12));
    release_all(x, w, tx, tw, gv[0], gv[1], gd[0], gd[1], ov[0], od[0], tv[0], td[0], hv, hd, NULL);
}

/* ---- Jacobians and Hessians through vmap ------------------------------------------- */

/* The paths without vmap (src/transforms/transforms_internal.h). */
nb_status nb_jacfwd_by_sets(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac);
nb_status nb_jacrev_by_rows(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac);

/* out0 = tanh(x @ W + b) [2, 3], out1 = sum(out0^2) (a scalar): in = x [2, 4], W [4, 3], b [3]. */
static nb_status f_mlp(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_tanh(b, nb_add(b, nb_matmul(b, in[0], in[1], 0), in[2]));
    out[1] = nb_reduce_sum(b, nb_mul(b, nb_square(b, out[0]), nb_sigmoid(b, out[0])), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status f_scalar(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    nb_value o[2];
    nb_status st = f_mlp(b, in, o, ctx);
    out[0] = o[1];
    return st;
}

/* d out / d in[arg] by central differences, shaped as the Jacobian. */
static nb_tensor *fd_jacobian(const nb_function *f, nb_tensor *const *in, int out, int arg)
{
    nb_tensor *a = in[arg], *o[2] = {0}, *jac = NULL;
    if (run_once(f, in, o)) return NULL;
    int64_t n_a = nb_tensor_numel(a), n_o = nb_tensor_numel(o[out]);
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, o[out]->shape, (size_t)o[out]->ndim * sizeof *shape);
    memcpy(shape + o[out]->ndim, a->shape, (size_t)a->ndim * sizeof *shape);
    if (nb_tensor_new(&jac, NB_F64, o[out]->ndim + a->ndim, shape)) return NULL;
    for (int k = 0; k < f->n_out; k++) nb_tensor_release(o[k]);
    for (int64_t j = 0; j < n_a; j++) {
        double v = nb_tensor_get(a, j), h = 1e-6, r[2][64];
        for (int s = 0; s < 2; s++) {
            nb_tensor_set(a, j, v + (s ? -h : h));
            nb_tensor *p[2] = {0};
            if (run_once(f, in, p)) return jac;
            for (int64_t i = 0; i < n_o && i < 64; i++) r[s][i] = nb_tensor_get(p[out], i);
            for (int k = 0; k < f->n_out; k++) nb_tensor_release(p[k]);
        }
        nb_tensor_set(a, j, v);
        for (int64_t i = 0; i < n_o && i < 64; i++) nb_tensor_set(jac, i * n_a + j, (r[0][i] - r[1][i]) / (2 * h));
    }
    return jac;
}

static void test_jacobians(void)
{
    nb_tensor *x = R(1, 2, 4), *w = R(2, 4, 3), *bias = R(3, 3), *in[3] = {x, w, bias};
    nb_function f = {f_mlp, 3, 2, NULL};
    for (int arg = 0; arg < 3; arg++)
        for (int out = 0; out < 2; out++) {
            nb_tensor *fwd = NULL, *rev = NULL, *fwd0 = NULL, *rev0 = NULL, *fd = fd_jacobian(&f, in, out, arg);
            REQUIRE_OK(nb_jacfwd(&f, in, out, arg, &fwd));
            REQUIRE_OK(nb_jacrev(&f, in, out, arg, &rev));
            REQUIRE_OK(nb_jacfwd_by_sets(&f, in, out, arg, &fwd0));
            REQUIRE_OK(nb_jacrev_by_rows(&f, in, out, arg, &rev0));
            CHECK(nb_tensor_allclose(fwd, fwd0, 1e-12, 1e-12));
            CHECK(nb_tensor_allclose(rev, rev0, 1e-12, 1e-12));
            CHECK(nb_tensor_allclose(fwd, fd, 1e-6, 1e-7));
            release_all(fwd, rev, fwd0, rev0, fd, NULL);
        }
    /* Hessians: forward over reverse through vmap, against reverse over reverse and differences of the gradient */
    nb_function s = {f_scalar, 3, 1, NULL};
    for (int arg = 0; arg < 3; arg++) {
        nb_tensor *h = NULL, *hr = NULL;
        REQUIRE_OK(nb_hessian(&s, in, arg, &h));
        REQUIRE_OK(nb_hessian_by_reverse(&s, in, arg, &hr));
        CHECK(nb_tensor_allclose(h, hr, 1e-10, 1e-12));
        int64_t n = nb_tensor_numel(in[arg]);
        CHECK(h->ndim == 2 * in[arg]->ndim && nb_tensor_numel(h) == n * n);
        release_all(h, hr, NULL);
    }
    release_all(x, w, bias, NULL);
}

/* ---- a record builder: the batched ops in a program ---------------------------------- */

/* Elementwise, matmul, reductions, softmax, shape ops, an op without a rule
 * (scatter_add) and a nested vmap: x [2, 3] per example, w [3, 4] shared. */
static nb_status f_prog(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value h = nb_tanh(b, nb_matmul(b, in[0], in[1], 0));
    out[0] = nb_softmax(b, nb_add(b, h, nb_reduce_mean(b, h, 1, S(0), true)), -1);
    out[1] = nb_reduce_sum(b, nb_transpose(b, nb_mul(b, h, h), 2, S(1, 0)), 1, S(-1), false);
    nb_value idx = nb_constant(b, ctx);
    out[2] = nb_scatter_add(b, in[0], idx, nb_slice(b, in[0], 1, S(0), S(0), S(1)), 0);
    nb_function inner = {f_inner, 2, 1, NULL};
    nb_vmap_emit(b, &inner, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, in, &out[3]);
    return nb_builder_status(b);
}

static void test_record_builder(void)
{
    nb_tensor *x = R(1, 5, 2, 3), *w = R(2, 3, 4), *idx = T(NB_I64, S(1), 1), *eager[4] = {0}, *got[4] = {0};
    nb_function f = {f_prog, 2, 4, idx};
    nb_vmap_opts o = {.in_axes = (int[]){1, NB}, .out_axes = (int[]){0, -1, 0, 1}};
    REQUIRE_OK(nb_vmap(&f, &o, (nb_tensor *[]){x, w}, eager));
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value xv = nb_data(b, "x", NB_F64, 3, S(5, 2, 3)), wv = nb_data(b, "w", NB_F64, 2, S(3, 4)), out[4];
    CHECK_OK(nb_vmap_emit(b, &f, &o, (nb_value[]){xv, wv}, out));
    if (nb_builder_status(b)) fprintf(stderr, "  %s\n", nb_builder_error(b));
    nb_executor *ex;
    nb_scope *scope;
    REQUIRE_OK(nb_executor_new(&ex));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    for (int k = 0; k < 4 && !nb_builder_status(b); k++) {
        CHECK_OK(nb_executor_run(ex, p, scope, NB_FEEDS({"x", x}, {"w", w}), NB_NAMES(nb_value_name(out[k])), &got[k]));
        CHECK(got[k] && nb_tensor_allclose(got[k], eager[k], 1e-12, 1e-12));
    }
    /* the program holds batched ops, not a loop, where rules exist: one tanh */
    int tanhs = 0;
    nb_block *g = nb_program_global_block(p);
    for (int i = 0; i < g->n_ops; i++) tanhs += !strcmp(g->ops[i]->def->name, "tanh");
    CHECK(tanhs == 2); /* the outer function's and the nested one's */
    /* a batch size that does not match, in a program */
    nb_value bad[4];
    nb_value zv = nb_data(b, "z", NB_F64, 2, S(4, 3));
    CHECK_ERR(nb_vmap_emit(b, &f, &(nb_vmap_opts){.in_axes = (int[]){1, 0}}, (nb_value[]){xv, zv}, bad), NB_ERR_SHAPE,
              "input 1 has batch size 4");
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(p);
    for (int k = 0; k < 4; k++) release_all(eager[k], got[k], NULL);
    release_all(x, w, idx, NULL);
}

/* ---- chunks and errors -------------------------------------------------------------- */

static void test_chunks(void)
{
    nb_function f = {f_ew, 2, 2, NULL};
    nb_tensor *x = R(1, 7, 3), *y = R(2, 3), *a[2], *c[2];
    REQUIRE_OK(nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){0, NB}}, (nb_tensor *[]){x, y}, a));
    REQUIRE_OK(nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){0, NB}, .chunk_size = 3}, (nb_tensor *[]){x, y}, c));
    CHECK(nb_tensor_allclose(a[0], c[0], 0, 0) && nb_tensor_allclose(a[1], c[1], 0, 0));
    release_all(x, y, a[0], a[1], c[0], c[1], NULL);
}

static nb_status f_read(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_tensor *t = nb_eager_tensor(in[0]), *c = NULL, *v = NULL;
    /* every read of a logical tensor's memory fails cleanly */
    char *s = nb_tensor_to_string(t);
    if (s || nb_tensor_clone(&c, t) != NB_ERR_ARG || nb_tensor_contiguous(&c, t) != NB_ERR_ARG || c ||
        !isnan(nb_tensor_get(t, 0)) || nb_tensor_print(t, stderr) != NB_ERR_ARG ||
        nb_tensor_reshape(&v, t, 1, S(-1)) != NB_ERR_ARG || v) {
        nb_free(s);
        return nb_error(NB_ERR_STATE, "a read of a logical tensor did not fail");
    }
    if (!nb_tensor_data(t)) return NB_ERR_ARG; /* with its error text */
    out[0] = in[0];
    return nb_builder_status(b);
}

static nb_status f_run(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_tensor *y = NULL;
    nb_status st = nb_op_run("tanh", NB_TENSORS(nb_eager_tensor(in[0])), NB_NO_ATTRS, 1, &y);
    out[0] = in[0];
    nb_tensor_release(y);
    return st ? st : nb_builder_status(b);
}

/* Fails without a message of its own. */
static nb_status f_silent(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)b, (void)in, (void)out, (void)ctx;
    return NB_ERR_STATE;
}

static nb_status f_batch_norm(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_layer_batch_norm(b, in[0], NULL);
    return nb_builder_status(b);
}

/* A batch norm's running statistics are one var shared by every example:
 * under vmap in a program, a clear refusal, and the program keeps no half
 * of the layer's update. */
static void test_state_update_refused(void)
{
    nb_program *p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&p));
    REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
    nb_value x = nb_data(b, "x", NB_F64, 3, S(4, 2, 3)), y;
    nb_function f = {f_batch_norm, 1, 1, NULL};
    CHECK_ERR(nb_vmap_emit(b, &f, NULL, &x, &y), NB_ERR_UNSUPPORTED,
              "vmap: batch_norm updates state shared by every example (input 0 is batched)");
    int bn = 0;
    nb_block *g = nb_program_global_block(p);
    for (int i = 0; i < g->n_ops; i++) bn += !strcmp(g->ops[i]->def->name, "batch_norm");
    CHECK(bn == 0);
    nb_builder_free(b);
    nb_program_free(p);
}

static void test_errors(void)
{
    nb_function f = {f_ew, 2, 2, NULL}, rd = {f_read, 1, 1, NULL}, rn = {f_run, 1, 1, NULL};
    nb_tensor *x = R(1, 4, 3), *y = R(2, 5, 3), *out[2];
    CHECK_ERR(nb_vmap(&f, NULL, (nb_tensor *[]){x, y}, out), NB_ERR_SHAPE,
              "input 1 has batch size 5 (axis 0 of shape [5, 3]) but input 0 has 4");
    CHECK_ERR(nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){2, 0}}, (nb_tensor *[]){x, y}, out), NB_ERR_ARG,
              "in_axes[0] is 2 but input 0 has shape [4, 3]");
    CHECK_ERR(
        nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){0, NB}, .out_axes = (int[]){0, 3}}, (nb_tensor *[]){x, y}, out),
        NB_ERR_ARG, "out_axes[1] is 3");
    CHECK_ERR(nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){NB, NB}}, (nb_tensor *[]){x, y}, out), NB_ERR_ARG,
              "give batch_size");
    CHECK_ERR(nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){0, NB}, .batch_size = 3}, (nb_tensor *[]){x, y}, out),
              NB_ERR_SHAPE, "input 0 has batch size 4 (axis 0 of shape [4, 3]) but batch_size is 3");
    /* A function failing without a message does not pass on an earlier
     * failure's (the one just above) or an empty one. */
    nb_function silent = {f_silent, 1, 1, NULL};
    CHECK_ERR(nb_vmap(&silent, NULL, &x, out), NB_ERR_STATE,
              "vmap: the mapped function failed (invalid state) and left no message");
    CHECK(!strstr(nb_last_error(), "batch size"));
    nb_clear_error();
    CHECK_ERR(nb_vmap(&silent, NULL, &x, out), NB_ERR_STATE, "the mapped function failed (invalid state)");
    /* One that succeeds leaves the last failure's text as it was. */
    nb_error(NB_ERR_ARG, "an earlier failure");
    nb_tensor *ok[2];
    REQUIRE_OK(nb_vmap(&f, NULL, (nb_tensor *[]){x, x}, ok));
    CHECK_STR(nb_last_error(), "an earlier failure");
    release_all(ok[0], ok[1], NULL);
    /* per-example shapes that do not fit name the op and the example's shapes */
    nb_tensor *z = R(3, 4, 2);
    CHECK_ERR(nb_vmap(&f, NULL, (nb_tensor *[]){x, z}, out), NB_ERR_SHAPE, "per example");
    CHECK_ERR(nb_vmap(&rd, NULL, &x, out), NB_ERR_ARG, "batched (vmap) value");
    CHECK_ERR(nb_vmap(&rn, NULL, &x, out), NB_ERR_ARG, "batched (vmap) tensor");
    /* an output that does not depend on the batch is broadcast */
    nb_tensor *o2[2], *y1 = R(4, 3);
    REQUIRE_OK(nb_vmap(&f, &(nb_vmap_opts){.in_axes = (int[]){NB, NB}, .batch_size = 2, .out_axes = (int[]){1, 0}},
                       (nb_tensor *[]){x, y1}, o2));
    nb_tensor_release(y1);
    CHECK(o2[0]->ndim == 3 && o2[0]->shape[1] == 2 && o2[1]->shape[0] == 2);
    release_all(x, y, z, o2[0], o2[1], NULL);
}

int main(void)
{
    RUN(test_elementwise_in_axes);
    RUN(test_matmul);
    RUN(test_fc);
    RUN(test_reductions_and_shapes);
    RUN(test_norm_and_attention);
    RUN(test_conv);
    RUN(test_loop_fallback);
    RUN(test_nested);
    RUN(test_per_example_grads);
    RUN(test_transforms_of_vmap);
    RUN(test_jacobians);
    RUN(test_record_builder);
    RUN(test_chunks);
    RUN(test_state_update_refused);
    RUN(test_errors);
    return test_report();
}
