/* Rules from composite definitions (see composite.h). */
#include <stdlib.h>
#include "nabla/device.h"
#include <string.h>
#include "composite.h"
#include "nabla/ops.h"
#include "../ops/op_internal.h"

#define MAX_IN 8
#define MAX_STEPS 128

typedef struct step {
    const nb_op_def *def;
    nb_attr_value attrs[NB_MAX_ATTRS]; /* deep copies */
    int n_in;
    nb_value x[MAX_IN], y;
} step;

struct nb_composite {
    nb_builder *b;
    bool forward; /* JVP: carry tangents; else record steps for the VJP */
    nb_value keys[MAX_STEPS + 2 * NB_MAX_SLOTS], vals[MAX_STEPS + 2 * NB_MAX_SLOTS];
    int n_keys; /* value -> its tangent (JVP) or cotangent (VJP) */
    step steps[MAX_STEPS];
    int n_steps;
};

nb_builder *nb_cmp_builder(nb_composite *c) { return c->b; }

static nb_value *slot_of(nb_composite *c, nb_value v, bool make)
{
    for (int i = 0; i < c->n_keys; i++)
        if (c->keys[i].p == v.p) return &c->vals[i];
    if (!make || c->n_keys == (int)(sizeof c->keys / sizeof *c->keys)) return NULL;
    c->keys[c->n_keys] = v;
    c->vals[c->n_keys] = NB_NONE;
    return &c->vals[c->n_keys++];
}

static nb_value lookup(nb_composite *c, nb_value v)
{
    nb_value *s = nb_is_none(v) ? NULL : slot_of(c, v, false);
    return s ? *s : NB_NONE;
}

/* A grad context for one primitive with all slots present, one value each. */
static nb_grad_ctx prim_ctx(const step *s, nb_value *y)
{
    nb_grad_ctx g = {.def = s->def, .attrs = s->attrs, .x = s->x, .y = y};
    for (int k = 0; k <= NB_MAX_SLOTS; k++) {
        g.in_begin[k] = k < s->n_in ? k : s->n_in;
        g.out_begin[k] = k < 1 ? k : 1;
    }
    return g;
}

nb_value nb_cmp_emit(nb_composite *c, const char *type, int n_in, const nb_value *in, int n_attrs, const nb_attr *attrs)
{
    nb_builder *b = c->b;
    const nb_op_def *def = nb_op_find(type);
    if (nb_builder_status(b)) return NB_NONE;
    if (!def || n_in > MAX_IN || n_in != nb_op_num_inputs(def) || nb_op_num_outputs(def) != 1 ||
        c->n_steps == MAX_STEPS) {
        nb_builder_fail(b, NB_ERR_ARG, "composite rule: %s is not a primitive it can use", type);
        return NB_NONE;
    }
    nb_value y = nb_emit1(b, type, NB_VALUES_N(n_in, in), NB_ATTRS_N(n_attrs, attrs));
    if (nb_builder_status(b)) return NB_NONE;
    step *s = &c->steps[c->n_steps];
    memset(s, 0, sizeof *s);
    s->def = def;
    s->n_in = n_in;
    memcpy(s->x, in, (size_t)n_in * sizeof *in);
    s->y = y;
    nb_attr_value av[NB_MAX_ATTRS];
    if (nb_resolve_attrs(def, n_attrs, attrs, av, type)) {
        nb_builder_fail(b, NB_ERR_ARG, "composite rule: %s", nb_last_error());
        return NB_NONE;
    }
    for (int i = 0; i < NB_MAX_ATTRS && def->attrs[i].name; i++)
        if (nb_attr_value_copy(&s->attrs[i], &av[i])) {
            nb_builder_fail(b, NB_ERR_NOMEM, "composite rule: out of memory");
            return NB_NONE;
        }
    c->n_steps++;
    /* A constant (a mask, say) carries no tangent, whatever its inputs do. */
    if (!c->forward || (def->flags & NB_OP_NOT_DIFFERENTIABLE)) return y;
    /* Forward mode: this primitive's tangent, from its inputs'. */
    nb_value tx[MAX_IN], ty = NB_NONE;
    bool any = false;
    for (int k = 0; k < n_in; k++) any |= !nb_is_none(tx[k] = lookup(c, in[k]));
    if (!any) return y;
    if (!def->jvp) {
        nb_builder_fail(b, NB_ERR_UNSUPPORTED, "composite rule: %s has no JVP rule", type);
        return NB_NONE;
    }
    nb_grad_ctx g = prim_ctx(s, &s->y);
    g.tx = tx;
    g.ty = &ty;
    if (def->jvp(b, &g) || nb_builder_status(b)) return NB_NONE;
    nb_value *slot = slot_of(c, y, true);
    if (slot) *slot = ty;
    return y;
}

