/* The functional transforms, on the eager tape. Reverse transforms record
 * their backward (create_graph), so that what they return can be
 * differentiated again by an enclosing transform. */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "nabla/ops.h"
#include "nabla/transforms.h"
#include "nabla/vmap.h"
#include "transforms_internal.h"
#include "../builder/builder_internal.h"

#define MAX_IO 16

static nb_status check_fn(const nb_function *f, const char *what)
{
    if (!f || !f->fn || f->n_in < 1 || f->n_out < 1 || f->n_in > MAX_IO || f->n_out > MAX_IO)
        return nb_error(NB_ERR_ARG, "%s: needs a function of 1..%d inputs and 1..%d outputs", what, MAX_IO, MAX_IO);
    return NB_OK;
}

/* An input to differentiate with respect to: the tensor itself when it
 * already takes part in a tape (an enclosing transform's), else a leaf view
 * of it that requires grad, with the tangents t has in b (when an enclosing
 * nb_jvp differentiates this transform: forward over reverse). */
static nb_status differentiable(nb_builder *b, nb_tensor *t, nb_tensor **out)
{
    if (!t) return nb_error(NB_ERR_ARG, "transform: a primal is NULL");
    if (nb_tensor_requires_grad(t)) {
        *out = nb_tensor_retain(t);
        return NB_OK;
    }
    nb_status st = nb_tensor_detach(out, t);
    if (!st && nb_dtype_is_float(t->dtype)) st = nb_tensor_set_requires_grad(*out, true);
    if (!st) st = nb_eager_alias_tangent(b, t, *out);
    return st;
}

/* Runs f on `inputs` in builder b; outputs[i] get new references. */
static nb_status call(const nb_function *f, nb_builder *b, nb_tensor *const *inputs, nb_tensor **outputs)
{
    nb_value in[MAX_IO], out[MAX_IO];
    for (int i = 0; i < f->n_in; i++) in[i] = nb_eager_value(b, inputs[i]);
    for (int i = 0; i < f->n_out; i++) out[i] = NB_NONE;
    nb_status st = nb_builder_status(b);
    if (!st) st = f->fn(b, in, out, f->ctx);
    if (!st) st = nb_builder_status(b);
    if (st && nb_builder_status(b)) nb_error(st, "%s", nb_builder_error(b));
    for (int i = 0; i < f->n_out && !st; i++)
        if (nb_is_none(out[i])) st = nb_error(NB_ERR_ARG, "transform: the function left output %d unset", i);
    for (int i = 0; i < f->n_out; i++) outputs[i] = st ? NULL : nb_tensor_retain(nb_eager_tensor(out[i]));
    return st;
}

static nb_status zeros_like(const nb_tensor *t, nb_tensor **out)
{
    return nb_tensor_new(out, t->dtype, t->ndim, t->shape);
}

static void release_n(nb_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) {
        nb_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}

/* ---- reverse mode ----------------------------------------------------------- */

struct nb_pullback {
    nb_builder *b;
    int n_in, n_out;
    nb_tensor *inputs[MAX_IO], *outputs[MAX_IO];
};

nb_status nb_vjp(const nb_function *f, nb_tensor *const *primals, nb_tensor **outputs, nb_pullback **out)
{
    *out = NULL;
    nb_status st = check_fn(f, "vjp");
    if (st) return st;
    nb_pullback *pb = nb_calloc(1, sizeof *pb);
    if (!pb) return nb_error(NB_ERR_NOMEM, "vjp: out of memory");
    pb->n_in = f->n_in;
    pb->n_out = f->n_out;
    st = nb_builder_new_eager(&pb->b);
    for (int i = 0; i < f->n_in && !st; i++) st = differentiable(pb->b, primals[i], &pb->inputs[i]);
    if (!st) st = call(f, pb->b, pb->inputs, pb->outputs);
    if (st) {
        nb_pullback_free(pb);
        return st;
    }
    for (int i = 0; i < f->n_out; i++) outputs[i] = nb_tensor_retain(pb->outputs[i]);
    *out = pb;
    return NB_OK;
}

