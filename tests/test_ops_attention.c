/* scaled_dot_product_attention: values against softmax(scale q k^T + mask) v
 * written out in double (sizes that cross the kernels' 64-wide blocks,
 * broadcast masks, causal with more keys than queries, rows that see no
 * key), float32 against float64, the dropout mask (reproducible, of the
 * right density, and the one attention_dropout_mask draws), the fused op in
 * a static program against the eager tape, and the errors. Gradients are
 * checked by `nabla gradcheck` (every column) and against PyTorch by
 * tests/test_attention_torch.sh. */
#include "test_ops_nn.h"

typedef struct sdpa_case {
    int64_t B, T, S, D, Dv; /* B pairs of (batch, head) */
    bool causal;
    double scale; /* 0: 1/sqrt(D) */
} sdpa_case;

/* The reference output [B, T, Dv] and LSE [B, T]; mask [T, S] or NULL. */
static void ref_attention(const sdpa_case *c, const nb_tensor *q, const nb_tensor *k, const nb_tensor *v,
                          const nb_tensor *mask, double *out, double *lse)
{
    const double scale = c->scale ? c->scale : 1 / sqrt((double)c->D);
    double *s = malloc((size_t)c->S * sizeof *s);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->T; i++) {
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < c->S; j++) {
                double x = 0;
                for (int64_t d = 0; d < c->D; d++)
                    x += nb_tensor_get(q, (b * c->T + i) * c->D + d) * nb_tensor_get(k, (b * c->S + j) * c->D + d);
                x *= scale;
                if (mask) x += nb_tensor_get(mask, i * c->S + j);
                if (c->causal && j > i) x = -INFINITY;
                s[j] = x;
                m = fmax(m, x);
            }
            for (int64_t j = 0; j < c->S; j++) sum += m == -INFINITY ? 0 : exp(s[j] - m);
            for (int64_t e = 0; e < c->Dv; e++) {
                double acc = 0;
                for (int64_t j = 0; j < c->S && sum > 0; j++)
                    acc += exp(s[j] - m) / sum * nb_tensor_get(v, (b * c->S + j) * c->Dv + e);
                out[(b * c->T + i) * c->Dv + e] = acc;
            }
            lse[b * c->T + i] = sum > 0 ? m + log(sum) : INFINITY;
        }
    free(s);
}

static double max_diff(const nb_tensor *t, const double *want)
{
    double e = 0;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
        const double a = nb_tensor_get(t, i), b = want[i];
        e = fmax(e, a == b ? 0 : fabs(a - b));
    }
    return e;
}

static nb_status run_sdpa(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_tensor *mask, int n_attrs, const nb_attr *attrs,
                          nb_tensor **out)
{
    nb_tensor *in[4] = {q, k, v, mask};
    return nb_op_run("scaled_dot_product_attention", (nb_tensors){mask ? 4 : 3, in}, (nb_attrs){n_attrs, attrs}, 3,
                     out);
}

