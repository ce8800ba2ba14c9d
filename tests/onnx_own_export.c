/* nabla's own models and ops through nb_onnx_export, for tests/test_onnx_own_export.sh
 * to run in ONNX Runtime:
 *
 *   onnx_own_export --list       the cases' names, one a line
 *   onnx_own_export CASE DIR     builds CASE as a static program, its
 *                                parameters drawn by the startup program;
 *                                runs the test copy on inputs drawn here;
 *                                writes DIR/in<i>.npy (the graph's inputs,
 *                                in order), DIR/nabla_out0.npy and the
 *                                export DIR/CASE.onnx
 *
 * exiting 3, and saying why, where nb_onnx_export refuses the model. A case
 * is one function in `cases` below that builds its model on data vars of
 * its own (a dim of -1 is fed as 2) and returns the output; a recurrent
 * layer or any other model joins as one more row. */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"

enum { B = 2, T = 5, S = 3, E = 8, HEADS = 2 };

static nb_value x_of(nb_builder *b, int64_t batch, int64_t len)
{
    return nb_layer_data(b, "x", NB_F32, 3, (int64_t[]){batch, len, E});
}

static nb_value mha(nb_builder *b) { return nb_layer_multi_head_attention(b, x_of(b, -1, T), NB_NONE, HEADS, NULL); }

static nb_value mha_causal(nb_builder *b)
{
    return nb_layer_multi_head_attention(b, x_of(b, -1, T), NB_NONE, HEADS, &(nb_mha_opts){.causal = true});
}

/* Keys of another length than the queries: the causal mask's top-left
 * triangle is not square, and an additive mask is added before it. */
static nb_value mha_cross_masked(nb_builder *b)
{
    nb_value x = x_of(b, B, S), kv = nb_layer_data(b, "kv", NB_F32, 3, (int64_t[]){B, T, E});
    nb_value mask = nb_layer_data(b, "mask", NB_F32, 2, (int64_t[]){S, T});
    return nb_layer_multi_head_attention(b, x, kv, HEADS, &(nb_mha_opts){.causal = true, .mask = mask});
}

static nb_value transformer_block(nb_builder *b)
{
    return nb_layer_transformer_block(b, x_of(b, -1, T), HEADS, &(nb_transformer_block_opts){.mlp = 12});
}

/* Dropout, which the test copy and the export both leave out. */
static nb_value transformer_block_causal(nb_builder *b)
{
    nb_transformer_block_opts o = {.mlp = 12, .causal = true, .dropout = 0.1, .act = "relu"};
    return nb_layer_transformer_block(b, x_of(b, -1, T), HEADS, &o);
}

/* The op itself on [B, H, T, D] heads apart (no heads attribute), float64,
 * with a scale of its own. */
static nb_value attention_4d(nb_builder *b)
{
    nb_value q = nb_layer_data(b, "q", NB_F64, 4, (int64_t[]){-1, HEADS, S, 4});
    nb_value k = nb_layer_data(b, "k", NB_F64, 4, (int64_t[]){-1, HEADS, T, 4});
    nb_value v = nb_layer_data(b, "v", NB_F64, 4, (int64_t[]){-1, HEADS, T, 6});
    return nb_scaled_dot_product_attention(b, q, k, v, &(nb_attention_opts){.scale = 0.7, .causal = true});
}

/* Equal parts, sizes with one inferred, the parts stacked on a new last
 * dim, and a strided slice from the end. */
static nb_value slice_split_stack(nb_builder *b)
{
    nb_value x = nb_layer_data(b, "x", NB_F32, 3, (int64_t[]){-1, 6, 4}), thirds[3], halves[2];
    nb_split(b, x, 1, 3, thirds);
    nb_value y = nb_stack(b, 3, thirds, -1); /* [B, 2, 4, 3] */
    nb_emit(b, "split", NB_VALUES(y), NB_ATTRS(NB_ATTR_INT("axis", 2), NB_ATTR_INTS("sections", 1, -1)), 2, halves);
    nb_value h = nb_concat(b, 2, (nb_value[]){halves[1], halves[0]}, 2);
    return nb_emit1(b, "slice", NB_VALUES(h),
                    NB_ATTRS(NB_ATTR_INTS("axes", 2, -1), NB_ATTR_INTS("starts", -3, 0), NB_ATTR_INTS("ends", 100, 3),
                             NB_ATTR_INTS("strides", 2, 2)));
}

/* conv2d's input gradient, as an imported ConvTranspose is one, grouped
 * and dilated, with uneven pads and a row the strided window missed
 * (output padding): Input [2, 6, 9, 7], Filter [4, 3, 3, 2]. */