nb_status nb_pullback_apply(nb_pullback *pb, nb_tensor *const *cotangents, nb_tensor **grads)
{
    nb_tensor *outs[MAX_IO], *cots[MAX_IO], *ins[MAX_IO];
    int n = 0, m = 0, where[MAX_IO];
    for (int i = 0; i < pb->n_out; i++)
        if (nb_tensor_requires_grad(pb->outputs[i]) && cotangents[i]) {
            outs[n] = pb->outputs[i];
            cots[n++] = cotangents[i];
        }
    for (int i = 0; i < pb->n_in; i++) {
        grads[i] = NULL;
        if (nb_tensor_requires_grad(pb->inputs[i])) {
            where[m] = i;
            ins[m++] = pb->inputs[i];
        }
    }
    if (n == 0 || m == 0) return NB_OK; /* nothing depends on anything: zero */
    nb_tensor *got[MAX_IO] = {0};
    nb_status st = nb_autograd_grad(NB_TENSORS_N(n, outs), cots, NB_TENSORS_N(m, ins),
                                    NB_RETAIN_GRAPH | NB_CREATE_GRAPH | NB_ALLOW_UNUSED, got);
    for (int j = 0; j < m && !st; j++) grads[where[j]] = got[j];
    return st;
}

void nb_pullback_free(nb_pullback *pb)
{
    if (!pb) return;
    release_n(pb->inputs, pb->n_in);
    release_n(pb->outputs, pb->n_out);
    nb_builder_free(pb->b);
    nb_free(pb);
}

/* nb_value_and_grad, with errors named after `who` (the call the user
 * made). */
static nb_status value_and_grad(const char *who, const nb_function *f, nb_tensor *const *primals,
                                const nb_grad_opts *opts, nb_tensor **outputs, nb_tensor **grads)
{
    static const nb_grad_opts defaults;
    if (!opts) opts = &defaults;
    int n_argnums = opts->n_argnums, n_free = opts->free_vars.n;
    const int *argnums = opts->argnums;
    nb_tensor *const *free_vars = opts->free_vars.v;
    nb_tensor **free_grads = opts->free_grads;
    nb_status st = check_fn(f, who);
    if (st) return st;
    int args[MAX_IO], n_args = n_argnums ? n_argnums : f->n_in;
    if (n_args > MAX_IO || n_free < 0 || n_free > MAX_IO || (n_argnums && !argnums) ||
        (n_free && (!free_vars || !free_grads)))
        return nb_error(NB_ERR_ARG, "%s: too many argnums or free vars, or a NULL list", who);
    for (int i = 0; i < n_args; i++) {
        args[i] = n_argnums ? argnums[i] : i;
        if (args[i] < 0 || args[i] >= f->n_in)
            return nb_error(NB_ERR_ARG, "%s: argnum %d is not an input of a %d-input function", who, args[i], f->n_in);
    }
    for (int i = 0; i < n_free; i++)
        if (!free_vars[i] || !nb_tensor_requires_grad(free_vars[i]))
            return nb_error(NB_ERR_ARG, "%s: free variable %d does not require grad", who, i);
    nb_pullback *pb;
    if ((st = nb_vjp(f, primals, outputs, &pb))) return st;
    nb_tensor *y = pb->outputs[0];
    if (nb_tensor_numel(y) != 1) {
        char s[NB_SHAPE_STR_MAX];
        st = nb_error(NB_ERR_SHAPE, "%s: the function's first output has shape %s; it must be a scalar", who,
                      nb_shape_str(s, sizeof s, y->ndim, y->shape));
    }
    nb_tensor *wrt[2 * MAX_IO], *got[2 * MAX_IO] = {0};
    int n = 0;
    for (int i = 0; i < n_args; i++) wrt[n++] = pb->inputs[args[i]];
    for (int i = 0; i < n_free; i++) wrt[n++] = free_vars[i];
    if (!st && nb_tensor_requires_grad(y))
        st = nb_autograd_grad(NB_TENSORS_N(1, &y), NULL, NB_TENSORS_N(n, wrt),
                              NB_RETAIN_GRAPH | NB_CREATE_GRAPH | NB_ALLOW_UNUSED, got);
    /* An input the output does not depend on gets a zero gradient. */
    for (int i = 0; i < n && !st; i++)
        if (!got[i] && nb_dtype_is_float(wrt[i]->dtype)) st = zeros_like(wrt[i], &got[i]);
    for (int i = 0; i < n_args; i++) grads[i] = st ? NULL : got[i];
    for (int i = 0; i < n_free; i++) free_grads[i] = st ? NULL : got[n_args + i];
    if (st) {
        release_n(got, n);
        release_n(outputs, f->n_out);
    }
    nb_pullback_free(pb);
    return st;
}