static void check_case(const sdpa_case *c, nb_dtype dt, bool with_mask, double tol)
{
    nb_tensor *q = new_tensor(dt, 3, S(c->B, c->T, c->D)), *k = new_tensor(dt, 3, S(c->B, c->S, c->D)),
              *v = new_tensor(dt, 3, S(c->B, c->S, c->Dv)), *mask = NULL;
    fill_pattern(q, -1.5, 1.5, 1);
    fill_pattern(k, -1.5, 1.5, 2);
    fill_pattern(v, -1, 1, 3);
    if (with_mask) {
        mask = new_tensor(dt, 2, S(c->T, c->S));
        fill_pattern(mask, -2, 1, 4);
        for (int64_t i = 0; i < c->T; i++) nb_tensor_set(mask, i * c->S + (i * 7) % c->S, -INFINITY);
    }
    double *want = malloc((size_t)(c->B * c->T * (c->Dv + 1)) * sizeof *want);
    ref_attention(c, q, k, v, mask, want, want + c->B * c->T * c->Dv);
    nb_attr attrs[] = {NB_ATTR_BOOL("causal", c->causal), NB_ATTR_FLOAT("scale", c->scale)};
    nb_tensor *out[3] = {NULL, NULL, NULL};
    CHECK_OK(run_sdpa(q, k, v, mask, 2, attrs, out));
    if (out[0]) {
        const double eo = max_diff(out[0], want), el = max_diff(out[1], want + c->B * c->T * c->Dv);
        if (!(eo <= tol && el <= tol * 10)) {
            fprintf(stderr, "  %s B %lld T %lld S %lld D %lld Dv %lld causal %d mask %d: out off by %g, LSE by %g\n",
                    nb_dtype_name(dt), (long long)c->B, (long long)c->T, (long long)c->S, (long long)c->D,
                    (long long)c->Dv, c->causal, with_mask, eo, el);
            test_failures_in_current++;
        }
    }
    nb_tensor_release(mask); /* may be NULL, which would end release_all's list */
    release_all(q, k, v, out[0], out[1], out[2], NULL);
    free(want);
}