static nb_value conv_input_grad(nb_builder *b)
{
    nb_value dy = nb_layer_data(b, "dy", NB_F32, 4, (int64_t[]){B, 4, 3, 4});
    nb_value w = nb_param(b, "w", NB_F32, 4, (int64_t[]){4, 3, 3, 2}, nb_init_uniform(-1, 1));
    nb_value like = nb_fill_constant(b, NB_F32, 4, (int64_t[]){B, 6, 9, 7}, 0);
    return nb_emit1(b, "conv2d_grad", NB_VALUES(like, w, dy),
                    NB_ATTRS(NB_ATTR_INTS("strides", 3, 2), NB_ATTR_INTS("paddings", 1, 2, 0, 1),
                             NB_ATTR_INTS("dilations", 2, 1), NB_ATTR_INT("groups", 2)));
}

static const struct {
    const char *name;
    nb_value (*build)(nb_builder *b);
} cases[] = {
    {"mha", mha},
    {"mha_causal", mha_causal},
    {"mha_cross_masked", mha_cross_masked},
    {"transformer_block", transformer_block},
    {"transformer_block_causal", transformer_block_causal},
    {"attention_4d", attention_4d},
    {"slice_split_stack", slice_split_stack},
    {"conv_input_grad", conv_input_grad},
};

/* Values in [-1, 1) from a fixed stream, so every run feeds the same. */
static nb_status draw(const nb_var *v, uint64_t *state, nb_tensor **out)
{
    int64_t shape[NB_MAX_DIMS];
    for (int d = 0; d < v->ndim; d++) shape[d] = v->shape[d] < 0 ? B : v->shape[d];
    nb_status st = nb_tensor_new(out, v->dtype, v->ndim, shape);
    for (int64_t i = 0; !st && i < nb_tensor_numel(*out); i++) {
        *state = *state * 6364136223846793005u + 1442695040888963407u;
        nb_tensor_set(*out, i, (double)(*state >> 11) / 9007199254740992.0 * 2 - 1);
    }
    return st;
}

#define MAX_IN 8

static int run_case(int c, const char *dir)
{
    nb_program *main_p = NULL, *startup = NULL, *test = NULL;
    nb_builder *b = NULL;
    nb_scope *scope = NULL;
    nb_executor *ex = NULL;
    nb_tensor *in[MAX_IN] = {0}, *out = NULL;
    nb_feed feeds[MAX_IN];
    int n_in = 0, rc = 1;
    uint64_t state = 42;
    char path[4096];
    nb_status st = nb_program_new(&main_p);
    if (!st) st = nb_program_new(&startup);
    if (!st) st = nb_builder_new_record(&b, main_p, startup);
    nb_value y = st ? NB_NONE : cases[c].build(b);
    if (!st) st = nb_builder_status(b);
    const char *y_name = st ? NULL : nb_value_name(y);
    const nb_block *g = st ? NULL : nb_program_global_block(main_p);
    for (int i = 0; !st && i < g->n_vars; i++) {
        if (!g->vars[i]->is_data) continue;
        if (n_in == MAX_IN) st = nb_error(NB_ERR_ARG, "more than %d inputs", MAX_IN);
        else if (!(st = draw(g->vars[i], &state, &in[n_in])))
            feeds[n_in] = (nb_feed){g->vars[i]->name, in[n_in]}, n_in++;
    }
    if (!st) nb_program_set_seed(startup, 7);
    if (!st) st = nb_program_clone_for_test(&test, main_p);
    if (!st) st = nb_scope_new(&scope, NULL);
    if (!st) st = nb_executor_new(&ex);
    if (!st) st = nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    if (!st) st = nb_executor_run(ex, test, scope, NB_FEEDS_N(n_in, feeds), NB_NAMES(y_name), &out);
    for (int i = 0; !st && i < n_in; i++) {
        snprintf(path, sizeof path, "%.4000s/in%d.npy", dir, i);
        st = nb_npy_save(path, in[i]);
    }
    if (!st) {
        snprintf(path, sizeof path, "%.4000s/nabla_out0.npy", dir);
        st = nb_npy_save(path, out);
    }
    if (st) {
        fprintf(stderr, "onnx_own_export: %s: %s\n", cases[c].name, nb_last_error());
        goto done;
    }
    snprintf(path, sizeof path, "%.4000s/%s.onnx", dir, cases[c].name);
    if (nb_onnx_export(main_p, scope, NB_NAMES(y_name), path)) {
        printf("export refused %s: %s\n", cases[c].name, nb_last_error());
        rc = 3;
        goto done;
    }
    rc = 0;
done:
    for (int i = 0; i < n_in; i++) nb_tensor_release(in[i]);
    nb_tensor_release(out);
    nb_executor_free(ex), nb_scope_free(scope), nb_builder_free(b);
    nb_program_free(test), nb_program_free(main_p), nb_program_free(startup);
    return rc;
}

int main(int argc, char **argv)
{
    const int n = (int)(sizeof cases / sizeof *cases);
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int c = 0; c < n; c++) puts(cases[c].name);
        return 0;
    }
    for (int c = 0; argc == 3 && c < n; c++)
        if (!strcmp(argv[1], cases[c].name)) return run_case(c, argv[2]);
    fprintf(stderr, "usage: onnx_own_export --list | CASE DIR\n");
    return 2;
}
