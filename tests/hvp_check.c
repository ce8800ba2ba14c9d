/* Second derivatives through control flow, for tests/test_hvp_torch.sh to
 * hold against PyTorch. MODEL is one of
 *
 *   while   h = x W;  while (sum(h) < 30) h = 1.3 h + 0.4 tanh(h);
 *           f = sum(sin(h) h)                       (issue 13's example)
 *   cond1, cond0   p = x W;  f = sum(p) > threshold ? sum(tanh(p)^2 p) : 2 sum(sin(p)),
 *           the threshold -100 (the first branch runs) or 100 (the second)
 *   net     o = net(x: tanh(x W));  f = sum(o^2) + sum(sin(o))
 *   lstm    an LSTM cell (gates from [x_t, h] W, split in i, f, g, o) scanned
 *           over x [T, B, I] from zero states; f = sum(h_T^2), the loss of a
 *           gradient penalty
 *
 *   hvp_check DIR MODEL   reads DIR/x.f64, DIR/W.f64 and DIR/t.f64 (raw
 *                         float64, shaped as below) and writes the
 *                         Hessian-vector product H t (with respect to W)
 *                         three ways: DIR/rr.f64 (static, reverse over
 *                         reverse), DIR/fr.f64 (static, forward over
 *                         reverse), DIR/eager.f64 (the tape, double backward). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/nabla.h"

static int fail(const char *what)
{
    fprintf(stderr, "hvp_check: %s: %s\n", what, nb_last_error());
    return 1;
}

static const char *model_name;

static nb_status loop_cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    (void)ctx;
    nb_value s = nb_reduce_sum(b, c[0], 0, NULL, false);
    *pred = nb_reshape(b, nb_less(b, s, nb_fill_constant(b, NB_F64, 0, NULL, 30)), 1, (int64_t[]){1});
    return nb_builder_status(b);
}

static nb_status loop_body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    (void)ctx;
    next[0] = nb_add(b, nb_scale(b, c[0], 1.3, 0), nb_scale(b, nb_tanh(b, c[0]), 0.4, 0));
    return nb_builder_status(b);
}

static nb_status then_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    nb_value t = nb_tanh(b, in[0]);
    out[0] = nb_reduce_sum(b, nb_mul(b, nb_mul(b, t, t), in[0]), 0, NULL, false);
    return nb_builder_status(b);
}

static nb_status else_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)ctx;
    out[0] = nb_scale(b, nb_reduce_sum(b, nb_sin(b, in[0]), 0, NULL, false), 2, 0);
    return nb_builder_status(b);
}

static nb_status net_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    out[0] = nb_tanh(b, nb_matmul(b, in[0], *(const nb_value *)ctx, 0));
    return nb_builder_status(b);
}

#define H 2 /* the LSTM's hidden size */

static nb_status lstm_step(nb_builder *b, const nb_value *c, const nb_value *x_t, nb_value *next, nb_value *y_t,
                           void *ctx)
{
    (void)y_t;
    nb_value z = nb_matmul(b, nb_concat(b, 2, (nb_value[]){x_t[0], c[0]}, 1), *(const nb_value *)ctx, 0), g[4];
    if (nb_split(b, z, 1, 4, g)) return nb_builder_status(b);
    next[1] = nb_add(b, nb_mul(b, nb_sigmoid(b, g[1]), c[1]), nb_mul(b, nb_sigmoid(b, g[0]), nb_tanh(b, g[2])));
    next[0] = nb_mul(b, nb_sigmoid(b, g[3]), nb_tanh(b, next[1]));
    return nb_builder_status(b);
}

/* f(x, W) through the builder: the same code for the program and the tape. */
static nb_value model(nb_builder *b, nb_value x, nb_value W)
{
    const char *m = model_name;
    if (!strcmp(m, "while")) {
        nb_value fin;
        if (nb_while_loop(b, loop_cond, loop_body, NULL, NB_VALUES(nb_matmul(b, x, W, 0)), &fin)) return NB_NONE;
        return nb_reduce_sum(b, nb_mul(b, nb_sin(b, fin), fin), 0, NULL, false);
    }
    if (!strncmp(m, "cond", 4)) {
        nb_value p = nb_matmul(b, x, W, 0), out;
        nb_value pred = nb_greater(b, nb_reduce_sum(b, p, 0, NULL, false),
                                   nb_fill_constant(b, NB_F64, 0, NULL, !strcmp(m, "cond1") ? -100 : 100));
        if (nb_cond(b, pred, &(nb_branches){then_fn, else_fn, NULL}, NB_VALUES(p), 1, &out)) return NB_NONE;
        return out;
    }
    if (!strcmp(m, "net")) {
        nb_value o;
        if (nb_net(b, net_fn, &W, NB_VALUES(x), 1, &o)) return NB_NONE;
        return nb_add(b, nb_reduce_sum(b, nb_mul(b, o, o), 0, NULL, false),
                      nb_reduce_sum(b, nb_sin(b, o), 0, NULL, false));
    }
    nb_var_info xi = nb_value_info(b, x);
    nb_value zero = nb_fill_constant(b, NB_F64, 2, (int64_t[]){xi.shape[1], H}, 0), fin[2];
    nb_scan_io io = {.init = NB_VALUES(zero, zero), .xs = NB_VALUES(x), .final = fin};
    if (nb_scan(b, lstm_step, &W, &io)) return NB_NONE;
    return nb_reduce_sum(b, nb_mul(b, fin[0], fin[0]), 0, NULL, false);
}

