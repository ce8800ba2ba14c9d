/* Tensors: storage, creation, reference counting, element access, views and
 * copies. Printing lives in tensor_print.c. */
#include <math.h>
#include <stdatomic.h>
#include "nabla/device.h"
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include "nabla/tensor.h"
#include "prefetch.h"
#include "small_pool.h"
#include "tensor_internal.h"

/* ---- storage ------------------------------------------------------------ */

bool nb_poison_uninit(void)
{
    static _Atomic int on = -1; /* every thread that finds it unset computes the same */
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("NABLA_POISON");
        v = e && !strcmp(e, "1");
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

/* A tensor made with its storage is one block: the tensor, the storage and,
 * up to this size, the data. An eager op makes a tensor or two, and their
 * two or three allocations were a sixth of its cost. The block goes when the
 * storage does; the tensor holds a reference to its own storage, so that is
 * never before the tensor itself has gone, and views of it keep it. */
#define INLINE_MAX 256

typedef struct tensor_block {
    nb_tensor t;
    nb_storage s;
    _Alignas(8) unsigned char room[NB_TENSOR_ROOM]; /* nb_tensor_room: pointers and bools */
} tensor_block;

static tensor_block *block_of(nb_storage *s) { return (tensor_block *)((char *)s - offsetof(tensor_block, s)); }

/* The block's size: its data inline up to INLINE_MAX bytes, padded to 64
 * and with room to align it. */
static size_t block_bytes(size_t padded, bool inline_data)
{
    return sizeof(tensor_block) + (inline_data ? padded + 63 : 0);
}

static size_t padded_bytes(size_t nbytes)
{
    size_t padded = (nbytes + 63) & ~(size_t)63;
    return padded ? padded : 64;
}

/* The tensor and storage of the block: the tensor's dims are the caller's
 * to fill; its storage holds nbytes, zeroed if `zero`. */
static nb_tensor *tensor_block_new(size_t nbytes, bool zero)
{
    size_t padded = padded_bytes(nbytes);
    bool inline_data = padded <= INLINE_MAX;
    tensor_block *b = nb_small_alloc(block_bytes(padded, inline_data));
    if (!b) return NULL;
    memset(b, 0, sizeof *b);
    nb_storage *s = &b->s;
    if (inline_data) {
        s->data = (void *)(((uintptr_t)(b + 1) + 63) & ~(uintptr_t)63);
        s->inline_data = true;
    } else if (!(s->data = nb_device_alloc(NB_DEVICE_CPU, padded))) {
        nb_small_free(b, block_bytes(padded, false));
        return NULL;
    }
    if (zero || nb_poison_uninit()) memset(s->data, zero ? 0 : 0xff, padded);
    s->nbytes = nbytes;
    s->refcount = 1;
    s->in_block = true;
    b->t.refcount = 1;
    b->t.storage = s;
    return &b->t;
}

void nb_tensor_prefetch_block_like(const nb_tensor *t)
{
    const nb_storage *s = t->storage;
    if (s && s->in_block) nb_small_prefetch(block_bytes(padded_bytes(s->nbytes), s->inline_data));
}

void nb_tensor_prefetch(const nb_tensor *t)
{
    /* Without reading t: its block (when it has one) starts with it, and
     * small data follows within a line of the block's header. */
    nb_prefetch_lines(t, sizeof(tensor_block) + 64);
}

void *nb_tensor_room(nb_tensor *t)
{
    nb_storage *s = t ? t->storage : NULL;
    return s && s->in_block && &block_of(s)->t == t ? block_of(s)->room : NULL;
}

static void storage_release(nb_storage *s)
{
    if (!s || --s->refcount > 0) return;
    if (!s->borrowed && !s->inline_data) nb_device_free(s->device, s->data);
    if (s->in_block) nb_small_free(block_of(s), block_bytes(padded_bytes(s->nbytes), s->inline_data));
    else nb_free(s);
}

/* ---- shapes ------------------------------------------------------------- */

int64_t nb_shape_numel(int ndim, const int64_t *shape) { return nb_shape_numel_inline(ndim, shape); }

bool nb_shape_equal(int nda, const int64_t *a, int ndb, const int64_t *b)
{
    return nb_shape_equal_inline(nda, a, ndb, b);
}

char *nb_shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static nb_status check_shape(int ndim, const int64_t *shape, const char *what)
{
    if (ndim < 0 || ndim > NB_MAX_DIMS)
        return nb_error(NB_ERR_SHAPE, "%s: %d dimensions (at most %d are supported)", what, ndim, NB_MAX_DIMS);
    if (ndim > 0 && !shape) return nb_error(NB_ERR_ARG, "%s: shape is NULL", what);
    /* The strides multiply the dims with a 0 counted as 1, so they, not the
     * element count (0 once any dim is), are what must not overflow. */
    int64_t n = 1;
    char s[NB_SHAPE_STR_MAX];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return nb_error(NB_ERR_SHAPE, "%s: shape %s has a negative dimension", what,
                            nb_shape_str(s, sizeof s, ndim, shape));
        int64_t d = shape[i] ? shape[i] : 1;
        if (n > INT64_MAX / 16 / d)
            return nb_error(NB_ERR_SHAPE, "%s: shape %s is too large (its strides overflow 64 bits)", what,
                            nb_shape_str(s, sizeof s, ndim, shape));
        n *= d;
    }
    return NB_OK;
}

