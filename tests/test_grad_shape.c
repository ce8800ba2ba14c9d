/* Gradient rules of the shape family in programs whose shapes are only
 * partly known when they are built (dims of -1): which ops the rules emit,
 * the numbers those compute once the shapes are known, and the errors of
 * the rules that need a size the program does not know. (`nabla gradcheck`
 * checks every rule against finite differences on known shapes.) */
#include <stdlib.h>
#include "test.h"

typedef struct fx {
    nb_program *p;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *ex;
    int fwd; /* ops of the forward part */
} fx;

static void fx_init(fx *f)
{
    CHECK_OK(nb_program_new(&f->p));
    CHECK_OK(nb_builder_new_record(&f->b, f->p, NULL));
    CHECK_OK(nb_scope_new(&f->scope, NULL));
    CHECK_OK(nb_executor_new(&f->ex));
}

static void fx_free(fx *f)
{
    nb_executor_free(f->ex);
    nb_scope_free(f->scope);
    nb_builder_free(f->b);
    nb_program_free(f->p);
}

static nb_value data(fx *f, const char *name, nb_dtype dt, int ndim, const int64_t *shape)
{
    return nb_data(f->b, name, dt, ndim, shape);
}
#define DATA(f, name, shape) data((f), (name), NB_F64, NDIM_OF(shape), (shape))

/* Gradients of `target` (with dOut fed as `dout`) for the inputs xs. */
static nb_status grads(fx *f, nb_value target, const char *dout, int n, const nb_value *xs, nb_backward_result *r)
{
    CHECK_OK(nb_builder_status(f->b));
    const char *t = nb_value_name(target), *in[8];
    for (int i = 0; i < n; i++) in[i] = nb_value_name(xs[i]);
    f->fwd = nb_program_global_block(f->p)->n_ops;
    return nb_gradients(f->p, NB_NAMES_N(1, &t), NB_NAMES_N(n, in),
                        &(nb_gradients_opts){.target_grads = &dout, .flags = NB_ALLOW_UNUSED}, r);
}

static int count_ops(fx *f, const char *type)
{
    nb_block *b = nb_program_global_block(f->p);
    int n = 0;
    for (int i = f->fwd; i < b->n_ops; i++) n += !strcmp(b->ops[i]->def->name, type);
    return n;
}

static nb_tensor *fetch(fx *f, int n_feed, const nb_feed *feeds, const char *name)
{
    nb_tensor *t = NULL;
    CHECK(name != NULL);
    if (name) CHECK_OK(nb_executor_run(f->ex, f->p, f->scope, NB_FEEDS_N(n_feed, feeds), NB_NAMES_N(1, &name), &t));
    return t;
}

static nb_tensor *iota(int ndim, const int64_t *shape, double scale)
{
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_new(&t, NB_F64, ndim, shape));
    for (int64_t i = 0; t && i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, scale * (double)(i + 1));
    return t;
}
#define IOTA(shape, scale) iota(NDIM_OF(shape), (shape), (scale))

static void check_var_shape(fx *f, const char *name, int ndim, const int64_t *shape)
{
    nb_var *v = nb_block_find_var(nb_program_global_block(f->p), name);
    CHECK(v && nb_shape_equal(v->ndim, v->shape, ndim, shape));
}
#define CHECK_VAR_SHAPE(f, name, shape) check_var_shape((f), (name), NDIM_OF(shape), (shape))

