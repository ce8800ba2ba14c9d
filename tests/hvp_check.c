/* The second derivative of issue 13's example, for tests/test_hvp_torch.sh
 * to hold against PyTorch:
 *
 *     h = x W;  while (sum(h) < 30) h = 1.3 h + 0.4 tanh(h);  f = sum(sin(h) h)
 *
 *   hvp_check DIR    reads DIR/x.f64 [2, 3], DIR/W.f64 [3, 4], DIR/t.f64 [3, 4]
 *                    (raw float64) and writes the Hessian-vector product
 *                    H t (with respect to W) three ways: DIR/rr.f64 (static,
 *                    reverse over reverse), DIR/fr.f64 (static, forward over
 *                    reverse), DIR/eager.f64 (the tape, double backward). */
#include <stdio.h>
#include <stdlib.h>
#include "nabla/nabla.h"

static int fail(const char *what)
{
    fprintf(stderr, "hvp_check: %s: %s\n", what, nb_last_error());
    return 1;
}

static nb_status cond(nb_builder *b, const nb_value *c, nb_value *pred, void *ctx)
{
    (void)ctx;
    nb_value s = nb_reduce_sum(b, c[0], 0, NULL, false);
    *pred = nb_reshape(b, nb_less(b, s, nb_fill_constant(b, NB_F64, 0, NULL, 30)), 1, (int64_t[]){1});
    return nb_builder_status(b);
}

static nb_status body(nb_builder *b, const nb_value *c, nb_value *next, void *ctx)
{
    (void)ctx;
    next[0] = nb_add(b, nb_scale(b, c[0], 1.3, 0), nb_scale(b, nb_tanh(b, c[0]), 0.4, 0));
    return nb_builder_status(b);
}

/* f(x, W) through the builder: the same code for the program and the tape. */
static nb_value model(nb_builder *b, nb_value x, nb_value W)
{
    nb_value h = nb_matmul(b, x, W, 0), fin;
    if (nb_while_loop(b, cond, body, NULL, NB_VALUES(h), &fin)) return NB_NONE;
    return nb_reduce_sum(b, nb_mul(b, nb_sin(b, fin), fin), 0, NULL, false);
}

static nb_tensor *load(const char *dir, const char *name, int64_t r, int64_t c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F64, 2, (int64_t[]){r, c})) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f || fread(nb_tensor_data(t), sizeof(double), (size_t)(r * c), f) != (size_t)(r * c)) {
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
    if (argc != 2) return fprintf(stderr, "usage: hvp_check DIR\n"), 2;
    const char *dir = argv[1];
    nb_tensor *x = load(dir, "x", 2, 3), *W = load(dir, "W", 3, 4), *t = load(dir, "t", 3, 4);
    if (!x || !W || !t || nb_control_register_ops()) return fail("inputs");

    /* Static: the gradient, then both second derivatives of it. */
    nb_program *p;
    nb_builder *b;
    if (nb_program_new(&p) || nb_builder_new_record(&b, p, NULL)) return fail("program");
    nb_value xv = nb_data(b, "x", NB_F64, 2, (int64_t[]){2, 3}), Wv = nb_data(b, "W", NB_F64, 2, (int64_t[]){3, 4});
    nb_value tv = nb_data(b, "t", NB_F64, 2, (int64_t[]){3, 4});
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
    if (nb_builder_new_eager(&eb) || nb_tensor_clone(&Wl, W) || nb_tensor_set_requires_grad(Wl, true)) return fail("eager");
    nb_value fe = model(eb, nb_eager_value(eb, x), nb_eager_value(eb, Wl));
    nb_tensor *ft = nb_eager_tensor(fe);
    if (!ft || nb_autograd_grad(NB_TENSORS(ft), NULL, NB_TENSORS(Wl), NB_CREATE_GRAPH, &gW)) return fail("eager gradient");
    nb_tensor *qt = nb_eager_tensor(nb_reduce_sum(eb, nb_mul(eb, nb_eager_value(eb, gW), nb_eager_value(eb, t)), 0, NULL, false));
    if (!qt || nb_autograd_grad(NB_TENSORS(qt), NULL, NB_TENSORS(Wl), 0, &hv) || save(dir, "eager", hv))
        return fail("eager second derivative");
    printf("hvp_check: H t written three ways\n");
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