static void test_values(void)
{
    static const sdpa_case cases[] = {
        {1, 1, 1, 1, 1, false, 0},      {2, 3, 5, 4, 2, false, 0},      {3, 64, 64, 16, 16, true, 0},
        {2, 65, 130, 8, 5, false, 0.3}, {1, 100, 200, 32, 32, true, 0}, {2, 130, 70, 4, 6, true, 0},
        {1, 7, 3, 3, 3, true, 1.7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int m = 0; m < 2; m++) {
            check_case(&cases[i], NB_F64, m, 1e-12);
            check_case(&cases[i], NB_F32, m, 2e-6);
        }
}

/* A row that sees no key (every score masked) gives zeros and finite
 * gradients, not NaN. */
static void test_masked_row(void)
{
    nb_tensor *q = T(NB_F64, S(2, 2), 1, 2, 3, 4), *k = T(NB_F64, S(2, 2), 1, 0, 0, 1), *v = T(NB_F64, S(2, 1), 5, 7);
    nb_tensor *mask = T(NB_F64, S(2, 2), 0, -INFINITY, -INFINITY, -INFINITY);
    nb_tensor *out[3] = {NULL, NULL, NULL};
    CHECK_OK(run_sdpa(q, k, v, mask, 0, NULL, out));
    CHECK_TENSOR(out[0], S(2, 1), 1e-15, 5, 0);
    CHECK(isinf(nb_tensor_get(out[1], 1)));
    nb_tensor *dout = T(NB_F64, S(2, 1), 1, 1), *delta = T(NB_F64, S(2), 0, 0), *g[3] = {NULL, NULL, NULL};
    nb_tensor *gin[8] = {q, k, v, mask, out[1], out[2], dout, delta};
    CHECK_OK(nb_op_run("scaled_dot_product_attention_grad", NB_TENSORS_N(8, gin), NB_NO_ATTRS, 3, g));
    for (int s = 0; s < 3 && g[s]; s++)
        for (int64_t i = 0; i < nb_tensor_numel(g[s]); i++) CHECK(isfinite(nb_tensor_get(g[s], i)));
    release_all(q, k, v, mask, out[0], out[1], out[2], dout, delta, g[0], g[1], g[2], NULL);
}

/* Dropout: the same seed gives the same output; about p of the weights are
 * dropped; attention_dropout_mask draws the very weights the kernel drops,
 * so softmax(S) * mask @ V equals the kernel's output. */
static void test_dropout(void)
{
    const int64_t B = 3, T_ = 40, S_ = 50, D = 8;
    nb_tensor *q = NEW(NB_F64, S(B, T_, D)), *k = NEW(NB_F64, S(B, S_, D)), *v = NEW(NB_F64, S(B, S_, D));
    fill_pattern(q, -1, 1, 5);
    fill_pattern(k, -1, 1, 6);
    fill_pattern(v, -1, 1, 7);
    nb_attr attrs[] = {NB_ATTR_FLOAT("dropout_prob", 0.25), NB_ATTR_INT("seed", 99), NB_ATTR_BOOL("causal", true)};
    nb_tensor *a[3] = {NULL, NULL, NULL}, *b[3] = {NULL, NULL, NULL}, *z = NULL;
    CHECK_OK(run_sdpa(q, k, v, NULL, 3, attrs, a));
    CHECK_OK(run_sdpa(q, k, v, NULL, 3, attrs, b));
    for (int64_t i = 0; i < nb_tensor_numel(a[0]); i++) CHECK(nb_tensor_get(a[0], i) == nb_tensor_get(b[0], i));
    nb_tensor *min[3] = {q, k, a[2]};
    CHECK_OK(nb_op_run("attention_dropout_mask", NB_TENSORS_N(3, min), (nb_attrs){3, attrs}, 1, &z));
    int64_t dropped = 0;
    for (int64_t i = 0; i < nb_tensor_numel(z); i++) dropped += nb_tensor_get(z, i) == 0;
    const double frac = (double)dropped / (double)nb_tensor_numel(z);
    CHECK(frac > 0.22 && frac < 0.28);
    /* The reference with the mask applied to the weights. */
    const double scale = 1 / sqrt((double)D);
    double worst = 0;
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t i = 0; i < T_; i++) {
            double s[50], m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < S_; j++) {
                double x = 0;
                for (int64_t d = 0; d < D; d++)
                    x += nb_tensor_get(q, (bb * T_ + i) * D + d) * nb_tensor_get(k, (bb * S_ + j) * D + d);
                s[j] = j > i ? -INFINITY : x * scale;
                m = fmax(m, s[j]);
            }
            for (int64_t j = 0; j < S_; j++) sum += exp(s[j] - m);
            for (int64_t e = 0; e < D; e++) {
                double acc = 0;
                for (int64_t j = 0; j < S_; j++)
                    acc += exp(s[j] - m) / sum * nb_tensor_get(z, (bb * T_ + i) * S_ + j) *
                        nb_tensor_get(v, (bb * S_ + j) * D + e);
                worst = fmax(worst, fabs(acc - nb_tensor_get(a[0], (bb * T_ + i) * D + e)));
            }
        }
    CHECK(worst < 1e-12);
    /* is_test turns it off. */
    nb_attr test_attrs[] = {NB_ATTR_FLOAT("dropout_prob", 0.25), NB_ATTR_BOOL("is_test", true)};
    nb_tensor *c[3] = {NULL, NULL, NULL}, *d[3] = {NULL, NULL, NULL};
    CHECK_OK(run_sdpa(q, k, v, NULL, 2, test_attrs, c));
    CHECK_OK(run_sdpa(q, k, v, NULL, 0, NULL, d));
    for (int64_t i = 0; c[0] && d[0] && i < nb_tensor_numel(c[0]); i++)
        CHECK(nb_tensor_get(c[0], i) == nb_tensor_get(d[0], i));
    release_all(q, k, v, a[0], a[1], a[2], b[0], b[1], b[2], c[0], c[1], c[2], d[0], d[1], d[2], z, NULL);
}

/* The typed call in a static program (with nb_append_backward) and on the
 * tape give the same output and gradients. */
static nb_status attention_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    const nb_attention_opts o = {.causal = true, .scale = 0.4};
    out[0] =
        nb_reduce_sum(b, nb_square(b, nb_scaled_dot_product_attention(b, in[0], in[1], in[2], &o)), 0, NULL, false);
    return nb_builder_status(b);
}

