/* Tests of tensors: creation, reference counting, properties, element
 * access, copies and casts, broadcasting of shapes, allclose and shape
 * strings. Views are in test_tensor_views.c, printing in
 * test_tensor_print.c. */
#include <stdint.h>
#include <stdlib.h>
#include "test.h"

static bool aligned64(const nb_tensor *t) { return ((uintptr_t)t->storage->data & 63) == 0; }

static bool all_zero_bytes(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return false;
    return true;
}

/* ---- creation ------------------------------------------------------------- */

static void test_new_every_dtype(void)
{
    static const size_t sizes[NB_DTYPE_COUNT] = {4, 8, 4, 8, 1, 1};
    for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) {
        nb_tensor *t = NULL;
        CHECK_OK(nb_tensor_new(&t, (nb_dtype)dt, 3, S(2, 3, 4)));
        if (!t) continue;
        CHECK(t->dtype == (nb_dtype)dt && t->ndim == 3 && t->refcount == 1 && t->offset == 0);
        CHECK(nb_shape_equal(t->ndim, t->shape, 3, S(2, 3, 4)));
        CHECK(t->strides[0] == 12 && t->strides[1] == 4 && t->strides[2] == 1);
        CHECK(nb_tensor_numel(t) == 24 && nb_tensor_is_contiguous(t));
        CHECK(nb_dtype_size((nb_dtype)dt) == sizes[dt]);
        CHECK(t->storage && t->storage->nbytes == 24 * sizes[dt] && t->storage->refcount == 1);
        CHECK(!t->storage->borrowed && t->autograd == NULL);
        CHECK(aligned64(t) && nb_tensor_data(t) == t->storage->data);
        CHECK(all_zero_bytes(t->storage->data, t->storage->nbytes));
        bool zeros = true;
        for (int64_t i = 0; i < 24; i++) zeros &= nb_tensor_get(t, i) == 0;
        CHECK(zeros);
        nb_tensor_release(t);
    }
}

static void test_new_scalar_and_empty(void)
{
    nb_tensor *s = NULL, *e = NULL, *e3 = NULL;
    CHECK_OK(nb_tensor_new(&s, NB_F64, 0, NULL));
    CHECK(s && s->ndim == 0 && nb_tensor_numel(s) == 1 && nb_tensor_is_contiguous(s));
    CHECK(s && s->storage->nbytes == 8 && nb_tensor_get(s, 0) == 0 && nb_tensor_at(s, NULL) == 0);
    CHECK_OK(nb_tensor_new(&e, NB_F32, 1, S(0)));
    CHECK(e && nb_tensor_numel(e) == 0 && e->storage->nbytes == 0 && aligned64(e));
    CHECK(e && isnan(nb_tensor_get(e, 0))); /* out of range reads NaN */
    CHECK_OK(nb_tensor_new(&e3, NB_I32, 3, S(3, 0, 2)));
    CHECK(e3 && nb_tensor_numel(e3) == 0 && e3->ndim == 3);
    /* An empty tensor is contiguous, whatever its strides: it has no
     * elements to be out of place. So is its contiguous copy (itself). */
    nb_tensor *e2 = NULL, *c = NULL, *tr = NULL;
    CHECK_OK(nb_tensor_new(&e2, NB_F32, 2, S(3, 0)));
    CHECK(e2 && nb_tensor_is_contiguous(e2) && nb_tensor_is_contiguous(e3));
    CHECK_OK(nb_tensor_contiguous(&c, e2));
    CHECK(c && nb_tensor_is_contiguous(c) && c->shape[0] == 3 && c->shape[1] == 0);
    CHECK_OK(nb_tensor_transpose(&tr, e3, 0, 2));
    CHECK(tr && nb_tensor_is_contiguous(tr));
    release_all(s, e, e3, e2, c, tr, NULL);

    nb_tensor *m = NULL;
    CHECK_OK(nb_tensor_new(&m, NB_U8, 8, S(1, 2, 1, 2, 1, 2, 1, 2)));
    CHECK(m && m->ndim == 8 && nb_tensor_numel(m) == 16);
    nb_tensor_release(m);
}

static void test_new_errors(void)
{
    nb_tensor *t = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_new(&t, NB_F32, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1)), NB_ERR_SHAPE, "9 dimensions (at most 8");
    CHECK(t == NULL);
    CHECK_ERR(nb_tensor_new(&t, NB_F32, -1, S(1)), NB_ERR_SHAPE, "-1 dimensions");
    CHECK_ERR(nb_tensor_new(&t, NB_F32, 2, S(2, -3)), NB_ERR_SHAPE, "shape [2, -3] has a negative dimension");
    CHECK_ERR(nb_tensor_new(&t, NB_F32, 1, S(-1)), NB_ERR_SHAPE, "negative");
    CHECK_ERR(nb_tensor_new(&t, (nb_dtype)NB_DTYPE_COUNT, 1, S(2)), NB_ERR_DTYPE, "invalid dtype");
    CHECK_ERR(nb_tensor_new(&t, (nb_dtype)-1, 1, S(2)), NB_ERR_DTYPE, "invalid dtype");
    CHECK_ERR(nb_tensor_new(&t, NB_F32, 2, NULL), NB_ERR_ARG, "shape is NULL");
    CHECK_ERR(nb_tensor_new(&t, NB_F32, 3, S(INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30)), NB_ERR_SHAPE,
              "too large");
    CHECK(t == NULL);
    CHECK_ERR(nb_tensor_full(&t, NB_F32, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1), 1.0), NB_ERR_SHAPE, "9 dimensions");
    CHECK(t == NULL);
}

