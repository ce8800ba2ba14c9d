/* ONNX export and import (nabla/onnx.h): models built in nabla, with every
 * op the export maps, go out and come back computing the same values,
 * statically and eagerly; the exported model's structure is what ONNX
 * tools expect (opset, symbolic batch, initializers); hand-made models
 * exercise the importer's checks (opset, unknown ops, missing inputs,
 * external data, float16, corrupted bytes), each error naming the node.
 * A build without ONNX checks that the calls say so. The comparison with
 * PyTorch and onnx.checker is tests/test_onnx_python.sh. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_test_util.h"
#include "test.h"
#ifdef NABLA_HAVE_ONNX
#include "onnx.pb-c.h"
#endif

typedef nb_value (*model_fn)(nb_builder *b, nb_value x);

/* A model in a program with its startup program run in a fresh scope. */
typedef struct built {
    nb_program *main, *startup, *test;
    nb_scope *scope;
    nb_value y;
} built;

static nb_status build(built *m, model_fn model, int ndim, const int64_t *shape)
{
    memset(m, 0, sizeof *m);
    nb_builder *b;
    nb_status st = nb_program_new(&m->main);
    if (!st) st = nb_program_new(&m->startup);
    if (st) return st;
    nb_program_set_seed(m->startup, 7);
    if ((st = nb_builder_new_record(&b, m->main, m->startup))) return st;
    m->y = model(b, nb_layer_data(b, "x", NB_F32, ndim, shape));
    st = nb_builder_status(b);
    if (st) fprintf(stderr, "  model: %s\n", nb_builder_error(b));
    nb_builder_free(b);
    nb_executor *e;
    if (!st) st = nb_scope_new(&m->scope, NULL);
    if (!st && !(st = nb_executor_new(&e))) {
        st = nb_executor_run(e, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
        nb_executor_free(e);
    }
    if (!st) st = nb_program_clone_for_test(&m->test, m->main);
    return st;
}

static void built_free(built *m)
{
    nb_program_free(m->main);
    nb_program_free(m->startup);
    nb_program_free(m->test);
    nb_scope_free(m->scope);
}

static nb_tensor *run_test(built *m, const char *fetch, nb_tensor *x)
{
    nb_executor *e;
    nb_tensor *out = NULL;
    if (nb_executor_new(&e)) return NULL;
    nb_status st = nb_executor_run(e, m->test, m->scope, NB_FEEDS({"x", x}), NB_NAMES(fetch), &out);
    if (st) fprintf(stderr, "  run: %s\n", nb_last_error());
    nb_executor_free(e);
    return out;
}

static nb_tensor *input(int ndim, const int64_t *shape, double scale)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F32, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, scale * sin(0.37 * (double)i + 0.1));
    return t;
}

/* The imported model (a record builder on fresh programs) for input x. */
static nb_tensor *imported_output(const char *path, nb_tensor *x)
{
    built m = {0};
    nb_builder *b;
    nb_tensor *y = NULL;
    nb_value outs[2];
    int n_out = 0;
    if (nb_program_new(&m.main) || nb_program_new(&m.startup) || nb_builder_new_record(&b, m.main, m.startup))
        return NULL;
    nb_status st = nb_onnx_import(path, b, NB_NO_VALUES, 2, outs, &n_out);
    if (st) fprintf(stderr, "  import: %s\n", nb_last_error());
    nb_executor *e = NULL;
    if (!st) st = nb_scope_new(&m.scope, NULL);
    if (!st) st = nb_executor_new(&e);
    if (!st) st = nb_executor_run(e, m.startup, m.scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    if (!st) st = nb_program_clone_for_test(&m.test, m.main);
    if (!st && n_out == 1) y = run_test(&m, nb_value_name(outs[0]), x);
    CHECK(n_out == 1);
    nb_executor_free(e);
    nb_builder_free(b);
    built_free(&m);
    return y;
}

/* The same import run eagerly, in test mode. */
static nb_tensor *eager_output(const char *path, nb_tensor *x)
{
    nb_builder *b;
    if (nb_builder_new_eager(&b)) return NULL;
    nb_eager_set_test_mode(b, true);
    nb_value out;
    int n_out = 0;
    nb_tensor *y = NULL;
    if (!nb_onnx_import(path, b, NB_VALUES(nb_eager_value(b, x)), 1, &out, &n_out))
        y = nb_tensor_retain(nb_eager_tensor(out));
    else fprintf(stderr, "  eager import: %s\n", nb_last_error());
    nb_builder_free(b);
    return y;
}

static void check_close(const nb_tensor *a, const nb_tensor *b, double tol)
{
    CHECK(a && b);
    if (!a || !b) return;
    CHECK(nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape));
    double worst = 0;
    for (int64_t i = 0; i < nb_tensor_numel(a) && i < nb_tensor_numel(b); i++) {
        double d = fabs(nb_tensor_get(a, i) - nb_tensor_get(b, i));
        if (!(d <= worst)) worst = d;
    }
    if (!(worst <= tol)) fprintf(stderr, "  largest difference %g (tolerance %g)\n", worst, tol);
    CHECK(worst <= tol);
}

