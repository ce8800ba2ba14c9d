/* The transformer block, for tests/test_transformer_torch.sh to hold against
 * PyTorch's nn.TransformerEncoderLayer (norm_first, gelu, batch_first):
 *
 *   transformer_check DIR CAUSAL   reads DIR/x.f64 and DIR/r.f64 (raw
 *                                  float64 [B, T, E]) and writes, for the
 *                                  block y = block(x) with its parameters
 *                                  drawn by the startup program, causal if
 *                                  CAUSAL is 1, and the loss sum(y * r):
 *       DIR/<param>.f64         each parameter's values (nabla's layout)
 *       DIR/out.f64             y, from a static program
 *       DIR/<param>.grad.f64    the loss's gradient, by nb_append_backward
 *       DIR/out.eager.f64, DIR/<param>.grad.eager.f64   the same on the tape
 *
 * B, T, E, the heads and the MLP width are fixed below; the script uses the
 * same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nabla/nabla.h"

enum { B = 2, T = 5, E = 8, HEADS = 2, MLP = 12 };

static int fail(const char *what)
{
    fprintf(stderr, "transformer_check: %s: %s\n", what, nb_last_error());
    return 1;
}

static bool causal;

/* y = block(x) and the loss sum(y * r), the same code in both modes. */
static nb_value loss_of(nb_builder *b, nb_value x, nb_value r, nb_value *y)
{
    nb_transformer_block_opts o = {.causal = causal, .mlp = MLP};
    *y = nb_layer_transformer_block(b, x, HEADS, &o);
    return nb_reduce_sum(b, nb_mul(b, *y, r), 0, NULL, false);
}

static nb_status read_f64(const char *dir, const char *name, nb_tensor **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f64", dir, name);
    nb_status st = nb_tensor_new(out, NB_F64, 3, (int64_t[]){B, T, E});
    if (st) return st;
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(nb_tensor_data(*out), sizeof(double), B * T * E, f) : 0;
    if (f) fclose(f);
    if (n != B * T * E) return nb_error(NB_ERR_IO, "cannot read %d doubles from %s", B * T * E, path);
    return NB_OK;
}

static nb_status write_f64(const char *dir, const char *name, const char *suffix, const nb_tensor *t)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s.f64", dir, name, suffix);
    FILE *f = fopen(path, "wb");
    if (!f) return nb_error(NB_ERR_IO, "cannot write %s", path);
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) {
        double v = nb_tensor_get(t, i);
        fwrite(&v, sizeof v, 1, f);
    }
    return fclose(f) ? nb_error(NB_ERR_IO, "cannot write %s", path) : NB_OK;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: transformer_check DIR CAUSAL\n");
        return 2;
    }
    const char *dir = argv[1];
    causal = !strcmp(argv[2], "1");
    nb_tensor *x, *r;
    if (read_f64(dir, "x", &x) || read_f64(dir, "r", &r)) return fail("input");

    /* The static program, its gradient part, and its parameters drawn. */
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
    if (nb_program_new(&main_p) || nb_program_new(&startup) || nb_builder_new_record(&b, main_p, startup) ||
        nb_scope_new(&scope, NULL) || nb_executor_new(&ex))
        return fail("setup");
    nb_program_set_seed(startup, 20);
    nb_value y;
    nb_value loss = loss_of(b, nb_layer_data(b, "x", NB_F64, 3, (int64_t[]){B, T, E}),
                            nb_layer_data(b, "r", NB_F64, 3, (int64_t[]){B, T, E}), &y);
    if (nb_builder_status(b)) {
        fprintf(stderr, "transformer_check: model: %s\n", nb_builder_error(b));
        return 1;
    }
    nb_backward_result g;
    if (nb_append_backward(main_p, nb_value_name(loss), NULL, &g)) return fail("append_backward");
    if (nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL)) return fail("startup");
    /* Fetch the block's output and every gradient. */
    const char *out_name = nb_value_name(y);
    int n = 1 + g.n_pairs;
    const char **fetch = malloc((size_t)n * sizeof *fetch);
    nb_tensor **got = calloc((size_t)n, sizeof *got);
    fetch[0] = out_name;
    for (int i = 0; i < g.n_pairs; i++) fetch[1 + i] = g.pairs[i].grad;
    nb_feed feeds[2] = {{"x", x}, {"r", r}};
    if (nb_executor_run(ex, main_p, scope, NB_FEEDS_N(2, feeds), NB_NAMES_N(n, fetch), got)) return fail("run");
    if (write_f64(dir, "out", "", got[0])) return fail("output");
    for (int i = 0; i < g.n_pairs; i++)
        if (write_f64(dir, g.pairs[i].param, "", nb_scope_find(scope, g.pairs[i].param)) ||
            write_f64(dir, g.pairs[i].param, ".grad", got[1 + i]))
            return fail("output");

    /* The tape, with the same parameters. */
    nb_builder *e;
    if (nb_builder_new_eager(&e)) return fail("eager builder");
    for (int i = 0; i < g.n_pairs; i++)
        if (nb_eager_add_param(e, g.pairs[i].param, nb_scope_find(scope, g.pairs[i].param))) return fail("eager");
    nb_value l = loss_of(e, nb_eager_value(e, x), nb_eager_value(e, r), &y);
    if (nb_builder_status(e)) {
        fprintf(stderr, "transformer_check: eager model: %s\n", nb_builder_error(e));
        return 1;
    }
    if (nb_eager_param_count(e) != g.n_pairs) {
        fprintf(stderr, "transformer_check: the tape made parameters of its own\n");
        return 1;
    }
    nb_tensor *lt = nb_eager_tensor(l);
    if (nb_backward(NB_TENSORS(lt), NULL, 0)) return fail("backward");
    if (write_f64(dir, "out", ".eager", nb_eager_tensor(y))) return fail("output");
    for (int i = 0; i < g.n_pairs; i++)
        if (write_f64(dir, g.pairs[i].param, ".grad.eager", nb_tensor_grad(nb_eager_find_param(e, g.pairs[i].param))))
            return fail("output");

    /* The parameter names, for the script. */
    char path[4096];
    snprintf(path, sizeof path, "%s/params.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return fail("params.txt");
    for (int i = 0; i < g.n_pairs; i++) fprintf(f, "%s\n", g.pairs[i].param);
    fclose(f);

    nb_builder_free(e);
    for (int i = 0; i < n; i++) nb_tensor_release(got[i]);
    free(got);
    free(fetch);
    nb_backward_result_free(&g);
    nb_executor_free(ex);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
    nb_tensor_release(x);
    nb_tensor_release(r);
    return 0;
}
