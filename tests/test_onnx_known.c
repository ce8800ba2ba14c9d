/* A static import given its inputs' values (nb_onnx_import_known): what
 * nabla's ops take at build time (Range's bounds, Expand's shape) may be
 * fed or computed at run time, and the program is fixed to the values it
 * was computed from, so that a run on other values is refused, never given
 * a stale result. Also what it refuses: an eager builder, a name that is no
 * graph input, an input it needs and was not given, a value computed from a
 * parameter. */
#include "file_test_util.h"
#include "test.h"
#ifdef NABLA_HAVE_ONNX
#include "onnx.pb-c.h"

#define MAX_N 4

/* A graph input or output: dims of -1 are the symbol "N". */
typedef struct vspec {
    const char *name;
    int type, ndim;
    int64_t dims[MAX_N];
} vspec;

typedef struct nspec {
    const char *op, *in[MAX_N], *out;
    const char *attr; /* an int attribute, or NULL */
    int64_t attr_i;
} nspec;

typedef struct model_spec {
    nspec nodes[MAX_N];
    vspec in[MAX_N], out[MAX_N];
    const char *float_init; /* a float [2] initializer of this name, or NULL */
} model_spec;

static int count_in(const char *const *names)
{
    int n = 0;
    while (n < MAX_N && names[n]) n++;
    return n;
}

/* The messages of one model, all in this struct: nothing to free. */
typedef struct model_msgs {
    Onnx__ModelProto m;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__GraphProto g;
    Onnx__NodeProto node[MAX_N], *nodes[MAX_N];
    Onnx__AttributeProto attr[MAX_N], *attrs[MAX_N];
    Onnx__ValueInfoProto vi[2 * MAX_N], *ins[MAX_N], *outs[MAX_N];
    Onnx__TypeProto tp[2 * MAX_N];
    Onnx__TypeProto__Tensor tt[2 * MAX_N];
    Onnx__TensorShapeProto shape[2 * MAX_N];
    Onnx__TensorShapeProto__Dimension dim[2 * MAX_N][MAX_N], *dims[2 * MAX_N][MAX_N];
    Onnx__TensorProto w, *inits[1];
    int64_t w_dims[1];
    float w_data[2];
} model_msgs;

static void value_info(model_msgs *h, int i, const vspec *v)
{
    onnx__value_info_proto__init(&h->vi[i]);
    onnx__type_proto__init(&h->tp[i]);
    onnx__type_proto__tensor__init(&h->tt[i]);
    onnx__tensor_shape_proto__init(&h->shape[i]);
    for (int d = 0; d < v->ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dm = &h->dim[i][d];
        onnx__tensor_shape_proto__dimension__init(dm);
        if (v->dims[d] < 0) dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, dm->dim_param = "N";
        else dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, dm->dim_value = v->dims[d];
        h->dims[i][d] = dm;
    }
    h->shape[i].n_dim = (size_t)v->ndim, h->shape[i].dim = h->dims[i];
    h->tt[i].has_elem_type = 1, h->tt[i].elem_type = v->type, h->tt[i].shape = &h->shape[i];
    h->tp[i].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, h->tp[i].tensor_type = &h->tt[i];
    h->vi[i].name = (char *)v->name, h->vi[i].type = &h->tp[i];
}

static void save_model(const char *path, const model_spec *s)
{
    static model_msgs h;
    memset(&h, 0, sizeof h);
    onnx__model_proto__init(&h.m);
    onnx__operator_set_id_proto__init(&h.opset);
    onnx__graph_proto__init(&h.g);
    h.opset.domain = "", h.opset.has_version = 1, h.opset.version = 13;
    h.opsets[0] = &h.opset;
    h.m.has_ir_version = 1, h.m.ir_version = 7, h.m.n_opset_import = 1, h.m.opset_import = h.opsets;
    h.m.graph = &h.g;
    int n_nodes = 0, n_in = 0, n_out = 0;
    for (; n_nodes < MAX_N && s->nodes[n_nodes].op; n_nodes++) {
        const nspec *ns = &s->nodes[n_nodes];
        Onnx__NodeProto *n = &h.node[n_nodes];
        onnx__node_proto__init(n);
        n->op_type = (char *)ns->op;
        n->n_input = (size_t)count_in(ns->in), n->input = (char **)ns->in;
        n->n_output = 1, n->output = (char **)&ns->out;
        if (ns->attr) {
            onnx__attribute_proto__init(&h.attr[n_nodes]);
            h.attr[n_nodes].name = (char *)ns->attr, h.attr[n_nodes].has_type = 1;
            h.attr[n_nodes].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
            h.attr[n_nodes].has_i = 1, h.attr[n_nodes].i = ns->attr_i;
            h.attrs[n_nodes] = &h.attr[n_nodes];
            n->n_attribute = 1, n->attribute = &h.attrs[n_nodes];
        }
        h.nodes[n_nodes] = n;
    }
    for (; n_in < MAX_N && s->in[n_in].name; n_in++) value_info(&h, n_in, &s->in[n_in]), h.ins[n_in] = &h.vi[n_in];
    for (; n_out < MAX_N && s->out[n_out].name; n_out++)
        value_info(&h, MAX_N + n_out, &s->out[n_out]), h.outs[n_out] = &h.vi[MAX_N + n_out];
    h.g.n_node = (size_t)n_nodes, h.g.node = h.nodes;
    h.g.n_input = (size_t)n_in, h.g.input = h.ins, h.g.n_output = (size_t)n_out, h.g.output = h.outs;
    if (s->float_init) {
        onnx__tensor_proto__init(&h.w);
        h.w_data[0] = 2, h.w_data[1] = 3;
        h.w.name = (char *)s->float_init, h.w.has_data_type = 1, h.w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        h.w_dims[0] = 2, h.w.n_dims = 1, h.w.dims = h.w_dims, h.w.n_float_data = 2, h.w.float_data = h.w_data;
        h.inits[0] = &h.w;
        h.g.n_initializer = 1, h.g.initializer = h.inits;
    }
    size_t n = onnx__model_proto__get_packed_size(&h.m);
    uint8_t *buf = malloc(n + 1);
    onnx__model_proto__pack(&h.m, buf);
    write_file(path, buf, n);
    free(buf);
}

enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };

/* y = Range(start, limit, delta), each an int64 scalar fed. */
static const model_spec range_model = {
    .nodes = {{.op = "Range", .in = {"start", "limit", "delta"}, .out = "y"}},
    .in = {{"start", I64, 0, {0}}, {"limit", I64, 0, {0}}, {"delta", I64, 0, {0}}},
    .out = {{"y", I64, 1, {-1}}},
};

/* y = Expand(x, Shape(like)): x [1, 3], like [N, 3]. */
static const model_spec expand_model = {
    .nodes = {{.op = "Shape", .in = {"like"}, .out = "s"}, {.op = "Expand", .in = {"x", "s"}, .out = "y"}},
    .in = {{"x", F32, 2, {1, 3}}, {"like", F32, 2, {-1, 3}}},
    .out = {{"y", F32, 2, {-1, 3}}},
};

/* y = Reshape(x, Cast(w)): a shape computed from a float initializer. */
static const model_spec param_shape_model = {
    .nodes = {{.op = "Cast", .in = {"w"}, .out = "s", .attr = "to", .attr_i = I64},
              {.op = "Reshape", .in = {"x", "s"}, .out = "y"}},
    .in = {{"x", F32, 1, {6}}},
    .out = {{"y", F32, 2, {2, 3}}},
    .float_init = "w",
};

/* A static program imported from a model, with its startup run. */
typedef struct imported {
    nb_program *main, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    nb_value y;
} imported;