/* Exports model, imports it twice (static and eager) and compares. */
static void round_trip(const char *name, model_fn model, int ndim, const int64_t *shape, double tol)
{
    built m;
    REQUIRE_OK(build(&m, model, ndim, shape));
    int64_t xs[NB_MAX_DIMS];
    memcpy(xs, shape, (size_t)ndim * sizeof *xs);
    xs[0] = 3; /* a batch the model never saw: the batch dim is symbolic */
    nb_tensor *x = input(ndim, xs, 1.0), *want = run_test(&m, nb_value_name(m.y), x);
    const char *path = path_of(name);
    CHECK_OK(nb_onnx_export(m.test, m.scope, NB_NAMES(nb_value_name(m.y)), path));
    nb_tensor *got = imported_output(path, x), *eager = eager_output(path, x);
    check_close(want, got, tol);
    check_close(want, eager, tol);
    nb_tensor_release(x);
    nb_tensor_release(want);
    nb_tensor_release(got);
    nb_tensor_release(eager);
    built_free(&m);
}

/* ---- models ----------------------------------------------------------------- */

static nb_value mlp(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, x, 16, "relu", NULL);
    h = nb_layer_fc(b, h, 8, "tanh", NULL);
    return nb_layer_fc(b, h, 3, NULL, NULL);
}

static nb_value lenet(nb_builder *b, nb_value x)
{
    nb_conv2d_opts relu = {.act = "relu", .padding = 1};
    nb_value h = nb_layer_conv2d(b, nb_reshape(b, x, 4, (int64_t[]){-1, 1, 12, 12}), 4, 3, &relu);
    h = nb_layer_batch_norm(b, h, NULL);
    h = nb_layer_pool2d(b, h, "max", 2, &(nb_pool2d_opts){.stride = 2});  /* 4x6x6 */
    h = nb_layer_conv2d(b, h, 6, 3, &(nb_conv2d_opts){.act = "sigmoid"}); /* 6x4x4 */
    h = nb_layer_pool2d(b, h, "avg", 2, &(nb_pool2d_opts){.stride = 2, .count_include_pad = true, .padding = 1});
    h = nb_layer_fc(b, nb_flatten(b, h, 1, -1), 10, "relu", NULL);
    return nb_softmax(b, nb_layer_fc(b, h, 5, NULL, NULL), 1);
}

/* Every other op the export maps, in one graph over x [N, 6]. */
static nb_value zoo(nb_builder *b, nb_value x)
{
    nb_tensor *w;
    if (nb_tensor_new(&w, NB_F32, 2, S(4, 6))) return NB_NONE;
    for (int i = 0; i < 24; i++) nb_tensor_set(w, i, 0.1 * (i % 7) - 0.3);
    nb_value W = nb_param_from(b, "zoo.w", w);
    nb_tensor_release(w);
    nb_value a = nb_matmul(b, x, W, NB_TRANSPOSE_Y); /* [N, 4] */
    nb_value V = nb_param(b, "zoo.v", NB_F32, 2, S(4, 4), nb_init_uniform(-1, 1));
    a = nb_emit1(b, "matmul", NB_VALUES(a, V),
                 NB_ATTRS(NB_ATTR_BOOL("transpose_y", true), NB_ATTR_FLOAT("alpha", 0.5)));
    nb_value t = nb_add(b, nb_scale(b, a, 0.5, 0.1), nb_clip(b, a, -0.5, 0.5));
    t = nb_sub(b, t, nb_leaky_relu(b, nb_elu(b, t, 0.7), 0.2));
    t = nb_mul(b, t, nb_silu(b, nb_sigmoid(b, t)));
    t = nb_div(b, nb_exp(b, nb_tanh(b, t)), nb_add(b, nb_sqrt(b, nb_abs(b, t)), nb_ones_like(b, t)));
    t = nb_add(b, t, nb_log(b, nb_add(b, nb_square(b, t), nb_ones_like(b, t))));
    t = nb_add(b, nb_neg(b, t), nb_gelu(b, t, false));
    t = nb_add(b, t, nb_gelu(b, t, true));
    t = nb_maximum(b, t, nb_minimum(b, t, nb_softplus(b, t, 1, 20)));
    t = nb_add(b, t, nb_rsqrt(b, nb_add(b, nb_square(b, t), nb_ones_like(b, t))));
    t = nb_pow(b, nb_add(b, nb_abs(b, t), nb_ones_like(b, t)), nb_sin(b, nb_cos(b, t)));
    /* epsilon 1e-2: rows whose four features nearly agree would otherwise
     * magnify a one-ulp difference between the gelu kernel and its ONNX
     * decomposition a thousandfold. */
    t = nb_layer_layer_norm(b, t, 1, 1e-2);
    nb_value u = nb_unsqueeze(b, t, 1, (int64_t[]){1});         /* [N, 1, 4] */
    u = nb_concat(b, 2, (nb_value[]){u, u}, 1);                 /* [N, 2, 4] */
    nb_value r = nb_reduce_mean(b, u, 1, (int64_t[]){1}, true); /* [N, 1, 4] */
    r = nb_add(b, nb_squeeze(b, r, 1, (int64_t[]){1}), nb_reduce_sum(b, u, 1, (int64_t[]){1}, false));
    nb_tensor *idx;
    if (nb_tensor_from_data(&idx, NB_I64, 1, S(3), (int64_t[]){3, 0, 2})) return NB_NONE;
    nb_value g = nb_gather(b, r, nb_constant(b, idx), 1); /* [N, 3] */
    nb_tensor_release(idx);
    nb_value e = nb_cast(b, nb_cast(b, g, NB_F64), NB_F32);
    e = nb_log_softmax(b, nb_dropout(b, e, 0.5, false, 1), 1);
    return nb_reshape(b, nb_sum(b, 2, (nb_value[]){e, g}), 2, (int64_t[]){0, -1});
}

