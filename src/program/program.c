/* Programs, blocks and vars: creation, lookup, cloning, unique names. Ops are
 * in op_desc.c and printing in program_print.c. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "program_internal.h"

nb_status nb_program_new(nb_program **out)
{
    *out = NULL;
    nb_program *p = nb_calloc(1, sizeof *p);
    nb_strmap *names = nb_calloc(1, sizeof *names);
    if (!p || !names) {
        nb_free(p);
        nb_free(names);
        return nb_error(NB_ERR_NOMEM, "program: out of memory");
    }
    nb_strmap_init(names);
    p->names = names;
    nb_block *b;
    if (nb_program_add_block(p, -1, &b)) {
        nb_program_free(p);
        return nb_error(NB_ERR_NOMEM, "program: out of memory");
    }
    *out = p;
    return NB_OK;
}

static void var_free(nb_var *v)
{
    if (!v) return;
    nb_free(v->name);
    nb_free(v);
}

static void block_free(nb_block *b)
{
    if (!b) return;
    for (int i = 0; i < b->n_ops; i++) nb_op_free(b->ops[i]);
    for (int i = 0; i < b->n_vars; i++) var_free(b->vars[i]);
    nb_free(b->ops);
    nb_free(b->vars);
    if (b->var_index) {
        nb_strmap_free(b->var_index);
        nb_free(b->var_index);
    }
    nb_free(b);
}

void nb_program_free(nb_program *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_blocks; i++) block_free(p->blocks[i]);
    nb_free(p->blocks);
    if (p->names) {
        nb_strmap_free(p->names);
        nb_free(p->names);
    }
    nb_free(p);
}

nb_block *nb_program_block(nb_program *p, int idx)
{
    return p && idx >= 0 && idx < p->n_blocks ? p->blocks[idx] : NULL;
}

nb_block *nb_program_global_block(nb_program *p) { return nb_program_block(p, 0); }

nb_status nb_program_add_block(nb_program *p, int parent_idx, nb_block **out)
{
    *out = NULL;
    if (parent_idx < -1 || parent_idx >= p->n_blocks)
        return nb_error(NB_ERR_ARG, "program: parent block %d does not exist", parent_idx);
    if (p->n_blocks == p->cap_blocks) {
        int cap = p->cap_blocks ? 2 * p->cap_blocks : 4;
        nb_block **bl = nb_realloc(p->blocks, (size_t)cap * sizeof *bl);
        if (!bl) return nb_error(NB_ERR_NOMEM, "program: out of memory");
        p->blocks = bl;
        p->cap_blocks = cap;
    }
    nb_block *b = nb_calloc(1, sizeof *b);
    nb_strmap *index = nb_calloc(1, sizeof *index);
    if (!b || !index) {
        nb_free(b);
        nb_free(index);
        return nb_error(NB_ERR_NOMEM, "program: out of memory");
    }
    nb_strmap_init(index);
    b->program = p;
    b->idx = p->n_blocks;
    b->parent_idx = parent_idx;
    b->forward_block_idx = -1;
    b->var_index = index;
    p->blocks[p->n_blocks++] = b;
    p->version++;
    *out = b;
    return NB_OK;
}

void nb_program_set_seed(nb_program *p, uint64_t seed)
{
    p->random_seed = seed;
    p->version++;
}

nb_status nb_program_unique_name(nb_program *p, const char *prefix, char *buf, size_t size)
{
    nb_strmap *names = p->names;
    for (;;) {
        uintptr_t k = (uintptr_t)nb_strmap_get(names, prefix, NULL);
        if (nb_strmap_put(names, prefix, (void *)(k + 1))) return nb_error(NB_ERR_NOMEM, "program: out of memory");
        snprintf(buf, size, "%s_%lu", prefix, (unsigned long)k);
        /* A user may have named a var like a generated one: skip such names. */
        bool taken = false;
        for (int i = 0; i < p->n_blocks && !taken; i++) taken = nb_block_find_var(p->blocks[i], buf) != NULL;
        if (!taken) return NB_OK;
    }
}

