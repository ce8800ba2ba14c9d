/* Checkpoints: the persistable vars of a program, in a safetensors file;
 * the gathering and the all-or-nothing restoring serve .npz state files too
 * (checkpoint_internal.h). */
#include <stdarg.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "checkpoint_internal.h"
#include "nabla/checkpoint.h"
#include "safetensors_internal.h"

/* A message listing problems, one after another; past `limit` bytes the
 * rest are only counted, so the error text (2 KB) keeps its ending. */
typedef struct problems {
    char text[1600];
    size_t len;
    int count, dropped;
} problems;

static void problem(problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(problems *p, const char *fmt, ...)
{
    char one[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof one) n = sizeof one - 1;
    const char *sep = p->count ? "; " : "";
    p->count++;
    if (p->len + strlen(sep) + (size_t)n + 1 > sizeof p->text) {
        p->dropped++;
        return;
    }
    p->len += (size_t)snprintf(p->text + p->len, sizeof p->text - p->len, "%s%s", sep, one);
}

static const nb_block *global_block(const nb_program *p) { return p->n_blocks > 0 ? p->blocks[0] : NULL; }

static char *describe(char *buf, size_t size, nb_dtype dtype, int ndim, const int64_t *shape)
{
    char s[NB_SHAPE_STR_MAX];
    snprintf(buf, size, "%s %s", nb_dtype_name(dtype), nb_shape_str(s, sizeof s, ndim, shape));
    return buf;
}

nb_status nb_ckpt_collect(const char *what, const char *path, const nb_program *program, nb_scope *scope, int *n_out,
                          const char ***names_out, nb_tensor ***tensors_out)
{
    const nb_block *b = global_block(program);
    int n_vars = b ? b->n_vars : 0, n = 0;
    const char **names = nb_malloc(((size_t)n_vars + 1) * sizeof *names);
    nb_tensor **tensors = nb_malloc(((size_t)n_vars + 1) * sizeof *tensors);
    if (!names || !tensors) {
        nb_free(names);
        nb_free(tensors);
        return nb_error(NB_ERR_NOMEM, "%s save '%s': out of memory", what, path);
    }
    problems missing = {0};
    for (int i = 0; i < n_vars; i++) {
        const nb_var *v = b->vars[i];
        if (!v->persistable) continue;
        nb_tensor *t = nb_scope_find(scope, v->name);
        if (!t) {
            problem(&missing, "'%s'", v->name);
            continue;
        }
        names[n] = v->name;
        tensors[n++] = t;
    }
    if (missing.count) {
        nb_free(names);
        nb_free(tensors);
        return nb_error(NB_ERR_NOT_FOUND,
                        "%s save '%s': %d persistable var(s) have no value in the scope (was the startup "
                        "program run?): %s%s",
                        what, path, missing.count, missing.text, missing.dropped ? ", ..." : "");
    }
    *n_out = n;
    *names_out = names;
    *tensors_out = tensors;
    return NB_OK;
}

nb_status nb_checkpoint_save(const char *path, const nb_program *program, nb_scope *scope, const nb_meta *meta)
{
    return nb_checkpoint_save_as(path, program, scope, meta, NB_STORE_NATIVE);
}

nb_status nb_checkpoint_save_as(const char *path, const nb_program *program, nb_scope *scope, const nb_meta *meta,
                                nb_float_storage storage)
{
    if (!path || !program || !scope) return nb_error(NB_ERR_ARG, "checkpoint save: NULL path, program or scope");
    int n;
    const char **names;
    nb_tensor **tensors;
    nb_status st = nb_ckpt_collect("checkpoint", path, program, scope, &n, &names, &tensors);
    if (st) return st;
    st = nb_safetensors_save_as(path, n, names, tensors, meta, storage);
    nb_free(names);
    nb_free(tensors);
    return st;
}

static bool shape_fits(const nb_var *v, const nb_tensor *t)
{
    if (v->ndim != t->ndim) return false;
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] != -1 && v->shape[i] != t->shape[i]) return false;
    return true;
}

/* Where a loaded tensor goes: copied into `existing`, or bound in `owner`. */
typedef struct plan {
    const char *name;
    nb_tensor *loaded, *existing;
    nb_scope *owner;
    bool copy, is_new;
} plan;

static void plan_var(plan *p, nb_scope *scope)
{
    p->owner = scope;
    for (nb_scope *s = scope; s; s = nb_scope_parent(s)) {
        nb_tensor *t = nb_scope_find_local(s, p->name);
        if (t) {
            p->owner = s;
            p->existing = t;
            break;
        }
    }
    p->is_new = !p->existing;
    p->copy = p->existing && p->existing->dtype == p->loaded->dtype &&
        nb_shape_equal(p->existing->ndim, p->existing->shape, p->loaded->ndim, p->loaded->shape);
}