static void composite_free(nb_composite *c)
{
    for (int i = 0; i < c->n_steps; i++)
        for (int a = 0; a < NB_MAX_ATTRS; a++) nb_attr_value_free(&c->steps[i].attrs[a]);
    nb_free(c);
}

nb_status nb_composite_jvp(nb_builder *b, nb_grad_ctx *g, nb_composite_fn fn)
{
    nb_composite *c = nb_calloc(1, sizeof *c);
    if (!c) return nb_builder_fail(b, NB_ERR_NOMEM, "composite rule: out of memory");
    c->b = b;
    c->forward = true;
    int n_out = g->out_begin[NB_MAX_SLOTS];
    /* Tangents enter through the slots that take gradients (statistics and
     * labels, in NO_GRAD slots, are constants). */
    for (int sl = 0; sl < NB_MAX_SLOTS && g->def->inputs[sl].name; sl++)
        for (int k = g->in_begin[sl]; k < g->in_begin[sl + 1]; k++) {
            if (g->def->inputs[sl].flags & NB_SLOT_NO_GRAD) continue;
            nb_value *s = nb_is_none(g->tx[k]) ? NULL : slot_of(c, g->x[k], true);
            if (s) *s = g->tx[k];
        }
    nb_value y[2 * NB_MAX_SLOTS] = {{0}};
    nb_status st = fn(c, g, g->x, y);
    if (!st) st = nb_builder_status(b);
    for (int k = 0; k < n_out && !st; k++) g->ty[k] = lookup(c, y[k]);
    composite_free(c);
    return st;
}

nb_status nb_composite_vjp(nb_builder *b, nb_grad_ctx *g, nb_composite_fn fn)
{
    nb_composite *c = nb_calloc(1, sizeof *c);
    if (!c) return nb_builder_fail(b, NB_ERR_NOMEM, "composite rule: out of memory");
    c->b = b;
    int n_in = g->in_begin[NB_MAX_SLOTS], n_out = g->out_begin[NB_MAX_SLOTS];
    nb_value y[2 * NB_MAX_SLOTS] = {{0}};
    nb_status st = fn(c, g, g->x, y);
    if (!st) st = nb_builder_status(b);
    /* Seed the outputs' cotangents; then each primitive, last first. */
    for (int k = 0; k < n_out && !st; k++) {
        if (nb_is_none(y[k]) || nb_is_none(g->dy[k])) continue;
        nb_value *s = slot_of(c, y[k], true);
        if (s) *s = nb_is_none(*s) ? g->dy[k] : nb_add(b, *s, g->dy[k]);
    }
    for (int i = c->n_steps - 1; i >= 0 && !st; i--) {
        step *s = &c->steps[i];
        nb_value dy = lookup(c, s->y), dx[MAX_IN] = {{0}};
        if (nb_is_none(dy) || (s->def->flags & NB_OP_NOT_DIFFERENTIABLE)) continue;
        bool want[MAX_IN];
        for (int k = 0; k < s->n_in; k++)
            want[k] =
                !(s->def->inputs[k].flags & NB_SLOT_NO_GRAD) && nb_dtype_is_float(nb_value_info(b, s->x[k]).dtype);
        if (!s->def->vjp) {
            st = nb_builder_fail(b, NB_ERR_UNSUPPORTED, "composite rule: %s has no VJP rule", s->def->name);
            break;
        }
        nb_grad_ctx pg = prim_ctx(s, &s->y);
        pg.dy = &dy;
        pg.dx = dx;
        pg.want_dx = want;
        if ((st = s->def->vjp(b, &pg)) || (st = nb_builder_status(b))) break;
        for (int k = 0; k < s->n_in; k++) {
            if (!want[k] || nb_is_none(dx[k])) continue;
            nb_value *slot = slot_of(c, s->x[k], true);
            if (!slot) {
                st = nb_builder_fail(b, NB_ERR_NOMEM, "composite rule: too many values");
                break;
            }
            *slot = nb_is_none(*slot) ? dx[k] : nb_add(b, *slot, dx[k]);
        }
    }
    for (int k = 0; k < n_in && !st; k++)
        if (g->want_dx[k]) g->dx[k] = lookup(c, g->x[k]);
    composite_free(c);
    return st;
}