nb_status nb_program_unique_index(nb_program *p, const char *key, const char *fmt, int *out)
{
    nb_strmap *names = p->names;
    char buf[512];
    for (;;) {
        uintptr_t k = (uintptr_t)nb_strmap_get(names, key, NULL);
        if (nb_strmap_put(names, key, (void *)(k + 1))) return nb_error(NB_ERR_NOMEM, "program: out of memory");
        snprintf(buf, sizeof buf, fmt, (int)k);
        bool taken = false;
        for (int i = 0; i < p->n_blocks && !taken; i++) taken = nb_block_find_var(p->blocks[i], buf) != NULL;
        if (!taken) {
            *out = (int)k;
            return NB_OK;
        }
    }
}

/* ---- vars ------------------------------------------------------------------ */

nb_var *nb_block_find_var(const nb_block *b, const char *name)
{
    return name ? nb_strmap_get(b->var_index, name, NULL) : NULL;
}

nb_var *nb_block_find_var_recursive(const nb_block *b, const char *name)
{
    while (b) {
        nb_var *v = nb_block_find_var(b, name);
        if (v) return v;
        b = b->parent_idx >= 0 ? b->program->blocks[b->parent_idx] : NULL;
    }
    return NULL;
}

void nb_var_set_shape(nb_var *v, nb_dtype dtype, int ndim, const int64_t *shape)
{
    v->dtype = dtype;
    v->ndim = ndim;
    memset(v->shape, 0, sizeof v->shape);
    if (ndim > 0) memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
}

nb_var_info nb_var_info_of(const nb_var *v)
{
    nb_var_info i = {.dtype = v->dtype, .ndim = v->ndim};
    memcpy(i.shape, v->shape, sizeof i.shape);
    return i;
}