nb_status nb_value_and_grad(const nb_function *f, nb_tensor *const *primals, const nb_grad_opts *opts,
                            nb_tensor **outputs, nb_tensor **grads)
{
    return value_and_grad("value_and_grad", f, primals, opts, outputs, grads);
}

nb_status nb_grad(const nb_function *f, nb_tensor *const *primals, const nb_grad_opts *opts, nb_tensor **grads,
                  nb_tensor **aux)
{
    bool has_aux = opts && (opts->flags & NB_HAS_AUX);
    nb_status st = check_fn(f, "grad");
    if (st) return st;
    if (!has_aux && f->n_out > 1)
        return nb_error(NB_ERR_ARG, "grad: the function has %d outputs; pass NB_HAS_AUX to get all but the first back",
                        f->n_out);
    if (has_aux && f->n_out < 2)
        return nb_error(NB_ERR_ARG,
                        "grad: NB_HAS_AUX needs a function of 2 or more outputs (the value, then the "
                        "auxiliary ones); it has %d",
                        f->n_out);
    nb_tensor *outputs[MAX_IO] = {0};
    nb_grad_opts plain = {.n_argnums = opts ? opts->n_argnums : 0, .argnums = opts ? opts->argnums : NULL};
    if ((st = value_and_grad("grad", f, primals, &plain, outputs, grads))) return st;
    nb_tensor_release(outputs[0]);
    for (int i = 1; i < f->n_out; i++) aux[i - 1] = outputs[i];
    return NB_OK;
}

/* ---- forward mode ------------------------------------------------------------ */

/* Runs f once in a new builder *b carrying n sets of tangents, set k giving
 * input i the tangent tangents[k * n_in + i] (NULL: zero); the output
 * tangents are then read from *b (which the caller frees). The builder is
 * pushed while f runs: the transforms f calls make builders of their own,
 * and run the backward engine, and those carry the tangents too. */
static nb_status forward(const nb_function *f, nb_tensor *const *primals, int n, nb_tensor *const *tangents,
                         nb_builder **b, nb_tensor **outputs)
{
    for (int i = 0; i < f->n_out; i++) outputs[i] = NULL;
    nb_status st = nb_builder_new_eager(b);
    if (st) return st;
    st = nb_eager_forward_mode_sets(*b, n);
    for (int k = 0; k < n && !st; k++)
        for (int i = 0; i < f->n_in && !st; i++)
            if (tangents[k * f->n_in + i]) st = nb_eager_set_tangent_in(*b, k, primals[i], tangents[k * f->n_in + i]);
    if (!st && !(st = nb_eager_forward_push(*b))) {
        st = call(f, *b, primals, outputs);
        nb_eager_forward_pop();
    }
    return st;
}

nb_status nb_jvp(const nb_function *f, nb_tensor *const *primals, nb_tensor *const *tangents, nb_tensor **outputs,
                 nb_tensor **out_tangents)
{
    nb_status st = check_fn(f, "jvp");
    if (st) return st;
    for (int i = 0; i < f->n_out; i++) out_tangents[i] = NULL;
    nb_builder *b = NULL;
    st = forward(f, primals, 1, tangents, &b, outputs);
    for (int i = 0; i < f->n_out && !st; i++) {
        nb_tensor *t = nb_eager_tangent(b, nb_value_make(outputs[i], NB_VALUE_TENSOR));
        if (t) out_tangents[i] = nb_tensor_retain(t);
        else st = zeros_like(outputs[i], &out_tangents[i]); /* known to be zero */
    }
    if (st) {
        release_n(outputs, f->n_out);
        release_n(out_tangents, f->n_out);
    }
    nb_builder_free(b);
    return st;
}

