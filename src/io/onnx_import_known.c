/* Values a static import needs when it builds an op, computed at import
 * from the values its graph inputs are known to take (nb_onnx_import_known):
 * an eager import of the same graph runs beside the static one, node by node
 * and only as far as the values asked for need, and what each value was
 * computed from is kept, so that the program can be fixed to it at the end
 * (nabla/onnx.h says how). */
#ifdef NABLA_HAVE_ONNX
#include <stdint.h>
#include <string.h>
#include "nabla/eager.h"
#include "nabla/ops.h"
#include "onnx_internal.h"

/* What a folded value reads of a graph input. */
enum { BY_SHAPE = 1, BY_VALUE = 2 };

struct ox_known {
    ox_import eager; /* the import beside, into an eager builder of its own */
    const Onnx__GraphProto *g;
    nb_strmap producer; /* value name -> 1 + the index of the node writing it */
    nb_strmap inputs;   /* graph input name -> its ValueInfoProto */
    nb_strmap read;     /* graph input name -> BY_SHAPE | BY_VALUE (as a pointer) */
    bool *ran;          /* node i has been imported into `eager` */
    bool *need;         /* the nodes the value being computed depends on */
    nb_strmap seen;     /* name -> the BY_ ways `depends` has been through it, for that value */
};

static nb_status nomem(ox_import *im) { return nb_builder_fail(im->b, NB_ERR_NOMEM, "onnx import: out of memory"); }

/* The eager import's error, as the static import's. */
static nb_status eager_failed(ox_import *im, nb_status st)
{
    const char *msg = nb_builder_error(im->known->eager.b);
    return nb_builder_fail(im->b, st, "%s", *msg ? msg : nb_last_error());
}

static nb_status give(ox_import *im, ox_known *k, nb_feeds known)
{
    for (int i = 0; i < known.n; i++) {
        const char *name = known.v[i].name;
        const Onnx__ValueInfoProto *vi = name ? nb_strmap_get(&k->inputs, name, NULL) : NULL;
        if (!vi || !known.v[i].tensor)
            return nb_builder_fail(im->b, NB_ERR_ARG, "onnx import: known value %d ('%.200s') %s", i,
                                   name ? name : "(null)", vi ? "is NULL" : "names no graph input of the model");
        if (nb_strmap_get(&k->eager.values, name, NULL))
            return nb_builder_fail(im->b, NB_ERR_ARG, "onnx import: graph input '%.200s' is known twice", name);
        nb_value v = nb_eager_value(k->eager.b, known.v[i].tensor);
        nb_status st = ox_check_given(&k->eager, vi, v);
        if (st) return eager_failed(im, st);
        if (ox_set_value(&k->eager, name, v)) return nomem(im);
    }
    return NB_OK;
}

nb_status ox_known_open(ox_import *im, const Onnx__GraphProto *g, nb_feeds known)
{
    ox_known *k = nb_calloc(1, sizeof *k);
    nb_builder *eb = NULL;
    if (!k || nb_builder_new_eager(&eb)) {
        nb_free(k);
        return nomem(im);
    }
    nb_eager_set_test_mode(eb, true);
    im->known = k; /* freed with the import from here on */
    k->g = g;
    nb_strmap_init(&k->producer);
    nb_strmap_init(&k->inputs);
    nb_strmap_init(&k->read);
    nb_strmap_init(&k->seen);
    if (ox_import_begin(&k->eager, eb, im->dir, im->opset, g)) return nomem(im);
    k->ran = nb_calloc(g->n_node + 1, sizeof *k->ran);
    k->need = nb_calloc(g->n_node + 1, sizeof *k->need);
    if (!k->ran || !k->need) return nomem(im);
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t o = 0; o < g->node[i]->n_output; o++)
            if (*g->node[i]->output[o] &&
                nb_strmap_put(&k->producer, g->node[i]->output[o], (void *)(uintptr_t)(i + 1)))
                return nomem(im);
    for (size_t i = 0; i < g->n_input; i++)
        if (!nb_strmap_get(&k->eager.protos, g->input[i]->name, NULL) &&
            nb_strmap_put(&k->inputs, g->input[i]->name, (void *)g->input[i]))
            return nomem(im);
    return give(im, k, known);
}

static bool float_proto(const Onnx__TensorProto *p)
{
    nb_dtype dt;
    return p->has_data_type && ox_nabla_dtype(p->data_type, &dt) && nb_dtype_is_float(dt);
}

/* Marks the nodes `name` depends on in k->need and what it reads of each
 * graph input: past a Shape or Size node only the shape. A value computed
 * from a float initializer (a parameter) or an input not known is refused.
 * Each name is gone through once each way (a graph of residual blocks has
 * exponentially many paths). */
