/* The record backend: emitting an op appends an OpDesc to the current block
 * (after validation and shape inference); values are the block's vars. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "../builder/builder_internal.h"
#include "program_internal.h"
#include "../ops/op_internal.h"
#include "record.h"

#define NAME_MAX_LEN 256

static nb_status record_emit(nb_builder *b, const char *type, int n_in, const nb_value *in, int n_attrs,
                             const nb_attr *attrs, int n_out, nb_value *out)
{
    const nb_op_def *def = nb_op_find(type);
    if (!def) return nb_error(NB_ERR_NOT_FOUND, "unknown op '%s'", type);
    if (def->expand) return nb_op_expand(b, def, n_in, in, n_attrs, attrs, n_out, out);
    if (n_out < 0) n_out = nb_op_default_outputs(def);
    const char **in_names = nb_calloc((size_t)n_in + 1, sizeof *in_names);
    char(*out_names)[NAME_MAX_LEN] = nb_calloc((size_t)n_out, sizeof *out_names);
    const char **out_ptrs = nb_calloc((size_t)n_out + 1, sizeof *out_ptrs);
    nb_status st = NB_OK;
    if (!in_names || !out_names || !out_ptrs) {
        st = nb_error(NB_ERR_NOMEM, "%s: out of memory", def->name);
        goto done;
    }
    for (int i = 0; i < n_in; i++) in_names[i] = nb_is_none(in[i]) ? NULL : ((nb_var *)in[i].p)->name;
    char key[NAME_MAX_LEN], fmt[NAME_MAX_LEN];
    int k;
    snprintf(key, sizeof key, "%s@output", def->name);
    snprintf(fmt, sizeof fmt, "%s_%%d.tmp_0", def->name);
    if ((st = nb_program_unique_index(b->site->program, key, fmt, &k))) goto done;
    for (int i = 0; i < n_out; i++) {
        snprintf(out_names[i], NAME_MAX_LEN, "%.200s_%d.tmp_%d", def->name, k, i);
        out_ptrs[i] = out_names[i];
    }
    nb_op *op;
    if ((st = nb_block_append_op(b->site->block, def->name, NB_NAMES_N(n_in, in_names), NB_NAMES_N(n_out, out_ptrs),
                                 NB_ATTRS_N(n_attrs, attrs), &op)))
        goto done;
    op->role = b->site->role;
    for (int i = 0; i < n_out; i++) out[i] = nb_value_from_var(nb_block_find_var(b->site->block, out_names[i]));
done:
    nb_free(in_names);
    nb_free(out_names);
    nb_free(out_ptrs);
    return st;
}

static nb_var_info record_info(const nb_builder *b, nb_value v) { return nb_var_info_of(v.p); }

static nb_status record_unique_name(nb_builder *b, const char *prefix, char *buf, size_t size)
{
    return nb_program_unique_name(b->site->program, prefix, buf, size);
}

static const nb_builder_backend record_backend = {
    .name = "record",
    .kind = NB_VALUE_VAR,
    .emit = record_emit,
    .info = record_info,
    .unique_name = record_unique_name,
    .state = nb_record_state,
    .emit_into = nb_record_emit_into,
    .name_of = nb_record_name_of,
    .destroy = nb_record_site_free,
};

nb_status nb_record_site_new(nb_builder *b, const nb_record_site *from)
{
    if (!(b->site = nb_calloc(1, sizeof *b->site))) return nb_error(NB_ERR_NOMEM, "builder: out of memory");
    if (from) *b->site = *from;
    return NB_OK;
}

void nb_record_site_free(nb_builder *b)
{
    nb_free(b->site);
    b->site = NULL;
}

nb_status nb_builder_new_record(nb_builder **out, nb_program *main, nb_program *startup)
{
    *out = NULL;
    if (!main) return nb_error(NB_ERR_ARG, "builder: main program is NULL");
    nb_status st = nb_builder_init(out, &record_backend);
    const nb_record_site site = {main, startup, nb_program_global_block(main), NB_ROLE_FORWARD};
    if (!st && (st = nb_record_site_new(*out, &site))) {
        nb_builder_free(*out);
        *out = NULL;
    }
    return st;
}

/* The calls of nabla/program.h on a builder that is not recording (an
 * eager one) give NULL, and setting its block or role does nothing. */
nb_program *nb_builder_program(nb_builder *b) { return b->site ? b->site->program : NULL; }
nb_program *nb_builder_startup(nb_builder *b) { return b->site ? b->site->startup : NULL; }
nb_block *nb_builder_block(nb_builder *b) { return b->site ? b->site->block : NULL; }
void nb_builder_set_block(nb_builder *b, nb_block *block)
{
    if (b->site) b->site->block = block;
}
void nb_builder_set_role(nb_builder *b, nb_op_role role)
{
    if (b->site) b->site->role = role;
}
nb_op_role nb_builder_role(const nb_builder *b) { return b->site ? b->site->role : NB_ROLE_FORWARD; }

nb_value nb_value_from_var(nb_var *v) { return nb_value_make(v, NB_VALUE_VAR); }

