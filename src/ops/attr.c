/* Attribute values: copying, printing, resolving against a definition, and
 * reading them from kernels. */
#include <stdio.h>
#include "nabla/device.h"
#include <stdlib.h>
#include <string.h>
#include "nabla/grad_rule.h"
#include "op_internal.h"

const char *nb_attr_type_name(nb_attr_type t)
{
    static const char *names[] = {"none",     "bool",       "int",   "float",      "string",
                                  "int list", "float list", "block", "string list"};
    return t >= NB_ATTR_NONE && t <= NB_ATTR_STRINGS ? names[t] : "invalid";
}

int nb_attr_value_copy(nb_attr_value *dst, const nb_attr_value *src)
{
    /* On failure dst is left empty (type NONE), never pointing at src's data,
     * so that freeing it afterwards is safe. */
    nb_attr_value v = *src;
    if (src->type == NB_ATTR_STRING && src->s) {
        if (!(v.s = nb_strdup(src->s))) goto fail;
    } else if (src->type == NB_ATTR_INTS || src->type == NB_ATTR_FLOATS) {
        size_t sz = src->type == NB_ATTR_INTS ? sizeof(int64_t) : sizeof(double);
        const void *from = src->type == NB_ATTR_INTS ? (const void *)src->ints : (const void *)src->floats;
        void *p = nb_malloc(src->n ? (size_t)src->n * sz : 1);
        if (!p) goto fail;
        if (src->n) memcpy(p, from, (size_t)src->n * sz);
        if (src->type == NB_ATTR_INTS) v.ints = p;
        else v.floats = p;
    } else if (src->type == NB_ATTR_STRINGS) {
        char **p = nb_calloc((size_t)src->n + 1, sizeof *p);
        if (!p) goto fail;
        for (int i = 0; i < src->n; i++)
            if (!(p[i] = nb_strdup(src->strs[i] ? src->strs[i] : ""))) {
                while (i--) nb_free(p[i]);
                nb_free(p);
                goto fail;
            }
        v.strs = (const char *const *)p;
    }
    *dst = v;
    return 0;
fail:
    memset(dst, 0, sizeof *dst);
    return -1;
}

void nb_attr_value_free(nb_attr_value *v)
{
    if (v->type == NB_ATTR_STRING) nb_free((void *)v->s);
    else if (v->type == NB_ATTR_INTS) nb_free((void *)v->ints);
    else if (v->type == NB_ATTR_FLOATS) nb_free((void *)v->floats);
    else if (v->type == NB_ATTR_STRINGS && v->strs) {
        for (int i = 0; i < v->n; i++) nb_free((void *)v->strs[i]);
        nb_free((void *)v->strs);
    }
    memset(v, 0, sizeof *v);
}

char *nb_attr_value_str(char *buf, unsigned long size, const nb_attr_value *v)
{
    size_t u = 0;
    switch (v->type) {
    case NB_ATTR_BOOL: snprintf(buf, size, "%s", v->b ? "true" : "false"); break;
    case NB_ATTR_INT: snprintf(buf, size, "%lld", (long long)v->i); break;
    case NB_ATTR_FLOAT: snprintf(buf, size, "%g", v->f); break;
    case NB_ATTR_STRING: snprintf(buf, size, "\"%s\"", v->s ? v->s : ""); break;
    case NB_ATTR_BLOCK: snprintf(buf, size, "block %d", v->block); break;
    case NB_ATTR_INTS:
    case NB_ATTR_FLOATS:
    case NB_ATTR_STRINGS:
        u = (size_t)snprintf(buf, size, "[");
        for (int i = 0; i < v->n && u < size; i++) {
            if (v->type == NB_ATTR_INTS)
                u += (size_t)snprintf(buf + u, size - u, i ? ", %lld" : "%lld", (long long)v->ints[i]);
            else if (v->type == NB_ATTR_FLOATS)
                u += (size_t)snprintf(buf + u, size - u, i ? ", %g" : "%g", v->floats[i]);
            else u += (size_t)snprintf(buf + u, size - u, i ? ", \"%s\"" : "\"%s\"", v->strs[i]);
        }
        if (u < size) snprintf(buf + u, size - u, "]");
        break;
    default: snprintf(buf, size, "(none)"); break;
    }
    return buf;
}

