/* Scopes: name -> tensor maps with a parent chain. */
#include <stdlib.h>
#include "nabla/device.h"
#include "nabla/scope.h"
#include "../core/strmap.h"
#include "scope_internal.h"

typedef struct attachment {
    void *data;
    void (*free_fn)(void *);
} attachment;

struct nb_scope {
    nb_scope *parent;
    nb_strmap vars;
    nb_strmap attached; /* key -> attachment* */
};

nb_status nb_scope_new(nb_scope **out, nb_scope *parent)
{
    *out = nb_calloc(1, sizeof **out);
    if (!*out) return nb_error(NB_ERR_NOMEM, "scope: out of memory");
    (*out)->parent = parent;
    nb_strmap_init(&(*out)->vars);
    nb_strmap_init(&(*out)->attached);
    return NB_OK;
}

void nb_scope_free(nb_scope *s)
{
    if (!s) return;
    for (int i = 0; i < s->vars.n; i++)
        if (s->vars.keys[i]) nb_tensor_release(s->vars.vals[i]);
    nb_strmap_free(&s->vars);
    for (int i = 0; i < s->attached.n; i++)
        if (s->attached.keys[i]) {
            attachment *a = s->attached.vals[i];
            if (a->free_fn) a->free_fn(a->data);
            nb_free(a);
        }
    nb_strmap_free(&s->attached);
    nb_free(s);
}

nb_scope *nb_scope_parent(const nb_scope *s) { return s->parent; }

nb_tensor *nb_scope_find_local(const nb_scope *s, const char *name)
{
    return name ? nb_strmap_get(&s->vars, name, NULL) : NULL;
}

nb_tensor *nb_scope_find(const nb_scope *s, const char *name)
{
    for (; s; s = s->parent) {
        nb_tensor *t = nb_scope_find_local(s, name);
        if (t) return t;
    }
    return NULL;
}

nb_status nb_scope_set(nb_scope *s, const char *name, nb_tensor *t)
{
    if (!name || !*name || !t) return nb_error(NB_ERR_ARG, "scope: empty name or NULL tensor");
    nb_tensor *old = nb_strmap_get(&s->vars, name, NULL);
    if (old == t) return NB_OK;
    if (nb_strmap_put(&s->vars, name, nb_tensor_retain(t))) {
        nb_tensor_release(t);
        return nb_error(NB_ERR_NOMEM, "scope: out of memory setting %s", name);
    }
    nb_tensor_release(old);
    return NB_OK;
}

nb_status nb_scope_remove(nb_scope *s, const char *name)
{
    int found;
    nb_strmap_get(&s->vars, name, &found);
    if (!found) return nb_error(NB_ERR_NOT_FOUND, "scope: no var named '%s'", name);
    nb_tensor_release(nb_strmap_remove(&s->vars, name));
    return NB_OK;
}

int nb_scope_size(const nb_scope *s) { return nb_strmap_size(&s->vars); }

/* The i-th live entry, skipping removed ones. */
static int entry_at(const nb_scope *s, int i)
{
    for (int e = 0; e < s->vars.n; e++)
        if (s->vars.keys[e] && i-- == 0) return e;
    return -1;
}

const char *nb_scope_name_at(const nb_scope *s, int i)
{
    int e = entry_at(s, i);
    return e >= 0 ? s->vars.keys[e] : NULL;
}

nb_tensor *nb_scope_tensor_at(const nb_scope *s, int i)
{
    int e = entry_at(s, i);
    return e >= 0 ? s->vars.vals[e] : NULL;
}

nb_status nb_scope_attach(nb_scope *s, const char *key, void *data, void (*free_fn)(void *))
{
    attachment *a = nb_malloc(sizeof *a);
    if (!a) {
        if (free_fn) free_fn(data);
        return nb_error(NB_ERR_NOMEM, "scope: out of memory attaching %s", key);
    }
    *a = (attachment){data, free_fn};
    attachment *old = nb_strmap_get(&s->attached, key, NULL);
    if (nb_strmap_put(&s->attached, key, a)) {
        if (free_fn) free_fn(data);
        nb_free(a);
        return nb_error(NB_ERR_NOMEM, "scope: out of memory attaching %s", key);
    }
    if (old) {
        if (old->free_fn) old->free_fn(old->data);
        nb_free(old);
    }
    return NB_OK;
}

void *nb_scope_attachment(const nb_scope *s, const char *key)
{
    for (; s; s = s->parent) {
        attachment *a = nb_strmap_get(&s->attached, key, NULL);
        if (a) return a->data;
    }
    return NULL;
}

void nb_scope_detach(nb_scope *s, const char *key)
{
    for (; s; s = s->parent) {
        int found;
        nb_strmap_get(&s->attached, key, &found);
        if (!found) continue;
        attachment *a = nb_strmap_remove(&s->attached, key);
        if (a->free_fn) a->free_fn(a->data);
        nb_free(a);
        return;
    }
}