nb_var *nb_value_var(nb_value v)
{
    if (v.kind == NB_VALUE_VAR) return v.p;
    nb_error(NB_ERR_ARG, "nb_value_var: %s",
             nb_is_none(v) ? "the value is NB_NONE (did an emit fail?)"
                           : "the value is an eager tensor, not a var of a program");
    return NULL;
}

const char *nb_value_name(nb_value v)
{
    if (v.kind == NB_VALUE_VAR) return ((nb_var *)v.p)->name;
    nb_error(NB_ERR_ARG, "nb_value_name: %s",
             nb_is_none(v) ? "the value is NB_NONE (did an emit fail?)"
                           : "an eager tensor has no name; only a var of a program has");
    return NULL;
}

nb_value nb_value_by_name(nb_builder *b, const char *name)
{
    if (b->status) return NB_NONE;
    nb_block *blk = nb_builder_block(b);
    nb_var *v = blk ? nb_block_find_var_recursive(blk, name) : NULL;
    if (!v) {
        nb_builder_fail(b, NB_ERR_NOT_FOUND, "no var named '%s' in block %d or its parents", name ? name : "(null)",
                        blk ? blk->idx : -1);
        return NB_NONE;
    }
    return nb_value_from_var(v);
}

nb_value nb_data(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape)
{
    if (b->status) return NB_NONE;
    if (!b->site) {
        nb_builder_fail(b, NB_ERR_STATE, "data %s: eager builders take tensors, not data vars", name);
        return NB_NONE;
    }
    if (nb_block_find_var_recursive(b->site->block, name)) {
        nb_builder_fail(b, NB_ERR_ARG, "data %s: a var of that name already exists", name);
        return NB_NONE;
    }
    nb_var *v;
    if (nb_builder_record_error(b, nb_block_create_var(b->site->block, name, dtype, ndim, shape, &v))) return NB_NONE;
    v->is_data = true;
    v->stop_gradient = true;
    return nb_value_from_var(v);
}

/* Adds shape and dtype attributes to an initialiser's attrs when its def
 * takes them and the caller left them out. */
static int init_attrs(const nb_op_def *def, int n, const nb_attr *attrs, nb_dtype dtype, int ndim, const int64_t *shape,
                      nb_attr *out)
{
    int m = 0;
    bool has_shape = false, has_dtype = false;
    for (int i = 0; i < n; i++) {
        has_shape |= !strcmp(attrs[i].name, "shape");
        has_dtype |= !strcmp(attrs[i].name, "dtype");
        out[m++] = attrs[i];
    }
    if (!has_shape && nb_op_attr_index(def, "shape") >= 0) out[m++] = NB_ATTR_INTS_N("shape", ndim, shape);
    if (!has_dtype && nb_op_attr_index(def, "dtype") >= 0) out[m++] = NB_ATTR_INT("dtype", dtype);
    return m;
}

nb_value nb_create_parameter(nb_builder *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                             const char *init_type, int n_attrs, const nb_attr *attrs)
{
    if (b->status) return NB_NONE;
    if (!b->site) {
        nb_builder_fail(b, NB_ERR_STATE, "parameter %s: eager mode creates parameters as tensors", name);
        return NB_NONE;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            nb_builder_fail(b, NB_ERR_SHAPE, "parameter %s: dimension %d is %lld; parameters need known sizes", name, i,
                            (long long)shape[i]);
            return NB_NONE;
        }
    nb_block *global = nb_program_global_block(b->site->program);
    if (nb_block_find_var(global, name)) {
        nb_builder_fail(b, NB_ERR_ARG, "parameter %s: a var of that name already exists", name);
        return NB_NONE;
    }
    nb_var *v;
    if (nb_builder_record_error(b, nb_block_create_var(global, name, dtype, ndim, shape, &v))) return NB_NONE;
    v->persistable = v->is_parameter = v->trainable = true;

    const nb_op_def *def = nb_op_find(init_type);
    if (!def) {
        nb_builder_fail(b, NB_ERR_NOT_FOUND, "parameter %s: unknown initialiser op '%s'", name, init_type);
        return NB_NONE;
    }
    nb_attr *all = nb_calloc((size_t)n_attrs + 2, sizeof *all);
    if (!all) {
        nb_builder_fail(b, NB_ERR_NOMEM, "parameter %s: out of memory", name);
        return NB_NONE;
    }
    int m = init_attrs(def, n_attrs, attrs, dtype, ndim, shape, all);
    nb_program *target = b->site->startup ? b->site->startup : b->site->program;
    nb_block *tb = nb_program_global_block(target);
    nb_var *sv;
    nb_status st = nb_block_create_var(tb, name, dtype, ndim, shape, &sv);
    nb_op *op = NULL;
    if (!st) {
        sv->persistable = sv->is_parameter = sv->trainable = true;
        const char *outs[1] = {name};
        st = nb_block_append_op(tb, init_type, NB_NO_NAMES, NB_NAMES_N(1, outs), NB_ATTRS_N(m, all), &op);
    }
    nb_free(all);
    if (nb_builder_record_error(b, st)) return NB_NONE;
    op->role = NB_ROLE_STARTUP;
    return nb_value_from_var(v);
}
