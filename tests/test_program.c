/* Programs, blocks, vars, ops, the record builder, and user-registered ops.
 * The ops used here are registered by the test itself (which also tests
 * nb_op_register), so that the program machinery is tested on its own. */
#include <stdlib.h>
#include "test.h"
#include "program/record.h"

/* test_axpy: Out = alpha * X + Y, same shapes. */
static nb_status axpy_infer(nb_op_ctx *c)
{
    const nb_var_info *x = nb_in_info(c, 0, 0), *y = nb_in_info(c, 1, 0);
    if (!nb_shape_equal(x->ndim, x->shape, y->ndim, y->shape) || x->dtype != y->dtype) {
        char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
        return nb_error(NB_ERR_SHAPE, "%s: X has shape %s but Y has shape %s", c->label,
                        nb_shape_str(a, sizeof a, x->ndim, x->shape), nb_shape_str(b, sizeof b, y->ndim, y->shape));
    }
    *nb_out_info(c, 0, 0) = *x;
    return NB_OK;
}

/* The kernel reads alpha from the op's parameter struct, which axpy_params
 * fills from the attributes. */
typedef struct axpy_params {
    double alpha;
} axpy_params;

static nb_status axpy_params_fill(const nb_op_ctx *c, void *p)
{
    ((axpy_params *)p)->alpha = nb_attr_float(c, "alpha");
    return NB_OK;
}

static nb_status axpy_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *x = nb_kin(k, 0, 0), *y = nb_kin(k, 1, 0), *o = nb_kout(k, 0, 0);
    double a = ((const axpy_params *)k->params)->alpha;
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, a * nb_tensor_get(x, i) + nb_tensor_get(y, i));
    return NB_OK;
}

static const nb_op_def axpy_def = {
    .name = "test_axpy",
    .doc = "Out = alpha * X + Y",
    .inputs = {{"X", 0}, {"Y", 0}},
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_FLOAT("alpha", 1.0)},
    .infer = axpy_infer,
    .params_size = sizeof(axpy_params),
    .params = axpy_params_fill,
};
static const nb_kernel_def axpy_kernel = {"test_axpy", NB_DEVICE_CPU, NB_DT_FLOAT, "test", 0, axpy_cpu, NULL, NULL};

/* test_fill: Out of attr shape filled with value. */
static nb_status fill_infer(nb_op_ctx *c)
{
    const nb_attr_value *shape = nb_attr_get(c, "shape");
    nb_var_info *o = nb_out_info(c, 0, 0);
    o->dtype = NB_F64;
    o->ndim = shape->n;
    for (int i = 0; i < shape->n; i++) o->shape[i] = shape->ints[i];
    return NB_OK;
}

static nb_status fill_params(const nb_op_ctx *c, void *p)
{
    *(double *)p = nb_attr_float(c, "value");
    return NB_OK;
}

static nb_status fill_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *o = nb_kout(k, 0, 0);
    for (int64_t i = 0; i < nb_tensor_numel(o); i++) nb_tensor_set(o, i, *(const double *)k->params);
    return NB_OK;
}

static const nb_op_def fill_def = {
    .name = "test_fill",
    .outputs = {{"Out", 0}},
    .attrs = {NB_ADEF_REQUIRED("shape", NB_ATTR_INTS), NB_ADEF_FLOAT("value", 0)},
    .infer = fill_infer,
    .params_size = sizeof(double),
    .params = fill_params,
    .flags = NB_OP_NOT_DIFFERENTIABLE,
};
static const nb_kernel_def fill_kernel = {"test_fill", NB_DEVICE_CPU, NB_DT(NB_F64), "test", 0, fill_cpu, NULL, NULL};

/* test_concat: variadic X -> Out (1-D only), to exercise variadic slots. */
static nb_status cat_infer(nb_op_ctx *c)
{
    nb_var_info *o = nb_out_info(c, 0, 0);
    *o = *nb_in_info(c, 0, 0);
    o->shape[0] = 0;
    for (int k = 0; k < nb_in_count(c, 0); k++) {
        int64_t d = nb_in_info(c, 0, k)->shape[0];
        if (d < 0 || o->shape[0] < 0) o->shape[0] = -1;
        else o->shape[0] += d;
    }
    return NB_OK;
}

static nb_status cat_cpu(const nb_kernel_ctx *k)
{
    nb_tensor *o = nb_kout(k, 0, 0);
    int64_t j = 0;
    for (int v = 0; v < nb_kin_count(k, 0); v++)
        for (int64_t i = 0; i < nb_tensor_numel(nb_kin(k, 0, v)); i++)
            nb_tensor_set(o, j++, nb_tensor_get(nb_kin(k, 0, v), i));
    return NB_OK;
}