nb_status nb_jvp_by_reverse(const nb_function *f, nb_tensor *const *primals, nb_tensor *const *tangents,
                            nb_tensor **outputs, nb_tensor **out_tangents)
{
    nb_pullback *pb;
    nb_status st = nb_vjp(f, primals, outputs, &pb);
    if (st) return st;
    nb_builder *b = NULL;
    nb_tensor *u[MAX_IO] = {0}, *g[MAX_IO] = {0};
    for (int i = 0; i < f->n_out; i++) out_tangents[i] = NULL;
    /* The pullback at a cotangent u that itself requires grad... */
    for (int i = 0; i < f->n_out && !st; i++)
        if (!(st = zeros_like(outputs[i], &u[i])) && nb_dtype_is_float(u[i]->dtype))
            st = nb_tensor_set_requires_grad(u[i], true);
    if (!st) st = nb_pullback_apply(pb, u, g);
    /* ... then <VJP(u), t>, differentiated with respect to u, is J t. */
    if (!st) st = nb_builder_new_eager(&b);
    nb_value terms[MAX_IO];
    int m = 0;
    for (int i = 0; i < f->n_in && !st; i++)
        if (g[i] && tangents[i])
            terms[m++] =
                nb_reduce_sum(b, nb_mul(b, nb_eager_value(b, g[i]), nb_eager_value(b, tangents[i])), 0, NULL, false);
    if (!st && m > 0) {
        nb_value s = m == 1 ? terms[0] : nb_sum(b, m, terms);
        nb_tensor *st_t = nb_eager_tensor(s);
        if (!(st = nb_builder_status(b)) && nb_tensor_requires_grad(st_t)) {
            nb_tensor *us[MAX_IO];
            int idx[MAX_IO], k = 0;
            for (int i = 0; i < f->n_out; i++)
                if (nb_tensor_requires_grad(u[i])) idx[k] = i, us[k++] = u[i];
            nb_tensor *jt[MAX_IO] = {0};
            st = nb_autograd_grad(NB_TENSORS_N(1, &st_t), NULL, NB_TENSORS_N(k, us),
                                  NB_RETAIN_GRAPH | NB_CREATE_GRAPH | NB_ALLOW_UNUSED, jt);
            for (int j = 0; j < k; j++) out_tangents[idx[j]] = jt[j];
        }
    }
    for (int i = 0; i < f->n_out && !st; i++)
        if (!out_tangents[i]) st = zeros_like(outputs[i], &out_tangents[i]);
    if (st) {
        release_n(outputs, f->n_out);
        release_n(out_tangents, f->n_out);
    }
    release_n(u, f->n_out);
    release_n(g, f->n_in);
    nb_builder_free(b);
    nb_pullback_free(pb);
    return st;
}

/* ---- Jacobians and Hessians --------------------------------------------------- */

/* A Jacobian's shape: the output's (o_ndim, o_shape), then the input's. */
static nb_status jac_dims(int o_ndim, const int64_t *o_shape, const nb_tensor *a, int64_t shape[NB_MAX_DIMS])
{
    if (o_ndim + a->ndim > NB_MAX_DIMS)
        return nb_error(NB_ERR_SHAPE, "jacobian: %d + %d dimensions is too many", o_ndim, a->ndim);
    memcpy(shape, o_shape, (size_t)o_ndim * sizeof *shape);
    memcpy(shape + o_ndim, a->shape, (size_t)a->ndim * sizeof *shape);
    return NB_OK;
}

static nb_status jac_shape(const nb_tensor *o, const nb_tensor *a, nb_tensor **jac)
{
    int64_t shape[NB_MAX_DIMS];
    nb_status st = jac_dims(o->ndim, o->shape, a, shape);
    return st ? st : nb_tensor_new(jac, o->dtype, o->ndim + a->ndim, shape);
}

/* jac[e * stride + at] = src[e] for each element e of src: a row of a
 * Jacobian (stride 1) or a column. On the data itself when both are
 * contiguous and of one float dtype: a Hessian has n^2 elements. A batched
 * (vmap) src holds no data to read: the batched paths are for those. */
