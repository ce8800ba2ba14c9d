/* Rules of scaled_dot_product_attention and of its fused gradient op.
 *
 * The forward op's VJP emits the gradient op, which recomputes the weights
 * blockwise as its kernel does. Everything else (the forward op's JVP, and
 * both rules of the gradient op, which give second derivatives) comes from
 * a composite definition: the same computation written with primitive ops
 * (see composite.h), with the [..., T, S] weights materialised, which only
 * the higher orders pay for. The masks enter those definitions through two
 * constant ops, attention_causal_bias and attention_dropout_mask, the latter
 * drawing exactly the weights the kernels drop (from the forward op's Key). */
#include <math.h>
#include "attention_grad.h"
#include "composite.h"
#include "conv_grad.h"
#include "nabla/ops.h"
#include "nabla/op.h"

enum { Q, K, V, MASK };                     /* both ops' first inputs */
enum { G_LSE = 4, G_KEY, G_DOUT, G_DELTA }; /* the gradient op's others */

static bool dropping(const nb_grad_ctx *g)
{
    return nb_grad_attr(g, "dropout_prob")->f > 0 && !nb_grad_attr(g, "is_test")->b;
}

static int64_t heads_of(const nb_grad_ctx *g) { return nb_grad_attr(g, "heads")->i; }

/* The scores' factor: the attribute, or 1/sqrt(D) for 0. */
static double scale_of(nb_builder *b, const nb_grad_ctx *g)
{
    const double s = nb_grad_attr(g, "scale")->f;
    if (s != 0) return s;
    const nb_var_info q = nb_value_info(b, nb_grad_x(g, Q, 0));
    const int64_t heads = heads_of(g), last = q.shape[q.ndim - 1];
    const int64_t D = heads > 0 && last > 0 ? last / heads : last;
    if (D <= 0) {
        nb_builder_fail(b, NB_ERR_SHAPE, "scaled_dot_product_attention rule: Q's last dim must be known");
        return 1;
    }
    return 1.0 / sqrt((double)D);
}

/* ---- composite definitions ------------------------------------------------------ */

static nb_value matmul(nb_composite *c, nb_value x, nb_value y, bool tx, bool ty, double alpha)
{
    const nb_attr a[3] = {NB_ATTR_BOOL("transpose_x", tx), NB_ATTR_BOOL("transpose_y", ty),
                          NB_ATTR_FLOAT("alpha", alpha)};
    return nb_cmp_emit(c, "matmul", 2, (nb_value[]){x, y}, 3, a);
}

static nb_value binary(nb_composite *c, const char *type, nb_value x, nb_value y)
{
    return nb_cmp_emit(c, type, 2, (nb_value[]){x, y}, 0, NULL);
}

/* A row statistic [..., T] as [..., T, 1], to broadcast over the keys. */
static nb_value as_column(nb_composite *c, nb_value row, int nd)
{
    const nb_attr a[1] = {NB_ATTR_INTS("axes", nd - 1)};
    return nb_cmp_emit(c, "unsqueeze", 1, &row, 1, a);
}

/* With the heads side by side ([..., T, H * D], the heads attribute), the
 * composite definitions work on [..., H, T, D]: x split into heads and
 * moved in front of its rows, or y moved back and joined. */
static nb_value split_heads(nb_composite *c, nb_value x, int64_t heads)
{
    const int nd = nb_value_info(nb_cmp_builder(c), x).ndim;
    int64_t shape[NB_MAX_DIMS], perm[NB_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) shape[i] = 0;
    shape[nd - 1] = heads;
    shape[nd] = -1;
    for (int i = 0; i <= nd; i++) perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    const nb_attr ra[1] = {NB_ATTR_INTS_N("shape", nd + 1, shape)}, ta[1] = {NB_ATTR_INTS_N("perm", nd + 1, perm)};
    return nb_cmp_emit(c, "transpose", 1, (nb_value[]){nb_cmp_emit(c, "reshape", 1, &x, 1, ra)}, 1, ta);
}

