/* Initialised vars through a builder (nb_param, nb_persistable_var) and the
 * naming and checking helpers every layer uses. A record builder gets vars
 * initialised by ops in the startup program; an eager one gets tensors made
 * at once by the same ops, kept in the builder by name. */
#include <math.h>
#include <string.h>
#include "layer_internal.h"
#include "nabla/eager.h"
#include "../ops/op_internal.h"
#include "../builder/builder_internal.h"
#include "../program/record.h"

/* The attrs of a draw's op; shape and dtype are added by the caller. Seed
 * 0 leaves the stream to the program's seed. */
static int draw_attrs(const nb_init_draw *d, nb_attr *a)
{
    switch (d->kind) {
    case NB_DRAW_FILL: a[0] = NB_ATTR_FLOAT("value", d->p0); return 1;
    case NB_DRAW_UNIFORM:
        a[0] = NB_ATTR_FLOAT("min", d->p0);
        a[1] = NB_ATTR_FLOAT("max", d->p1);
        break;
    case NB_DRAW_NORMAL:
    case NB_DRAW_TRUNCATED_NORMAL:
        a[0] = NB_ATTR_FLOAT("mean", d->p0);
        a[1] = NB_ATTR_FLOAT("std", d->p1);
        break;
    }
    a[2] = NB_ATTR_INT("seed", 0);
    return 3;
}

/* Checks what nb_param and nb_persistable_var need and resolves the draw,
 * before anything is created, so a failure leaves the program as it was. */
static bool prepare(nb_builder *b, const char *what, const char *name, nb_dtype dtype, int ndim,
                    const int64_t *shape, nb_init init, nb_init_draw *d)
{
    if (!b || nb_builder_status(b)) return false;
    if (!nb_dtype_valid((int)dtype) || ndim < 0 || ndim > NB_MAX_DIMS || (ndim > 0 && !shape)) {
        nb_builder_fail(b, NB_ERR_ARG, "%s %s: bad dtype %d or shape (ndim %d)", what, name ? name : "", (int)dtype,
                        ndim);
        return false;
    }
    nb_status st = nb_init_resolve(init, ndim, shape, d);
    if (st) {
        nb_builder_fail(b, st, "%s %s: %s", what, name ? name : "", nb_last_error());
        return false;
    }
    if (d->kind != NB_DRAW_FILL && !nb_dtype_is_float(dtype)) {
        nb_builder_fail(b, NB_ERR_DTYPE, "%s %s: %s initialisation draws random values, which need float32 or "
                                         "float64, not %s",
                        what, name ? name : "", nb_init_kind_name(init.kind), nb_dtype_name(dtype));
        return false;
    }
    return true;
}

/* The eager form of both: the builder's tensor of that name if it exists
 * (it must agree in dtype, shape and kind), else a new one drawn now from
 * the builder's generator by the draw's op, stored under the name. State
 * shares the parameters' store with requires_grad off, as torch's buffers
 * sit beside the parameters in a state dict. */
/* The builder's tensor `name`, checked against what is asked; NULL (with
 * *failed false) when there is none. */
static nb_tensor *eager_existing(nb_builder *b, const char *what, const char *name, nb_dtype dtype, int ndim,
                                 const int64_t *shape, bool trainable, bool *failed)
{
    char want[NB_SHAPE_STR_MAX], have[NB_SHAPE_STR_MAX];
    nb_tensor *t = nb_eager_find_param(b, name);
    *failed = false;
    if (t) {
        if (t->dtype != dtype || !nb_shape_equal(t->ndim, t->shape, ndim, shape) ||
            nb_tensor_requires_grad(t) != trainable) {
            nb_builder_fail(b, NB_ERR_ARG,
                            "%s %s: the builder already holds a %s %s %s of that name; asked for a %s %s %s (two "
                            "layers given one name?)",
                            what, name, nb_dtype_name(t->dtype), nb_shape_str(have, sizeof have, t->ndim, t->shape),
                            nb_tensor_requires_grad(t) ? "parameter" : "state var", nb_dtype_name(dtype),
                            nb_shape_str(want, sizeof want, ndim, shape), trainable ? "parameter" : "state var");
            *failed = true;
            return NULL;
        }
    }
    return t;
}

/* Stores `made` (a new tensor, released here) as the builder's `name`. */
static nb_value eager_store(nb_builder *b, const char *what, const char *name, nb_status st, nb_tensor *made,
                            bool trainable)
{
    if (!st) st = nb_eager_add_param(b, name, made);
    if (!st && !trainable && nb_dtype_is_float(made->dtype)) st = nb_tensor_set_requires_grad(made, false);
    if (st) {
        nb_tensor_release(made);
        nb_builder_fail(b, st, "%s %s: %s", what, name, nb_last_error());
        return NB_NONE;
    }
    nb_value v = nb_eager_value(b, made);
    nb_tensor_release(made); /* the store holds it */
    return v;
}