void nb_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

/* ---- creation ----------------------------------------------------------- */

/* Sets a new tensor's dtype and dims, contiguous. */
static void tensor_dims(nb_tensor *t, nb_dtype dtype, int ndim, const int64_t *shape)
{
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim > 0 && ndim <= NB_MAX_DIMS) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    nb_contiguous_strides(ndim, shape, t->strides);
}

static nb_tensor *tensor_shell(nb_dtype dtype, int ndim, const int64_t *shape)
{
    nb_tensor *t = nb_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->refcount = 1;
    tensor_dims(t, dtype, ndim, shape);
    return t;
}

static nb_status tensor_new(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, bool zero)
{
    *out = NULL;
    size_t elsize = nb_dtype_bytes(dtype);
    if (!elsize) return nb_error(NB_ERR_DTYPE, "tensor: invalid dtype %d", (int)dtype);
    nb_status st = check_shape(ndim, shape, "tensor");
    if (st) return st;
    nb_tensor *t = tensor_block_new((size_t)nb_shape_numel(ndim, shape) * elsize, zero);
    if (!t)
        return nb_error(NB_ERR_NOMEM, "tensor: out of memory allocating %lld elements",
                        (long long)nb_shape_numel(ndim, shape));
    tensor_dims(t, dtype, ndim, shape);
    *out = t;
    return NB_OK;
}

nb_status nb_tensor_new(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape)
{
    return tensor_new(out, dtype, ndim, shape, true);
}

nb_status nb_tensor_new_uninit(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape)
{
    return tensor_new(out, dtype, ndim, shape, false);
}

nb_status nb_tensor_from_data(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    nb_status st = nb_tensor_new(out, dtype, ndim, shape);
    if (st) return st;
    if (!data) {
        nb_tensor_release(*out);
        *out = NULL;
        return nb_error(NB_ERR_ARG, "tensor: data is NULL");
    }
    memcpy((*out)->storage->data, data, (*out)->storage->nbytes);
    return NB_OK;
}

nb_status nb_tensor_wrap(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, void *data)
{
    *out = NULL;
    if (!nb_dtype_valid(dtype)) return nb_error(NB_ERR_DTYPE, "tensor: invalid dtype %d", (int)dtype);
    nb_status st = check_shape(ndim, shape, "tensor");
    if (st) return st;
    if (!data) return nb_error(NB_ERR_ARG, "tensor: data is NULL");
    nb_tensor *t = tensor_shell(dtype, ndim, shape);
    nb_storage *s = nb_calloc(1, sizeof *s);
    if (!t || !s) {
        nb_free(t);
        nb_free(s);
        return nb_error(NB_ERR_NOMEM, "tensor: out of memory");
    }
    s->data = data;
    s->nbytes = (size_t)nb_shape_numel(ndim, shape) * nb_dtype_size(dtype);
    s->refcount = 1;
    s->borrowed = true;
    t->storage = s;
    *out = t;
    return NB_OK;
}