static nb_status scatter(nb_tensor *jac, int64_t at, int64_t stride, const nb_tensor *src, const char *who)
{
    if (!src->storage)
        return nb_error(NB_ERR_ARG, "%s: a row or column is a batched (vmap) value; this path reads data", who);
    int64_t n = nb_tensor_numel(src);
    bool direct = src->dtype == jac->dtype && nb_tensor_is_contiguous(src) && nb_tensor_is_contiguous(jac);
    if (direct && jac->dtype == NB_F32) {
        float *d = nb_tensor_data(jac);
        const float *v = nb_tensor_data(src);
        for (int64_t e = 0; e < n; e++) d[e * stride + at] = v[e];
    } else if (direct && jac->dtype == NB_F64) {
        double *d = nb_tensor_data(jac);
        const double *v = nb_tensor_data(src);
        for (int64_t e = 0; e < n; e++) d[e * stride + at] = v[e];
    } else {
        for (int64_t e = 0; e < n; e++) nb_tensor_set(jac, e * stride + at, nb_tensor_get(src, e));
    }
    return NB_OK;
}

static nb_status check_indices(const nb_function *f, int out, int arg, const char *what)
{
    nb_status st = check_fn(f, what);
    if (!st && (out < 0 || out >= f->n_out || arg < 0 || arg >= f->n_in))
        st = nb_error(NB_ERR_ARG, "%s: output %d or input %d out of range", what, out, arg);
    return st;
}

nb_status nb_jacrev_by_rows(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac)
{
    *jac = NULL;
    nb_status st = check_indices(f, out, arg, "jacrev");
    if (st) return st;
    nb_tensor *outputs[MAX_IO] = {0}, *cot[MAX_IO] = {0}, *g[MAX_IO] = {0};
    nb_pullback *pb;
    if ((st = nb_vjp(f, primals, outputs, &pb))) return st;
    nb_tensor *o = outputs[out], *a = pb->inputs[arg];
    int64_t n_o = nb_tensor_numel(o), n_a = nb_tensor_numel(a);
    if (!(st = jac_shape(o, a, jac))) st = zeros_like(o, &cot[out]);
    /* One pullback per output element: a row of the Jacobian. */
    for (int64_t e = 0; e < n_o && !st; e++) {
        nb_tensor_set(cot[out], e, 1);
        if (e > 0) nb_tensor_set(cot[out], e - 1, 0);
        if ((st = nb_pullback_apply(pb, cot, g))) break;
        if (g[arg]) st = scatter(*jac, e * n_a, 1, g[arg], "jacrev");
        release_n(g, f->n_in);
    }
    if (st) {
        nb_tensor_release(*jac);
        *jac = NULL;
    }
    release_n(cot, f->n_out);
    release_n(outputs, f->n_out);
    nb_pullback_free(pb);
    return st;
}

/* Columns of the Jacobian per forward pass. The sets of a pass share its
 * primal computation (for a Hessian, the forward and the backward); each
 * holds a basis tangent and a tangent of every value, so a pass stays
 * within about a million elements of basis tangents, and within 32 sets:
 * on the 874-parameter Hessian of bench_transforms 32 took 70 ms of CPU,
 * 64 took 81-85 (the tangents of a pass outgrow the caches), 8 took 76. */
static int64_t columns_per_pass(int64_t n_a)
{
    int64_t k = ((int64_t)1 << 20) / (n_a > 0 ? n_a : 1);
    return k < 1 ? 1 : k > 32 ? 32 : k;
}

/* Columns first .. first + m - 1 of the Jacobian (made by the first pass). */
static nb_status jacfwd_pass(const nb_function *f, nb_tensor *const *primals, int out, int arg, int64_t first, int m,
                             nb_tensor **jac)
{
    const nb_tensor *a = primals[arg];
    int64_t n_a = nb_tensor_numel(a);
    nb_tensor **tangents = nb_calloc((size_t)m * (size_t)f->n_in, sizeof *tangents), *outputs[MAX_IO] = {0};
    nb_status st = tangents ? NB_OK : nb_error(NB_ERR_NOMEM, "jacfwd: out of memory");
    for (int k = 0; k < m && !st; k++) {
        nb_tensor **e = &tangents[k * f->n_in + arg];
        if (!(st = zeros_like(a, e))) nb_tensor_set(*e, first + k, 1);
    }
    nb_builder *b = NULL;
    if (!st) st = forward(f, primals, m, tangents, &b, outputs);
    if (!st && !*jac) st = jac_shape(outputs[out], a, jac);
    for (int k = 0; k < m && !st; k++) {
        nb_tensor *t = nb_eager_tangent_in(b, k, nb_value_make(outputs[out], NB_VALUE_TENSOR));
        if (t) st = scatter(*jac, first + k, n_a, t, "jacfwd");
    }
    release_n(outputs, f->n_out);
    for (int k = 0; tangents && k < m; k++) nb_tensor_release(tangents[k * f->n_in + arg]);
    nb_free(tangents);
    nb_builder_free(b);
    return st;
}

