/* Tests of tensor views: reshape, permute, transpose, slice, expand, and the
 * copies (contiguous) that materialise them. */
#include <stdint.h>
#include "test.h"

/* 0, 1, ..., n-1 in the given shape. */
static nb_tensor *iota(nb_dtype dt, int ndim, const int64_t *shape)
{
    nb_tensor *t = NULL;
    if (nb_tensor_new(&t, dt, ndim, shape)) return NULL;
    for (int64_t i = 0; i < nb_tensor_numel(t); i++) nb_tensor_set(t, i, (double)i);
    return t;
}
#define IOTA(dt, shape) iota((dt), NDIM_OF(shape), (shape))

/* ---- reshape ---------------------------------------------------------------- */

static void test_reshape(void)
{
    nb_tensor *t = IOTA(NB_F32, S(2, 3)), *r = NULL;
    CHECK_OK(nb_tensor_reshape(&r, t, 2, S(3, 2)));
    CHECK(r && r->storage == t->storage && t->storage->refcount == 2 && nb_tensor_is_contiguous(r));
    CHECK(r && r->strides[0] == 2 && r->strides[1] == 1);
    CHECK_TENSOR(r, S(3, 2), 0, 0, 1, 2, 3, 4, 5);
    nb_tensor_set(r, 5, 50); /* a view: writes show in the base */
    CHECK(nb_tensor_at(t, S(1, 2)) == 50);
    nb_tensor_release(r);

    /* -1 takes what is left. */
    CHECK_OK(nb_tensor_reshape(&r, t, 2, S(-1, 2)));
    CHECK(r && nb_shape_equal(r->ndim, r->shape, 2, S(3, 2)));
    nb_tensor_release(r);
    CHECK_OK(nb_tensor_reshape(&r, t, 3, S(1, -1, 1)));
    CHECK(r && nb_shape_equal(r->ndim, r->shape, 3, S(1, 6, 1)));
    nb_tensor_release(r);
    CHECK_OK(nb_tensor_reshape(&r, t, 1, S(-1)));
    CHECK_TENSOR(r, S(6), 0, 0, 1, 2, 3, 4, 50);
    nb_tensor_release(r);

    /* To and from 0-d. */
    nb_tensor *one = T(NB_F64, S(1, 1), 7), *s = NULL, *back = NULL;
    CHECK_OK(nb_tensor_reshape(&s, one, 0, NULL));
    CHECK(s && s->ndim == 0 && nb_tensor_get(s, 0) == 7);
    CHECK_OK(nb_tensor_reshape(&back, s, 2, S(-1, 1)));
    CHECK(back && nb_shape_equal(back->ndim, back->shape, 2, S(1, 1)));
    release_all(one, s, back, NULL);

    /* Empty tensors reshape when the count matches. */
    nb_tensor *e = NULL;
    CHECK_OK(nb_tensor_new(&e, NB_F32, 2, S(0, 3)));
    CHECK_OK(nb_tensor_reshape(&r, e, 3, S(3, 0, 5)));
    CHECK(r && nb_tensor_numel(r) == 0);
    nb_tensor_release(r);
    /* ... but -1 next to a 0 is ambiguous. */
    CHECK_ERR(nb_tensor_reshape(&r, e, 2, S(-1, 0)), NB_ERR_SHAPE, "reshape: cannot view [0, 3]");
    nb_tensor_release(e);

    /* A base with an offset: the view starts where it does. */
    nb_tensor *row = NULL;
    CHECK_OK(nb_tensor_slice(&row, t, 0, 1, 2, 1));
    CHECK_OK(nb_tensor_reshape(&r, row, 2, S(3, 1)));
    CHECK(r && r->storage == t->storage && r->offset == 3);
    CHECK_TENSOR(r, S(3, 1), 0, 3, 4, 50);
    release_all(r, row, NULL);

    r = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_reshape(&r, t, 2, S(4, 2)), NB_ERR_SHAPE, "reshape: cannot view [2, 3] (6 elements) as [4, 2]");
    CHECK(r == NULL);
    CHECK_ERR(nb_tensor_reshape(&r, t, 1, S(5)), NB_ERR_SHAPE, "6 elements");
    CHECK_ERR(nb_tensor_reshape(&r, t, 2, S(-1, 4)), NB_ERR_SHAPE,
              "reshape: cannot view [2, 3] (6 elements) as [-1, 4]");
    CHECK_ERR(nb_tensor_reshape(&r, t, 3, S(-1, -1, 2)), NB_ERR_SHAPE, "reshape: more than one -1 in [-1, -1, 2]");
    CHECK_ERR(nb_tensor_reshape(&r, t, 2, S(-2, -3)), NB_ERR_SHAPE, "reshape: negative size in [-2, -3]");
    CHECK_ERR(nb_tensor_reshape(&r, t, 9, S(1, 1, 1, 1, 1, 1, 1, 2, 3)), NB_ERR_SHAPE, "reshape: 9 dimensions");
    CHECK_ERR(nb_tensor_reshape(&r, t, -1, NULL), NB_ERR_SHAPE, "reshape");
    CHECK_ERR(nb_tensor_reshape(&r, t, 2, NULL), NB_ERR_ARG, "reshape: shape is NULL");
    CHECK_ERR(nb_tensor_reshape(&r, t, 3, S(INT64_C(1) << 40, INT64_C(1) << 40, -1)), NB_ERR_SHAPE, "too large");
    CHECK(r == NULL);
    nb_tensor_release(t);
}