static void test_from_data(void)
{
    float f[6] = {1, 2, 3, 4, 5, 6.5f};
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_from_data(&t, NB_F32, 2, S(2, 3), f));
    CHECK(t && t->storage->data != (void *)f && aligned64(t) && !t->storage->borrowed);
    f[0] = 100; /* a copy: the source may change or go away */
    CHECK_TENSOR(t, S(2, 3), 0, 1, 2, 3, 4, 5, 6.5);
    nb_tensor_release(t);

    int64_t l[2] = {INT64_C(9007199254740993), INT64_MIN};
    CHECK_OK(nb_tensor_from_data(&t, NB_I64, 1, S(2), l));
    CHECK(t && !memcmp(nb_tensor_data(t), l, sizeof l));
    nb_tensor_release(t);

    uint8_t b[3] = {1, 0, 1};
    CHECK_OK(nb_tensor_from_data(&t, NB_BOOL, 1, S(3), b));
    CHECK_TENSOR(t, S(3), 0, 1, 0, 1);
    nb_tensor_release(t);
    uint8_t u[3] = {0, 128, 255};
    CHECK_OK(nb_tensor_from_data(&t, NB_U8, 1, S(3), u));
    CHECK_TENSOR(t, S(3), 0, 0, 128, 255);
    nb_tensor_release(t);
    int32_t i[2] = {-7, 2147483647};
    CHECK_OK(nb_tensor_from_data(&t, NB_I32, 1, S(2), i));
    CHECK_TENSOR(t, S(2), 0, -7, 2147483647);
    nb_tensor_release(t);
    double d = 0.1;
    CHECK_OK(nb_tensor_from_data(&t, NB_F64, 0, NULL, &d));
    CHECK(t && t->ndim == 0 && nb_tensor_get(t, 0) == 0.1);
    nb_tensor_release(t);

    t = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_from_data(&t, NB_F32, 1, S(2), NULL), NB_ERR_ARG, "data is NULL");
    CHECK(t == NULL);
    CHECK_ERR(nb_tensor_from_data(&t, NB_F32, 1, S(-2), f), NB_ERR_SHAPE, "negative");
    CHECK_ERR(nb_tensor_from_data(&t, NB_F32, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1), f), NB_ERR_SHAPE, "9 dimensions");
    CHECK(t == NULL);
}

/* A wrapped buffer belongs to the caller: nabla reads and writes it but never
 * frees it (AddressSanitizer reports a double free or a bad free otherwise). */
static void test_wrap(void)
{
    double *buf = malloc(6 * sizeof *buf);
    for (int i = 0; i < 6; i++) buf[i] = i;
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_wrap(&t, NB_F64, 2, S(2, 3), buf));
    CHECK(t && t->storage->borrowed && t->storage->data == buf && nb_tensor_data(t) == buf);
    CHECK(t && t->storage->nbytes == 6 * sizeof(double));
    CHECK_TENSOR(t, S(2, 3), 0, 0, 1, 2, 3, 4, 5);
    nb_tensor_set(t, 1, 42);
    CHECK(buf[1] == 42); /* writes go to the caller's memory */
    buf[5] = -1;
    CHECK(nb_tensor_get(t, 5) == -1);

    /* A view of a wrapped tensor outlives the wrapper, never the buffer. */
    nb_tensor *v = NULL;
    CHECK_OK(nb_tensor_transpose(&v, t, 0, 1));
    nb_tensor_release(t);
    CHECK(v && v->storage->borrowed);
    CHECK_TENSOR(v, S(3, 2), 0, 0, 3, 42, 4, 2, -1);
    nb_tensor_release(v);
    CHECK(buf[1] == 42);
    free(buf);

    /* Stack memory works the same. */
    int32_t stack[4] = {1, 2, 3, 4};
    CHECK_OK(nb_tensor_wrap(&t, NB_I32, 1, S(4), stack));
    CHECK_TENSOR(t, S(4), 0, 1, 2, 3, 4);
    nb_tensor_release(t);

    t = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_wrap(&t, NB_F32, 1, S(2), NULL), NB_ERR_ARG, "data is NULL");
    CHECK(t == NULL);
    CHECK_ERR(nb_tensor_wrap(&t, NB_F32, 1, S(-2), stack), NB_ERR_SHAPE, "negative");
    CHECK_ERR(nb_tensor_wrap(&t, NB_F32, 9, S(1, 1, 1, 1, 1, 1, 1, 1, 1), stack), NB_ERR_SHAPE, "9 dimensions");
    CHECK_ERR(nb_tensor_wrap(&t, (nb_dtype)99, 1, S(2), stack), NB_ERR_DTYPE, "invalid dtype");
    CHECK(t == NULL);
}