static nb_value eager_var(nb_builder *b, const char *what, const char *name, nb_dtype dtype, int ndim,
                          const int64_t *shape, const nb_init_draw *d, bool trainable)
{
    char want[NB_SHAPE_STR_MAX];
    bool failed;
    nb_tensor *t = eager_existing(b, what, name, dtype, ndim, shape, trainable, &failed);
    if (failed) return NB_NONE;
    if (t) return nb_eager_value(b, t);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            nb_builder_fail(b, NB_ERR_SHAPE, "%s %s: shape %s has an unknown dimension; eager tensors need sizes",
                            what, name, nb_shape_str(want, sizeof want, ndim, shape));
            return NB_NONE;
        }
    nb_attr attrs[5];
    int n = draw_attrs(d, attrs);
    attrs[n++] = NB_ATTR_INTS_N("shape", ndim, shape);
    attrs[n++] = NB_ATTR_INT("dtype", dtype);
    nb_tensor *out[1] = {NULL};
    nb_status st = nb_op_run_rng(nb_init_draw_op(d->kind), 0, NULL, n, attrs, 1, out, nb_eager_rng(b));
    return eager_store(b, what, name, st, out[0], trainable);
}

nb_value nb_param(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape, nb_init init)
{
    nb_init_draw d;
    if (!prepare(b, "parameter", name, dtype, ndim, shape, init, &d)) return NB_NONE;
    char fresh[NB_LAYER_NAME_MAX];
    if (!name) {
        if (!nb_layer_name(b, "param", NULL, fresh, sizeof fresh)) return NB_NONE;
        name = fresh;
    }
    if (nb_builder_is_eager(b)) return eager_var(b, "parameter", name, dtype, ndim, shape, &d, true);
    nb_attr attrs[3];
    int n = draw_attrs(&d, attrs);
    return nb_create_parameter(b, name, dtype, ndim, shape, nb_init_draw_op(d.kind), n, attrs);
}

/* Creates var `name` in the global block of `p` with the flags of state. */
static nb_status create_state(nb_program *p, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                              nb_var **out)
{
    nb_status st = nb_block_create_var(nb_program_global_block(p), name, dtype, ndim, shape, out);
    if (st) return st;
    (*out)->persistable = true;
    (*out)->stop_gradient = true;
    (*out)->is_parameter = (*out)->trainable = false;
    return NB_OK;
}

/* The record form of state: var `name` in main's global block, set once by
 * op `init_type` (with attrs, to which shape and dtype are added) in the
 * startup program (in main itself when there is none). */
static nb_value record_state(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                             const char *init_type, int n, const nb_attr *init_attrs)
{
    nb_program *main = nb_builder_program(b);
    nb_program *init_prog = nb_builder_startup(b) ? nb_builder_startup(b) : main;
    if (nb_block_find_var(nb_program_global_block(main), name) ||
        (init_prog != main && nb_block_find_var(nb_program_global_block(init_prog), name))) {
        nb_builder_fail(b, NB_ERR_ARG, "persistable var %s: a var of that name already exists", name);
        return NB_NONE;
    }
    nb_var *v, *iv = NULL;
    nb_status st = create_state(main, name, dtype, ndim, shape, &v);
    if (!st && init_prog != main) st = create_state(init_prog, name, dtype, ndim, shape, &iv);
    nb_attr attrs[8];
    memcpy(attrs, init_attrs, (size_t)n * sizeof *attrs);
    attrs[n++] = NB_ATTR_INTS_N("shape", ndim, shape);
    attrs[n++] = NB_ATTR_INT("dtype", dtype);
    nb_op *op = NULL;
    if (!st)
        st = nb_block_append_op(nb_program_global_block(init_prog), init_type, NB_NO_NAMES, NB_NAMES(name), NB_ATTRS_N(n, attrs), &op);
    if (st) {
        nb_builder_fail(b, st, "persistable var %s: %s", name, nb_last_error());
        return NB_NONE;
    }
    op->role = NB_ROLE_STARTUP;
    return nb_value_from_var(v);
}