static nb_value embed(nb_builder *b, nb_value x)
{
    nb_value ids = nb_cast(b, nb_clip(b, nb_scale(b, nb_abs(b, x), 4, 0), 0, 4), NB_I64);
    nb_value w = nb_param(b, "table", NB_F32, 2, S(5, 3), nb_init_uniform(-1, 1));
    return nb_flatten(b, nb_embedding(b, w, ids, -1), 1, -1);
}

static void test_models_round_trip(void)
{
    round_trip("mlp.onnx", mlp, 2, S(-1, 5), 1e-6);
    round_trip("lenet.onnx", lenet, 2, S(-1, 144), 1e-5);
    round_trip("zoo.onnx", zoo, 2, S(-1, 6), 1e-5);
    round_trip("embed.onnx", embed, 2, S(-1, 4), 0);
}

#ifdef NABLA_HAVE_ONNX
/* ---- the exported model itself ------------------------------------------------ */

static void test_exported_model_is_standard(void)
{
    built m;
    REQUIRE_OK(build(&m, mlp, 2, S(-1, 5)));
    const char *path = path_of("std.onnx");
    REQUIRE_OK(nb_onnx_export(m.test, m.scope, NB_NAMES(nb_value_name(m.y)), path));
    size_t n;
    unsigned char *bytes = read_all(path, &n);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, bytes);
    CHECK(mp != NULL);
    if (mp) {
        CHECK(mp->ir_version == 7 && mp->n_opset_import == 1 && mp->opset_import[0]->version == NB_ONNX_OPSET);
        CHECK_STR(mp->producer_name, "nabla");
        const Onnx__GraphProto *g = mp->graph;
        CHECK(g->n_input == 1 && !strcmp(g->input[0]->name, "x"));
        const Onnx__TensorShapeProto *s = g->input[0]->type->tensor_type->shape;
        CHECK(s->n_dim == 2 && s->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
              !strcmp(s->dim[0]->dim_param, "N") && s->dim[1]->dim_value == 5);
        CHECK(g->n_output == 1 && !strcmp(g->output[0]->name, nb_value_name(m.y)));
        CHECK(g->n_initializer == 6); /* three weights, three biases */
        int matmuls = 0;
        for (size_t i = 0; i < g->n_node; i++) matmuls += !strcmp(g->node[i]->op_type, "MatMul");
        CHECK(matmuls == 3);
        onnx__model_proto__free_unpacked(mp, NULL);
    }
    /* Every truncation is refused cleanly. */
    for (size_t cut = 0; cut < n; cut += 1 + cut / 16) {
        write_file(path_of("cut.onnx"), bytes, cut);
        nb_builder *b;
        nb_program *p;
        REQUIRE_OK(nb_program_new(&p));
        REQUIRE_OK(nb_builder_new_record(&b, p, NULL));
        nb_status st = nb_onnx_import(path_of("cut.onnx"), b, NB_NO_VALUES, 0, NULL, NULL);
        CHECK(st == NB_ERR_FORMAT || (cut == 0 && st == NB_ERR_FORMAT));
        nb_builder_free(b);
        nb_program_free(p);
    }
    free(bytes);
    built_free(&m);
}

/* ---- hand-made models for the importer's checks -------------------------------- */

typedef struct handmade {
    Onnx__ModelProto m;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__GraphProto g;
    Onnx__NodeProto node, *nodes[1];
    char *node_in[2], *node_out[1];
    Onnx__ValueInfoProto in, out, *ins[1], *outs[1];
    Onnx__TypeProto tp;
    Onnx__TypeProto__Tensor tt;
    Onnx__TensorShapeProto shape;
    Onnx__TensorShapeProto__Dimension dim, *dims[1];
    Onnx__TensorProto w, *inits[1];
    int64_t w_dims[1];
    Onnx__StringStringEntryProto ext[2], *exts[2];
} handmade;