static void test_static_matches_eager(void)
{
    const int64_t shape[4] = {2, 2, 5, 3};
    nb_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = new_tensor(NB_F64, 4, shape);
        fill_pattern(x[i], -1, 1, 10 + (unsigned)i);
    }
    nb_tensor *eg[3] = {NULL, NULL, NULL}, *loss = NULL;
    const nb_function f = {attention_fn, 3, 1, NULL};
    CHECK_OK(nb_value_and_grad(&f, x, NULL, &loss, eg));
    nb_program *p = NULL;
    nb_builder *b = NULL;
    nb_backward_result r = {0};
    nb_scope *s = NULL;
    nb_executor *ex = NULL;
    CHECK_OK(nb_program_new(&p));
    CHECK_OK(nb_builder_new_record(&b, p, NULL));
    static const char *names[3] = {"q", "k", "v"};
    nb_value in[3], out;
    for (int i = 0; i < 3; i++) in[i] = nb_data(b, names[i], NB_F64, 4, shape);
    CHECK_OK(attention_fn(b, in, &out, NULL));
    const char *fetch[4] = {nb_value_name(out)};
    nb_builder_free(b);
    const nb_backward_opts bo = {.params = NB_NAMES("q", "k", "v")};
    CHECK_OK(nb_append_backward(p, fetch[0], &bo, &r));
    for (int i = 0; i < 3; i++) fetch[1 + i] = nb_backward_grad_of(&r, names[i]);
    nb_tensor *got[4] = {NULL, NULL, NULL, NULL};
    CHECK_OK(nb_scope_new(&s, NULL));
    CHECK_OK(nb_executor_new(&ex));
    CHECK_OK(nb_executor_run(ex, p, s, NB_FEEDS({"q", x[0]}, {"k", x[1]}, {"v", x[2]}), NB_NAMES_N(4, fetch), got));
    CHECK_NEAR(nb_tensor_get(got[0], 0), nb_tensor_get(loss, 0), 1e-12);
    for (int i = 0; i < 3; i++)
        CHECK(got[1 + i] && max_diff(got[1 + i], (const double *)nb_tensor_data(eg[i])) < 1e-12);
    release_all(got[0], got[1], got[2], got[3], NULL);
    nb_executor_free(ex);
    nb_backward_result_free(&r);
    nb_scope_free(s);
    nb_program_free(p);
    release_all(x[0], x[1], x[2], eg[0], eg[1], eg[2], loss, NULL);
}

/* Heads side by side ([B, T, H * D], the heads attribute) give what the
 * heads split into [B, H, T, D] give, forward and backward, with a mask over
 * the heads and causal. */
typedef struct heads_cfg {
    int64_t H;
    bool split;
    nb_tensor *mask;
} heads_cfg;

static nb_value split_heads(nb_builder *b, nb_value x, int64_t H)
{
    return nb_transpose(b, nb_reshape(b, x, 4, (int64_t[]){0, 0, H, -1}), 4, (int64_t[]){0, 2, 1, 3});
}

static nb_status heads_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const heads_cfg *c = ctx;
    nb_attention_opts o = {.causal = true, .mask = nb_eager_value(b, c->mask)};
    if (!c->split) {
        o.heads = (int)c->H;
        out[0] = nb_scaled_dot_product_attention(b, in[0], in[1], in[2], &o);
    } else {
        nb_value y = nb_scaled_dot_product_attention(b, split_heads(b, in[0], c->H), split_heads(b, in[1], c->H),
                                                     split_heads(b, in[2], c->H), &o);
        out[0] = nb_reshape(b, nb_transpose(b, y, 4, (int64_t[]){0, 2, 1, 3}), 3, (int64_t[]){0, 0, -1});
    }
    return nb_builder_status(b);
}