/* The Jacobian with respect to an empty input: no columns to compute, but
 * f runs once for the shape of its output. */
static nb_status empty_jacobian(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac)
{
    nb_tensor *outputs[MAX_IO] = {0};
    nb_builder *b = NULL;
    nb_status st = nb_builder_new_eager(&b);
    if (!st) st = call(f, b, primals, outputs);
    if (!st) st = jac_shape(outputs[out], primals[arg], jac);
    release_n(outputs, f->n_out);
    nb_builder_free(b);
    return st;
}

nb_status nb_jacfwd_by_sets(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac)
{
    *jac = NULL;
    nb_status st = check_indices(f, out, arg, "jacfwd");
    if (!st && !primals[arg]) st = nb_error(NB_ERR_ARG, "jacfwd: input %d is NULL", arg);
    if (st) return st;
    int64_t n_a = nb_tensor_numel(primals[arg]), per = columns_per_pass(n_a);
    if (n_a == 0) return empty_jacobian(f, primals, out, arg, jac);
    /* Columns of the Jacobian by forward passes, up to 32 at a time. */
    for (int64_t first = 0; first < n_a && !st; first += per)
        st = jacfwd_pass(f, primals, out, arg, first, (int)(n_a - first < per ? n_a - first : per), jac);
    if (st) {
        nb_tensor_release(*jac);
        *jac = NULL;
    }
    return st;
}

/* ---- Jacobians through vmap: every column (or row) in one batched pass ---- */

/* The identity of n_a columns, each shaped as `a`: [n_a, a.shape...]. */
static nb_status basis(const nb_tensor *a, int64_t n, nb_tensor **out)
{
    int64_t shape[NB_MAX_DIMS + 1];
    if (a->ndim + 1 > NB_MAX_DIMS) return nb_error(NB_ERR_SHAPE, "jacobian: input of %d dims is too many", a->ndim);
    shape[0] = n;
    memcpy(shape + 1, a->shape, (size_t)a->ndim * sizeof *shape);
    nb_status st = nb_tensor_new(out, a->dtype, a->ndim + 1, shape);
    for (int64_t k = 0; k < n && !st; k++) nb_tensor_set(*out, k * n + k, 1);
    return st;
}

typedef struct jac_ctx {
    const nb_function *f;
    nb_tensor *const *primals;
    nb_pullback *pb;
    int out, arg;
} jac_ctx;

/* One column: the JVP of f along the (logical) basis tangent in[0]. */
static nb_status jvp_column(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const jac_ctx *c = ctx;
    nb_tensor *tangents[MAX_IO] = {0}, *outputs[MAX_IO] = {0}, *ot[MAX_IO] = {0};
    tangents[c->arg] = nb_eager_tensor(in[0]);
    nb_status st = nb_jvp(c->f, c->primals, tangents, outputs, ot);
    if (!st) out[0] = nb_eager_value(b, ot[c->out]);
    release_n(outputs, c->f->n_out);
    release_n(ot, c->f->n_out);
    return st ? st : nb_builder_status(b);
}

/* One row: the pullback of the (logical) basis cotangent in[0]. */
static nb_status vjp_row(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const jac_ctx *c = ctx;
    nb_tensor *cot[MAX_IO] = {0}, *g[MAX_IO] = {0};
    cot[c->out] = nb_eager_tensor(in[0]);
    nb_status st = nb_pullback_apply(c->pb, cot, g);
    if (!st && !g[c->arg]) st = zeros_like(c->pb->inputs[c->arg], &g[c->arg]);
    if (!st) out[0] = nb_eager_value(b, g[c->arg]);
    release_n(g, c->f->n_in);
    return st ? st : nb_builder_status(b);
}