static void test_full_and_scalar(void)
{
    static const double want[NB_DTYPE_COUNT] = {
        [NB_F32] = 2.75, [NB_F64] = 2.75, [NB_I32] = 2, [NB_I64] = 2, [NB_U8] = 2, [NB_BOOL] = 1};
    for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) {
        nb_tensor *t = NULL;
        CHECK_OK(nb_tensor_full(&t, (nb_dtype)dt, 2, S(2, 2), 2.75));
        CHECK(t && t->dtype == (nb_dtype)dt);
        double w = want[dt];
        CHECK_TENSOR(t, S(2, 2), 0, w, w, w, w);
        nb_tensor_release(t);
    }
    nb_tensor *t = NULL;
    CHECK_OK(nb_tensor_full(&t, NB_I32, 1, S(3), -2.75));
    CHECK_TENSOR(t, S(3), 0, -2, -2, -2); /* truncation towards zero */
    nb_tensor_release(t);
    CHECK_OK(nb_tensor_full(&t, NB_BOOL, 1, S(2), 0.5));
    CHECK_TENSOR(t, S(2), 0, 1, 1);
    nb_tensor_release(t);
    CHECK_OK(nb_tensor_full(&t, NB_F32, 1, S(1), 0.1));
    CHECK(t && ((float *)nb_tensor_data(t))[0] == 0.1f);
    nb_tensor_release(t);
    CHECK_OK(nb_tensor_full(&t, NB_F64, 1, S(0), 5));
    CHECK(t && nb_tensor_numel(t) == 0);
    nb_tensor_release(t);

    CHECK_OK(nb_tensor_scalar(&t, NB_F64, 3.5));
    CHECK(t && t->ndim == 0 && nb_tensor_numel(t) == 1 && t->dtype == NB_F64);
    CHECK(t && nb_tensor_get(t, 0) == 3.5 && nb_tensor_at(t, NULL) == 3.5 && isnan(nb_tensor_get(t, 1)));
    nb_tensor_release(t);
    CHECK_OK(nb_tensor_scalar(&t, NB_I64, -4));
    CHECK(t && t->ndim == 0 && *(int64_t *)nb_tensor_data(t) == -4);
    nb_tensor_release(t);
    CHECK_ERR(nb_tensor_scalar(&t, (nb_dtype)42, 1), NB_ERR_DTYPE, "invalid dtype");
    CHECK(t == NULL);
}

static void test_alignment(void)
{
    for (int64_t n = 0; n <= 130; n += 13) {
        for (int dt = 0; dt < NB_DTYPE_COUNT; dt++) {
            nb_tensor *t = NULL;
            CHECK_OK(nb_tensor_new(&t, (nb_dtype)dt, 1, &n));
            CHECK(t && aligned64(t));
            nb_tensor *c = NULL;
            if (t) CHECK_OK(nb_tensor_clone(&c, t));
            CHECK(c && aligned64(c));
            release_all(t, c, NULL);
        }
    }
}

/* ---- reference counting ----------------------------------------------------------- */

static void test_refcount(void)
{
    nb_tensor *t = T(NB_F32, S(2, 2), 1, 2, 3, 4);
    CHECK(t->refcount == 1);
    CHECK(nb_tensor_retain(t) == t && t->refcount == 2);
    nb_tensor_release(t);
    CHECK(t->refcount == 1);
    CHECK(nb_tensor_retain(NULL) == NULL);
    nb_tensor_release(NULL);

    /* Views hold the storage, not the base tensor. */
    nb_tensor *r = NULL, *p = NULL, *s = NULL, *e = NULL;
    CHECK_OK(nb_tensor_reshape(&r, t, 1, S(4)));
    CHECK_OK(nb_tensor_transpose(&p, t, 0, 1));
    CHECK_OK(nb_tensor_slice(&s, t, 1, 1, 2, 1));
    CHECK_OK(nb_tensor_expand(&e, t, 3, S(3, 2, 2)));
    CHECK(t->refcount == 1 && t->storage->refcount == 5);
    CHECK(r->refcount == 1 && p->refcount == 1 && s->refcount == 1 && e->refcount == 1);
    nb_tensor_release(t);
    CHECK(r->storage->refcount == 4);
    CHECK_TENSOR(r, S(4), 0, 1, 2, 3, 4);
    CHECK_TENSOR(p, S(2, 2), 0, 1, 3, 2, 4);
    CHECK_TENSOR(s, S(2, 1), 0, 2, 4);
    CHECK_TENSOR(e, S(3, 2, 2), 0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4);
    nb_tensor_release(r);
    nb_tensor_release(p);
    nb_tensor_release(e);
    CHECK(s->storage->refcount == 1);
    /* Views of views also share. */
    nb_tensor *s2 = NULL;
    CHECK_OK(nb_tensor_slice(&s2, s, 0, 1, 2, 1));
    nb_tensor_release(s);
    CHECK_TENSOR(s2, S(1, 1), 0, 4);
    nb_tensor_release(s2);

    /* A retained tensor survives one release. */
    nb_tensor *u = T(NB_I32, S(1), 9);
    nb_tensor_retain(u);
    nb_tensor_release(u);
    CHECK(u->refcount == 1 && nb_tensor_get(u, 0) == 9);
    nb_tensor_release(u);
}