/* y = op_type(x, w) with x a float [3] input and w a float [3] initializer. */
static void handmade_init(handmade *h, const char *op_type, int opset)
{
    memset(h, 0, sizeof *h);
    onnx__model_proto__init(&h->m);
    onnx__operator_set_id_proto__init(&h->opset);
    onnx__graph_proto__init(&h->g);
    onnx__node_proto__init(&h->node);
    onnx__value_info_proto__init(&h->in);
    onnx__value_info_proto__init(&h->out);
    onnx__type_proto__init(&h->tp);
    onnx__type_proto__tensor__init(&h->tt);
    onnx__tensor_shape_proto__init(&h->shape);
    onnx__tensor_shape_proto__dimension__init(&h->dim);
    onnx__tensor_proto__init(&h->w);
    h->opset.domain = "", h->opset.has_version = 1, h->opset.version = opset;
    h->opsets[0] = &h->opset;
    h->m.has_ir_version = 1, h->m.ir_version = 7, h->m.n_opset_import = 1, h->m.opset_import = h->opsets;
    h->m.graph = &h->g;
    h->dim.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, h->dim.dim_value = 3;
    h->dims[0] = &h->dim;
    h->shape.n_dim = 1, h->shape.dim = h->dims;
    h->tt.has_elem_type = 1, h->tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, h->tt.shape = &h->shape;
    h->tp.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, h->tp.tensor_type = &h->tt;
    h->in.name = "x", h->in.type = &h->tp, h->out.name = "y", h->out.type = &h->tp;
    h->ins[0] = &h->in, h->outs[0] = &h->out;
    h->g.n_input = 1, h->g.input = h->ins, h->g.n_output = 1, h->g.output = h->outs;
    h->node_in[0] = "x", h->node_in[1] = "w", h->node_out[0] = "y";
    h->node.op_type = (char *)op_type, h->node.name = "n1";
    h->node.n_input = 2, h->node.input = h->node_in, h->node.n_output = 1, h->node.output = h->node_out;
    h->nodes[0] = &h->node;
    h->g.n_node = 1, h->g.node = h->nodes;
    static float wv[3] = {0.5f, -2.0f, 4.0f};
    h->w.name = "w", h->w.has_data_type = 1, h->w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    h->w_dims[0] = 3, h->w.n_dims = 1, h->w.dims = h->w_dims;
    h->w.n_float_data = 3, h->w.float_data = wv;
    h->inits[0] = &h->w;
    h->g.n_initializer = 1, h->g.initializer = h->inits;
}

static void handmade_save(const handmade *h, const char *path)
{
    size_t n = onnx__model_proto__get_packed_size(&h->m);
    uint8_t *buf = malloc(n + 1);
    onnx__model_proto__pack(&h->m, buf);
    write_file(path, buf, n);
    free(buf);
}