nb_status nb_tensor_full(nb_tensor **out, nb_dtype dtype, int ndim, const int64_t *shape, double value)
{
    nb_status st = nb_tensor_new(out, dtype, ndim, shape);
    if (st) return st;
    int64_t n = nb_tensor_numel(*out);
    for (int64_t i = 0; i < n; i++) nb_store(dtype, (*out)->storage->data, i, value);
    return NB_OK;
}

nb_status nb_tensor_scalar(nb_tensor **out, nb_dtype dtype, double value)
{
    return nb_tensor_full(out, dtype, 0, NULL, value);
}

nb_tensor *nb_tensor_retain(nb_tensor *t)
{
    if (t) t->refcount++;
    return t;
}

void (*nb_tensor_autograd_free_hook)(nb_tensor *t) = NULL;

void nb_tensor_release(nb_tensor *t)
{
    if (!t || --t->refcount > 0) return;
    if (t->autograd && nb_tensor_autograd_free_hook) nb_tensor_autograd_free_hook(t);
    /* A block's own tensor goes with its storage, now or when the last view does. */
    nb_storage *s = t->storage;
    bool own_block = s && s->in_block && &block_of(s)->t == t;
    storage_release(s);
    if (!own_block) nb_free(t);
}

/* ---- properties ----------------------------------------------------------- */

int64_t nb_tensor_numel(const nb_tensor *t) { return nb_shape_numel_inline(t->ndim, t->shape); }

bool nb_tensor_is_contiguous(const nb_tensor *t) { return nb_is_contiguous_inline(t); }

/* A tensor without storage is a logical one of vmap (src/eager/batched.h):
 * shaped as one example, its data in a batch elsewhere. Nothing here may
 * read it. */
static nb_status need_storage(const nb_tensor *t, const char *what)
{
    if (t->storage) return NB_OK;
    return nb_error(NB_ERR_ARG,
                    "%s: the tensor is a batched (vmap) value, shaped as one example, which holds no data "
                    "of its own; return it from the mapped function to read the batch",
                    what);
}

void *nb_tensor_data(const nb_tensor *t)
{
    if (need_storage(t, "tensor_data")) return NULL;
    return (char *)t->storage->data + t->offset * (int64_t)nb_dtype_size(t->dtype);
}

/* ---- element access -------------------------------------------------------- */

double nb_load(nb_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case NB_F32: return ((const float *)p)[i];
    case NB_F64: return ((const double *)p)[i];
    case NB_I32: return ((const int32_t *)p)[i];
    case NB_I64: return (double)((const int64_t *)p)[i];
    case NB_U8: return ((const uint8_t *)p)[i];
    case NB_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
    }
}

void nb_store(nb_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case NB_F32: ((float *)p)[i] = (float)v; break;
    case NB_F64: ((double *)p)[i] = v; break;
    case NB_I32: ((int32_t *)p)[i] = isfinite(v) && fabs(v) < 2147483648.0 ? (int32_t)v : 0; break;
    case NB_I64: ((int64_t *)p)[i] = isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0; break;
    case NB_U8: ((uint8_t *)p)[i] = v >= 0 && v < 256 ? (uint8_t)v : 0; break;
    case NB_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

/* Storage offset (in elements) of the flat logical index i. */
static int64_t offset_of(const nb_tensor *t, int64_t i)
{
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (i % n) * t->strides[d];
        i /= n;
    }
    return off;
}

double nb_tensor_get(const nb_tensor *t, int64_t i)
{
    if (i < 0 || i >= nb_tensor_numel(t) || need_storage(t, "tensor_get")) return NAN;
    return nb_load(t->dtype, t->storage->data, offset_of(t, i));
}