/* The Jacobian from its rows (or columns, batched last) `cols`, whose
 * elements are already in order: reshaped to out.shape + arg.shape by an
 * op, not a copy of the data, since inside an enclosing vmap `cols` is a
 * batched value that holds none (and the op keeps the Jacobian
 * differentiable). */
static nb_status jac_from(nb_tensor *cols, int o_ndim, const int64_t *o_shape, const nb_tensor *a, nb_tensor **jac)
{
    int64_t shape[NB_MAX_DIMS];
    nb_status st = jac_dims(o_ndim, o_shape, a, shape);
    if (st) return st;
    /* Nothing to move, and the reshape op would read a 0 in the shape as
     * "keep this dim". */
    if (nb_shape_numel(o_ndim + a->ndim, shape) == 0) return nb_tensor_new(jac, cols->dtype, o_ndim + a->ndim, shape);
    nb_builder *b;
    if ((st = nb_builder_new_eager(&b))) return st;
    nb_value j = nb_reshape(b, nb_eager_value(b, cols), o_ndim + a->ndim, shape);
    if (!(st = nb_builder_status(b))) *jac = nb_tensor_retain(nb_eager_tensor(j));
    else nb_error(st, "%s", nb_builder_error(b));
    nb_builder_free(b);
    return st;
}

/* Columns per batched pass: all of them, unless the basis would pass a
 * million elements. */
static int64_t chunk_for(int64_t n)
{
    int64_t k = ((int64_t)1 << 20) / (n > 0 ? n : 1);
    return k >= n ? 0 : k < 1 ? 1 : k;
}

nb_status nb_jacfwd(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac)
{
    *jac = NULL;
    nb_status st = check_indices(f, out, arg, "jacfwd");
    if (!st && !primals[arg]) st = nb_error(NB_ERR_ARG, "jacfwd: input %d is NULL", arg);
    if (st) return st;
    const nb_tensor *a = primals[arg];
    int64_t n_a = nb_tensor_numel(a);
    if (n_a == 0 || !nb_dtype_is_float(a->dtype)) return nb_jacfwd_by_sets(f, primals, out, arg, jac);
    jac_ctx c = {.f = f, .primals = primals, .out = out, .arg = arg};
    nb_function col = {jvp_column, 1, 1, &c};
    nb_tensor *e = NULL, *cols = NULL;
    if (!(st = basis(a, n_a, &e)))
        st = nb_vmap(&col, &(nb_vmap_opts){.out_axes = (int[]){-1}, .chunk_size = chunk_for(n_a)}, &e, &cols);
    /* The output's shape is that of a column without its batch dim. */
    if (!st) st = jac_from(cols, cols->ndim - 1, cols->shape, a, jac);
    nb_tensor_release(e);
    nb_tensor_release(cols);
    return st;
}

nb_status nb_jacrev(const nb_function *f, nb_tensor *const *primals, int out, int arg, nb_tensor **jac)
{
    *jac = NULL;
    nb_status st = check_indices(f, out, arg, "jacrev");
    if (st) return st;
    nb_tensor *outputs[MAX_IO] = {0}, *e = NULL, *rows = NULL;
    nb_pullback *pb;
    if ((st = nb_vjp(f, primals, outputs, &pb))) return st;
    nb_tensor *o = outputs[out], *a = pb->inputs[arg];
    int64_t n_o = nb_tensor_numel(o);
    if (n_o == 0 || !nb_dtype_is_float(o->dtype) || !nb_tensor_requires_grad(o)) {
        release_n(outputs, f->n_out);
        nb_pullback_free(pb);
        return nb_jacrev_by_rows(f, primals, out, arg, jac);
    }
    jac_ctx c = {.f = f, .primals = primals, .pb = pb, .out = out, .arg = arg};
    nb_function row = {vjp_row, 1, 1, &c};
    if (!(st = basis(o, n_o, &e))) st = nb_vmap(&row, &(nb_vmap_opts){.chunk_size = chunk_for(n_o)}, &e, &rows);
    if (!st) st = jac_from(rows, o->ndim, o->shape, a, jac);
    nb_tensor_release(e);
    nb_tensor_release(rows);
    release_n(outputs, f->n_out);
    nb_pullback_free(pb);
    return st;
}