/* ---- properties and element access ---------------------------------------------------- */

static void test_numel_contiguity(void)
{
    nb_tensor *t =
        T(NB_F64, S(2, 3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);
    CHECK(nb_tensor_numel(t) == 24 && nb_tensor_is_contiguous(t));
    CHECK(nb_shape_numel(3, S(2, 3, 4)) == 24 && nb_shape_numel(0, NULL) == 1 && nb_shape_numel(2, S(5, 0)) == 0);
    nb_tensor *v = NULL;
    CHECK_OK(nb_tensor_transpose(&v, t, 1, 2));
    CHECK(!nb_tensor_is_contiguous(v) && nb_tensor_numel(v) == 24);
    nb_tensor_release(v);
    /* Rows of a contiguous tensor are contiguous (with an offset); columns not. */
    CHECK_OK(nb_tensor_slice(&v, t, 0, 1, 2, 1));
    CHECK(nb_tensor_is_contiguous(v) && v->offset == 12);
    CHECK(nb_tensor_data(v) == (char *)t->storage->data + 12 * sizeof(double));
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 2, 0, 2, 1));
    CHECK(!nb_tensor_is_contiguous(v));
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_slice(&v, t, 0, 0, 2, 2)); /* one row left: contiguous again */
    CHECK(nb_tensor_is_contiguous(v) && v->shape[0] == 1);
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_expand(&v, t, 4, S(2, 2, 3, 4)));
    CHECK(!nb_tensor_is_contiguous(v) && nb_tensor_numel(v) == 48);
    nb_tensor_release(v);
    /* Size-1 dims do not count, whatever their stride. */
    nb_tensor *one = T(NB_F32, S(1, 3), 1, 2, 3);
    CHECK_OK(nb_tensor_expand(&v, one, 2, S(1, 3)));
    CHECK(nb_tensor_is_contiguous(v));
    nb_tensor_release(v);
    CHECK_OK(nb_tensor_transpose(&v, one, 0, 1));
    nb_tensor *w = NULL;
    CHECK_OK(nb_tensor_reshape(&w, v, 1, S(3)));
    CHECK(w && w->storage == one->storage); /* a [3, 1] transpose of [1, 3] needs no copy */
    release_all(v, w, one, t, NULL);
}

static void test_get_set_at(void)
{
    nb_tensor *t = T(NB_F32, S(2, 3), 1, 2, 3, 4, 5, 6);
    CHECK(nb_tensor_get(t, 0) == 1 && nb_tensor_get(t, 5) == 6);
    CHECK(isnan(nb_tensor_get(t, 6)) && isnan(nb_tensor_get(t, -1)));
    CHECK(nb_tensor_at(t, S(1, 2)) == 6 && nb_tensor_at(t, S(0, 1)) == 2);
    CHECK(isnan(nb_tensor_at(t, S(2, 0))) && isnan(nb_tensor_at(t, S(0, -1))) && isnan(nb_tensor_at(t, S(0, 3))));
    nb_tensor_set(t, 4, -5.5);
    CHECK(nb_tensor_at(t, S(1, 1)) == -5.5);
    nb_tensor_set(t, 6, 99); /* ignored, not a write out of bounds */
    nb_tensor_set(t, -1, 99);
    CHECK_TENSOR(t, S(2, 3), 0, 1, 2, 3, 4, -5.5, 6);

    /* Through a view: logical order, writes reach the base. */
    nb_tensor *v = NULL;
    CHECK_OK(nb_tensor_transpose(&v, t, 0, 1));
    CHECK(nb_tensor_get(v, 1) == 4 && nb_tensor_at(v, S(2, 0)) == 3);
    nb_tensor_set(v, 1, 40);
    CHECK(nb_tensor_at(t, S(1, 0)) == 40);
    nb_tensor_release(v);

    /* Conversions on set and get. */
    nb_tensor *i = T(NB_I32, S(2), 0, 0);
    nb_tensor_set(i, 0, 3.9);
    nb_tensor_set(i, 1, -3.9);
    CHECK(nb_tensor_get(i, 0) == 3 && nb_tensor_get(i, 1) == -3);
    nb_tensor *b = T(NB_BOOL, S(2), 0, 0);
    nb_tensor_set(b, 0, -2);
    CHECK(nb_tensor_get(b, 0) == 1 && nb_tensor_get(b, 1) == 0);
    CHECK(((uint8_t *)nb_tensor_data(b))[0] == 1);
    release_all(i, b, t, NULL);
}

/* ---- copies ---------------------------------------------------------------------------- */