static const nb_op_def cat_def = {
    .name = "test_concat",
    .inputs = {{"X", NB_SLOT_VARIADIC}},
    .outputs = {{"Out", 0}},
    .infer = cat_infer,
};
static const nb_kernel_def cat_kernel = {"test_concat", NB_DEVICE_CPU, NB_DT_ALL, "test", 0, cat_cpu, NULL, NULL};

static void register_test_ops(void)
{
    static int done;
    if (done++) return;
    CHECK_OK(nb_op_register(&axpy_def));
    CHECK_OK(nb_op_register(&fill_def));
    CHECK_OK(nb_op_register(&cat_def));
    CHECK_OK(nb_kernel_register(&axpy_kernel));
    CHECK_OK(nb_kernel_register(&fill_kernel));
    CHECK_OK(nb_kernel_register(&cat_kernel));
}

static void test_register(void)
{
    register_test_ops();
    CHECK(nb_op_find("test_axpy") == &axpy_def);
    CHECK_ERR(nb_op_register(&axpy_def), NB_ERR_ARG, "already exists");
    nb_op_def bad = {.name = "test_bad"};
    CHECK_ERR(nb_op_register(&bad), NB_ERR_ARG, "no infer function");
    /* The list stays sorted with user ops in it. */
    for (int i = 1; i < nb_op_count(); i++) CHECK(strcmp(nb_op_at(i - 1)->name, nb_op_at(i)->name) < 0);
    CHECK(nb_op_find("no_such_op") == NULL);
}

static void test_op_run_user_op(void)
{
    register_test_ops();
    nb_tensor *x = T(NB_F64, S(3), 1, 2, 3), *y = T(NB_F64, S(3), 10, 20, 30);
    nb_tensor *ins[] = {x, y};
    nb_attr attrs[] = {NB_ATTR_FLOAT("alpha", 2)};
    nb_tensor *o = RUN1("test_axpy", ins, attrs);
    CHECK_TENSOR(o, S(3), 0, 12, 24, 36);
    /* An int is accepted for a float attribute. */
    nb_attr iattrs[] = {NB_ATTR_INT("alpha", 3)};
    nb_tensor *o2 = RUN1("test_axpy", ins, iattrs);
    CHECK_TENSOR(o2, S(3), 0, 13, 26, 39);
    nb_tensor *out = NULL;
    nb_attr bad[] = {NB_ATTR_STRING("alpha", "x")};
    CHECK_ERR(nb_op_run("test_axpy", NB_TENSORS_N(2, ins), NB_ATTRS_N(1, bad), 1, &out), NB_ERR_ARG,
              "'alpha' must be of type float");
    nb_attr unknown[] = {NB_ATTR_FLOAT("beta", 1)};
    CHECK_ERR(nb_op_run("test_axpy", NB_TENSORS_N(2, ins), NB_ATTRS_N(1, unknown), 1, &out), NB_ERR_ARG,
              "unknown attribute 'beta' (it takes: alpha)");
    CHECK_ERR(nb_op_run("test_axpy", NB_TENSORS_N(1, ins), NB_NO_ATTRS, 1, &out), NB_ERR_ARG, "missing input 'Y'");
    CHECK_ERR(nb_op_run("test_axpy", NB_TENSORS(x, y, x), NB_NO_ATTRS, 1, &out), NB_ERR_ARG, "3 inputs given");
    CHECK_ERR(nb_op_run("nope", NB_NO_TENSORS, NB_NO_ATTRS, 1, &out), NB_ERR_NOT_FOUND, "unknown op 'nope'");
    CHECK_ERR(nb_op_run("test_fill", NB_NO_TENSORS, NB_NO_ATTRS, 1, &out), NB_ERR_ARG,
              "missing required attribute 'shape'");
    nb_tensor *z = T(NB_F64, S(2), 1, 2);
    CHECK_ERR(nb_op_run("test_axpy", NB_TENSORS(x, z), NB_NO_ATTRS, 1, &out), NB_ERR_SHAPE,
              "X has shape [3] but Y has shape [2]");
    /* Writing into a given output tensor, including in place. */
    nb_tensor *outs[] = {x};
    CHECK_OK(nb_op_run("test_axpy", NB_TENSORS_N(2, ins), NB_ATTRS_N(1, attrs), 1, outs));
    CHECK_TENSOR(x, S(3), 0, 12, 24, 36);
    nb_tensor *wrong[] = {z};
    CHECK_ERR(nb_op_run("test_axpy", NB_TENSORS_N(2, ins), NB_NO_ATTRS, 1, wrong), NB_ERR_SHAPE,
              "output 0 given as float64 [2]");
    /* Variadic inputs. */
    nb_tensor *cat = RUN1_NOATTR("test_concat", ((nb_tensor *[]){x, y, z}));
    CHECK_TENSOR(cat, S(8), 0, 12, 24, 36, 10, 20, 30, 1, 2);
    release_all(x, y, z, o, o2, cat, NULL);
}