nb_status nb_resolve_attrs(const nb_op_def *def, int n, const nb_attr *attrs, nb_attr_value out[NB_MAX_ATTRS],
                           const char *label)
{
    bool given[NB_MAX_ATTRS] = {false};
    for (int i = 0; i < NB_MAX_ATTRS; i++) out[i] = def->attrs[i].def;
    for (int k = 0; k < n; k++) {
        const nb_attr *a = &attrs[k];
        int i = a->name ? nb_op_attr_index(def, a->name) : -1;
        if (i < 0) {
            char names[512] = "";
            size_t u = 0;
            for (int j = 0; j < NB_MAX_ATTRS && def->attrs[j].name && u < sizeof names; j++)
                u += (size_t)snprintf(names + u, sizeof names - u, "%s%s", j ? ", " : "", def->attrs[j].name);
            return nb_error(NB_ERR_ARG, "%s: unknown attribute '%s' (it takes: %s)", label,
                            a->name ? a->name : "(null)", u ? names : "none");
        }
        nb_attr_type want = def->attrs[i].type, got = a->value.type;
        nb_attr_value v = a->value;
        if (want == NB_ATTR_FLOAT && got == NB_ATTR_INT) {
            v.type = NB_ATTR_FLOAT;
            v.f = (double)a->value.i;
        } else if (want == NB_ATTR_BOOL && got == NB_ATTR_INT && (a->value.i == 0 || a->value.i == 1)) {
            v.type = NB_ATTR_BOOL;
            v.b = a->value.i != 0;
        } else if (want != got) {
            return nb_error(NB_ERR_ARG, "%s: attribute '%s' must be of type %s, got %s", label, a->name,
                            nb_attr_type_name(want), nb_attr_type_name(got));
        }
        if ((v.type == NB_ATTR_INTS || v.type == NB_ATTR_FLOATS || v.type == NB_ATTR_STRINGS) && v.n < 0)
            return nb_error(NB_ERR_ARG, "%s: attribute '%s' has a negative length", label, a->name);
        if (v.type == NB_ATTR_INTS && v.n > 0 && !v.ints)
            return nb_error(NB_ERR_ARG, "%s: attribute '%s' has no values", label, a->name);
        if (v.type == NB_ATTR_FLOATS && v.n > 0 && !v.floats)
            return nb_error(NB_ERR_ARG, "%s: attribute '%s' has no values", label, a->name);
        if (v.type == NB_ATTR_STRINGS && v.n > 0 && !v.strs)
            return nb_error(NB_ERR_ARG, "%s: attribute '%s' has no values", label, a->name);
        for (int j = 0; v.type == NB_ATTR_STRINGS && j < v.n; j++)
            if (!v.strs[j]) return nb_error(NB_ERR_ARG, "%s: attribute '%s' has a NULL name at %d", label, a->name, j);
        if (v.type == NB_ATTR_STRING && !v.s) v.s = "";
        if (given[i]) return nb_error(NB_ERR_ARG, "%s: attribute '%s' is given twice", label, a->name);
        out[i] = v;
        given[i] = true;
    }
    for (int i = 0; i < NB_MAX_ATTRS && def->attrs[i].name; i++)
        if (def->attrs[i].required && !given[i])
            return nb_error(NB_ERR_ARG, "%s: missing required attribute '%s' (%s)", label, def->attrs[i].name,
                            nb_attr_type_name(def->attrs[i].type));
    return NB_OK;
}

static const nb_attr_value none_value;

const nb_attr_value *nb_attr_get(const nb_op_ctx *c, const char *name)
{
    int i = nb_op_attr_index(c->def, name);
    return i >= 0 ? &c->attrs[i] : &none_value;
}

bool nb_attr_bool(const nb_op_ctx *c, const char *name) { return nb_attr_get(c, name)->b; }
int64_t nb_attr_int(const nb_op_ctx *c, const char *name) { return nb_attr_get(c, name)->i; }
double nb_attr_float(const nb_op_ctx *c, const char *name) { return nb_attr_get(c, name)->f; }

const char *nb_attr_string(const nb_op_ctx *c, const char *name)
{
    const char *s = nb_attr_get(c, name)->s;
    return s ? s : "";
}

/* A rule's attribute by name: the definition gives the order of g->attrs. */
const nb_attr_value *nb_grad_attr(const nb_grad_ctx *g, const char *name)
{
    static const nb_attr_value none;
    for (int i = 0; i < NB_MAX_ATTRS && g->def->attrs[i].name; i++)
        if (!strcmp(g->def->attrs[i].name, name)) return &g->attrs[i];
    return &none;
}