static void test_reshape_non_contiguous(void)
{
    nb_tensor *t = IOTA(NB_I64, S(2, 3)), *tt_ = NULL, *r = NULL;
    CHECK_OK(nb_tensor_transpose(&tt_, t, 0, 1));
    CHECK_OK(nb_tensor_reshape(&r, tt_, 1, S(6)));
    /* A transposed view cannot be reshaped in place: it is copied. */
    CHECK(r && r->storage != t->storage && nb_tensor_is_contiguous(r));
    CHECK_TENSOR(r, S(6), 0, 0, 3, 1, 4, 2, 5);
    nb_tensor_set(r, 0, 100);
    CHECK(nb_tensor_get(t, 0) == 0);
    release_all(r, tt_, NULL);

    /* The view outlives its base. */
    CHECK_OK(nb_tensor_reshape(&r, t, 3, S(3, 1, 2)));
    nb_tensor_release(t);
    CHECK_TENSOR(r, S(3, 1, 2), 0, 0, 1, 2, 3, 4, 5);
    nb_tensor_release(r);
}

/* ---- permute, transpose ------------------------------------------------------- */

static void test_permute(void)
{
    nb_tensor *t = IOTA(NB_F64, S(2, 3, 4)), *p = NULL;
    CHECK_OK(nb_tensor_permute(&p, t, (const int[]){2, 0, 1}));
    CHECK(p && p->storage == t->storage && !nb_tensor_is_contiguous(p));
    CHECK(p && nb_shape_equal(p->ndim, p->shape, 3, S(4, 2, 3)));
    CHECK(p && p->strides[0] == 1 && p->strides[1] == 12 && p->strides[2] == 4);
    /* p[k, i, j] == t[i, j, k] */
    bool right = p != NULL;
    for (int64_t i = 0; p && i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            for (int64_t k = 0; k < 4; k++) right &= nb_tensor_at(p, S(k, i, j)) == nb_tensor_at(t, S(i, j, k));
    CHECK(right);
    CHECK(p && nb_tensor_get(p, 1) == 4 && nb_tensor_get(p, 3) == 12);

    /* contiguous() packs the permuted order into new storage. */
    nb_tensor *c = NULL;
    CHECK_OK(nb_tensor_contiguous(&c, p));
    CHECK(c && c->storage != t->storage && nb_tensor_is_contiguous(c));
    CHECK(c && nb_shape_equal(c->ndim, c->shape, 3, S(4, 2, 3)));
    right = c != NULL;
    for (int64_t i = 0; c && i < 24; i++) right &= nb_tensor_get(c, i) == nb_tensor_get(p, i);
    CHECK(right);
    CHECK(c && ((double *)nb_tensor_data(c))[1] == 4);
    release_all(c, NULL);

    /* Permuting back gives the original layout. */
    nb_tensor *q = NULL;
    CHECK_OK(nb_tensor_permute(&q, p, (const int[]){1, 2, 0}));
    CHECK(q && nb_tensor_is_contiguous(q) && nb_shape_equal(q->ndim, q->shape, 3, S(2, 3, 4)));
    nb_tensor_release(q);

    /* The identity and the 0-d case. */
    CHECK_OK(nb_tensor_permute(&q, t, (const int[]){0, 1, 2}));
    CHECK(q && nb_tensor_is_contiguous(q));
    nb_tensor_release(q);
    nb_tensor *s = tscalar(NB_F32, 1);
    CHECK_OK(nb_tensor_permute(&q, s, NULL));
    CHECK(q && q->ndim == 0 && nb_tensor_get(q, 0) == 1);
    release_all(q, s, NULL);

    q = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_permute(&q, t, (const int[]){0, 0, 1}), NB_ERR_ARG, "permute: not a permutation of 3");
    CHECK(q == NULL);
    CHECK_ERR(nb_tensor_permute(&q, t, (const int[]){0, 1, 3}), NB_ERR_ARG, "permute");
    CHECK_ERR(nb_tensor_permute(&q, t, (const int[]){-1, 0, 1}), NB_ERR_ARG, "permute");
    CHECK_ERR(nb_tensor_permute(&q, t, NULL), NB_ERR_ARG, "permute");

    /* Views survive their base. */
    nb_tensor_release(t);
    CHECK(p && nb_tensor_at(p, S(3, 1, 2)) == 23);
    nb_tensor_release(p);
}