static nb_tensor *load(const char *dir, const char *name, int ndim, const int64_t *shape)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F64, ndim, shape)) return NULL;
    size_t n = (size_t)nb_tensor_numel(t);
    FILE *f = fopen(path, "rb");
    if (!f || fread(nb_tensor_data(t), sizeof(double), n, f) != n) {
        nb_error(NB_ERR_IO, "cannot read %s", path);
        nb_tensor_release(t);
        t = NULL;
    }
    if (f) fclose(f);
    return t;
}

static nb_status save(const char *dir, const char *name, const nb_tensor *t)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    nb_tensor *c;
    nb_status st = nb_tensor_contiguous(&c, (nb_tensor *)t);
    if (st) return st;
    FILE *f = fopen(path, "wb");
    size_t n = (size_t)nb_tensor_numel(c);
    if (!f || fwrite(nb_tensor_data(c), sizeof(double), n, f) != n) st = nb_error(NB_ERR_IO, "cannot write %s", path);
    if (f && fclose(f)) st = nb_error(NB_ERR_IO, "cannot write %s", path);
    nb_tensor_release(c);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 3) return fprintf(stderr, "usage: hvp_check DIR while|cond1|cond0|net|lstm\n"), 2;
    const char *dir = argv[1];
    model_name = argv[2];
    bool lstm = !strcmp(model_name, "lstm");
    /* x [2, 3] and W [3, 4]; for the LSTM x [T 3, B 2, I 3] and W [I + H, 4 H]. */
    int xd = lstm ? 3 : 2;
    int64_t xs[3] = {3, 2, 3}, ws[2] = {lstm ? 3 + H : 3, lstm ? 4 * H : 4};
    const int64_t *xshape = lstm ? xs : xs + 1;
    nb_tensor *x = load(dir, "x", xd, xshape), *W = load(dir, "W", 2, ws), *t = load(dir, "t", 2, ws);
    if (!x || !W || !t || nb_control_register_ops()) return fail("inputs");

    /* Static: the gradient, then both second derivatives of it. */
    nb_program *p;
    nb_builder *b;
    if (nb_program_new(&p) || nb_builder_new_record(&b, p, NULL)) return fail("program");
    nb_value xv = nb_data(b, "x", NB_F64, xd, xshape), Wv = nb_data(b, "W", NB_F64, 2, ws);
    nb_value tv = nb_data(b, "t", NB_F64, 2, ws);
    const char *f = nb_value_name(model(b, xv, Wv));
    if (!f) return fail(nb_builder_error(b));
    nb_backward_result g, h;
    if (nb_gradients(p, NB_NAMES(f), NB_NAMES("W"), NULL, &g)) return fail("gradient");
    const char *q = nb_value_name(nb_reduce_sum(b, nb_mul(b, nb_value_by_name(b, g.grads[0]), tv), 0, NULL, false));
    if (!q || nb_gradients(p, NB_NAMES(q), NB_NAMES("W"), NULL, &h)) return fail("reverse over reverse");
    char *fr = NULL;
    const char *tn = "t", *gn = g.grads[0];
    if (nb_append_jvp(p, NB_NAMES("W"), &tn, NB_NAMES_N(1, &gn), &fr)) return fail("forward over reverse");
    nb_executor *e;
    nb_scope *scope;
    nb_tensor *out[2] = {0};
    if (nb_executor_new(&e) || nb_scope_new(&scope, NULL) ||
        nb_executor_run(e, p, scope, NB_FEEDS({"x", x}, {"W", W}, {"t", t}), NB_NAMES(h.grads[0], fr), out))
        return fail("run");
    if (save(dir, "rr", out[0]) || save(dir, "fr", out[1])) return fail("save");

    /* Eager: the loop runs as C on the tape; grad with create_graph, twice. */
    nb_builder *eb;
    nb_tensor *Wl, *gW = NULL, *hv = NULL;
    if (nb_builder_new_eager(&eb) || nb_tensor_clone(&Wl, W) || nb_tensor_set_requires_grad(Wl, true))
        return fail("eager");
    nb_value fe = model(eb, nb_eager_value(eb, x), nb_eager_value(eb, Wl));
    nb_tensor *ft = nb_eager_tensor(fe);
    if (!ft || nb_autograd_grad(NB_TENSORS(ft), NULL, NB_TENSORS(Wl), NB_CREATE_GRAPH, &gW))
        return fail("eager gradient");
    nb_tensor *qt =
        nb_eager_tensor(nb_reduce_sum(eb, nb_mul(eb, nb_eager_value(eb, gW), nb_eager_value(eb, t)), 0, NULL, false));
    if (!qt || nb_autograd_grad(NB_TENSORS(qt), NULL, NB_TENSORS(Wl), 0, &hv) || save(dir, "eager", hv))
        return fail("eager second derivative");
    printf("hvp_check %s: H t written three ways\n", model_name);
    nb_tensor_release(out[0]), nb_tensor_release(out[1]), nb_tensor_release(gW), nb_tensor_release(hv);
    nb_tensor_release(Wl), nb_tensor_release(x), nb_tensor_release(W), nb_tensor_release(t);
    nb_builder_free(eb);
    nb_executor_free(e);
    nb_scope_free(scope);
    free(fr);
    nb_backward_result_free(&g), nb_backward_result_free(&h);
    nb_builder_free(b);
    nb_program_free(p);
    return 0;
}