static void test_program_vars_and_blocks(void)
{
    nb_program *p;
    CHECK_OK(nb_program_new(&p));
    CHECK(p->n_blocks == 1 && nb_program_global_block(p)->parent_idx == -1);
    nb_block *g = nb_program_global_block(p), *sub;
    nb_var *v;
    CHECK_OK(nb_block_create_var(g, "x", NB_F32, 2, S(-1, 784), &v));
    CHECK(v->shape[0] == -1 && v->shape[1] == 784 && !v->persistable);
    CHECK_ERR(nb_block_create_var(g, "x", NB_F64, 2, S(-1, 784), NULL), NB_ERR_ARG, "it exists as float32 [-1, 784]");
    CHECK_ERR(nb_block_create_var(g, "y", NB_F32, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1), NULL), NB_ERR_SHAPE, "9 dimensions");
    CHECK_ERR(nb_block_create_var(g, "y", NB_F32, 1, S(-2), NULL), NB_ERR_SHAPE, "dimension 0 is -2");
    CHECK_OK(nb_program_add_block(p, 0, &sub));
    CHECK(sub->idx == 1 && sub->parent_idx == 0);
    CHECK(nb_block_find_var(sub, "x") == NULL);
    CHECK(nb_block_find_var_recursive(sub, "x") == v);
    CHECK_ERR(nb_program_add_block(p, 7, &sub), NB_ERR_ARG, "parent block 7");
    char name[64], name2[64];
    CHECK_OK(nb_program_unique_name(p, "fc", name, sizeof name));
    CHECK_OK(nb_program_unique_name(p, "fc", name2, sizeof name2));
    CHECK_STR(name, "fc_0");
    CHECK_STR(name2, "fc_1");
    /* A user var that looks generated is skipped. */
    CHECK_OK(nb_block_create_var(g, "fc_2", NB_F32, 0, NULL, NULL));
    CHECK_OK(nb_program_unique_name(p, "fc", name, sizeof name));
    CHECK_STR(name, "fc_3");
    nb_program_free(p);
}

static void test_ops_in_blocks(void)
{
    register_test_ops();
    nb_program *p;
    CHECK_OK(nb_program_new(&p));
    nb_block *g = nb_program_global_block(p);
    CHECK_OK(nb_block_create_var(g, "a", NB_F64, 2, S(-1, 3), NULL));
    CHECK_OK(nb_block_create_var(g, "b", NB_F64, 2, S(-1, 3), NULL));
    nb_op *op;
    CHECK_OK(nb_block_append_op(g, "test_axpy", NB_NAMES("a", "b"), NB_NAMES("c"),
                                NB_ATTRS(NB_ATTR_FLOAT("alpha", 0.5)), &op));
    nb_var *c = nb_block_find_var(g, "c");
    CHECK(c && c->ndim == 2 && c->shape[0] == -1 && c->shape[1] == 3 && c->dtype == NB_F64);
    CHECK(op->attrs[0].f == 0.5 && op->role == NB_ROLE_FORWARD);
    CHECK_STR(nb_op_in_name(op, 1, 0), "b");
    CHECK_STR(nb_op_out_name(op, 0, 0), "c");
    CHECK_ERR(nb_block_append_op(g, "test_axpy", NB_NAMES("a", "nope"), NB_NAMES("d"), NB_NO_ATTRS, NULL),
              NB_ERR_NOT_FOUND, "input var 'nope' does not exist");
    CHECK_ERR(nb_block_append_op(g, "frobnicate", NB_NO_NAMES, NB_NAMES("d"), NB_NO_ATTRS, NULL), NB_ERR_NOT_FOUND,
              "unknown op 'frobnicate'");
    CHECK(g->n_ops == 1);
    /* Append, move to the front, then remove it. */
    CHECK_OK(
        nb_block_append_op(g, "test_fill", NB_NO_NAMES, NB_NAMES("f"), NB_ATTRS(NB_ATTR_INTS("shape", 2, 2)), NULL));
    CHECK_OK(nb_block_move_op(g, 1, 0));
    CHECK(g->n_ops == 2 && !strcmp(g->ops[0]->def->name, "test_fill") && g->ops[1] == op);
    CHECK_ERR(nb_block_move_op(g, 0, 2), NB_ERR_ARG, "move op: positions 0 and 2 must lie in [0, 2)");
    CHECK_OK(nb_block_remove_op(g, 0));
    CHECK(g->n_ops == 1 && g->ops[0] == op);
    CHECK_ERR(nb_block_remove_op(g, 5), NB_ERR_ARG, "position 5");

    /* Clone is deep and equal; changing the clone leaves the original alone. */
    nb_program *q;
    CHECK_OK(nb_program_clone(&q, p));
    char *ps = NULL, *qs = NULL;
    size_t n1, n2;
    FILE *f1 = open_memstream(&ps, &n1), *f2 = open_memstream(&qs, &n2);
    nb_program_print(p, f1);
    nb_program_print(q, f2);
    fclose(f1);
    fclose(f2);
    CHECK_STR(qs, ps);
    CHECK(strstr(ps, "test_axpy(X=[a], Y=[b]) -> (Out=[c]) {alpha=0.5} [forward]") != NULL);
    CHECK(strstr(ps, "c: float64[-1, 3]") != NULL);
    nb_block_remove_op(nb_program_global_block(q), 0);
    CHECK(g->n_ops == 1);
    free(ps);
    free(qs);
    nb_program_free(q);
    nb_program_free(p);
}