/* One unknown dim: a static reshape whose -1 takes it. */
static void test_reshape_unknown_batch(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, 3, 2));
    nb_value y = nb_reshape(f.b, x, 2, S(0, 6));
    DATA(&f, "dout", S(-1, 6));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 1, &x, &r));
    CHECK(count_ops(&f, "reshape") == 1 && count_ops(&f, "reshape_as") == 0);
    CHECK_VAR_SHAPE(&f, r.grads[0], S(-1, 3, 2));
    nb_tensor *xt = IOTA(S(2, 3, 2), 1), *dt = IOTA(S(2, 6), 10);
    nb_feed feeds[] = {{"x", xt}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 2, feeds, r.grads[0]);
    CHECK_TENSOR(gx, S(2, 3, 2), 0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120);
    release_all(xt, dt, gx, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* Two unknown dims: reshape_as reads X's shape when it runs. */
static void test_flatten_two_unknown(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, -1, 2));
    nb_value y = nb_flatten(f.b, x, 0, -1);
    DATA(&f, "dout", S(-1));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 1, &x, &r));
    CHECK(count_ops(&f, "reshape_as") == 1);
    CHECK_VAR_SHAPE(&f, r.grads[0], S(-1, -1, 2));
    nb_tensor *xt = IOTA(S(2, 3, 2), 1), *dt = IOTA(S(12), -1);
    nb_feed feeds[] = {{"x", xt}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 2, feeds, r.grads[0]);
    CHECK_TENSOR(gx, S(2, 3, 2), 0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12);
    release_all(xt, dt, gx, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* concat along a dim one input does not know: split infers that section. */
static void test_concat_one_unknown(void)
{
    fx f;
    fx_init(&f);
    nb_value xs[2] = {DATA(&f, "a", S(-1, 2)), DATA(&f, "b", S(2, 2))};
    nb_value y = nb_concat(f.b, 2, xs, 0);
    DATA(&f, "dout", S(-1, 2));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 2, xs, &r));
    CHECK(count_ops(&f, "split") == 1);
    nb_tensor *at = IOTA(S(1, 2), 1), *bt = IOTA(S(2, 2), 1), *dt = IOTA(S(3, 2), 1);
    nb_feed feeds[] = {{"a", at}, {"b", bt}, {"dout", dt}};
    nb_tensor *ga = fetch(&f, 3, feeds, r.grads[0]), *gb = fetch(&f, 3, feeds, r.grads[1]);
    CHECK_TENSOR(ga, S(1, 2), 0, 1, 2);
    CHECK_TENSOR(gb, S(2, 2), 0, 3, 4, 5, 6);
    release_all(at, bt, dt, ga, gb, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

static void test_concat_two_unknown_fails(void)
{
    fx f;
    fx_init(&f);
    nb_value xs[2] = {DATA(&f, "a", S(-1, 2)), DATA(&f, "b", S(-1, 2))};
    nb_value y = nb_concat(f.b, 2, xs, -2);
    DATA(&f, "dout", S(-1, 2));
    nb_backward_result r;
    CHECK_ERR(
        grads(&f, y, "dout", 2, xs, &r), NB_ERR_UNSUPPORTED,
        "concat: its gradient splits dOut along axis 0 at the sizes of the inputs there, but X[0] (shape [-1, 2]) "
        "and X[1] (shape [-1, 2]) both have an unknown size along it");
    CHECK(nb_program_global_block(f.p)->n_ops == f.fwd);
    /* Along a known dim they are fine. */
    nb_value z = nb_concat(f.b, 2, xs, 1);
    DATA(&f, "dz", S(-1, 4));
    CHECK_OK(grads(&f, z, "dz", 2, xs, &r));
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* slice: unknown dims that are not sliced do not matter; strides spread
 * dOut out. */
static void test_slice_unknown(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, 7));
    nb_value y = nb_emit1(f.b, "slice", NB_VALUES(x),
                          NB_ATTRS(NB_ATTR_INTS("axes", -1), NB_ATTR_INTS("starts", 1), NB_ATTR_INTS("ends", -1),
                                   NB_ATTR_INTS("strides", 3)));
    DATA(&f, "dout", S(-1, 2));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 1, &x, &r));
    CHECK_VAR_SHAPE(&f, r.grads[0], S(-1, 7));
    nb_tensor *xt = IOTA(S(2, 7), 1), *dt = IOTA(S(2, 2), 1);
    nb_feed feeds[] = {{"x", xt}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 2, feeds, r.grads[0]);
    CHECK_TENSOR(gx, S(2, 7), 0, 0, 1, 0, 0, 2, 0, 0, 0, 3, 0, 0, 4, 0, 0);
    release_all(xt, dt, gx, NULL);
    nb_backward_result_free(&r);

    nb_value z = nb_slice(f.b, x, 1, S(0), S(0), S(1));
    DATA(&f, "dz", S(1, 7));
    CHECK_ERR(grads(&f, z, "dz", 1, &x, &r), NB_ERR_UNSUPPORTED,
              "slice: its gradient pads dOut back to the shape of Input, but Input (shape [-1, 7]) has an unknown "
              "size along the sliced dim 0");
    fx_free(&f);
}

/* pad: constant mode slices dOut from both ends; reflect goes to pad_grad.
 * Neither needs X's sizes. */