/* Imports path into a fresh record builder and runs it on x = (1, 2, 3). */
static nb_status import_and_run(const char *path, double out[3])
{
    nb_program *p, *s;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    nb_value y;
    nb_program_new(&p), nb_program_new(&s), nb_builder_new_record(&b, p, s), nb_scope_new(&scope, NULL),
        nb_executor_new(&e);
    nb_status st = nb_onnx_import(path, b, NB_NO_VALUES, 1, &y, NULL);
    nb_tensor *x = NULL, *r = NULL;
    nb_tensor_from_data(&x, NB_F32, 1, S(3), (float[]){1, 2, 3});
    if (!st) st = nb_executor_run(e, s, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    if (!st) st = nb_executor_run(e, p, scope, NB_FEEDS({"x", x}), NB_NAMES(nb_value_name(y)), &r);
    for (int i = 0; !st && i < 3; i++) out[i] = nb_tensor_get(r, i);
    nb_tensor_release(x);
    nb_tensor_release(r);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(p);
    nb_program_free(s);
    return st;
}

/* Bounds that exporters compute from shapes (torch's chunk: Shape, Gather,
 * Div into Slice) fold at import, so a static program takes them: y =
 * x[0 : len(x) / 2] * (w0 * w1), where w0 and w1 are float initializers,
 * which stay parameters rather than fold into a constant. Before the fold
 * the Slice was refused ("must be a constant"). */
static void test_static_folds_shape_arithmetic(void)
{
    handmade h;
    handmade_init(&h, "Slice", 13);
    h.dim.dim_value = 4;
    Onnx__NodeProto n[5], *nodes[5];
    char *io[5][3] = {{"x"}, {"shape", "two"}, {"x", "zero", "half"}, {"w", "w1"}, {"sliced", "ww"}};
    char *outs[5][1] = {{"shape"}, {"half"}, {"sliced"}, {"ww"}, {"y"}};
    const char *types[5] = {"Shape", "Div", "Slice", "Mul", "Mul"};
    int n_in[5] = {1, 2, 3, 2, 2};
    for (int i = 0; i < 5; i++) {
        onnx__node_proto__init(&n[i]);
        n[i].op_type = (char *)types[i], n[i].n_input = (size_t)n_in[i], n[i].input = io[i];
        n[i].n_output = 1, n[i].output = outs[i], nodes[i] = &n[i];
    }
    h.g.n_node = 5, h.g.node = nodes;
    Onnx__TensorProto t[3], *inits[4] = {&h.w};
    int64_t one = 1, two = 2, zero = 0;
    static float w1 = 3.0f;
    const char *names[3] = {"two", "zero", "w1"};
    for (int i = 0; i < 3; i++) {
        onnx__tensor_proto__init(&t[i]);
        t[i].name = (char *)names[i], t[i].has_data_type = 1, t[i].n_dims = 1, t[i].dims = &one;
        t[i].data_type = i < 2 ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64 : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        if (i < 2) t[i].n_int64_data = 1, t[i].int64_data = i ? &zero : &two;
        else t[i].n_float_data = 1, t[i].float_data = &w1;
        inits[i + 1] = &t[i];
    }
    h.w_dims[0] = 1, h.w.n_float_data = 1; /* w = 0.5 */
    h.g.n_initializer = 4, h.g.initializer = inits;
    const char *path = path_of("folded.onnx");
    handmade_save(&h, path);

    nb_program *p, *s;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    nb_value y;
    CHECK_OK(nb_program_new(&p));
    CHECK_OK(nb_program_new(&s));
    CHECK_OK(nb_builder_new_record(&b, p, s));
    CHECK_OK(nb_scope_new(&scope, NULL));
    CHECK_OK(nb_executor_new(&e));
    CHECK_OK(nb_onnx_import(path, b, NB_NO_VALUES, 1, &y, NULL));
    nb_var *w = nb_block_find_var(nb_program_global_block(p), "w");
    CHECK(w && w->is_parameter);
    nb_tensor *x, *r = NULL;
    CHECK_OK(nb_tensor_from_data(&x, NB_F32, 1, S(4), (float[]){1, 2, 3, 4}));
    CHECK_OK(nb_executor_run(e, s, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    CHECK_OK(nb_executor_run(e, p, scope, NB_FEEDS({"x", x}), NB_NAMES(nb_value_name(y)), &r));
    CHECK(r && r->ndim == 1 && r->shape[0] == 2 && nb_tensor_get(r, 0) == 1.5 && nb_tensor_get(r, 1) == 3);
    nb_tensor_release(x), nb_tensor_release(r);
    nb_executor_free(e), nb_scope_free(scope), nb_builder_free(b), nb_program_free(p), nb_program_free(s);
}

/* An eager import takes a value for each graph input, which must be what
 * the model declares: the handmade model's x is float32 [3]. */
static void test_eager_inputs_checked(void)
{
    handmade h;
    const char *path = path_of("h.onnx");
    handmade_init(&h, "Mul", 13);
    handmade_save(&h, path);
    nb_tensor *good, *wide, *longer;
    nb_tensor_from_data(&good, NB_F32, 1, S(3), (float[]){1, 2, 3});
    nb_tensor_from_data(&wide, NB_F64, 1, S(3), (double[]){1, 2, 3});
    nb_tensor_from_data(&longer, NB_F32, 1, S(4), (float[]){1, 2, 3, 4});
    nb_tensor *given[] = {good, wide, longer};
    nb_status want[] = {NB_OK, NB_ERR_ARG, NB_ERR_SHAPE};
    const char *msg[] = {"", "graph input 'x' is FLOAT (nabla's float32); the value given is float64",
                         "graph input 'x' is [3]; the value given is [4]"};
    for (int i = 0; i < 3; i++) {
        nb_builder *b;
        nb_value y;
        CHECK_OK(nb_builder_new_eager(&b));
        nb_status st = nb_onnx_import(path, b, NB_VALUES(nb_eager_value(b, given[i])), 1, &y, NULL);
        if (want[i]) CHECK_ERR(st, want[i], msg[i]);
        else CHECK(!st && nb_tensor_get(nb_eager_tensor(y), 2) == 12);
        nb_builder_free(b);
    }
    nb_tensor_release(good), nb_tensor_release(wide), nb_tensor_release(longer);
}

static void test_import_checks(void)
{
    handmade h;
    double y[3];
    const char *path = path_of("h.onnx");

    handmade_init(&h, "Mul", 13);
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));
    CHECK(y[0] == 0.5 && y[1] == -4 && y[2] == 12);

    /* Opsets before 11 read the ops whose meaning has not changed since... */
    handmade_init(&h, "Mul", 9);
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));
    CHECK(y[0] == 0.5 && y[1] == -4 && y[2] == 12);
    handmade_init(&h, "Mul", 18);
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED, "uses opset 18; nabla reads opsets 1 to 17");
    /* ...and refuse what has: opset 1-6's broadcast along an axis. */
    handmade_init(&h, "Mul", 6);
    Onnx__AttributeProto bc = ONNX__ATTRIBUTE_PROTO__INIT, ax = ONNX__ATTRIBUTE_PROTO__INIT, *legacy[2] = {&bc, &ax};
    bc.name = "broadcast", bc.has_type = 1, bc.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, bc.has_i = 1,
    bc.i = 1;
    ax.name = "axis", ax.has_type = 1, ax.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, ax.has_i = 1, ax.i = 0;
    h.node.n_attribute = 2, h.node.attribute = legacy;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED, "(Mul, opset 6): broadcasts along axis 0");

    handmade_init(&h, "FancyOp", 13);
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED, "node 'n1' (FancyOp, opset 13): nabla has no import");

    handmade_init(&h, "Mul", 13);
    h.node_in[1] = "nowhere";
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "input 'nowhere' is neither a graph input");

    /* An op's own complaint carries the node's name (MatMul, which did this
     * with vectors, now takes them as numpy does). */
    handmade_init(&h, "Gather", 13);
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_DTYPE,
              "node 'n1' (Gather, opset 13): gather (gather_0.tmp_0): Index must");

    handmade_init(&h, "Mul", 13);
    h.w_dims[0] = 4; /* three values for four elements */
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "initializer 'w': holds 3 values for shape of 4 elements");

    /* float16 bits in int32_data, widened exactly. */
    handmade_init(&h, "Mul", 13);
    int32_t halves[3] = {0x3800, 0xc000, 0x0001}; /* 0.5, -2, the smallest subnormal 2^-24 */
    h.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, h.w.n_float_data = 0;
    h.w.n_int32_data = 3, h.w.int32_data = halves;
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));
    CHECK(y[0] == 0.5 && y[1] == -4 && y[2] == 3 * ldexp(1, -24));

    /* int8 raw bytes, held widened as int32 (CastLike brings them to x's float). */
    handmade_init(&h, "CastLike", 13);
    uint8_t narrow[3] = {0xff, 0x02, 0x7f};
    h.node_in[0] = "w", h.node_in[1] = "x";
    h.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT8, h.w.n_float_data = 0;
    h.w.has_raw_data = 1, h.w.raw_data.len = 3, h.w.raw_data.data = narrow;
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));
    CHECK(y[0] == -1 && y[1] == 2 && y[2] == 127);

    /* External data beside the model, and one that tries to leave its folder. */
    handmade_init(&h, "Mul", 13);
    float raw[4] = {0, 3, -1, 0.25f}; /* offset 4: (3, -1, 0.25) */
    write_file(path_of("w.bin"), raw, sizeof raw);
    h.w.n_float_data = 0, h.w.has_data_location = 1, h.w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    for (int i = 0; i < 2; i++) onnx__string_string_entry_proto__init(&h.ext[i]), h.exts[i] = &h.ext[i];
    h.ext[0].key = "location", h.ext[0].value = "w.bin", h.ext[1].key = "offset", h.ext[1].value = "4";
    h.w.n_external_data = 2, h.w.external_data = h.exts;
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));
    CHECK(y[0] == 3 && y[1] == -2 && y[2] == 0.75);
    h.ext[0].value = "../w.bin";
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "external data location \"../w.bin\" leaves the model's folder");
    h.ext[0].value = "w.bin", h.ext[1].value = "8";
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "has no 12 bytes at offset 8");

    /* Found by fuzz_onnx: an attribute with an empty list. */
    handmade_init(&h, "MaxPool", 13);
    Onnx__AttributeProto ks = ONNX__ATTRIBUTE_PROTO__INIT, *attrs[1] = {&ks};
    ks.name = "kernel_shape", ks.has_type = 1, ks.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    h.node.n_input = 1, h.node.n_attribute = 1, h.node.attribute = attrs;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED, "attribute kernel_shape has 0 values");

    handmade_init(&h, "Mul", 13); /* and a node without outputs */
    h.node.n_output = 0;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "node 0 (Mul) has no outputs");

    write_file(path, "not a model at all", 18);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "is not an ONNX model");
    CHECK_ERR(import_and_run(path_of("missing.onnx"), y), NB_ERR_NOT_FOUND, "cannot open");
    CHECK_ERR(import_and_run(path_of(""), y), NB_ERR_IO, "is not a file"); /* the test's folder */
}

