/* scaled_dot_product_attention for tests/test_attention_torch.sh to hold
 * against PyTorch.
 *
 *   attention_check DIR B H T S D DV CAUSAL MASK
 *
 * reads DIR/q.f64 [B, H, T, D], DIR/k.f64 [B, H, S, D], DIR/v.f64 [B, H, S,
 * DV], DIR/r.f64 (the cotangent of the output, [B, H, T, DV]) and, when
 * MASK is 1, DIR/mask.f64 [T, S] (raw float64), and writes the output and
 * the gradients of sum(out * r) to DIR/out.f64, DIR/dq.f64, DIR/dk.f64 and
 * DIR/dv.f64, computed by the fused op on the eager tape (nb_vjp). */
#include <stdio.h>
#include <stdlib.h>
#include "nabla/nabla.h"

typedef struct cfg {
    bool causal;
    nb_tensor *mask;
} cfg;

static nb_status attention(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const cfg *c = ctx;
    nb_attention_opts o = {.causal = c->causal};
    if (c->mask) o.mask = nb_eager_value(b, c->mask);
    out[0] = nb_scaled_dot_product_attention(b, in[0], in[1], in[2], &o);
    return nb_builder_status(b);
}

static nb_tensor *load(const char *dir, const char *name, int64_t a, int64_t b_, int64_t c, int64_t d, int ndim)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    const int64_t shape[4] = {a, b_, c, d};
    const int64_t *sh = ndim == 4 ? shape : shape + 2;
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, NB_F64, ndim, sh)) return NULL;
    FILE *f = fopen(path, "rb");
    const size_t n = (size_t)nb_tensor_numel(t);
    if (!f || fread(nb_tensor_data(t), sizeof(double), n, f) != n) {
        fprintf(stderr, "attention_check: cannot read %s\n", path);
        if (f) fclose(f);
        nb_tensor_release(t);
        return NULL;
    }
    fclose(f);
    return t;
}

static int save(const char *dir, const char *name, const nb_tensor *t)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    FILE *f = fopen(path, "wb");
    const size_t n = (size_t)nb_tensor_numel(t);
    const int ok = f && fwrite(nb_tensor_data(t), sizeof(double), n, f) == n;
    if (f) fclose(f);
    if (!ok) fprintf(stderr, "attention_check: cannot write %s\n", path);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: attention_check DIR B H T S D DV CAUSAL MASK\n");
        return 2;
    }
    const char *dir = argv[1];
    int64_t d[6];
    for (int i = 0; i < 6; i++) d[i] = atoll(argv[2 + i]);
    cfg c = {.causal = atoi(argv[8]) != 0};
    nb_tensor *in[3] = {load(dir, "q", d[0], d[1], d[2], d[4], 4), load(dir, "k", d[0], d[1], d[3], d[4], 4),
                        load(dir, "v", d[0], d[1], d[3], d[5], 4)};
    nb_tensor *r = load(dir, "r", d[0], d[1], d[2], d[5], 4);
    if (atoi(argv[9])) c.mask = load(dir, "mask", 0, 0, d[2], d[3], 2);
    int rc = 1;
    nb_tensor *out = NULL, *grads[3] = {NULL, NULL, NULL};
    nb_pullback *pb = NULL;
    const nb_function f = {attention, 3, 1, &c};
    if (in[0] && in[1] && in[2] && r && (!atoi(argv[9]) || c.mask) && !nb_vjp(&f, in, &out, &pb) &&
        !nb_pullback_apply(pb, &r, grads))
        rc = save(dir, "out", out) | save(dir, "dq", grads[0]) | save(dir, "dk", grads[1]) | save(dir, "dv", grads[2]);
    else fprintf(stderr, "attention_check: %s\n", nb_last_error());
    nb_pullback_free(pb);
    nb_tensor_release(out);
    for (int i = 0; i < 3; i++) {
        nb_tensor_release(in[i]);
        nb_tensor_release(grads[i]);
    }
    nb_tensor_release(r);
    nb_tensor_release(c.mask);
    return rc;
}