static nb_status depends(ox_import *im, const char *name, int how)
{
    ox_known *k = im->known;
    uintptr_t seen = (uintptr_t)nb_strmap_get(&k->seen, name, NULL);
    if (seen & (uintptr_t)how) return NB_OK;
    if (nb_strmap_put(&k->seen, name, (void *)(seen | (uintptr_t)how))) return nomem(im);
    if (nb_strmap_get(&k->inputs, name, NULL)) {
        if (!nb_strmap_get(&k->eager.values, name, NULL))
            return ox_node_error(im, NB_ERR_UNSUPPORTED,
                                 "needs the value of graph input '%s' at import, and the known "
                                 "values given have none for it",
                                 name);
        uintptr_t had = (uintptr_t)nb_strmap_get(&k->read, name, NULL);
        return nb_strmap_put(&k->read, name, (void *)(had | (uintptr_t)how)) ? nomem(im) : NB_OK;
    }
    const Onnx__TensorProto *p = nb_strmap_get(&k->eager.protos, name, NULL);
    if (p) {
        if (how == BY_VALUE && float_proto(p))
            return ox_node_error(im, NB_ERR_UNSUPPORTED,
                                 "needs at import a value computed from the float initializer "
                                 "'%s', a parameter that training changes",
                                 name);
        return NB_OK;
    }
    size_t node = (size_t)(uintptr_t)nb_strmap_get(&k->producer, name, NULL);
    if (!node) return NB_OK; /* no writer: the eager import says so */
    const Onnx__NodeProto *n = k->g->node[node - 1];
    k->need[node - 1] = true;
    int next = !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size") ? BY_SHAPE : how;
    for (size_t i = 0; i < n->n_input; i++) {
        nb_status st = *n->input[i] ? depends(im, n->input[i], next) : NB_OK;
        if (st) return st;
    }
    return NB_OK;
}

const nb_tensor *ox_known_value(ox_import *im, const char *name)
{
    ox_known *k = im->known;
    memset(k->need, 0, k->g->n_node * sizeof *k->need);
    nb_strmap_free(&k->seen);
    nb_strmap_init(&k->seen);
    if (depends(im, name, BY_VALUE)) return NULL;
    for (size_t i = 0; i < k->g->n_node; i++) {
        if (!k->need[i] || k->ran[i]) continue;
        k->ran[i] = true;
        k->eager.node = k->g->node[i];
        nb_status st = ox_walk_node(&k->eager);
        if (st) {
            ox_node_error(im, st, "computing '%s' from the known inputs: %s", name, nb_builder_error(k->eager.b));
            return NULL;
        }
    }
    nb_value *v = nb_strmap_get(&k->eager.values, name, NULL);
    const nb_tensor *t = v ? nb_eager_tensor(*v) : nb_strmap_get(&k->eager.consts, name, NULL);
    if (!t) ox_node_error(im, NB_ERR_UNSUPPORTED, "'%s' has no value computed from the known inputs", name);
    return t;
}

nb_status ox_known_fold(ox_import *im)
{
    for (size_t o = 0; o < im->node->n_output; o++) {
        if (!*im->node->output[o]) continue;
        const nb_tensor *t = ox_known_value(im, im->node->output[o]);
        if (!t) return nb_builder_status(im->b);
        nb_status st = ox_set_const(im, (int)o, nb_tensor_retain((nb_tensor *)t));
        if (st) return st;
    }
    return NB_OK;
}

/* Graph input `name`'s var becomes a constant holding t: written, before
 * any op reads it, by an assign of a constant, and no longer a data var. */
static nb_status make_constant(ox_import *im, nb_var *var, const nb_tensor *t)
{
    nb_block *blk = nb_builder_block(im->b);
    nb_value c = nb_constant(im->b, t);
    if (nb_is_none(c)) return nb_builder_status(im->b);
    var->is_data = false;
    nb_status st =
        nb_block_append_op(blk, "assign", NB_NAMES(nb_value_name(c)), NB_NAMES(var->name), NB_NO_ATTRS, NULL);
    if (!st) st = nb_block_move_op(blk, blk->n_ops - 2, 0);
    if (!st) st = nb_block_move_op(blk, blk->n_ops - 1, 1);
    return st
        ? nb_builder_fail(im->b, st, "onnx import: making graph input '%s' a constant: %s", var->name, nb_last_error())
        : NB_OK;
}

nb_status ox_known_guard(ox_import *im)
{
    ox_known *k = im->known;
    for (int i = 0; i < k->read.n; i++) {
        const char *name = k->read.keys[i];
        if (!name) continue;
        uintptr_t how = (uintptr_t)k->read.vals[i];
        nb_value *v = nb_strmap_get(&im->values, name, NULL);
        nb_value *e = nb_strmap_get(&k->eager.values, name, NULL);
        if (!v || v->kind != NB_VALUE_VAR || !e) continue; /* given by the caller: nothing to fix */
        nb_var *var = v->p;
        const nb_tensor *t = nb_eager_tensor(*e);
        nb_var_set_shape(var, var->dtype, t->ndim, t->shape);
        nb_status st = how & BY_VALUE ? make_constant(im, var, t) : NB_OK;
        if (st) return st;
    }
    return NB_OK;
}

void ox_known_free(ox_import *im)
{
    ox_known *k = im->known;
    if (!k) return;
    im->known = NULL;
    nb_builder *eb = k->eager.b;
    ox_import_end(&k->eager);
    nb_builder_free(eb);
    nb_strmap_free(&k->producer);
    nb_strmap_free(&k->inputs);
    nb_strmap_free(&k->read);
    nb_strmap_free(&k->seen);
    nb_free(k->ran);
    nb_free(k->need);
    nb_free(k);
}

#endif