/* Variants of ops the importer once refused, where they still cannot be
 * imported: Reshape's allowzero=1 (a 0 is a dim of size 0) meeting an X
 * with elements, and MaxPool's Indices of an input whose batch only a run
 * knows (they are flat indices into X, so its every dim is needed). And
 * one it once took: CastLike to a FLOAT16 initializer, which nabla holds as
 * float32, gave X unrounded (the node suite's tolerance passed it). */
static void test_import_variant_refusals(void)
{
    handmade h;
    double y[3];
    const char *path = path_of("variant.onnx");

    handmade_init(&h, "Reshape", 14);
    int64_t to[2] = {0, 3};
    Onnx__AttributeProto az = ONNX__ATTRIBUTE_PROTO__INIT, *rattrs[1] = {&az};
    az.name = "allowzero", az.has_type = 1, az.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    az.has_i = 1, az.i = 1;
    h.node.n_attribute = 1, h.node.attribute = rattrs;
    h.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64, h.w.n_float_data = 0, h.w_dims[0] = 2;
    h.w.n_int64_data = 2, h.w.int64_data = to;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_SHAPE,
              "(Reshape, opset 14): has allowzero=1 and a 0 in its shape, for X of shape [3]");

    handmade_init(&h, "MaxPool", 12);
    Onnx__TensorShapeProto__Dimension dims[3], *dimp[3];
    for (int i = 0; i < 3; i++) {
        onnx__tensor_shape_proto__dimension__init(&dims[i]), dimp[i] = &dims[i];
        dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[i].dim_value = i ? 2 * i - 1 : 0; /* [N, 1, 3] */
    }
    dims[0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, dims[0].dim_param = "N";
    h.shape.n_dim = 3, h.shape.dim = dimp;
    int64_t k = 2;
    Onnx__AttributeProto ks = ONNX__ATTRIBUTE_PROTO__INIT, *pattrs[1] = {&ks};
    ks.name = "kernel_shape", ks.has_type = 1, ks.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    ks.n_ints = 1, ks.ints = &k;
    char *outs[2] = {"y", "z"};
    h.node.n_input = 1, h.node.n_attribute = 1, h.node.attribute = pattrs, h.node.n_output = 2, h.node.output = outs;
    h.g.n_initializer = 0;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED,
              "(MaxPool, opset 12): asks for MaxPool's Indices of an input whose size only a run knows");

    handmade_init(&h, "CastLike", 15);
    int32_t halves[3] = {0x3800, 0xc000, 0x4400}; /* 0.5, -2, 4 */
    h.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, h.w.n_float_data = 0;
    h.w.n_int32_data = 3, h.w.int32_data = halves;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED,
              "(CastLike, opset 15): casts to the type of 'w', FLOAT16 or BFLOAT16, which nabla holds as float32");
}