void nb_tensor_set(nb_tensor *t, int64_t i, double v)
{
    if (i < 0 || i >= nb_tensor_numel(t) || need_storage(t, "tensor_set")) return;
    nb_store(t->dtype, t->storage->data, offset_of(t, i), v);
}

double nb_tensor_at(const nb_tensor *t, const int64_t *index)
{
    int64_t off = t->offset;
    if (need_storage(t, "tensor_at")) return NAN;
    for (int d = 0; d < t->ndim; d++) {
        if (index[d] < 0 || index[d] >= t->shape[d]) return NAN;
        off += index[d] * t->strides[d];
    }
    return nb_load(t->dtype, t->storage->data, off);
}

/* ---- views ------------------------------------------------------------------ */

static nb_tensor *view_of(nb_tensor *t)
{
    if (need_storage(t, "tensor view")) return NULL;
    nb_tensor *v = nb_calloc(1, sizeof *v);
    if (!v) return NULL;
    *v = *t;
    v->refcount = 1;
    v->autograd = NULL;
    v->storage->refcount++;
    return v;
}

nb_status nb_tensor_reshape(nb_tensor **out, nb_tensor *t, int ndim, const int64_t *shape)
{
    if (need_storage(t, "tensor_reshape")) return NB_ERR_ARG;
    *out = NULL;
    int64_t full[NB_MAX_DIMS];
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (ndim < 0 || ndim > NB_MAX_DIMS) return nb_error(NB_ERR_SHAPE, "reshape: %d dimensions", ndim);
    if (ndim > 0 && !shape) return nb_error(NB_ERR_ARG, "reshape: shape is NULL");
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        full[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0)
                return nb_error(NB_ERR_SHAPE, "reshape: more than one -1 in %s",
                                nb_shape_str(a, sizeof a, ndim, shape));
            infer = i;
        } else if (shape[i] < 0) {
            return nb_error(NB_ERR_SHAPE, "reshape: negative size in %s", nb_shape_str(a, sizeof a, ndim, shape));
        } else {
            if (shape[i] && known > INT64_MAX / shape[i])
                return nb_error(NB_ERR_SHAPE, "reshape: shape %s is too large", nb_shape_str(a, sizeof a, ndim, shape));
            known *= shape[i];
        }
    }
    int64_t n = nb_tensor_numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known)
            return nb_error(NB_ERR_SHAPE, "reshape: cannot view %s (%lld elements) as %s",
                            nb_shape_str(a, sizeof a, t->ndim, t->shape), (long long)n,
                            nb_shape_str(b, sizeof b, ndim, shape));
        full[infer] = n / known;
    }
    if (nb_shape_numel(ndim, full) != n)
        return nb_error(NB_ERR_SHAPE, "reshape: cannot view %s (%lld elements) as %s",
                        nb_shape_str(a, sizeof a, t->ndim, t->shape), (long long)n,
                        nb_shape_str(b, sizeof b, ndim, full));
    nb_tensor *src = NULL;
    nb_status st = nb_tensor_contiguous(&src, t);
    if (st) return st;
    nb_tensor *v = view_of(src);
    nb_tensor_release(src);
    if (!v) return nb_error(NB_ERR_NOMEM, "reshape: out of memory");
    v->ndim = ndim;
    memcpy(v->shape, full, (size_t)ndim * sizeof *full);
    nb_contiguous_strides(ndim, full, v->strides);
    *out = v;
    return NB_OK;
}

nb_status nb_tensor_permute(nb_tensor **out, nb_tensor *t, const int *perm)
{
    if (need_storage(t, "tensor_permute")) return NB_ERR_ARG;
    *out = NULL;
    bool seen[NB_MAX_DIMS] = {false};
    if (t->ndim > 0 && !perm) return nb_error(NB_ERR_ARG, "permute: perm is NULL");
    for (int i = 0; i < t->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= t->ndim || seen[perm[i]])
            return nb_error(NB_ERR_ARG, "permute: not a permutation of %d dimensions", t->ndim);
        seen[perm[i]] = true;
    }
    nb_tensor *v = view_of(t);
    if (!v) return nb_error(NB_ERR_NOMEM, "permute: out of memory");
    for (int i = 0; i < t->ndim; i++) {
        v->shape[i] = t->shape[perm[i]];
        v->strides[i] = t->strides[perm[i]];
    }
    *out = v;
    return NB_OK;
}

