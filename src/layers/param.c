/* Initialised vars through a builder (nb_param, nb_persistable_var) and the
 * naming and checking helpers every layer uses. The builder's backend keeps
 * them (nb_builder_state): a program as vars set by ops of its startup
 * program, an eager builder as tensors made at once by the same ops. */
#include <math.h>
#include <string.h>
#include "layer_internal.h"
#include "../builder/builder_internal.h"
#include "../ops/op_internal.h"

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
static bool prepare(nb_builder *b, const char *what, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                    nb_init init, nb_init_draw *d)
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
        nb_builder_fail(b, NB_ERR_DTYPE,
                        "%s %s: %s initialisation draws random values, which need float32 or "
                        "float64, not %s",
                        what, name ? name : "", nb_init_kind_name(init.kind), nb_dtype_name(dtype));
        return false;
    }
    return true;
}

/* The spec of a var drawn as `d` says; attrs has room for the draw's. */
static nb_state_spec drawn(const char *what, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                           const nb_init_draw *d, bool trainable, nb_attr *attrs)
{
    return (nb_state_spec){.what = what,
                           .name = name,
                           .dtype = dtype,
                           .ndim = ndim,
                           .shape = shape,
                           .trainable = trainable,
                           .init_type = nb_init_draw_op(d->kind),
                           .n_attrs = draw_attrs(d, attrs),
                           .attrs = attrs};
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
    nb_attr attrs[3];
    nb_state_spec spec = drawn("parameter", name, dtype, ndim, shape, &d, true, attrs);
    return nb_builder_state(b, &spec);
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
    nb_attr attrs[3];
    nb_state_spec spec = drawn("persistable var", name, dtype, ndim, shape, &d, false, attrs);
    return nb_builder_state(b, &spec);
}

/* nb_param_from and nb_persistable_from: as nb_param and nb_persistable_var,
 * set to a copy of `value` rather than drawn. */
static nb_value var_from(nb_builder *b, const char *what, const char *name, const nb_tensor *value, bool trainable)
{
    if (!b || nb_builder_status(b)) return NB_NONE;
    if (!value || !name || !*name) {
        nb_builder_fail(b, NB_ERR_ARG, "%s %s: %s", what, name ? name : "", value ? "no name" : "the tensor is NULL");
        return NB_NONE;
    }
    nb_state_spec spec = {.what = what,
                          .name = name,
                          .dtype = value->dtype,
                          .ndim = value->ndim,
                          .shape = value->shape,
                          .trainable = trainable,
                          .value = value};
    return nb_builder_state(b, &spec);
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
    const char *name = nb_value_label(b, x);
    nb_builder_fail(b, NB_ERR_DTYPE, "%s: input %s%sis %s; it takes float32 or float64", layer, name, *name ? " " : "",
                    nb_dtype_name(info->dtype));
    return false;
}