/* Valid models the importer once called malformed, and malformed ones it
 * once took (the last writer of a name winning). */
static void test_import_validity(void)
{
    handmade h;
    double y[3];
    const char *path = path_of("v.onnx");

    /* A Constant straight into a graph output. */
    handmade_init(&h, "Constant", 13);
    Onnx__AttributeProto vf = ONNX__ATTRIBUTE_PROTO__INIT, *cattrs[1] = {&vf};
    vf.name = "value_floats", vf.has_type = 1, vf.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    float cv[3] = {7, 8, 9};
    vf.n_floats = 3, vf.floats = cv;
    h.node.n_input = 0, h.node.n_attribute = 1, h.node.attribute = cattrs;
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));
    CHECK(y[0] == 7 && y[1] == 8 && y[2] == 9);

    /* The graph output's name is its var's in the program. */
    {
        nb_program *prog, *start;
        nb_builder *b;
        nb_value out;
        nb_program_new(&prog), nb_program_new(&start), nb_builder_new_record(&b, prog, start);
        handmade_init(&h, "Mul", 13);
        h.out.name = "logits", h.node_out[0] = "logits";
        handmade_save(&h, path);
        CHECK_OK(nb_onnx_import(path, b, NB_NO_VALUES, 1, &out, NULL));
        CHECK_STR(nb_value_name(out), "logits");
        nb_builder_free(b), nb_program_free(prog), nb_program_free(start);
    }

    /* An optional output left unnamed (""), as LSTM's often are. */
    handmade_init(&h, "Mul", 13);
    char *outs[2] = {"y", ""};
    h.node.n_output = 2, h.node.output = outs;
    handmade_save(&h, path);
    CHECK_OK(import_and_run(path, y));

    /* A model of another domain only is valid; its node is what nabla lacks. */
    handmade_init(&h, "Adagrad", 1);
    h.opset.domain = "ai.onnx.preview.training", h.node.domain = "ai.onnx.preview.training";
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_UNSUPPORTED, "its domain 'ai.onnx.preview.training' is not ONNX's");

    /* Two initializers of one name; a node writing a graph input's name. */
    handmade_init(&h, "Mul", 13);
    Onnx__TensorProto *twice[2] = {&h.w, &h.w};
    h.g.n_initializer = 2, h.g.initializer = twice;
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "two initializers are named 'w'");
    handmade_init(&h, "Mul", 13);
    h.node_out[0] = "x";
    handmade_save(&h, path);
    CHECK_ERR(import_and_run(path, y), NB_ERR_FORMAT, "node 0 (Mul) writes 'x', which is already written");

    /* External data through a link that leads out of the model's folder. */
    char dir[4096], model[4096], link[4096];
    snprintf(dir, sizeof dir, "%s", path_of("inner"));
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%.4000s/m.onnx", dir);
    snprintf(link, sizeof link, "%.4000s/w.bin", dir);
    float raw[3] = {1, 1, 1};
    write_file(path_of("outside.bin"), raw, sizeof raw);
    unlink(link);
    CHECK(symlink(path_of("outside.bin"), link) == 0);
    handmade_init(&h, "Mul", 13);
    Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *exts[1] = {&loc};
    loc.key = "location", loc.value = "w.bin";
    h.w.n_float_data = 0, h.w.has_data_location = 1, h.w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    h.w.n_external_data = 1, h.w.external_data = exts;
    handmade_save(&h, model);
    CHECK_ERR(import_and_run(model, y), NB_ERR_FORMAT,
              "external data location \"w.bin\" leads out of the model's folder");
    unlink(link), unlink(model), rmdir(dir);
}

/* Export names its own initializers apart from every name the program has:
 * a parameter called "const/0" and the exporter's constants both survive. */
static nb_value scaled_by_const0(nb_builder *b, nb_value x)
{
    nb_tensor *w;
    nb_tensor_from_data(&w, NB_F32, 1, S(3), (float[]){1, -2, 3});
    nb_value p = nb_param_from(b, "const/0", w);
    nb_tensor_release(w);
    return nb_scale(b, nb_mul(b, x, p), 2.0, 1.0);
}