nb_status nb_block_create_var(nb_block *b, const char *name, nb_dtype dtype, int ndim, const int64_t *shape,
                              nb_var **out)
{
    if (out) *out = NULL;
    if (!name || !*name) return nb_error(NB_ERR_ARG, "create var: empty name");
    if (!nb_dtype_valid(dtype)) return nb_error(NB_ERR_DTYPE, "create var %s: invalid dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > NB_MAX_DIMS)
        return nb_error(NB_ERR_SHAPE, "create var %s: %d dimensions (at most %d)", name, ndim, NB_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < -1)
            return nb_error(NB_ERR_SHAPE, "create var %s: dimension %d is %lld", name, i, (long long)shape[i]);
    nb_var *v = nb_block_find_var(b, name);
    if (v) {
        if (v->dtype != dtype || v->ndim != ndim) {
            char a[NB_SHAPE_STR_MAX], c[NB_SHAPE_STR_MAX];
            return nb_error(NB_ERR_ARG, "create var %s: it exists as %s %s, not %s %s", name, nb_dtype_name(v->dtype),
                            nb_shape_str(a, sizeof a, v->ndim, v->shape), nb_dtype_name(dtype),
                            nb_shape_str(c, sizeof c, ndim, shape));
        }
        if (out) *out = v;
        return NB_OK;
    }
    if (b->n_vars == b->cap_vars) {
        int cap = b->cap_vars ? 2 * b->cap_vars : 16;
        nb_var **vs = nb_realloc(b->vars, (size_t)cap * sizeof *vs);
        if (!vs) return nb_error(NB_ERR_NOMEM, "create var %s: out of memory", name);
        b->vars = vs;
        b->cap_vars = cap;
    }
    v = nb_calloc(1, sizeof *v);
    if (!v || !(v->name = nb_strdup(name)) || nb_strmap_put(b->var_index, name, v)) {
        var_free(v);
        return nb_error(NB_ERR_NOMEM, "create var %s: out of memory", name);
    }
    nb_var_set_shape(v, dtype, ndim, shape);
    b->vars[b->n_vars++] = v;
    b->program->version++;
    if (out) *out = v;
    return NB_OK;
}

/* ---- cloning --------------------------------------------------------------- */

nb_status nb_program_clone(nb_program **out, const nb_program *src)
{
    nb_program *p;
    nb_status st = nb_program_new(&p);
    if (st) return st;
    for (int bi = 0; bi < src->n_blocks; bi++) {
        const nb_block *sb = src->blocks[bi];
        nb_block *b = p->blocks[0];
        if (bi > 0 && (st = nb_program_add_block(p, sb->parent_idx, &b))) goto fail;
        b->forward_block_idx = sb->forward_block_idx;
        for (int i = 0; i < sb->n_vars; i++) {
            const nb_var *sv = sb->vars[i];
            nb_var *v;
            if ((st = nb_block_create_var(b, sv->name, sv->dtype, sv->ndim, sv->shape, &v))) goto fail;
            v->persistable = sv->persistable;
            v->stop_gradient = sv->stop_gradient;
            v->is_parameter = sv->is_parameter;
            v->trainable = sv->trainable;
            v->is_data = sv->is_data;
        }
    }
    for (int bi = 0; bi < src->n_blocks; bi++)
        for (int i = 0; i < src->blocks[bi]->n_ops; i++) {
            nb_op *op = nb_op_clone(src->blocks[bi]->ops[i]);
            if (!op || nb_block_push_op(p->blocks[bi], p->blocks[bi]->n_ops, op)) {
                nb_op_free(op);
                st = nb_error(NB_ERR_NOMEM, "clone: out of memory");
                goto fail;
            }
        }
    p->random_seed = src->random_seed;
    p->next_op_id = src->next_op_id;
    /* Carry the unique-name counters so that names made later never collide. */
    const nb_strmap *names = src->names;
    for (int i = 0; i < names->n; i++)
        if (names->keys[i] && nb_strmap_put(p->names, names->keys[i], names->vals[i])) {
            st = nb_error(NB_ERR_NOMEM, "clone: out of memory");
            goto fail;
        }
    *out = p;
    return NB_OK;
fail:
    nb_program_free(p);
    *out = NULL;
    return st;
}

nb_status nb_block_rename_var(nb_block *b, const char *old_name, const char *new_name)
{
    nb_var *v = nb_block_find_var(b, old_name);
    if (!v) return nb_error(NB_ERR_NOT_FOUND, "rename: block %d has no var '%s'", b->idx, old_name);
    if (nb_block_find_var_recursive(b, new_name))
        return nb_error(NB_ERR_ARG, "rename %s: a var named '%s' already exists", old_name, new_name);
    /* Every string the rename needs is made first, so that running out of
     * memory leaves the block as it was, never half renamed. */
    int n_uses = 0;
    for (int i = 0; i < b->n_ops; i++) {
        nb_op *op = b->ops[i];
        for (int k = 0; k < nb_op_n_inputs(op); k++) n_uses += !strcmp(op->inputs[k], old_name);
        for (int k = 0; k < nb_op_n_outputs(op); k++) n_uses += !strcmp(op->outputs[k], old_name);
        for (int r = 0; r < 2; r++) n_uses += op->role_var[r] && !strcmp(op->role_var[r], old_name);
    }
    char **fresh = nb_calloc((size_t)n_uses + 1, sizeof *fresh);
    bool ok = fresh != NULL;
    for (int i = 0; ok && i <= n_uses; i++) ok = (fresh[i] = nb_strdup(new_name)) != NULL;
    if (!ok || nb_strmap_put(b->var_index, new_name, v)) {
        for (int i = 0; fresh && i <= n_uses; i++) nb_free(fresh[i]);
        nb_free(fresh);
        return nb_error(NB_ERR_NOMEM, "rename %s to %s: out of memory", old_name, new_name);
    }
    nb_strmap_remove(b->var_index, old_name);
    int used = 0;
    for (int i = 0; i < b->n_ops; i++) {
        nb_op *op = b->ops[i];
        for (int side = 0; side < 2; side++) {
            int n = side ? nb_op_n_outputs(op) : nb_op_n_inputs(op);
            char **names = side ? op->outputs : op->inputs;
            for (int k = 0; k < n; k++)
                if (!strcmp(names[k], old_name)) {
                    nb_free(names[k]);
                    names[k] = fresh[used++];
                }
        }
        for (int r = 0; r < 2; r++)
            if (op->role_var[r] && !strcmp(op->role_var[r], old_name)) {
                nb_free(op->role_var[r]);
                op->role_var[r] = fresh[used++];
            }
    }
    nb_free(v->name);
    v->name = fresh[used];
    nb_free(fresh);
    b->program->version++;
    return NB_OK;
}