static void test_transpose(void)
{
    nb_tensor *t = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6), *v = NULL;
    CHECK_OK(nb_tensor_transpose(&v, t, 0, 1));
    CHECK(v && !nb_tensor_is_contiguous(v) && v->storage == t->storage);
    CHECK_TENSOR(v, S(3, 2), 0, 1, 4, 2, 5, 3, 6);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_transpose(&v, t, -1, -2));
    CHECK_TENSOR(v, S(3, 2), 0, 1, 4, 2, 5, 3, 6);
    nb_tensor *vv = NULL;
    CHECK_OK(nb_tensor_transpose(&vv, v, 0, 1));
    CHECK(vv && nb_tensor_is_contiguous(vv));
    CHECK_TENSOR(vv, S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    release_all(v, vv, NULL);
    CHECK_OK(nb_tensor_transpose(&v, t, 1, 1));
    CHECK(v && nb_tensor_is_contiguous(v));
    CHECK_TENSOR(v, S(2, 3), 0, 1, 2, 3, 4, 5, 6);
    nb_tensor_release(v);

    nb_tensor *b = IOTA(NB_I32, S(2, 3, 4));
    CHECK_OK(nb_tensor_transpose(&v, b, 0, 2));
    CHECK(v && nb_shape_equal(v->ndim, v->shape, 3, S(4, 3, 2)) && nb_tensor_at(v, S(3, 2, 1)) == 23 &&
          nb_tensor_at(v, S(1, 0, 1)) == 13);
    nb_tensor_release(v);

    v = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_transpose(&v, t, 0, 2), NB_ERR_ARG, "transpose: dimensions out of range for a 2-d tensor");
    CHECK(v == NULL);
    CHECK_ERR(nb_tensor_transpose(&v, t, -3, 0), NB_ERR_ARG, "transpose");
    nb_tensor *s = tscalar(NB_F32, 1);
    CHECK_ERR(nb_tensor_transpose(&v, s, 0, 0), NB_ERR_ARG, "0-d tensor");
    release_all(t, b, s, NULL);
}

/* ---- slice ---------------------------------------------------------------------- */