static nb_value join_heads(nb_composite *c, nb_value y)
{
    const int nd = nb_value_info(nb_cmp_builder(c), y).ndim;
    int64_t shape[NB_MAX_DIMS], perm[NB_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 3] = nd - 2;
    perm[nd - 2] = nd - 3;
    for (int i = 0; i < nd - 2; i++) shape[i] = 0;
    shape[nd - 2] = -1;
    const nb_attr ta[1] = {NB_ATTR_INTS_N("perm", nd, perm)}, ra[1] = {NB_ATTR_INTS_N("shape", nd - 1, shape)};
    return nb_cmp_emit(c, "reshape", 1, (nb_value[]){nb_cmp_emit(c, "transpose", 1, &y, 1, ta)}, 1, ra);
}

/* Input slot `slot` as [..., H, T, D]. */
static nb_value head_input(nb_composite *c, const nb_grad_ctx *g, int slot)
{
    const nb_value x = nb_grad_x(g, slot, 0);
    return heads_of(g) > 0 ? split_heads(c, x, heads_of(g)) : x;
}

static nb_value head_output(nb_composite *c, const nb_grad_ctx *g, nb_value y)
{
    return heads_of(g) > 0 ? join_heads(c, y) : y;
}

/* scale * Q K^T + Mask (+ the causal bias). */
static nb_value scores(nb_composite *c, const nb_grad_ctx *g)
{
    nb_builder *b = nb_cmp_builder(c);
    const nb_value q = head_input(c, g, Q), k = head_input(c, g, K);
    nb_value s = matmul(c, q, k, false, true, scale_of(b, g));
    if (nb_grad_in_count(g, MASK)) s = binary(c, "add", s, nb_grad_x(g, MASK, 0));
    if (nb_grad_attr(g, "causal")->b)
        s = binary(c, "add", s, nb_cmp_emit(c, "attention_causal_bias", 2, (nb_value[]){q, k}, 0, NULL));
    return s;
}

/* The weights exp(S - LSE), and the dropout factors (NB_NONE: none). */
static nb_value weights(nb_composite *c, const nb_grad_ctx *g, nb_value s, nb_value lse, nb_value key, nb_value *z)
{
    const int nd = nb_value_info(nb_cmp_builder(c), s).ndim;
    *z = NB_NONE;
    if (dropping(g)) {
        nb_attr a[NB_MAX_ATTRS];
        const int n = nb_convgrad_attrs(g, "attention_dropout_mask", a);
        *z = nb_cmp_emit(c, "attention_dropout_mask", 3, (nb_value[]){nb_grad_x(g, Q, 0), nb_grad_x(g, K, 0), key}, n,
                         a);
    }
    return nb_cmp_emit(c, "exp", 1, (nb_value[]){binary(c, "sub", s, as_column(c, lse, nd))}, 0, NULL);
}

/* Out and LSE from Q, K, V (and Mask). */
static nb_status attention_composite(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y)
{
    (void)x;
    nb_builder *b = nb_cmp_builder(c);
    const nb_value s = scores(c, g);
    const int nd = nb_value_info(b, s).ndim;
    const nb_attr a[2] = {NB_ATTR_INTS("axes", nd - 1), NB_ATTR_BOOL("keepdim", false)};
    const nb_value lse = nb_cmp_emit(c, "logsumexp", 1, &s, 2, a);
    nb_value z, p = weights(c, g, s, lse, nb_grad_y(g, 2, 0), &z);
    if (!nb_is_none(z)) p = binary(c, "mul", p, z);
    y[0] = head_output(c, g, matmul(c, p, head_input(c, g, V), false, false, 1));
    y[1] = lse;
    return nb_builder_status(b);
}