static void test_copy_into(void)
{
    nb_tensor *src = T(NB_F64, S(2, 3), 1.5, -2.5, 3, 4, 5, 6);
    nb_tensor *dst = T(NB_F64, S(2, 3), 0, 0, 0, 0, 0, 0);
    CHECK_OK(nb_tensor_copy_into(dst, src));
    CHECK_TENSOR(dst, S(2, 3), 0, 1.5, -2.5, 3, 4, 5, 6);
    CHECK(dst->storage != src->storage);

    /* Broadcasting: a row, a column, a scalar. */
    nb_tensor *row = T(NB_F64, S(3), 7, 8, 9), *col = T(NB_F64, S(2, 1), -1, -2), *sc = tscalar(NB_F64, 0.5);
    CHECK_OK(nb_tensor_copy_into(dst, row));
    CHECK_TENSOR(dst, S(2, 3), 0, 7, 8, 9, 7, 8, 9);
    CHECK_OK(nb_tensor_copy_into(dst, col));
    CHECK_TENSOR(dst, S(2, 3), 0, -1, -1, -1, -2, -2, -2);
    CHECK_OK(nb_tensor_copy_into(dst, sc));
    CHECK_TENSOR(dst, S(2, 3), 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);

    /* Dtype conversion. */
    nb_tensor *di = T(NB_I32, S(2, 3), 0, 0, 0, 0, 0, 0);
    CHECK_OK(nb_tensor_copy_into(di, src));
    CHECK_TENSOR(di, S(2, 3), 0, 1, -2, 3, 4, 5, 6);
    nb_tensor *db = T(NB_BOOL, S(3), 0, 0, 0);
    nb_tensor *fb = T(NB_F32, S(3), 0, 0.25, -1);
    CHECK_OK(nb_tensor_copy_into(db, fb));
    CHECK_TENSOR(db, S(3), 0, 0, 1, 1);

    /* Into a non-contiguous destination. */
    nb_tensor *base = T(NB_F64, S(3, 2), 0, 0, 0, 0, 0, 0), *bt = NULL;
    CHECK_OK(nb_tensor_transpose(&bt, base, 0, 1));
    CHECK_OK(nb_tensor_copy_into(bt, src));
    CHECK_TENSOR(base, S(3, 2), 0, 1.5, 4, -2.5, 5, 3, 6);
    /* From a strided view into a contiguous one. */
    nb_tensor *sl = NULL, *d2 = T(NB_F64, S(3), 0, 0, 0);
    CHECK_OK(nb_tensor_slice(&sl, base, 1, 1, 2, 1));
    nb_tensor *slr = NULL;
    CHECK_OK(nb_tensor_reshape(&slr, sl, 1, S(3)));
    CHECK_OK(nb_tensor_copy_into(d2, slr));
    CHECK_TENSOR(d2, S(3), 0, 4, 5, 6);

    /* int64 values beyond 2^53 survive a strided copy. */
    int64_t big[4] = {INT64_C(9007199254740993), 1, INT64_MAX, INT64_MIN + 1};
    nb_tensor *l = NULL, *lt = NULL, *lc = NULL;
    CHECK_OK(nb_tensor_from_data(&l, NB_I64, 2, S(2, 2), big));
    CHECK_OK(nb_tensor_transpose(&lt, l, 0, 1));
    CHECK_OK(nb_tensor_contiguous(&lc, lt));
    const int64_t *lv = lc ? nb_tensor_data(lc) : NULL;
    CHECK(lv && lv[0] == big[0] && lv[1] == big[2] && lv[2] == big[1] && lv[3] == big[3]);

    /* Shapes that do not broadcast. */
    nb_tensor *bad = T(NB_F64, S(4), 1, 2, 3, 4);
    CHECK_ERR(nb_tensor_copy_into(dst, bad), NB_ERR_SHAPE, "copy: cannot broadcast [4] to [2, 3]");
    nb_tensor *big3 = NULL;
    CHECK_OK(nb_tensor_new(&big3, NB_F64, 3, S(1, 2, 3)));
    CHECK_ERR(nb_tensor_copy_into(dst, big3), NB_ERR_SHAPE, "copy: cannot broadcast [1, 2, 3] to [2, 3]");
    CHECK_TENSOR(dst, S(2, 3), 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5);

    /* A copy onto itself changes nothing. */
    CHECK_OK(nb_tensor_copy_into(src, src));
    CHECK_TENSOR(src, S(2, 3), 0, 1.5, -2.5, 3, 4, 5, 6);
    release_all(src, dst, row, col, sc, di, db, fb, base, bt, sl, d2, slr, l, lt, lc, bad, big3, NULL);
}

