/* ONNX export (nabla/onnx.h): the forward ops of block 0 pruned to what the
 * fetches need, each turned into nodes by onnx_export_ops.c, the data vars
 * they read as the graph's inputs and the persistable ones as initializers,
 * packed by protobuf-c and written atomically. */
#ifdef NABLA_HAVE_ONNX
#include <stdio.h>
#include <string.h>
#include "atomic_file.h"
#include "nabla/device.h"
#include "nabla/program.h"
#include "nabla/scope.h"
#include "nabla/version.h"
#include "nabla/onnx.h"
#include "onnx_internal.h"
#include "../core/strmap.h"

/* ---- building blocks for onnx_export_ops.c ------------------------------ */

/* Whether `name` is taken: by a var of the program (whose names become the
 * graph's) or by an initializer the export already made. */
static bool name_taken(const ox_export *e, const char *name)
{
    if (nb_block_find_var(e->blk, name)) return true;
    for (size_t i = 0; i < e->n_inits; i++)
        if (!strcmp(e->inits[i]->name, name)) return true;
    return false;
}

const char *ox_tmp(ox_export *e, const char *base)
{
    char buf[512];
    do snprintf(buf, sizeof buf, "%.480s/%d", base, e->n_tmp++);
    while (name_taken(e, buf));
    return ox_strdup(&e->a, buf);
}

/* Makes room for one more pointer in an arena array. */
static bool grow(ox_arena *a, void ***v, size_t n, size_t *cap)
{
    if (n < *cap) return true;
    size_t c = *cap ? 2 * *cap : 16;
    void **nv = ox_alloc(a, c * sizeof *nv);
    if (!nv) return false;
    if (n) memcpy(nv, *v, n * sizeof *nv);
    *v = nv;
    *cap = c;
    return true;
}

#define MAX_NODE_ATTRS 8

Onnx__NodeProto *ox_node_outs(ox_export *e, const char *type, int n_in, const char *const *in, int n_out,
                              const char *const *out)
{
    Onnx__NodeProto *n = ox_alloc(&e->a, sizeof *n);
    if (!n || !grow(&e->a, (void ***)&e->nodes, e->n_nodes, &e->cap_nodes)) return NULL;
    onnx__node_proto__init(n);
    n->op_type = ox_strdup(&e->a, type);
    n->input = ox_alloc(&e->a, (size_t)n_in * sizeof *n->input);
    n->output = ox_alloc(&e->a, (size_t)n_out * sizeof *n->output);
    n->attribute = ox_alloc(&e->a, MAX_NODE_ATTRS * sizeof *n->attribute);
    if (!n->op_type || !n->input || !n->output || !n->attribute || n_out < 1) return NULL;
    for (int i = 0; i < n_in; i++)
        if (!in[i] || !(n->input[i] = ox_strdup(&e->a, in[i]))) return NULL;
    n->n_input = (size_t)n_in;
    for (int k = 0; k < n_out; k++)
        if (!out[k] || !(n->output[k] = ox_strdup(&e->a, out[k]))) return NULL;
    n->n_output = (size_t)n_out;
    n->name = n->output[0];
    e->nodes[e->n_nodes++] = n;
    return n;
}

Onnx__NodeProto *ox_node(ox_export *e, const char *type, int n_in, const char *const *in, const char *out)
{
    return ox_node_outs(e, type, n_in, in, 1, &out);
}

bool ox_needed(const ox_export *e, const char *name) { return nb_strmap_get(e->needed, name, NULL) != NULL; }