static void test_slice(void)
{
    nb_tensor *t = IOTA(NB_F64, S(10)), *v = NULL;
    CHECK_OK(nb_tensor_slice(&v, t, 0, 2, 8, 1));
    CHECK(v && v->storage == t->storage && v->offset == 2 && nb_tensor_is_contiguous(v));
    CHECK_TENSOR(v, S(6), 0, 2, 3, 4, 5, 6, 7);
    nb_tensor_release(v);

    CHECK_OK(nb_tensor_slice(&v, t, 0, 2, 8, 2));
    CHECK(v && v->strides[0] == 2 && !nb_tensor_is_contiguous(v));
    CHECK_TENSOR(v, S(3), 0, 2, 4, 6);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 1, 10, 3));
    CHECK_TENSOR(v, S(3), 0, 1, 4, 7);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 0, 10, 100)); /* a step beyond the end: one element */
    CHECK_TENSOR(v, S(1), 0, 0);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 3, INT64_MAX, INT64_MAX)); /* no overflow */
    CHECK_TENSOR(v, S(1), 0, 3);
    nb_tensor_release(v);

    /* Negative indices count from the end, as in Python. */
    CHECK_OK(nb_tensor_slice(&v, t, 0, -3, 10, 1));
    CHECK_TENSOR(v, S(3), 0, 7, 8, 9);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 0, -1, 1));
    CHECK(v && v->shape[0] == 9 && nb_tensor_get(v, 8) == 8);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, -4, -2, 1));
    CHECK_TENSOR(v, S(2), 0, 6, 7);
    nb_tensor_release(v);

    /* Clamping. */
    CHECK_OK(nb_tensor_slice(&v, t, 0, -100, 100, 1));
    CHECK(v && v->shape[0] == 10 && v->offset == 0);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 8, 100, 1));
    CHECK_TENSOR(v, S(2), 0, 8, 9);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, INT64_MIN, INT64_MAX, 1));
    CHECK(v && v->shape[0] == 10);
    nb_tensor_release(v);
    /* Empty results. */
    CHECK_OK(nb_tensor_slice(&v, t, 0, 5, 3, 1));
    CHECK(v && v->shape[0] == 0 && nb_tensor_numel(v) == 0);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 12, 20, 1));
    CHECK(v && v->shape[0] == 0);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, -1, -5, 1));
    CHECK(v && v->shape[0] == 0);
    nb_tensor_release(v);

    /* Writes through a slice reach the base; a slice of a slice composes. */
    CHECK_OK(nb_tensor_slice(&v, t, 0, 1, 9, 2)); /* 1 3 5 7 */
    nb_tensor *w = NULL;
    CHECK_OK(nb_tensor_slice(&w, v, 0, 1, 4, 2)); /* 3 7 */
    CHECK(w && w->offset == 3 && w->strides[0] == 4);
    CHECK_TENSOR(w, S(2), 0, 3, 7);
    nb_tensor_set(w, 1, -7);
    CHECK(nb_tensor_get(t, 7) == -7 && nb_tensor_get(v, 3) == -7);
    release_all(v, NULL);

    v = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_slice(&v, t, 0, 0, 5, 0), NB_ERR_ARG, "slice: step must be positive, got 0");
    CHECK(v == NULL);
    CHECK_ERR(nb_tensor_slice(&v, t, 0, 5, 0, -1), NB_ERR_ARG, "got -1");
    CHECK_ERR(nb_tensor_slice(&v, t, 1, 0, 5, 1), NB_ERR_ARG, "slice: dimension out of range for a 1-d tensor");
    CHECK_ERR(nb_tensor_slice(&v, t, -2, 0, 5, 1), NB_ERR_ARG, "slice");
    nb_tensor *s = tscalar(NB_F32, 1);
    CHECK_ERR(nb_tensor_slice(&v, s, 0, 0, 1, 1), NB_ERR_ARG, "0-d");
    CHECK(v == NULL);

    /* The slice survives the base. */
    nb_tensor_release(t);
    CHECK_TENSOR(w, S(2), 0, 3, -7);
    release_all(w, s, NULL);
}

static void test_slice_2d(void)
{
    nb_tensor *t = IOTA(NB_I32, S(3, 4)), *v = NULL;
    CHECK_OK(nb_tensor_slice(&v, t, 1, 1, 4, 2)); /* columns 1 and 3 */
    CHECK(v && !nb_tensor_is_contiguous(v) && v->offset == 1 && v->strides[0] == 4 && v->strides[1] == 2);
    CHECK_TENSOR(v, S(3, 2), 0, 1, 3, 5, 7, 9, 11);
    nb_tensor *c = NULL;
    CHECK_OK(nb_tensor_contiguous(&c, v));
    CHECK(c && c != v && nb_tensor_is_contiguous(c) && c->storage->nbytes == 6 * sizeof(int32_t));
    CHECK_TENSOR(c, S(3, 2), 0, 1, 3, 5, 7, 9, 11);
    release_all(c, NULL);

    nb_tensor *w = NULL;
    CHECK_OK(nb_tensor_slice(&w, v, -1, 1, 2, 1)); /* negative dim: the last */
    CHECK_TENSOR(w, S(3, 1), 0, 3, 7, 11);
    nb_tensor *rows = NULL;
    CHECK_OK(nb_tensor_slice(&rows, w, 0, 1, 3, 1));
    CHECK_TENSOR(rows, S(2, 1), 0, 7, 11);
    release_all(v, w, rows, t, NULL);
}

/* ---- expand ---------------------------------------------------------------------- */