static void test_heads_side_by_side(void)
{
    const int64_t B = 2, T_ = 70, H = 3, D = 4, Dv = 5;
    nb_tensor *x[3] = {NEW(NB_F64, S(B, T_, H * D)), NEW(NB_F64, S(B, T_, H * D)), NEW(NB_F64, S(B, T_, H * Dv))};
    nb_tensor *r = NEW(NB_F64, S(B, T_, H * Dv)), *mask = NEW(NB_F64, S(H, 1, T_));
    for (int i = 0; i < 3; i++) fill_pattern(x[i], -1, 1, 20 + (unsigned)i);
    fill_pattern(r, -1, 1, 30);
    fill_pattern(mask, -1, 1, 31);
    nb_tensor *out[2] = {NULL, NULL}, *g[2][3] = {{NULL}};
    for (int split = 0; split < 2; split++) {
        heads_cfg c = {H, split, mask};
        const nb_function f = {heads_fn, 3, 1, &c};
        nb_pullback *pb = NULL;
        CHECK_OK(nb_vjp(&f, x, &out[split], &pb));
        CHECK_OK(nb_pullback_apply(pb, &r, g[split]));
        nb_pullback_free(pb);
    }
    CHECK(out[0] && out[1] && max_diff(out[0], nb_tensor_data(out[1])) < 1e-13);
    for (int i = 0; i < 3; i++) CHECK(g[0][i] && g[1][i] && max_diff(g[0][i], nb_tensor_data(g[1][i])) < 1e-13);
    release_all(x[0], x[1], x[2], r, mask, out[0], out[1], g[0][0], g[0][1], g[0][2], g[1][0], g[1][1], g[1][2], NULL);
}

static void test_errors(void)
{
    nb_tensor *q = NEW(NB_F64, S(2, 3, 4)), *k = NEW(NB_F64, S(2, 5, 4)), *v = NEW(NB_F64, S(2, 5, 3));
    nb_tensor *k3 = NEW(NB_F64, S(2, 5, 3)), *v6 = NEW(NB_F64, S(2, 6, 3)), *q2 = NEW(NB_F64, S(3, 4));
    nb_tensor *kb = NEW(NB_F64, S(3, 5, 4)), *m = NEW(NB_F64, S(4, 5)), *q32 = NEW(NB_F32, S(2, 3, 4));
    nb_tensor *out[3] = {NULL, NULL, NULL};
    CHECK_ERR(run_sdpa(q, k3, v, NULL, 0, NULL, out), NB_ERR_SHAPE,
              "Q [2, 3, 4], K [2, 5, 3] and V [2, 5, 3]: Q and K must have the same last dim D");
    CHECK_ERR(run_sdpa(q, k, v6, NULL, 0, NULL, out), NB_ERR_SHAPE, "K and V must have the same number of keys S");
    CHECK_ERR(run_sdpa(q2, k, v, NULL, 0, NULL, out), NB_ERR_SHAPE, "they must have the same rank, at least 2");
    CHECK_ERR(run_sdpa(q, kb, v, NULL, 0, NULL, out), NB_ERR_SHAPE, "leading (batch and head) dims must be equal");
    CHECK_ERR(run_sdpa(q, k, v, m, 0, NULL, out), NB_ERR_SHAPE,
              "Mask has shape [4, 5], which does not broadcast to the scores' shape [2, 3, 5]");
    CHECK_ERR(run_sdpa(q32, k, v, NULL, 0, NULL, out), NB_ERR_DTYPE, "K has dtype float64 but Q has dtype float32");
    nb_attr p1[] = {NB_ATTR_FLOAT("dropout_prob", 1.0)};
    CHECK_ERR(run_sdpa(q, k, v, NULL, 1, p1, out), NB_ERR_ARG, "dropout_prob must be in [0, 1), got 1");
    nb_attr h3[] = {NB_ATTR_INT("heads", 3)};
    CHECK_ERR(run_sdpa(q, k, v, NULL, 1, h3, out), NB_ERR_SHAPE, "3 heads must divide the last dims of Q and V");
    nb_attr inf[] = {NB_ATTR_FLOAT("scale", INFINITY)};
    CHECK_ERR(run_sdpa(q, k, v, NULL, 1, inf, out), NB_ERR_ARG, "scale must be finite");
    release_all(q, k, v, k3, v6, q2, kb, m, q32, NULL);
}

int main(void)
{
    RUN(test_values);
    RUN(test_masked_row);
    RUN(test_dropout);
    RUN(test_static_matches_eager);
    RUN(test_heads_side_by_side);
    RUN(test_errors);
    return test_report();
}