static Onnx__AttributeProto *attr(ox_export *e, Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *a = n && n->n_attribute < MAX_NODE_ATTRS ? ox_alloc(&e->a, sizeof *a) : NULL;
    if (!a || !(a->name = ox_strdup(&e->a, name))) {
        e->a.failed = true;
        return NULL;
    }
    onnx__attribute_proto__init(a);
    a->name = ox_strdup(&e->a, name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void ox_attr_int(ox_export *e, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = 1, a->i = v;
}

void ox_attr_float(ox_export *e, Onnx__NodeProto *n, const char *name, double v)
{
    Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = 1, a->f = (float)v;
}

void ox_attr_ints(ox_export *e, Onnx__NodeProto *n, const char *name, int count, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (!a || !(a->ints = ox_alloc(&e->a, (size_t)count * sizeof *v))) return;
    memcpy(a->ints, v, (size_t)count * sizeof *v);
    a->n_ints = (size_t)count;
}

void ox_attr_string(ox_export *e, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *s = a ? ox_strdup(&e->a, v) : NULL;
    if (s) a->has_s = 1, a->s.data = (uint8_t *)s, a->s.len = strlen(s);
}

void ox_attr_tensor(ox_export *e, Onnx__NodeProto *n, const char *name, const nb_tensor *t)
{
    Onnx__AttributeProto *a = attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    if (a && !(a->t = ox_tensor_proto(&e->a, name, t))) e->a.failed = true;
}

bool ox_add_init(ox_export *e, const char *name, const nb_tensor *t)
{
    Onnx__TensorProto *p = ox_tensor_proto(&e->a, name, t);
    if (!p || !grow(&e->a, (void ***)&e->inits, e->n_inits, &e->cap_inits)) return false;
    e->inits[e->n_inits++] = p;
    return true;
}

static const char *add_tensor(ox_export *e, nb_tensor *t, const char *base)
{
    const char *name = t ? ox_tmp(e, base) : NULL;
    bool ok = name && ox_add_init(e, name, t);
    nb_tensor_release(t);
    if (!ok) e->a.failed = true;
    return ok ? name : NULL;
}

const char *ox_scalar(ox_export *e, nb_dtype dt, double v)
{
    nb_tensor *t = NULL;
    nb_tensor_scalar(&t, dt, v);
    return add_tensor(e, t, "const");
}

const char *ox_int64s(ox_export *e, int count, const int64_t *v)
{
    nb_tensor *t = NULL;
    int64_t shape[1] = {count};
    nb_tensor_from_data(&t, NB_I64, 1, shape, v);
    return add_tensor(e, t, "ints");
}

/* ---- the walk ----------------------------------------------------------- */

/* Marks the forward ops that the fetches need (keep[i]), from the last op
 * back: an op is needed when it writes a needed var, and then the vars its
 * ONNX form reads are needed. */
static nb_status prune(const nb_block *blk, nb_names fetches, nb_strmap *needed, bool *keep)
{
    for (int i = 0; i < fetches.n; i++) {
        if (!fetches.v[i]) return nb_error(NB_ERR_ARG, "onnx export: fetch %d is NULL, not a var's name", i);
        if (!nb_block_find_var(blk, fetches.v[i]))
            return nb_error(NB_ERR_NOT_FOUND, "onnx export: fetch '%s' is not a var of block 0",
                            fetches.v[i] ? fetches.v[i] : "(null)");
        if (nb_strmap_put(needed, fetches.v[i], (void *)1)) return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    }
    for (int i = blk->n_ops - 1; i >= 0; i--) {
        const nb_op *op = blk->ops[i];
        keep[i] = false;
        if (op->role != NB_ROLE_FORWARD) continue;
        for (int k = 0; k < nb_op_n_outputs(op) && !keep[i]; k++)
            keep[i] = nb_strmap_get(needed, op->outputs[k], NULL) != NULL;
        const unsigned unread = keep[i] ? ox_export_unread(op) : 0;
        for (int s = 0; keep[i] && s < NB_MAX_SLOTS; s++)
            for (int k = 0; k < nb_op_in_count(op, s) && !(unread >> s & 1); k++)
                if (nb_strmap_put(needed, nb_op_in_name(op, s, k), (void *)1))
                    return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    }
    return NB_OK;
}

static Onnx__ValueInfoProto *value_info(ox_arena *a, const nb_var *v)
{
    Onnx__ValueInfoProto *vi = ox_alloc(a, sizeof *vi);
    Onnx__TypeProto *tp = ox_alloc(a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ox_alloc(a, sizeof *tt);
    Onnx__TensorShapeProto *sh = ox_alloc(a, sizeof *sh);
    if (!vi || !tp || !tt || !sh) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    vi->name = ox_strdup(a, v->name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = ox_onnx_type(v->dtype);
    tt->shape = sh;
    sh->dim = ox_alloc(a, (size_t)v->ndim * sizeof *sh->dim + 1);
    if (!sh->dim) return NULL;
    sh->n_dim = (size_t)v->ndim;
    for (int d = 0; d < v->ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = ox_alloc(a, sizeof *dim);
        if (!dim) return NULL;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (v->shape[d] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = v->shape[d];
        } else {
            char name[64];
            if (d == 0) snprintf(name, sizeof name, "N");
            else snprintf(name, sizeof name, "%s_dim%d", v->name, d);
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = ox_strdup(a, name);
        }
        sh->dim[d] = dim;
    }
    return vi->name ? vi : NULL;
}

/* The graph's inputs and initializers: every var a kept op reads that no
 * kept op writes (a persistable output, as batch_norm's running mean, is
 * not written by its inference form). */
static nb_status sources(ox_export *e, nb_scope *scope, const bool *keep, const nb_strmap *needed, Onnx__GraphProto *g)
{
    const nb_block *blk = e->blk;
    nb_strmap made;
    nb_strmap_init(&made);
    nb_status st = NB_OK;
    for (int i = 0; i < blk->n_ops && !st; i++)
        for (int k = 0; keep[i] && k < nb_op_n_outputs(blk->ops[i]) && !st; k++) {
            const nb_var *v = nb_block_find_var(blk, blk->ops[i]->outputs[k]);
            if (v && !v->persistable && nb_strmap_put(&made, v->name, (void *)1)) st = NB_ERR_NOMEM;
        }
    g->input = ox_alloc(&e->a, (size_t)blk->n_vars * sizeof *g->input + 1);
    if (!g->input) st = NB_ERR_NOMEM;
    if (st) {
        nb_strmap_free(&made);
        return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    }
    for (int i = 0; i < blk->n_vars && !st; i++) {
        const nb_var *v = blk->vars[i];
        if (!nb_strmap_get(needed, v->name, NULL) || nb_strmap_get(&made, v->name, NULL)) continue;
        if (v->persistable) {
            const nb_tensor *t = nb_scope_find(scope, v->name);
            if (!t)
                st = nb_error(NB_ERR_NOT_FOUND,
                              "onnx export: parameter '%s' has no value in the scope (run the "
                              "startup program, or train, first)",
                              v->name);
            else if (!ox_add_init(e, v->name, t))
                st = nb_error(NB_ERR_NOMEM, "onnx export: out of memory for '%s'", v->name);
        } else if (v->is_data) {
            if (!(g->input[g->n_input++] = value_info(&e->a, v)))
                st = nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
        } else {
            st = nb_error(NB_ERR_ARG,
                          "onnx export: var '%s' is read but neither fed, computed by a forward op, "
                          "nor persistable",
                          v->name);
        }
    }
    nb_strmap_free(&made);
    return st;
}

/* Packs the model and writes it atomically. */
static nb_status write_model(const Onnx__ModelProto *m, const char *path)
{
    size_t n = onnx__model_proto__get_packed_size(m);
    if (n > 0x7fffffffu)
        return nb_error(NB_ERR_UNSUPPORTED, "onnx export: the model is %zu bytes, over protobuf's 2 GB", n);
    uint8_t *buf = nb_malloc(n + 1);
    if (!buf) return nb_error(NB_ERR_NOMEM, "onnx export: out of memory for %zu bytes", n);
    onnx__model_proto__pack(m, buf);
    nb_atomic_file *f;
    nb_status st = nb_atomic_open(&f, path);
    if (!st) st = nb_atomic_write(f, buf, n);
    if (!st) st = nb_atomic_commit(f);
    else if (f) nb_atomic_abort(f);
    nb_free(buf);
    return st;
}

static nb_status export_graph(ox_export *e, nb_scope *scope, nb_names fetches, const char *path)
{
    const nb_block *blk = e->blk;
    bool *keep = nb_calloc((size_t)blk->n_ops + 1, sizeof *keep);
    nb_strmap needed;
    nb_strmap_init(&needed);
    nb_status st = keep ? prune(blk, fetches, &needed, keep) : nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    e->needed = &needed;
    for (int i = 0; !st && i < blk->n_ops; i++)
        if (keep[i]) st = ox_export_op(e, blk->ops[i]);
    Onnx__GraphProto *g = st ? NULL : ox_alloc(&e->a, sizeof *g);
    if (!st && !g) st = nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    if (!st) {
        onnx__graph_proto__init(g);
        st = sources(e, scope, keep, &needed, g);
    }
    nb_free(keep);
    nb_strmap_free(&needed);
    e->needed = NULL;
    if (st) return st;
    g->name = "nabla";
    g->output = ox_alloc(&e->a, (size_t)fetches.n * sizeof *g->output + 1);
    for (int i = 0; g->output && i < fetches.n; i++)
        g->output[g->n_output++] = value_info(&e->a, nb_block_find_var(blk, fetches.v[i]));
    g->node = e->nodes;
    g->n_node = e->n_nodes;
    g->initializer = e->inits;
    g->n_initializer = e->n_inits;

    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    opset.domain = "";
    opset.has_version = 1;
    opset.version = NB_ONNX_OPSET;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 7; /* the IR version of opset 13 */
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = "nabla";
    m.producer_version = NABLA_VERSION;
    m.graph = g;
    if (e->a.failed) return nb_error(NB_ERR_NOMEM, "onnx export: out of memory");
    return write_model(&m, path);
}

bool nb_onnx_available(void) { return true; }

nb_status nb_onnx_export(const nb_program *program, nb_scope *scope, nb_names fetches, const char *path)
{
    if (!program || !scope || !path || fetches.n <= 0 || !fetches.v)
        return nb_error(NB_ERR_ARG, "onnx export: needs a program, a scope, at least one fetch and a path");
    ox_export e = {.blk = program->blocks[0]};
    nb_status st = export_graph(&e, scope, fetches, path);
    ox_arena_free(&e.a);
    return st;
}

#endif