static void test_cast(void)
{
    nb_tensor *f = T(NB_F32, S(5), 2.7f, -2.7f, 0.5f, -0.5f, 100.0f);
    nb_tensor *c = NULL;
    CHECK_OK(nb_tensor_cast(&c, f, NB_I32));
    CHECK(c && c->dtype == NB_I32 && c->storage != f->storage);
    CHECK_TENSOR(c, S(5), 0, 2, -2, 0, 0, 100);
    nb_tensor_release(c);
    CHECK_OK(nb_tensor_cast(&c, f, NB_I64));
    CHECK(c && ((int64_t *)nb_tensor_data(c))[1] == -2);
    nb_tensor_release(c);
    CHECK_OK(nb_tensor_cast(&c, f, NB_F64));
    CHECK(c && ((double *)nb_tensor_data(c))[0] == (double)2.7f);
    nb_tensor_release(c);

    nb_tensor *d = T(NB_F64, S(5), 0, 0.1, -1, NAN, -0.0);
    CHECK_OK(nb_tensor_cast(&c, d, NB_BOOL));
    CHECK(c && c->dtype == NB_BOOL);
    CHECK_TENSOR(c, S(5), 0, 0, 1, 1, 1, 0);
    const uint8_t *bv = c ? nb_tensor_data(c) : NULL;
    CHECK(bv && bv[0] == 0 && bv[1] == 1 && bv[3] == 1); /* stored as 0/1 bytes */
    nb_tensor *back = NULL;
    CHECK_OK(nb_tensor_cast(&back, c, NB_F32));
    CHECK_TENSOR(back, S(5), 0, 0, 1, 1, 1, 0);
    release_all(c, back, NULL);

    nb_tensor *u = T(NB_U8, S(2), 200, 3);
    CHECK_OK(nb_tensor_cast(&c, u, NB_F64));
    CHECK_TENSOR(c, S(2), 0, 200, 3);
    nb_tensor_release(c);

    /* A cast of a view is contiguous, in logical order. */
    nb_tensor *m = T(NB_F64, S(2, 2), 1.9, 2.9, 3.9, 4.9), *mt = NULL;
    CHECK_OK(nb_tensor_transpose(&mt, m, 0, 1));
    CHECK_OK(nb_tensor_cast(&c, mt, NB_I32));
    CHECK(c && nb_tensor_is_contiguous(c));
    CHECK_TENSOR(c, S(2, 2), 0, 1, 3, 2, 4);
    nb_tensor_release(c);

    c = (nb_tensor *)1;
    CHECK_ERR(nb_tensor_cast(&c, f, (nb_dtype)17), NB_ERR_DTYPE, "invalid dtype");
    CHECK(c == NULL);
    release_all(f, d, u, m, mt, NULL);
}

static void test_clone_contiguous(void)
{
    nb_tensor *t = T(NB_I32, S(2, 2), 1, 2, 3, 4), *c = NULL;
    CHECK_OK(nb_tensor_clone(&c, t));
    CHECK(c && c != t && c->storage != t->storage && c->dtype == NB_I32 && nb_tensor_is_contiguous(c));
    CHECK_TENSOR(c, S(2, 2), 0, 1, 2, 3, 4);
    nb_tensor_set(c, 0, 10);
    CHECK(nb_tensor_get(t, 0) == 1);
    nb_tensor_release(c);

    /* contiguous() of a contiguous tensor is the tensor itself. */
    CHECK_OK(nb_tensor_contiguous(&c, t));
    CHECK(c == t && t->refcount == 2);
    nb_tensor_release(c);

    /* Of a view: a packed copy. */
    nb_tensor *v = NULL;
    CHECK_OK(nb_tensor_transpose(&v, t, 0, 1));
    CHECK_OK(nb_tensor_contiguous(&c, v));
    CHECK(c && c != v && c->storage != t->storage && nb_tensor_is_contiguous(c) && c->offset == 0);
    CHECK_TENSOR(c, S(2, 2), 0, 1, 3, 2, 4);
    nb_tensor_release(c);
    CHECK_OK(nb_tensor_clone(&c, v));
    CHECK_TENSOR(c, S(2, 2), 0, 1, 3, 2, 4);
    nb_tensor_release(c);

    /* Of a sliced row with an offset: contiguous already, kept as is. */
    nb_tensor *r = NULL;
    CHECK_OK(nb_tensor_slice(&r, t, 0, 1, 2, 1));
    CHECK_OK(nb_tensor_contiguous(&c, r));
    CHECK(c == r);
    nb_tensor_release(c);
    CHECK_OK(nb_tensor_clone(&c, r));
    CHECK(c && c->offset == 0 && c->storage->nbytes == 2 * sizeof(int32_t));
    CHECK_TENSOR(c, S(1, 2), 0, 3, 4);
    release_all(c, r, v, t, NULL);

    nb_tensor *s = tscalar(NB_F64, 2.5);
    CHECK_OK(nb_tensor_clone(&c, s));
    CHECK(c && c->ndim == 0 && nb_tensor_get(c, 0) == 2.5);
    release_all(c, s, NULL);
}

/* ---- broadcasting ----------------------------------------------------------------------- */