nb_status nb_tensor_transpose(nb_tensor **out, nb_tensor *t, int d0, int d1)
{
    int perm[NB_MAX_DIMS];
    if (d0 < 0) d0 += t->ndim;
    if (d1 < 0) d1 += t->ndim;
    if (d0 < 0 || d0 >= t->ndim || d1 < 0 || d1 >= t->ndim) {
        *out = NULL;
        return nb_error(NB_ERR_ARG, "transpose: dimensions out of range for a %d-d tensor", t->ndim);
    }
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return nb_tensor_permute(out, t, perm);
}

nb_status nb_tensor_slice(nb_tensor **out, nb_tensor *t, int dim, int64_t start, int64_t stop, int64_t step)
{
    if (need_storage(t, "tensor_slice")) return NB_ERR_ARG;
    *out = NULL;
    if (dim < 0) dim += t->ndim;
    if (dim < 0 || dim >= t->ndim)
        return nb_error(NB_ERR_ARG, "slice: dimension out of range for a %d-d tensor", t->ndim);
    if (step <= 0) return nb_error(NB_ERR_ARG, "slice: step must be positive, got %lld", (long long)step);
    int64_t n = t->shape[dim];
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = start < 0 ? 0 : start > n ? n : start;
    stop = stop < start ? start : stop > n ? n : stop;
    nb_tensor *v = view_of(t);
    if (!v) return nb_error(NB_ERR_NOMEM, "slice: out of memory");
    v->offset += start * t->strides[dim];
    /* Written so that a huge step cannot overflow; a stride that is never
     * stepped over (at most one element) keeps its value for the same reason. */
    v->shape[dim] = stop > start ? (stop - start - 1) / step + 1 : 0;
    if (v->shape[dim] > 1) v->strides[dim] *= step;
    *out = v;
    return NB_OK;
}

nb_status nb_broadcast_shapes(int nda, const int64_t *a, int ndb, const int64_t *b, int *ndim_out, int64_t *out)
{
    int nd = nda > ndb ? nda : ndb;
    if (nd > NB_MAX_DIMS) return NB_ERR_SHAPE;
    int64_t res[NB_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - nda), ib = i - (nd - ndb);
        int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
        if (x == y) res[i] = x;
        else if (x == 1) res[i] = y;
        else if (y == 1) res[i] = x;
        else if (x == -1) res[i] = y;
        else if (y == -1) res[i] = x;
        else return NB_ERR_SHAPE;
    }
    *ndim_out = nd;
    memcpy(out, res, (size_t)nd * sizeof *res);
    return NB_OK;
}

nb_status nb_tensor_expand(nb_tensor **out, nb_tensor *t, int ndim, const int64_t *shape)
{
    if (need_storage(t, "tensor_expand")) return NB_ERR_ARG;
    *out = NULL;
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    if (ndim > 0 && !shape) return nb_error(NB_ERR_ARG, "expand: shape is NULL");
    if (ndim < t->ndim || ndim > NB_MAX_DIMS) goto bad;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) goto bad;
    nb_tensor *v = view_of(t);
    if (!v) return nb_error(NB_ERR_NOMEM, "expand: out of memory");
    int lead = ndim - t->ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        int j = i - lead;
        int64_t sz = j >= 0 ? t->shape[j] : 1, st = j >= 0 ? t->strides[j] : 0;
        if (sz != shape[i]) {
            if (sz != 1) {
                nb_tensor_release(v);
                goto bad;
            }
            st = 0;
        }
        v->shape[i] = shape[i];
        v->strides[i] = st;
    }
    v->ndim = ndim;
    *out = v;
    return NB_OK;