nb_value nb_persistable_var(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                            nb_init init)
{
    nb_init_draw d;
    if (!prepare(b, "persistable var", name, dtype, ndim, shape, init, &d)) return NB_NONE;
    char fresh[NB_LAYER_NAME_MAX];
    if (!name) {
        if (!nb_layer_name(b, "persistable", NULL, fresh, sizeof fresh)) return NB_NONE;
        name = fresh;
    }
    if (nb_builder_is_eager(b)) return eager_var(b, "persistable var", name, dtype, ndim, shape, &d, false);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            nb_builder_fail(b, NB_ERR_SHAPE, "persistable var %s: dimension %d is %lld; state needs known sizes", name,
                            i, (long long)shape[i]);
            return NB_NONE;
        }
    nb_attr attrs[5];
    int n = draw_attrs(&d, attrs);
    return record_state(b, name, dtype, ndim, shape, nb_init_draw_op(d.kind), n, attrs);
}

/* nb_param_from and nb_persistable_from: as nb_param and nb_persistable_var,
 * set to a copy of `value` by an assign_value op rather than drawn. */
static nb_value var_from(nb_builder *b, const char *what, const char *name, const nb_tensor *value, bool trainable)
{
    if (!b || nb_builder_status(b)) return NB_NONE;
    if (!value || !name || !*name) {
        nb_builder_fail(b, NB_ERR_ARG, "%s %s: %s", what, name ? name : "", value ? "no name" : "the tensor is NULL");
        return NB_NONE;
    }
    if (nb_builder_is_eager(b)) {
        bool failed;
        nb_tensor *t = eager_existing(b, what, name, value->dtype, value->ndim, value->shape, trainable, &failed);
        if (failed) return NB_NONE;
        if (t) return nb_eager_value(b, t);
        nb_tensor *copy = NULL;
        nb_status st = nb_tensor_clone(&copy, value);
        return eager_store(b, what, name, st, copy, trainable);
    }
    void *vals;
    nb_attr values;
    nb_status st = nb_values_attr(value, &vals, &values);
    if (st) {
        nb_builder_fail(b, st, "%s %s: %s", what, name, nb_last_error());
        return NB_NONE;
    }
    nb_value v = trainable ? nb_create_parameter(b, name, value->dtype, value->ndim, value->shape, "assign_value", 1,
                                                 &values)
                           : record_state(b, name, value->dtype, value->ndim, value->shape, "assign_value", 1, &values);
    nb_free(vals);
    return v;
}

nb_value nb_param_from(nb_builder *b, const char *name, const nb_tensor *value)
{
    return var_from(b, "parameter", name, value, true);
}

nb_value nb_persistable_from(nb_builder *b, const char *name, const nb_tensor *value)
{
    return var_from(b, "persistable var", name, value, false);
}

/* ---- helpers of the layers ------------------------------------------------------- */

bool nb_layer_ok(nb_builder *b, const char *layer, int n, const nb_value *vals)
{
    if (!b || nb_builder_status(b)) return false;
    for (int i = 0; i < n; i++)
        if (nb_is_none(vals[i])) {
            nb_builder_fail(b, NB_ERR_ARG, "%s: input %d is NB_NONE", layer, i);
            return false;
        }
    return true;
}

bool nb_layer_name(nb_builder *b, const char *kind, const char *given, char *buf, size_t size)
{
    if (given && given[0]) {
        if (strlen(given) + 16 >= size) {
            nb_builder_fail(b, NB_ERR_ARG, "%s: name \"%.40s...\" is too long", kind, given);
            return false;
        }
        snprintf(buf, size, "%s", given);
        return true;
    }
    nb_status st = nb_builder_unique_name(b, kind, buf, size);
    if (st) nb_builder_fail(b, st, "%s: %s", kind, nb_last_error());
    return !st;
}

bool nb_layer_param_name(nb_builder *b, const char *layer, const char *suffix, char *buf, size_t size)
{
    char prefix[NB_LAYER_NAME_MAX];
    snprintf(prefix, sizeof prefix, "%s.%s", layer, suffix);
    return nb_layer_name(b, prefix, NULL, buf, size);
}

nb_init nb_layer_default_bias_init(int64_t fan_in)
{
    double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
    return nb_init_uniform(-bound, bound);
}

bool nb_dims_known(const nb_var_info *info, int from, int64_t *prod)
{
    int64_t p = 1;
    for (int i = from; i < info->ndim; i++) {
        if (info->shape[i] < 0) return false;
        p *= info->shape[i];
    }
    *prod = p;
    return true;
}

bool nb_layer_need_float(nb_builder *b, const char *layer, nb_value x, nb_var_info *info)
{
    *info = nb_value_info(b, x);
    if (nb_dtype_is_float(info->dtype)) return true;
    nb_builder_fail(b, NB_ERR_DTYPE, "%s: input %s is %s; it takes float32 or float64", layer,
                    nb_builder_is_eager(b) ? "" : nb_value_name(x), nb_dtype_name(info->dtype));
    return false;
}