/* Checks nb_broadcast_shapes(a, b) and (b, a): both give `want`. */
static void check_bcast_(int line, int nda, const int64_t *a, int ndb, const int64_t *b, int ndw, const int64_t *want)
{
    for (int swap = 0; swap < 2; swap++) {
        int nd = -7;
        int64_t out[NB_MAX_DIMS];
        nb_status st =
            swap ? nb_broadcast_shapes(ndb, b, nda, a, &nd, out) : nb_broadcast_shapes(nda, a, ndb, b, &nd, out);
        if (st != NB_OK || !nb_shape_equal(nd, out, ndw, want)) {
            char x[NB_SHAPE_STR_MAX], y[NB_SHAPE_STR_MAX], w[NB_SHAPE_STR_MAX];
            fprintf(stderr, "  %s:%d: broadcast %s with %s: status %d, expected %s\n", __FILE__, line,
                    nb_shape_str(x, sizeof x, nda, a), nb_shape_str(y, sizeof y, ndb, b), (int)st,
                    nb_shape_str(w, sizeof w, ndw, want));
            test_failures_in_current++;
        }
    }
}
#define CHECK_BCAST(a, b, want) check_bcast_(__LINE__, NDIM_OF(a), (a), NDIM_OF(b), (b), NDIM_OF(want), (want))

static void check_bcast_fails_(int line, int nda, const int64_t *a, int ndb, const int64_t *b)
{
    int nd = -7;
    int64_t out[NB_MAX_DIMS];
    nb_clear_error();
    if (nb_broadcast_shapes(nda, a, ndb, b, &nd, out) != NB_ERR_SHAPE ||
        nb_broadcast_shapes(ndb, b, nda, a, &nd, out) != NB_ERR_SHAPE || nd != -7 || *nb_last_error()) {
        fprintf(stderr, "  %s:%d: broadcast should fail quietly\n", __FILE__, line);
        test_failures_in_current++;
    }
}
#define CHECK_BCAST_FAILS(a, b) check_bcast_fails_(__LINE__, NDIM_OF(a), (a), NDIM_OF(b), (b))

static void test_broadcast_shapes(void)
{
    /* NumPy's documented examples. */
    CHECK_BCAST(S(256, 256, 3), S(3), S(256, 256, 3));
    CHECK_BCAST(S(8, 1, 6, 1), S(7, 1, 5), S(8, 7, 6, 5));
    CHECK_BCAST(S(5, 4), S(1), S(5, 4));
    CHECK_BCAST(S(5, 4), S(4), S(5, 4));
    CHECK_BCAST(S(15, 3, 5), S(15, 1, 5), S(15, 3, 5));
    CHECK_BCAST(S(15, 3, 5), S(3, 5), S(15, 3, 5));
    CHECK_BCAST(S(15, 3, 5), S(3, 1), S(15, 3, 5));
    CHECK_BCAST(S(2, 1), S(1, 3), S(2, 3));
    CHECK_BCAST(S(2, 3), S(2, 3), S(2, 3));
    CHECK_BCAST(S(1), S(1), S(1));
    /* Zero-size dims broadcast with 1 and stay 0. */
    CHECK_BCAST(S(0), S(1), S(0));
    CHECK_BCAST(S(2, 0), S(1, 1), S(2, 0));
    CHECK_BCAST_FAILS(S(0), S(3));
    CHECK_BCAST_FAILS(S(3), S(4));
    CHECK_BCAST_FAILS(S(2, 1), S(8, 4, 3));
    CHECK_BCAST_FAILS(S(2, 3), S(3, 2));
    /* -1 (unknown at build time). */
    CHECK_BCAST(S(-1, 3), S(3), S(-1, 3));
    CHECK_BCAST(S(-1), S(1), S(-1));
    CHECK_BCAST(S(-1), S(5), S(5));
    CHECK_BCAST(S(-1), S(-1), S(-1));
    CHECK_BCAST(S(-1), S(0), S(0));
    CHECK_BCAST(S(-1, 1), S(1, -1), S(-1, -1));
    CHECK_BCAST(S(-1, 784), S(784), S(-1, 784));
    CHECK_BCAST(S(-1, 10), S(64, 1), S(64, 10));
    CHECK_BCAST_FAILS(S(-1, 3), S(4));
    /* Scalars. */
    int nd = -7;
    int64_t out[NB_MAX_DIMS];
    CHECK(nb_broadcast_shapes(0, NULL, 0, NULL, &nd, out) == NB_OK && nd == 0);
    CHECK(nb_broadcast_shapes(0, NULL, 2, S(4, 5), &nd, out) == NB_OK && nb_shape_equal(nd, out, 2, S(4, 5)));
    CHECK(nb_broadcast_shapes(2, S(-1, 5), 0, NULL, &nd, out) == NB_OK && nb_shape_equal(nd, out, 2, S(-1, 5)));
    /* More dims than a tensor can have. */
    CHECK(nb_broadcast_shapes(9, S(1, 1, 1, 1, 1, 1, 1, 1, 1), 1, S(1), &nd, out) == NB_ERR_SHAPE);
    CHECK(nb_broadcast_shapes(8, S(1, 1, 1, 1, 1, 1, 1, 2), 1, S(2), &nd, out) == NB_OK && nd == 8);
}

/* ---- comparison and shapes ----------------------------------------------------------------- */