static void test_pad_unknown(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, 3));
    nb_value yc = nb_emit1(f.b, "pad", NB_VALUES(x), NB_ATTRS(NB_ATTR_INTS("paddings", 1, 1, 0, 2)));
    nb_value yr = nb_emit1(f.b, "pad", NB_VALUES(x),
                           NB_ATTRS(NB_ATTR_INTS("paddings", 0, 0, 2, 1), NB_ATTR_STRING("mode", "reflect")));
    DATA(&f, "dc", S(-1, 5));
    DATA(&f, "dr", S(-1, 6));
    nb_backward_result r;
    CHECK_OK(grads(&f, yc, "dc", 1, &x, &r));
    CHECK(count_ops(&f, "slice") == 1 && count_ops(&f, "pad_grad") == 0);
    char *gc = r.grads[0] ? strdup(r.grads[0]) : NULL;
    nb_backward_result_free(&r);
    CHECK_OK(grads(&f, yr, "dr", 1, &x, &r));
    CHECK(count_ops(&f, "pad_grad") == 1);
    CHECK_VAR_SHAPE(&f, r.grads[0], S(-1, 3));
    nb_tensor *xt = IOTA(S(2, 3), 1), *dct = IOTA(S(4, 5), 1), *drt = IOTA(S(2, 6), 1);
    nb_feed feeds[] = {{"x", xt}, {"dc", dct}, {"dr", drt}};
    nb_tensor *g1 = fetch(&f, 3, feeds, gc), *g2 = fetch(&f, 3, feeds, r.grads[0]);
    CHECK_TENSOR(g1, S(2, 3), 0, 6, 7, 8, 11, 12, 13);
    /* Columns of the padded rows read x[2 1 0 1 2 1]. */
    CHECK_TENSOR(g2, S(2, 3), 0, 3, 2 + 4 + 6, 1 + 5, 9, 8 + 10 + 12, 7 + 11);
    release_all(xt, dct, drt, g1, g2, NULL);
    free(gc);
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* The piece of a split that gets no gradient gets zeros (fill_zeros_like). */
static void test_split_zero_fill(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, 4)), parts[2];
    CHECK_OK(nb_split(f.b, x, -1, 2, parts));
    DATA(&f, "dout", S(-1, 2));
    nb_backward_result r;
    CHECK_OK(grads(&f, parts[1], "dout", 1, &x, &r));
    CHECK(count_ops(&f, "fill_zeros_like") == 1 && count_ops(&f, "concat") == 1);
    nb_tensor *xt = IOTA(S(2, 4), 1), *dt = IOTA(S(2, 2), 1);
    nb_feed feeds[] = {{"x", xt}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 2, feeds, r.grads[0]);
    CHECK_TENSOR(gx, S(2, 4), 0, 0, 0, 1, 2, 0, 0, 3, 4);
    release_all(xt, dt, gx, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

static void test_stack_unknown(void)
{
    fx f;
    fx_init(&f);
    nb_value xs[2] = {DATA(&f, "a", S(-1, 2)), DATA(&f, "b", S(-1, 2))};
    nb_value y = nb_stack(f.b, 2, xs, -1);
    DATA(&f, "dout", S(-1, 2, 2));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 2, xs, &r));
    CHECK_VAR_SHAPE(&f, r.grads[0], S(-1, 2));
    nb_tensor *at = IOTA(S(2, 2), 1), *bt = IOTA(S(2, 2), 1), *dt = IOTA(S(2, 2, 2), 1);
    nb_feed feeds[] = {{"a", at}, {"b", bt}, {"dout", dt}};
    nb_tensor *ga = fetch(&f, 3, feeds, r.grads[0]), *gb = fetch(&f, 3, feeds, r.grads[1]);
    CHECK_TENSOR(ga, S(2, 2), 0, 1, 3, 5, 7);
    CHECK_TENSOR(gb, S(2, 2), 0, 2, 4, 6, 8);
    release_all(at, bt, dt, ga, gb, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* gather's gradient adds repeated indices up; scatter_add's gathers. */
static void test_gather_scatter_add_unknown(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, 2)), idx = data(&f, "idx", NB_I64, 1, S(-1));
    nb_value y = nb_gather(f.b, x, idx, 0);
    DATA(&f, "dout", S(-1, 2));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 1, &x, &r));
    CHECK(count_ops(&f, "scatter_add") == 1 && count_ops(&f, "fill_zeros_like") == 1);
    nb_tensor *xt = IOTA(S(3, 2), 1), *it = T(NB_I64, S(4), 0, 2, 0, 0), *dt = IOTA(S(4, 2), 1);
    nb_feed feeds[] = {{"x", xt}, {"idx", it}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 3, feeds, r.grads[0]);
    CHECK_TENSOR(gx, S(3, 2), 0, 1 + 5 + 7, 2 + 6 + 8, 0, 0, 3, 4);
    release_all(gx, NULL);
    nb_backward_result_free(&r);

    nb_value u = DATA(&f, "u", S(-1, 2));
    nb_value in[2] = {x, u};
    nb_value s = nb_scatter_add(f.b, x, idx, u, 0);
    DATA(&f, "ds", S(-1, 2));
    CHECK_OK(grads(&f, s, "ds", 2, in, &r));
    nb_tensor *ut = IOTA(S(4, 2), 1), *dst = IOTA(S(3, 2), 1);
    /* The program still holds gather's gradient, which reads dout. */
    nb_feed feeds2[] = {{"x", xt}, {"idx", it}, {"u", ut}, {"ds", dst}, {"dout", dt}};
    nb_tensor *g0 = fetch(&f, 5, feeds2, r.grads[0]), *g1 = fetch(&f, 5, feeds2, r.grads[1]);
    CHECK_TENSOR(g0, S(3, 2), 0, 1, 2, 3, 4, 5, 6);
    CHECK_TENSOR(g1, S(4, 2), 0, 1, 2, 5, 6, 1, 2, 1, 2);
    release_all(xt, it, dt, ut, dst, g0, g1, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* transpose by the inverse permutation; expand sums back. */
static void test_transpose_expand(void)
{
    fx f;
    fx_init(&f);
    nb_value x = DATA(&f, "x", S(-1, 1, 3));
    nb_value y = nb_expand(f.b, nb_transpose(f.b, x, 3, S(1, 2, 0)), 3, S(2, -1, -1));
    DATA(&f, "dout", S(2, 3, -1));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 1, &x, &r));
    nb_tensor *xt = IOTA(S(2, 1, 3), 1), *dt = IOTA(S(2, 3, 2), 1);
    nb_feed feeds[] = {{"x", xt}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 2, feeds, r.grads[0]);
    /* d(expand) sums dim 0: [[8 10] [12 14] [16 18]] ([3, 2]); its transpose back is [2, 1, 3]. */
    CHECK_TENSOR(gx, S(2, 1, 3), 0, 8, 12, 16, 10, 14, 18);
    release_all(xt, dt, gx, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

/* float32 programs get float32 gradients through the same rules. */
static void test_float32(void)
{
    fx f;
    fx_init(&f);
    nb_value x = data(&f, "x", NB_F32, 2, S(-1, 4));
    nb_value p = nb_emit1(f.b, "pad", NB_VALUES(x),
                          NB_ATTRS(NB_ATTR_INTS("paddings", 0, 0, 1, 1), NB_ATTR_STRING("mode", "edge")));
    nb_value y = nb_emit1(f.b, "slice", NB_VALUES(p),
                          NB_ATTRS(NB_ATTR_INTS("axes", 1), NB_ATTR_INTS("starts", 0), NB_ATTR_INTS("ends", 6),
                                   NB_ATTR_INTS("strides", 2)));
    data(&f, "dout", NB_F32, 2, S(-1, 3));
    nb_backward_result r;
    CHECK_OK(grads(&f, y, "dout", 1, &x, &r));
    nb_tensor *xt = T(NB_F32, S(1, 4), 1, 2, 3, 4), *dt = T(NB_F32, S(1, 3), 1, 2, 3);
    nb_feed feeds[] = {{"x", xt}, {"dout", dt}};
    nb_tensor *gx = fetch(&f, 2, feeds, r.grads[0]);
    /* The padded row reads x[0 0 1 2 3 3]; the slice takes its columns 0, 2, 4. */
    CHECK_TENSOR(gx, S(1, 4), 0, 1, 2, 0, 3);
    CHECK(gx && gx->dtype == NB_F32);
    release_all(xt, dt, gx, NULL);
    nb_backward_result_free(&r);
    fx_free(&f);
}

int main(void)
{
    RUN(test_reshape_unknown_batch);
    RUN(test_flatten_two_unknown);
    RUN(test_concat_one_unknown);
    RUN(test_concat_two_unknown_fails);
    RUN(test_slice_unknown);
    RUN(test_pad_unknown);
    RUN(test_split_zero_fill);
    RUN(test_stack_unknown);
    RUN(test_gather_scatter_add_unknown);
    RUN(test_transpose_expand);
    RUN(test_float32);
    return test_report();
}