static void test_expand(void)
{
    nb_tensor *r = T(NB_F32, S(3), 1, 2, 3), *v = NULL;
    CHECK_OK(nb_tensor_expand(&v, r, 2, S(2, 3)));
    CHECK(v && v->storage == r->storage && v->strides[0] == 0 && v->strides[1] == 1 && !nb_tensor_is_contiguous(v));
    CHECK_TENSOR(v, S(2, 3), 0, 1, 2, 3, 1, 2, 3);
    /* Expanded elements alias one another. */
    nb_tensor_set(v, 0, 10);
    CHECK(nb_tensor_at(v, S(1, 0)) == 10 && nb_tensor_get(r, 0) == 10);
    nb_tensor *c = NULL;
    CHECK_OK(nb_tensor_contiguous(&c, v));
    CHECK(c && c->storage != r->storage && nb_tensor_is_contiguous(c) && c->storage->nbytes == 6 * sizeof(float));
    CHECK_TENSOR(c, S(2, 3), 0, 10, 2, 3, 10, 2, 3);
    release_all(v, c, NULL);

    nb_tensor *col = T(NB_I64, S(3, 1), 1, 2, 3);
    CHECK_OK(nb_tensor_expand(&v, col, 3, S(2, 3, 4)));
    CHECK(v && v->strides[0] == 0 && v->strides[1] == 1 && v->strides[2] == 0);
    CHECK(v && nb_tensor_at(v, S(1, 2, 3)) == 3 && nb_tensor_at(v, S(0, 1, 0)) == 2 && nb_tensor_numel(v) == 24);
    nb_tensor_release(v);

    nb_tensor *s = tscalar(NB_F64, 2.5);
    CHECK_OK(nb_tensor_expand(&v, s, 2, S(2, 2)));
    CHECK_TENSOR(v, S(2, 2), 0, 2.5, 2.5, 2.5, 2.5);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_expand(&v, s, 0, NULL));
    CHECK(v && v->ndim == 0 && nb_tensor_get(v, 0) == 2.5);
    nb_tensor_release(v);

    /* Same shape: a plain view. A size-1 dim may go to 0. */
    CHECK_OK(nb_tensor_expand(&v, r, 1, S(3)));
    CHECK(v && nb_tensor_is_contiguous(v));
    nb_tensor_release(v);
    nb_tensor *one = T(NB_F32, S(1), 4);
    CHECK_OK(nb_tensor_expand(&v, one, 2, S(5, 0)));
    CHECK(v && nb_tensor_numel(v) == 0);
    nb_tensor_release(v);

    v = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_expand(&v, r, 2, S(2, 4)), NB_ERR_SHAPE, "expand: cannot broadcast [3] to [2, 4]");
    CHECK(v == NULL);
    CHECK_ERR(nb_tensor_expand(&v, col, 1, S(3)), NB_ERR_SHAPE, "expand: cannot broadcast [3, 1] to [3]");
    CHECK_ERR(nb_tensor_expand(&v, one, 2, S(-1, 1)), NB_ERR_SHAPE, "expand: cannot broadcast [1] to [-1, 1]");
    CHECK_ERR(nb_tensor_expand(&v, one, 1, S(-1)), NB_ERR_SHAPE, "expand");
    CHECK_ERR(nb_tensor_expand(&v, one, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1)), NB_ERR_SHAPE, "expand");
    CHECK_ERR(nb_tensor_expand(&v, one, 2, NULL), NB_ERR_ARG, "expand: shape is NULL");
    CHECK(v == NULL);

    /* Survives the base. */
    CHECK_OK(nb_tensor_expand(&v, col, 2, S(3, 2)));
    release_all(col, r, s, one, NULL);
    CHECK_TENSOR(v, S(3, 2), 0, 1, 1, 2, 2, 3, 3);
    nb_tensor_release(v);
}

/* Views of views of every kind, materialised and compared. */
static void test_view_chain(void)
{
    nb_tensor *t = IOTA(NB_F64, S(4, 6)), *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    CHECK_OK(nb_tensor_slice(&a, t, 1, 1, 6, 2));   /* [4, 3]: columns 1 3 5 */
    CHECK_OK(nb_tensor_transpose(&b, a, 0, 1));     /* [3, 4] */
    CHECK_OK(nb_tensor_slice(&c, b, 1, -2, 4, 1));  /* [3, 2]: rows 2 and 3 of t */
    CHECK_OK(nb_tensor_reshape(&d, c, 2, S(2, 3))); /* a copy, [2, 3] */
    CHECK_OK(nb_tensor_expand(&e, d, 3, S(2, 2, 3)));
    CHECK_TENSOR(c, S(3, 2), 0, 13, 19, 15, 21, 17, 23);
    CHECK_TENSOR(d, S(2, 3), 0, 13, 19, 15, 21, 17, 23);
    CHECK_TENSOR(e, S(2, 2, 3), 0, 13, 19, 15, 21, 17, 23, 13, 19, 15, 21, 17, 23);
    CHECK(c && c->storage == t->storage && d && d->storage != t->storage);
    release_all(t, a, b, NULL);
    CHECK(nb_tensor_at(c, S(2, 1)) == 23);
    release_all(c, d, e, NULL);
}

int main(void)
{
    RUN(test_reshape);
    RUN(test_reshape_non_contiguous);
    RUN(test_permute);
    RUN(test_transpose);
    RUN(test_slice);
    RUN(test_slice_2d);
    RUN(test_expand);
    RUN(test_view_chain);
    return test_report();
}