static nb_status import_known(imported *m, const char *path, nb_feeds known)
{
    memset(m, 0, sizeof *m);
    nb_status st;
    if ((st = nb_program_new(&m->main)) || (st = nb_program_new(&m->startup)) ||
        (st = nb_builder_new_record(&m->b, m->main, m->startup)) || (st = nb_scope_new(&m->scope, NULL)) ||
        (st = nb_executor_new(&m->e)))
        return st;
    st = known.n ? nb_onnx_import_known(path, m->b, known, 1, &m->y, NULL)
                 : nb_onnx_import(path, m->b, NB_NO_VALUES, 1, &m->y, NULL);
    if (!st) st = nb_executor_run(m->e, m->startup, m->scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    return st;
}

static nb_status run(imported *m, nb_feeds feeds, nb_tensor **y)
{
    *y = NULL;
    return nb_executor_run(m->e, m->main, m->scope, feeds, NB_NAMES(nb_value_name(m->y)), y);
}

static void imported_free(imported *m)
{
    nb_executor_free(m->e);
    nb_scope_free(m->scope);
    nb_builder_free(m->b);
    nb_program_free(m->main);
    nb_program_free(m->startup);
}

static nb_tensor *i64_scalar(int64_t v)
{
    nb_tensor *t = NULL;
    nb_tensor_scalar(&t, NB_I64, (double)v);
    return t;
}

static bool is_data(imported *m, const char *name)
{
    const nb_var *v = nb_block_find_var(nb_program_block(m->main, 0), name);
    return v && v->is_data;
}

/* Range's bounds are fed: without their values the static import refuses;
 * with them it folds the bounds, and the bounds are constants of the
 * program from then on, so that a feed of other bounds is refused. */
static void test_range_bounds_fed(void)
{
    const char *path = path_of("range.onnx");
    save_model(path, &range_model);
    imported m;
    CHECK_ERR(import_known(&m, path, NB_NO_FEEDS), NB_ERR_UNSUPPORTED,
              "(Range, opset 13): input 0 ('start') must be a constant");
    imported_free(&m);

    nb_tensor *start = i64_scalar(1), *limit = i64_scalar(7), *delta = i64_scalar(2), *other = i64_scalar(0), *y;
    REQUIRE_OK(import_known(&m, path, NB_FEEDS({"start", start}, {"limit", limit}, {"delta", delta})));
    CHECK(!is_data(&m, "start") && !is_data(&m, "limit") && !is_data(&m, "delta"));
    CHECK_OK(run(&m, NB_NO_FEEDS, &y));
    CHECK(y && nb_tensor_numel(y) == 3 && nb_tensor_get(y, 0) == 1 && nb_tensor_get(y, 2) == 5);
    nb_tensor_release(y);
    /* Other bounds would need another output's shape: refused, not stale. */
    CHECK_ERR(run(&m, NB_FEEDS({"start", other}), &y), NB_ERR_ARG, "'start', which is fed: feeds are read-only");
    CHECK(!y);
    imported_free(&m);

    /* Imported again for them, it computes them. */
    REQUIRE_OK(import_known(&m, path, NB_FEEDS({"start", other}, {"limit", limit}, {"delta", delta})));
    CHECK_OK(run(&m, NB_NO_FEEDS, &y));
    CHECK(y && nb_tensor_numel(y) == 4 && nb_tensor_get(y, 3) == 6);
    nb_tensor_release(y);
    imported_free(&m);

    /* An input it needs and was not given, and a name that is no input. */
    CHECK_ERR(import_known(&m, path, NB_FEEDS({"limit", limit}, {"delta", delta})), NB_ERR_UNSUPPORTED,
              "needs the value of graph input 'start' at import");
    imported_free(&m);
    CHECK_ERR(import_known(&m, path, NB_FEEDS({"begin", start})), NB_ERR_ARG, "('begin') names no graph input");
    imported_free(&m);
    nb_tensor_release(start), nb_tensor_release(limit), nb_tensor_release(delta), nb_tensor_release(other);
}

/* Expand to Shape(like), like's first dim symbolic: the shape is folded
 * from the known like, whose dims the program is then declared with, so a
 * like of another batch is refused rather than expanded to the old one.
 * x, read only as data, stays a feed and is computed on afresh each run. */
static void test_expand_to_a_fed_shape(void)
{
    const char *path = path_of("expand.onnx");
    save_model(path, &expand_model);
    nb_tensor *x, *x2, *like, *like4, *y;
    nb_tensor_from_data(&x, NB_F32, 2, S(1, 3), (float[]){1, 2, 3});
    nb_tensor_from_data(&x2, NB_F32, 2, S(1, 3), (float[]){-1, 0, 5});
    nb_tensor_full(&like, NB_F32, 2, S(2, 3), 0);
    nb_tensor_full(&like4, NB_F32, 2, S(4, 3), 0);
    imported m;
    REQUIRE_OK(import_known(&m, path, NB_FEEDS({"x", x}, {"like", like})));
    CHECK(is_data(&m, "x") && is_data(&m, "like"));
    CHECK_OK(run(&m, NB_FEEDS({"x", x}, {"like", like}), &y));
    CHECK(y && y->ndim == 2 && y->shape[0] == 2 && nb_tensor_get(y, 5) == 3);
    nb_tensor_release(y);
    CHECK_OK(run(&m, NB_FEEDS({"x", x2}, {"like", like}), &y));
    CHECK(y && y->shape[0] == 2 && nb_tensor_get(y, 3) == -1 && nb_tensor_get(y, 5) == 5);
    nb_tensor_release(y);
    CHECK_ERR(run(&m, NB_FEEDS({"x", x}, {"like", like4}), &y), NB_ERR_SHAPE, "feed 'like' is float32 [4, 3]");
    CHECK(!y);
    imported_free(&m);
    nb_tensor_release(x), nb_tensor_release(x2), nb_tensor_release(like), nb_tensor_release(like4);
}

static void test_refusals(void)
{
    const char *path = path_of("param.onnx");
    save_model(path, &param_shape_model);
    nb_tensor *x;
    nb_tensor_full(&x, NB_F32, 1, S(6), 0);
    imported m;
    CHECK_ERR(import_known(&m, path, NB_FEEDS({"x", x})), NB_ERR_UNSUPPORTED,
              "computed from the float initializer 'w', a parameter that training changes");
    imported_free(&m);

    nb_builder *b;
    nb_value y;
    REQUIRE_OK(nb_builder_new_eager(&b));
    CHECK_ERR(nb_onnx_import_known(path, b, NB_FEEDS({"x", x}), 1, &y, NULL), NB_ERR_ARG, "needs a record builder");
    nb_builder_free(b);
    nb_tensor_release(x);
}
#endif

int main(void)
{
    if (!nb_onnx_available()) {
        printf("skipped: this build has no ONNX support (libonnx-dev)\n");
        return 0;
    }
#ifdef NABLA_HAVE_ONNX
    make_temp_dir(dir, sizeof dir);
    RUN(test_range_bounds_fed);
    RUN(test_expand_to_a_fed_shape);
    RUN(test_refusals);
    remove_tree(dir);
#endif
    return test_report();
}