static void test_builder_record(void)
{
    register_test_ops();
    nb_program *p, *startup;
    nb_builder *b;
    CHECK_OK(nb_program_new(&p));
    CHECK_OK(nb_program_new(&startup));
    CHECK_OK(nb_builder_new_record(&b, p, startup));
    CHECK(!nb_builder_is_eager(b));
    nb_value x = nb_data(b, "x", NB_F64, 2, S(-1, 4));
    CHECK(nb_value_var(x)->is_data && nb_value_var(x)->stop_gradient);
    nb_value w =
        nb_create_parameter(b, "w", NB_F64, 2, S(1, 4), "test_fill", 1, (nb_attr[]){NB_ATTR_FLOAT("value", 0.25)});
    CHECK(nb_value_var(w)->persistable && nb_value_var(w)->is_parameter && nb_value_var(w)->trainable);
    CHECK(nb_program_global_block(startup)->n_ops == 1);
    CHECK(nb_program_global_block(startup)->ops[0]->role == NB_ROLE_STARTUP);
    nb_value y = nb_emit1(b, "test_axpy", NB_VALUES(x, x), NB_ATTRS(NB_ATTR_FLOAT("alpha", 2)));
    CHECK_OK(nb_builder_status(b));
    nb_var_info yi = nb_value_info(b, y);
    CHECK(yi.ndim == 2 && yi.shape[0] == -1 && yi.shape[1] == 4);
    CHECK_STR(nb_value_name(y), "test_axpy_0.tmp_0");
    /* The first error sticks; later emits do nothing and return it. */
    nb_value bad = nb_emit1(b, "test_axpy", NB_VALUES(x, w), NB_NO_ATTRS);
    CHECK(nb_is_none(bad));
    CHECK(nb_builder_status(b) == NB_ERR_SHAPE);
    CHECK(strstr(nb_builder_error(b), "X has shape [-1, 4] but Y has shape [1, 4]") != NULL);
    int n_ops = p->blocks[0]->n_ops;
    nb_value later = nb_emit1(b, "test_axpy", NB_VALUES(x, x), NB_NO_ATTRS);
    CHECK(nb_is_none(later) && p->blocks[0]->n_ops == n_ops);
    CHECK(nb_emit(b, "test_axpy", NB_VALUES(x, x), NB_NO_ATTRS, 1, &later) == NB_ERR_SHAPE);
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_value_by_name(b, "missing")));
    CHECK(strstr(nb_builder_error(b), "no var named 'missing'") != NULL);
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_data(b, "x", NB_F64, 1, S(2))));
    CHECK(strstr(nb_builder_error(b), "already exists") != NULL);
    nb_builder_clear_error(b);
    CHECK(nb_is_none(nb_create_parameter(b, "v", NB_F64, 1, S(-1), "test_fill", 0, NULL)));
    CHECK(strstr(nb_builder_error(b), "parameters need known sizes") != NULL);
    nb_builder_free(b);
    nb_program_free(p);
    nb_program_free(startup);
}

int main(void)
{
    RUN(test_register);
    RUN(test_op_run_user_op);
    RUN(test_program_vars_and_blocks);
    RUN(test_ops_in_blocks);
    RUN(test_builder_record);
    return test_report();
}