/* DQ, DK, DV from (Q, K, V, Mask?, LSE, Key, DOut, Delta), as the kernel. */
static nb_status attention_grad_composite(nb_composite *c, const nb_grad_ctx *g, const nb_value *x, nb_value *y)
{
    (void)x;
    nb_builder *b = nb_cmp_builder(c);
    const nb_value s = scores(c, g), dout = head_input(c, g, G_DOUT);
    const int nd = nb_value_info(b, s).ndim;
    const double scale = scale_of(b, g);
    nb_value z, p = weights(c, g, s, nb_grad_x(g, G_LSE, 0), nb_grad_x(g, G_KEY, 0), &z);
    const nb_value pd = nb_is_none(z) ? p : binary(c, "mul", p, z);
    y[2] = head_output(c, g, matmul(c, pd, dout, true, false, 1));
    nb_value dp = matmul(c, dout, head_input(c, g, V), false, true, 1);
    if (!nb_is_none(z)) dp = binary(c, "mul", dp, z);
    const nb_value ds = binary(c, "mul", p, binary(c, "sub", dp, as_column(c, nb_grad_x(g, G_DELTA, 0), nd)));
    y[0] = head_output(c, g, matmul(c, ds, head_input(c, g, K), false, false, scale));
    y[1] = head_output(c, g, matmul(c, ds, head_input(c, g, Q), true, false, scale));
    return nb_builder_status(b);
}

/* ---- rules ---------------------------------------------------------------------- */

/* Out's cotangent DOut and LSE's DLSE become the gradient op's DOut and
 * Delta = rowsum(DOut * Out) - DLSE: with weights P, a score's gradient is
 * P * (DOut V^T - rowsum(DOut * Out)) from Out and P * DLSE from LSE. */
nb_status nb_attention_vjp(nb_builder *b, nb_grad_ctx *g)
{
    nb_value dout = nb_grad_dy(g, 0, 0);
    const nb_value dlse = nb_grad_dy(g, 1, 0), out = nb_grad_y(g, 0, 0);
    if (nb_is_none(dout) && nb_is_none(dlse)) return nb_builder_status(b);
    if (!nb_grad_wants_dx(g, Q, 0) && !nb_grad_wants_dx(g, K, 0) && !nb_grad_wants_dx(g, V, 0))
        return nb_builder_status(b);
    if (nb_is_none(dout)) dout = nb_fill_zeros_like(b, out);
    const int nd = nb_value_info(b, out).ndim;
    const int64_t heads = heads_of(g), last = nd - 1;
    nb_value prod = nb_mul(b, dout, out), delta;
    if (heads > 0) { /* [..., T, H * Dv] -> per head [..., T, H] -> [..., H, T] */
        int64_t shape[NB_MAX_DIMS], perm[NB_MAX_DIMS], hlast = nd;
        for (int i = 0; i < nd - 1; i++) shape[i] = 0, perm[i] = i;
        shape[nd - 1] = heads;
        shape[nd] = -1;
        perm[nd - 2] = nd - 1;
        perm[nd - 1] = nd - 2;
        delta = nb_reduce_sum(b, nb_reshape(b, prod, nd + 1, shape), 1, &hlast, false);
        delta = nb_transpose(b, delta, nd, perm);
    } else {
        delta = nb_reduce_sum(b, prod, 1, &last, false);
    }
    if (!nb_is_none(dlse)) delta = nb_sub(b, delta, dlse);
    const bool has_mask = nb_grad_in_count(g, MASK) > 0;
    const nb_value in[8] = {nb_grad_x(g, Q, 0),
                            nb_grad_x(g, K, 0),
                            nb_grad_x(g, V, 0),
                            has_mask ? nb_grad_x(g, MASK, 0) : NB_NONE,
                            nb_grad_y(g, 1, 0),
                            nb_grad_y(g, 2, 0),
                            dout,
                            delta};
    nb_attr attrs[NB_MAX_ATTRS];
    const int n_attrs = nb_convgrad_attrs(g, "scaled_dot_product_attention_grad", attrs);
    nb_value d[3];
    if (nb_emit(b, "scaled_dot_product_attention_grad", NB_VALUES_N(8, in), NB_ATTRS_N(n_attrs, attrs), 3, d))
        return nb_builder_status(b);
    for (int s = 0; s < 3; s++) nb_grad_set_dx(g, s, 0, d[s]);
    return nb_builder_status(b);
}

nb_status nb_attention_jvp(nb_builder *b, nb_grad_ctx *g) { return nb_composite_jvp(b, g, attention_composite); }
nb_status nb_attention_grad_vjp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_vjp(b, g, attention_grad_composite);
}
nb_status nb_attention_grad_jvp(nb_builder *b, nb_grad_ctx *g)
{
    return nb_composite_jvp(b, g, attention_grad_composite);
}