static void test_allclose(void)
{
    nb_tensor *a = T(NB_F64, S(3), 1, 2, 3), *b = T(NB_F64, S(3), 1, 2, 3);
    CHECK(nb_tensor_allclose(a, b, 0, 0));
    nb_tensor_set(b, 2, 3.001);
    CHECK(!nb_tensor_allclose(a, b, 0, 0));
    CHECK(nb_tensor_allclose(a, b, 0, 0.0011));
    CHECK(!nb_tensor_allclose(a, b, 0, 0.0009));
    CHECK(nb_tensor_allclose(a, b, 0.0004, 0)); /* |a-b| <= rtol * |b| */
    CHECK(!nb_tensor_allclose(a, b, 0.0003, 0));
    CHECK(nb_tensor_allclose(a, b, 0.0002, 0.0005)); /* atol and rtol add up */

    /* NaN equals NaN; NaN is not close to a number. Infinities are close to
     * themselves only, however loose the tolerance. */
    nb_tensor *n1 = T(NB_F32, S(4), NAN, INFINITY, -INFINITY, 0), *n2 = T(NB_F32, S(4), NAN, INFINITY, -INFINITY, 0);
    CHECK(nb_tensor_allclose(n1, n2, 0, 0));
    nb_tensor_set(n2, 0, 1);
    CHECK(!nb_tensor_allclose(n1, n2, 1e9, 1e9));
    nb_tensor_set(n2, 0, NAN);
    nb_tensor_set(n2, 1, -INFINITY);
    CHECK(!nb_tensor_allclose(n1, n2, 1e9, 1e9));
    nb_tensor_set(n2, 1, 1e30);
    CHECK(!nb_tensor_allclose(n1, n2, 1e9, 1e9));
    CHECK(!nb_tensor_allclose(n2, n1, 1e9, 1e9));

    /* Shapes must match; dtypes need not. */
    nb_tensor *c = T(NB_F64, S(1, 3), 1, 2, 3), *i = T(NB_I32, S(3), 1, 2, 3);
    CHECK(!nb_tensor_allclose(a, c, 1, 1));
    CHECK(nb_tensor_allclose(a, i, 0, 0));
    /* Views compare by logical values. */
    nb_tensor *m = T(NB_F32, S(2, 2), 1, 2, 3, 4), *mt = NULL, *e = T(NB_F32, S(2, 2), 1, 3, 2, 4);
    CHECK_OK(nb_tensor_transpose(&mt, m, 0, 1));
    CHECK(nb_tensor_allclose(mt, e, 0, 0) && !nb_tensor_allclose(m, e, 0, 0));
    nb_tensor *z1 = NULL, *z2 = NULL;
    CHECK_OK(nb_tensor_new(&z1, NB_F32, 2, S(0, 3)));
    CHECK_OK(nb_tensor_new(&z2, NB_F32, 2, S(0, 3)));
    CHECK(nb_tensor_allclose(z1, z2, 0, 0));
    release_all(a, b, n1, n2, c, i, m, mt, e, z1, z2, NULL);
}

static void test_shape_str(void)
{
    char buf[NB_SHAPE_STR_MAX];
    CHECK_STR(nb_shape_str(buf, sizeof buf, 2, S(64, 784)), "[64, 784]");
    CHECK_STR(nb_shape_str(buf, sizeof buf, 0, NULL), "[]");
    CHECK_STR(nb_shape_str(buf, sizeof buf, 1, S(7)), "[7]");
    CHECK_STR(nb_shape_str(buf, sizeof buf, 3, S(-1, 0, 10)), "[-1, 0, 10]");
    CHECK_STR(nb_shape_str(buf, sizeof buf, 8, S(INT64_MAX, 1, 1, 1, 1, 1, 1, INT64_MIN)),
              "[9223372036854775807, 1, 1, 1, 1, 1, 1, -9223372036854775808]");
    /* Too small a buffer: truncated, terminated, nothing written past it. */
    char small[8];
    memset(small, 'x', sizeof small);
    nb_shape_str(small, 6, 3, S(64, 784, 10));
    CHECK(strlen(small) == 5 && !strncmp(small, "[64, ", 5) && small[6] == 'x' && small[7] == 'x');
}

static void test_dtype_names(void)
{
    CHECK_STR(nb_dtype_name(NB_F32), "float32");
    CHECK_STR(nb_dtype_name(NB_BOOL), "bool");
    CHECK(nb_dtype_is_float(NB_F64) && !nb_dtype_is_float(NB_I32) && !nb_dtype_valid(NB_DTYPE_COUNT));
    nb_dtype d;
    CHECK(nb_dtype_parse("i64", &d) == NB_OK && d == NB_I64);
    CHECK_ERR(nb_dtype_parse("float16", &d), NB_ERR_NOT_FOUND, "unknown dtype 'float16'");
}

int main(void)
{
    RUN(test_new_every_dtype);
    RUN(test_new_scalar_and_empty);
    RUN(test_new_errors);
    RUN(test_from_data);
    RUN(test_wrap);
    RUN(test_full_and_scalar);
    RUN(test_alignment);
    RUN(test_refcount);
    RUN(test_numel_contiguity);
    RUN(test_get_set_at);
    RUN(test_copy_into);
    RUN(test_cast);
    RUN(test_clone_contiguous);
    RUN(test_broadcast_shapes);
    RUN(test_allclose);
    RUN(test_shape_str);
    RUN(test_dtype_names);
    return test_report();
}