static void test_export_names_apart(void)
{
    built m;
    REQUIRE_OK(build(&m, scaled_by_const0, 2, S(-1, 3)));
    const char *path = path_of("names.onnx");
    CHECK_OK(nb_onnx_export(m.test, m.scope, NB_NAMES(nb_value_name(m.y)), path));
    nb_tensor *x = input(2, S(2, 3), 1.0), *want = run_test(&m, nb_value_name(m.y), x), *got = imported_output(path, x);
    check_close(got, want, 1e-6);
    CHECK_ERR(nb_onnx_export(m.test, m.scope, (nb_names){1, (const char *[]){NULL}}, path), NB_ERR_ARG,
              "onnx export: fetch 0 is NULL");
    nb_tensor_release(x), nb_tensor_release(want), nb_tensor_release(got);
    built_free(&m);
}

/* Outputs of attention and conv2d_grad that their ONNX forms do not make. */
static nb_value attention_lse(nb_builder *b, nb_value x)
{
    nb_value out[3];
    nb_emit(b, "scaled_dot_product_attention", NB_VALUES(x, x, x), NB_NO_ATTRS, 3, out);
    return out[1];
}

static nb_value conv_filter_grad(nb_builder *b, nb_value x)
{
    nb_value w = nb_param(b, "w", NB_F32, 4, S(2, 1, 3, 3), nb_init_uniform(-1, 1)), out[2];
    nb_emit(b, "conv2d_grad", NB_VALUES(x, w, nb_conv2d(b, x, w, NB_NONE, NULL)), NB_NO_ATTRS, 2, out);
    return out[1];
}

/* scale 0: 1/sqrt(D), of a D that the program leaves unknown. */
static nb_value attention_of_unknown_width(nb_builder *b, nb_value x)
{
    return nb_scaled_dot_product_attention(b, x, x, x, NULL);
}

static void test_export_refusals(void)
{
    static const struct {
        model_fn model;
        int ndim;
        int64_t shape[4];
        const char *op, *why;
    } cases[] = {
        {attention_lse, 3, {-1, 3, 4}, "scaled_dot_product_attention", "has its LSE or Key read"},
        {conv_filter_grad, 4, {2, 1, 5, 5}, "conv2d_grad", "computes the filter's or the bias's gradient"},
        {attention_of_unknown_width, 3, {2, 3, -1}, "scaled_dot_product_attention", "scales by 1/sqrt(D) of a D only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        built m;
        REQUIRE_OK(build(&m, cases[i].model, cases[i].ndim, cases[i].shape));
        CHECK_ERR(nb_onnx_export(m.test, m.scope, NB_NAMES(nb_value_name(m.y)), path_of("refused.onnx")),
                  NB_ERR_UNSUPPORTED, cases[i].why);
        CHECK(strstr(nb_last_error(), cases[i].op) != NULL);
        built_free(&m);
    }
}
#endif

/* topk has no ONNX form nabla knows. */
static nb_value with_topk(nb_builder *b, nb_value x) { return nb_topk(b, mlp(b, x), 2, 1, true, NULL); }

static void test_export_errors(void)
{
    built m;
    REQUIRE_OK(build(&m, with_topk, 2, S(-1, 5)));
    const char *y = nb_value_name(m.y);
    if (!nb_onnx_available()) {
        CHECK_ERR(nb_onnx_export(m.test, m.scope, NB_NAMES(y), path_of("a.onnx")), NB_ERR_UNSUPPORTED,
                  "no ONNX support");
        built_free(&m);
        return;
    }
    CHECK_ERR(nb_onnx_export(m.test, m.scope, NB_NAMES(y), path_of("a.onnx")), NB_ERR_UNSUPPORTED, "onnx export: topk");
    CHECK(access(path_of("a.onnx"), F_OK) != 0); /* nothing written */
    CHECK_ERR(nb_onnx_export(m.test, m.scope, NB_NAMES("no_such_var"), path_of("a.onnx")), NB_ERR_NOT_FOUND,
              "fetch 'no_such_var' is not a var");
    nb_scope *empty;
    REQUIRE_OK(nb_scope_new(&empty, NULL));
    const char *hidden = nb_op_in_name(m.test->blocks[0]->ops[1], 0, 0); /* the first fc's output */
    (void)hidden;
    CHECK_ERR(
        nb_onnx_export(m.test, empty, NB_NAMES(nb_op_out_name(m.test->blocks[0]->ops[0], 0, 0)), path_of("a.onnx")),
        NB_ERR_NOT_FOUND, "has no value in the scope");
    nb_scope_free(empty);
    built_free(&m);
}

int main(void)
{
    make_temp_dir(dir, sizeof dir);
    if (!nb_onnx_available()) {
        printf("skipped: this build has no ONNX support (libonnx-dev); checking that the calls say so\n");
        RUN(test_export_errors);
    } else {
        RUN(test_models_round_trip);
        RUN(test_export_errors);
#ifdef NABLA_HAVE_ONNX
        RUN(test_exported_model_is_standard);
        RUN(test_import_checks);
        RUN(test_eager_inputs_checked);
        RUN(test_import_validity);
        RUN(test_import_variant_refusals);
        RUN(test_export_names_apart);
        RUN(test_export_refusals);
        RUN(test_static_folds_shape_arithmetic);
#endif
    }
    remove_tree(dir);
    return test_report();
}