bad:
    return nb_error(NB_ERR_SHAPE, "expand: cannot broadcast %s to %s", nb_shape_str(a, sizeof a, t->ndim, t->shape),
                    nb_shape_str(b, sizeof b, ndim, shape));
}

/* ---- copies ----------------------------------------------------------------- */

nb_status nb_tensor_copy_into(nb_tensor *dst, const nb_tensor *src)
{
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    nb_tensor *bs = NULL;
    if (need_storage(dst, "copy") || need_storage(src, "copy")) return NB_ERR_ARG;
    if (!nb_shape_equal(dst->ndim, dst->shape, src->ndim, src->shape)) {
        nb_status st = nb_tensor_expand(&bs, (nb_tensor *)src, dst->ndim, dst->shape);
        if (st)
            return nb_error(NB_ERR_SHAPE, "copy: cannot broadcast %s to %s",
                            nb_shape_str(a, sizeof a, src->ndim, src->shape),
                            nb_shape_str(b, sizeof b, dst->ndim, dst->shape));
        src = bs;
    }
    int64_t n = nb_tensor_numel(dst);
    if (src->dtype == dst->dtype && nb_tensor_is_contiguous(src) && nb_tensor_is_contiguous(dst)) {
        memmove(nb_tensor_data(dst), nb_tensor_data(src), (size_t)n * nb_dtype_size(dst->dtype));
    } else {
        /* Walk both views with an odometer over the logical index. */
        int64_t idx[NB_MAX_DIMS] = {0}, so = src->offset, doff = dst->offset;
        size_t es = nb_dtype_size(dst->dtype);
        bool same = src->dtype == dst->dtype;
        for (int64_t i = 0; i < n; i++) {
            /* Same dtype: copy the bytes, as int64 does not survive double. */
            if (same)
                memcpy((char *)dst->storage->data + doff * (int64_t)es,
                       (const char *)src->storage->data + so * (int64_t)es, es);
            else nb_store(dst->dtype, dst->storage->data, doff, nb_load(src->dtype, src->storage->data, so));
            for (int d = dst->ndim - 1; d >= 0; d--) {
                if (++idx[d] < dst->shape[d]) {
                    so += src->strides[d];
                    doff += dst->strides[d];
                    break;
                }
                so -= (idx[d] - 1) * src->strides[d];
                doff -= (idx[d] - 1) * dst->strides[d];
                idx[d] = 0;
            }
        }
    }
    nb_tensor_release(bs);
    return NB_OK;
}

nb_status nb_tensor_cast(nb_tensor **out, const nb_tensor *t, nb_dtype dtype)
{
    nb_status st = nb_tensor_new(out, dtype, t->ndim, t->shape);
    if (st) return st;
    st = nb_tensor_copy_into(*out, t);
    if (st) {
        nb_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

nb_status nb_tensor_clone(nb_tensor **out, const nb_tensor *t) { return nb_tensor_cast(out, t, t->dtype); }

nb_status nb_tensor_contiguous(nb_tensor **out, nb_tensor *t)
{
    *out = NULL;
    if (need_storage(t, "contiguous")) return NB_ERR_ARG;
    if (nb_is_contiguous_inline(t)) {
        *out = nb_tensor_retain(t);
        return NB_OK;
    }
    return nb_tensor_clone(out, t);
}

bool nb_tensor_allclose(const nb_tensor *a, const nb_tensor *b, double rtol, double atol)
{
    if (!nb_shape_equal(a->ndim, a->shape, b->ndim, b->shape)) return false;
    int64_t n = nb_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = nb_tensor_get(a, i), y = nb_tensor_get(b, i);
        if (isnan(x) && isnan(y)) continue;
        if (x == y) continue; /* equal infinities */
        /* An infinity is close only to itself (rtol * inf would admit anything). */
        if (isinf(x) || isinf(y) || !(fabs(x - y) <= atol + rtol * fabs(y))) return false;
    }
    return true;
}