/* Puts the loaded values in the scope, all or nothing: the only steps that
 * can fail (adding new names) go first and are undone on failure; rebinding
 * an existing name and copying into a tensor of the same shape cannot fail. */
static nb_status commit(plan *plans, int n, const char *what, const char *path)
{
    for (int i = 0; i < n; i++) {
        if (!plans[i].is_new) continue;
        nb_status st = nb_scope_set(plans[i].owner, plans[i].name, plans[i].loaded);
        if (st) {
            for (int j = 0; j < i; j++)
                if (plans[j].is_new) nb_scope_remove(plans[j].owner, plans[j].name);
            return nb_error(st, "%s '%s': out of memory binding var '%s' (the scope is unchanged)", what, path,
                            plans[i].name);
        }
    }
    for (int i = 0; i < n; i++) {
        nb_status st = NB_OK;
        if (plans[i].copy) st = nb_tensor_copy_into(plans[i].existing, plans[i].loaded);
        else if (!plans[i].is_new) st = nb_scope_set(plans[i].owner, plans[i].name, plans[i].loaded);
        if (st) return nb_error_context(st, "%s '%s': var '%s'", what, path, plans[i].name);
    }
    return NB_OK;
}

nb_status nb_ckpt_restore(const char *what, const char *path, const nb_program *program, nb_scope *scope,
                          nb_ckpt_find_fn find, const void *file)
{
    const nb_block *b = global_block(program);
    int n_vars = b ? b->n_vars : 0, n = 0;
    plan *plans = nb_calloc((size_t)n_vars + 1, sizeof *plans);
    if (!plans) return nb_error(NB_ERR_NOMEM, "%s '%s': out of memory", what, path);
    problems bad = {0};
    char want[NB_SHAPE_STR_MAX + 16], got[NB_SHAPE_STR_MAX + 16];
    for (int i = 0; i < n_vars; i++) {
        const nb_var *v = b->vars[i];
        if (!v->persistable) continue;
        nb_tensor *t = find(file, v->name);
        describe(want, sizeof want, v->dtype, v->ndim, v->shape);
        if (!t) {
            problem(&bad, "var '%s': expected %s, missing in the file", v->name, want);
        } else if (t->dtype != v->dtype || !shape_fits(v, t)) {
            problem(&bad, "var '%s': expected %s, found %s", v->name, want,
                    describe(got, sizeof got, t->dtype, t->ndim, t->shape));
        } else {
            plans[n] = (plan){.name = v->name, .loaded = t};
            plan_var(&plans[n++], scope);
        }
    }
    nb_status st;
    if (bad.count) {
        char more[48] = "";
        if (bad.dropped) snprintf(more, sizeof more, "; and %d more", bad.dropped);
        st = nb_error(NB_ERR_FORMAT, "%s '%s' does not fit the program (%d mismatch%s, the scope is unchanged): %s%s",
                      what, path, bad.count, bad.count == 1 ? "" : "es", bad.text, more);
    } else {
        st = commit(plans, n, what, path);
    }
    nb_free(plans);
    return st;
}

static nb_tensor *find_in_safetensors(const void *file, const char *name) { return nb_safetensors_find(file, name); }

/* F16 and BF16 tensors load as F32; the ones an F64 var will take are
 * widened again here, in the loaded file (exactly: a 16-bit float is an F64
 * value), so that they fit the var like any F64 tensor. */
static nb_status widen_half_for_f64_vars(nb_safetensors *f, const nb_program *program, const char *path)
{
    const nb_block *b = global_block(program);
    for (int i = 0; b && i < b->n_vars; i++) {
        const nb_var *v = b->vars[i];
        int at = v->persistable && v->dtype == NB_F64 ? nb_st_find_index(f, v->name) : -1;
        if (at < 0 || (f->stored[at] != NB_ST_F16 && f->stored[at] != NB_ST_BF16) || f->tensors[at]->dtype != NB_F32)
            continue;
        nb_tensor *wide;
        nb_status st = nb_tensor_cast(&wide, f->tensors[at], NB_F64);
        if (st) return nb_error_context(st, "checkpoint '%s': var '%s'", path, v->name);
        nb_tensor_release(f->tensors[at]);
        f->tensors[at] = wide;
    }
    return NB_OK;
}

nb_status nb_checkpoint_load(const char *path, const nb_program *program, nb_scope *scope, nb_safetensors **meta_out)
{
    if (meta_out) *meta_out = NULL;
    if (!path || !program || !scope) return nb_error(NB_ERR_ARG, "checkpoint load: NULL path, program or scope");
    nb_safetensors *f;
    nb_status st = nb_safetensors_load(&f, path);
    if (st) return st;
    st = widen_half_for_f64_vars(f, program, path);
    if (!st) st = nb_ckpt_restore("checkpoint", path, program, scope, find_in_safetensors, f);
    if (!st && meta_out) *meta_out = f;
    else nb_safetensors_free(f);
    return st;
}