/* The gradient of f's first output with respect to input `arg`, as a
 * function: the Hessian is its Jacobian, a Hessian-vector product its JVP
 * (forward over reverse) or, the Hessian being symmetric, its VJP (reverse
 * over reverse). */
typedef struct grad_ctx {
    const nb_function *f;
    int arg;
} grad_ctx;

static nb_status grad_fn(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    const grad_ctx *c = ctx;
    nb_tensor *primals[MAX_IO], *outputs[MAX_IO] = {0}, *g = NULL;
    for (int i = 0; i < c->f->n_in; i++) primals[i] = nb_eager_tensor(in[i]);
    nb_status st = nb_value_and_grad(c->f, primals, &(nb_grad_opts){.n_argnums = 1, .argnums = &c->arg}, outputs, &g);
    release_n(outputs, c->f->n_out);
    if (st) return st;
    out[0] = nb_eager_value(b, g);
    nb_tensor_release(g);
    return nb_builder_status(b);
}

nb_status nb_hessian(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor **hess)
{
    *hess = NULL;
    nb_status st = check_indices(f, 0, arg, "hessian");
    if (st) return st;
    grad_ctx c = {f, arg};
    nb_function gf = {grad_fn, f->n_in, 1, &c};
    return nb_jacfwd(&gf, primals, 0, arg, hess);
}

nb_status nb_hessian_by_reverse(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor **hess)
{
    *hess = NULL;
    nb_status st = check_indices(f, 0, arg, "hessian_by_reverse");
    if (st) return st;
    grad_ctx c = {f, arg};
    nb_function gf = {grad_fn, f->n_in, 1, &c};
    return nb_jacrev(&gf, primals, 0, arg, hess);
}

static nb_status check_vector(nb_tensor *const *primals, int arg, const nb_tensor *v, const char *what)
{
    const nb_tensor *x = primals[arg];
    if (!x || !v) return nb_error(NB_ERR_ARG, "%s: input %d or the vector is NULL", what, arg);
    if (nb_shape_equal(x->ndim, x->shape, v->ndim, v->shape) && x->dtype == v->dtype) return NB_OK;
    char a[NB_SHAPE_STR_MAX], b[NB_SHAPE_STR_MAX];
    return nb_error(NB_ERR_SHAPE, "%s: the vector is %s %s but input %d is %s %s", what, nb_dtype_name(v->dtype),
                    nb_shape_str(a, sizeof a, v->ndim, v->shape), arg, nb_dtype_name(x->dtype),
                    nb_shape_str(b, sizeof b, x->ndim, x->shape));
}

nb_status nb_hvp(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor *v, nb_tensor **hv)
{
    *hv = NULL;
    nb_status st = check_indices(f, 0, arg, "hvp");
    if (!st) st = check_vector(primals, arg, v, "hvp");
    if (st) return st;
    grad_ctx c = {f, arg};
    nb_function gf = {grad_fn, f->n_in, 1, &c};
    nb_tensor *tangents[MAX_IO] = {0}, *g = NULL;
    tangents[arg] = v;
    /* The tangent of the gradient along v. */
    st = nb_jvp(&gf, primals, tangents, &g, hv);
    nb_tensor_release(g);
    return st;
}

nb_status nb_hvp_by_reverse(const nb_function *f, nb_tensor *const *primals, int arg, nb_tensor *v, nb_tensor **hv)
{
    *hv = NULL;
    nb_status st = check_indices(f, 0, arg, "hvp_by_reverse");
    if (!st) st = check_vector(primals, arg, v, "hvp_by_reverse");
    if (st) return st;
    grad_ctx c = {f, arg};
    nb_function gf = {grad_fn, f->n_in, 1, &c};
    nb_tensor *outputs[1] = {0}, *cot[1] = {v}, *g[MAX_IO] = {0};
    nb_pullback *pb;
    if ((st = nb_vjp(&gf, primals, outputs, &pb))) return st;
    /* The Hessian is symmetric, so the pullback of v through the gradient is H v. */
    st = nb_pullback_apply(pb, cot, g);
    if (!st) {
        *hv = g[arg];
        g[arg] = NULL;
        if (!*hv) st = zeros_like(primals[arg], hv);
    }
    release_n(g, f->n_in);
    release_n(outputs, 1);
    nb_pullback_free(pb);
    return st;
}
