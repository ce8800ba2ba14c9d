/* ONNX import (nabla/onnx.h): the model unpacked by protobuf-c through
 * nabla's allocator, checked, and its graph walked node by node in order
 * (ONNX graphs are topologically sorted), each node emitted through the
 * builder by onnx_import_ops.c. Initializers become vars on first use. */
#ifdef NABLA_HAVE_ONNX
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "nabla/device.h"
#include "nabla/eager.h"
#include "nabla/init.h"
#include "nabla/onnx.h"
#include "nabla/ops.h"
#include "onnx_internal.h"

/* ---- reading the file ----------------------------------------------------- */

static void *pb_alloc(void *ud, size_t n)
{
    (void)ud;
    return nb_malloc(n ? n : 1);
}
static void pb_free(void *ud, void *p)
{
    (void)ud;
    nb_free(p);
}

static nb_status read_file(const char *path, uint8_t **buf, size_t *n)
{
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return nb_error(NB_ERR_NOT_FOUND, "onnx import: cannot open %s", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return nb_error(NB_ERR_IO, "onnx import: %s is not a file", path);
    }
    nb_status st = NB_OK;
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET)) st = nb_error(NB_ERR_IO, "onnx import: cannot read %s", path);
    else if ((unsigned long)size > 0x7fffffffu)
        st = nb_error(NB_ERR_FORMAT,
                      "onnx import: %s is %ld bytes, over protobuf's 2 GB (large weights belong in "
                      "external data files)",
                      path, size);
    else if (!(*buf = nb_malloc((size_t)size + 1)))
        st = nb_error(NB_ERR_NOMEM, "onnx import: out of memory for %s", path);
    else if (fread(*buf, 1, (size_t)size, f) != (size_t)size)
        st = nb_error(NB_ERR_IO, "onnx import: cannot read %s", path);
    fclose(f);
    *n = (size_t)size;
    if (st) nb_free(*buf), *buf = NULL;
    return st;
}

/* A graph is in SSA form: every name is written once, by an initializer, a
 * graph input (which may repeat an initializer's name, as older exporters
 * list them) or a node. onnx.checker refuses the rest, and so does nabla,
 * rather than let the last writer win. */
static nb_status check_single_writers(const Onnx__GraphProto *g, const char *path)
{
    nb_strmap seen;
    nb_strmap_init(&seen);
    nb_status st = NB_OK;
    for (size_t i = 0; i < g->n_initializer && !st; i++) {
        const char *name = g->initializer[i]->name;
        if (nb_strmap_get(&seen, name, NULL))
            st = nb_error(NB_ERR_FORMAT, "onnx import: %s: two initializers are named '%s'", path, name);
        else if (nb_strmap_put(&seen, name, (void *)1)) st = nb_error(NB_ERR_NOMEM, "onnx import: out of memory");
    }
    for (size_t i = 0; i < g->n_input && !st; i++)
        if (!nb_strmap_get(&seen, g->input[i]->name, NULL) && nb_strmap_put(&seen, g->input[i]->name, (void *)2))
            st = nb_error(NB_ERR_NOMEM, "onnx import: out of memory");
    for (size_t i = 0; i < g->n_node && !st; i++)
        for (size_t k = 0; k < g->node[i]->n_output && !st; k++) {
            const char *name = g->node[i]->output[k];
            if (!*name) continue;
            if (nb_strmap_get(&seen, name, NULL))
                st = nb_error(NB_ERR_FORMAT,
                              "onnx import: %s: node %zu (%s) writes '%s', which is already written "
                              "by an earlier node, an initializer or a graph input",
                              path, i, g->node[i]->op_type, name);
            else if (nb_strmap_put(&seen, name, (void *)3)) st = nb_error(NB_ERR_NOMEM, "onnx import: out of memory");
        }
    nb_strmap_free(&seen);
    return st;
}

/* The model's version of the default ONNX domain. */
static nb_status check_model(const Onnx__ModelProto *m, const char *path, int *opset)
{
    *opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) *opset = o->has_version ? (int)o->version : 1;
    }
    /* A model of other domains only (ai.onnx.preview.training, say) is
     * valid; its nodes are refused one by one, by domain. */
    if (*opset >= 0 && (*opset < NB_ONNX_MIN_OPSET || *opset > NB_ONNX_MAX_OPSET))
        return nb_error(NB_ERR_UNSUPPORTED, "onnx import: %s uses opset %d; nabla reads opsets %d to %d", path, *opset,
                        NB_ONNX_MIN_OPSET, NB_ONNX_MAX_OPSET);
    if (!m->graph) return nb_error(NB_ERR_FORMAT, "onnx import: %s has no graph", path);
    const Onnx__GraphProto *g = m->graph;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n->op_type) return nb_error(NB_ERR_FORMAT, "onnx import: %s: node %zu has no op type", path, i);
        if (!n->n_output)
            return nb_error(NB_ERR_FORMAT, "onnx import: %s: node %zu (%s) has no outputs", path, i, n->op_type);
        for (size_t k = 0; k < n->n_input; k++)
            if (!n->input[k]) return nb_error(NB_ERR_FORMAT, "onnx import: %s: node %zu has a NULL input", path, i);
        /* An empty name marks an optional output the model does not use. */
        for (size_t k = 0; k < n->n_output; k++)
            if (!n->output[k]) return nb_error(NB_ERR_FORMAT, "onnx import: %s: node %zu has a NULL output", path, i);
    }
    for (size_t i = 0; i < g->n_initializer; i++)
        if (!g->initializer[i]->name || !*g->initializer[i]->name)
            return nb_error(NB_ERR_FORMAT, "onnx import: %s: initializer %zu has no name", path, i);
    for (size_t i = 0; i < g->n_input; i++)
        if (!g->input[i]->name) return nb_error(NB_ERR_FORMAT, "onnx import: %s: graph input %zu has no name", path, i);
    for (size_t i = 0; i < g->n_output; i++)
        if (!g->output[i]->name)
            return nb_error(NB_ERR_FORMAT, "onnx import: %s: graph output %zu has no name", path, i);
    return check_single_writers(g, path);
}

/* ---- helpers for onnx_import_ops.c ---------------------------------------- */

nb_status ox_node_error(ox_import *im, nb_status st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = im->node;
    const char *name = n->name && *n->name ? n->name : n->n_output && *n->output[0] ? n->output[0] : n->op_type;
    if (im->opset < 0) nb_error(st, "onnx import: node '%s' (%s, no ONNX opset): %s", name, n->op_type, msg);
    else nb_error(st, "onnx import: node '%s' (%s, opset %d): %s", name, n->op_type, im->opset, msg);
    return nb_builder_fail(im->b, st, "%s", nb_last_error());
}

bool ox_has_in(const ox_import *im, int k) { return k < (int)im->node->n_input && *im->node->input[k]; }

static nb_status put_value(nb_strmap *m, const char *name, nb_value v);

nb_status ox_set_value(ox_import *im, const char *name, nb_value v) { return put_value(&im->values, name, v); }

/* An initializer or Constant as a tensor, made once and kept in consts:
 * NB_ERR_NOT_FOUND (no error set) when `name` is neither. */
static nb_status const_of(ox_import *im, const char *name, const nb_tensor **out)
{
    nb_tensor *t = nb_strmap_get(&im->consts, name, NULL);
    *out = t;
    if (t) return NB_OK;
    const Onnx__TensorProto *p = nb_strmap_get(&im->protos, name, NULL);
    if (!p) return NB_ERR_NOT_FOUND;
    char what[512];
    snprintf(what, sizeof what, "initializer '%.400s'", name);
    nb_status st = ox_tensor_from_proto(p, im->dir, what, &t);
    if (st) return ox_node_error(im, st, "%s", nb_last_error());
    if (nb_strmap_put(&im->consts, name, t)) {
        nb_tensor_release(t);
        return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    }
    *out = t;
    return NB_OK;
}

nb_value ox_in(ox_import *im, int k)
{
    if (!ox_has_in(im, k)) {
        ox_node_error(im, NB_ERR_FORMAT, "input %d is missing", k);
        return NB_NONE;
    }
    return ox_value_named(im, im->node->input[k]);
}

nb_value ox_value_named(ox_import *im, const char *name)
{
    nb_value *v = nb_strmap_get(&im->values, name, NULL);
    if (v) return *v;
    const nb_tensor *t;
    nb_status st = const_of(im, name, &t);
    if (st == NB_ERR_NOT_FOUND && im->known && nb_strmap_get(&im->shapes, name, NULL)) {
        /* A shape that arithmetic or an op other than the symbolic ones
         * reads: its value on the known inputs, a constant. */
        if (!(t = ox_known_value(im, name))) return NB_NONE;
        st = NB_OK;
    } else if (st == NB_ERR_NOT_FOUND && nb_strmap_get(&im->shapes, name, NULL))
        ox_node_error(im, NB_ERR_UNSUPPORTED,
                      "input '%s' is a shape computed at run time, which nabla follows only "
                      "through Gather, Unsqueeze, Concat and Cast into Reshape and ConstantOfShape",
                      name);
    else if (st == NB_ERR_NOT_FOUND && ox_is_seq(im, name))
        ox_node_error(im, NB_ERR_UNSUPPORTED,
                      "input '%s' is a sequence or optional, which nabla holds only at "
                      "import time, as a list that the sequence ops read (not as a tensor, nor carried by a Loop "
                      "or returned by an If)",
                      name);
    else if (st == NB_ERR_NOT_FOUND)
        ox_node_error(im, NB_ERR_FORMAT,
                      "input '%s' is neither a graph input, an initializer nor an output of an "
                      "earlier node",
                      name);
    if (st) return NB_NONE;
    /* Float initializers are what training changes; the rest are constants. */
    bool init = nb_strmap_get(&im->protos, name, NULL) != NULL;
    nb_value made = !init || !nb_dtype_is_float(t->dtype) ? nb_constant(im->b, t)
        : nb_strmap_get(&im->state, name, NULL)           ? nb_persistable_from(im->b, name, t)
                                                          : nb_param_from(im->b, name, t);
    if (nb_is_none(made)) return NB_NONE;
    if (ox_set_value(im, name, made)) {
        ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        return NB_NONE;
    }
    return made;
}

/* The tensor of a value the import has already computed, where the builder
 * holds it: an eager builder's values are tensors, so there a shape, axes
 * or bounds input computed by the graph (or fed) is as good as a constant.
 * A program's values are known only when it runs. */
static const nb_tensor *known_tensor(ox_import *im, const char *name)
{
    nb_value *v = nb_strmap_get(&im->values, name, NULL);
    return v ? nb_value_known(im->b, *v) : NULL;
}

const nb_tensor *ox_const_in(ox_import *im, int k)
{
    if (!ox_has_in(im, k)) {
        ox_node_error(im, NB_ERR_FORMAT, "input %d is missing", k);
        return NULL;
    }
    const nb_tensor *t = known_tensor(im, im->node->input[k]);
    if (t) return t;
    nb_status st = const_of(im, im->node->input[k], &t);
    if (st == NB_ERR_NOT_FOUND && im->known) return ox_known_value(im, im->node->input[k]);
    if (st == NB_ERR_NOT_FOUND)
        ox_node_error(im, NB_ERR_UNSUPPORTED,
                      "input %d ('%s') must be a constant (an initializer or a Constant node), "
                      "not computed at run time: a static program takes shapes, axes and bounds at build time "
                      "(nb_onnx_import_known computes them from the inputs' values given)",
                      k, im->node->input[k]);
    return st ? NULL : t;
}

/* A Constant node's value, kept for the nodes that read it. */
nb_status ox_set_const(ox_import *im, int k, nb_tensor *t)
{
    if (k >= (int)im->node->n_output) {
        nb_tensor_release(t);
        return NB_OK;
    }
    nb_tensor *old = nb_strmap_get(&im->consts, im->node->output[k], NULL);
    if (nb_strmap_put(&im->consts, im->node->output[k], t)) {
        nb_tensor_release(t);
        return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    }
    nb_tensor_release(old);
    return NB_OK;
}

static nb_status put_value(nb_strmap *m, const char *name, nb_value v)
{
    nb_value *p = nb_strmap_get(m, name, NULL);
    if (!p) {
        if (!(p = nb_malloc(sizeof *p))) return NB_ERR_NOMEM;
        if (nb_strmap_put(m, name, p)) {
            nb_free(p);
            return NB_ERR_NOMEM;
        }
    }
    *p = v;
    return NB_OK;
}

nb_status ox_set_shape(ox_import *im, const ox_shape *s)
{
    ox_shape *p = nb_strmap_get(&im->shapes, im->node->output[0], NULL);
    if (!p) {
        if (!(p = nb_malloc(sizeof *p))) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        if (nb_strmap_put(&im->shapes, im->node->output[0], p)) {
            nb_free(p);
            return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        }
    }
    *p = *s;
    return NB_OK;
}

const ox_shape *ox_shape_in(const ox_import *im, int k)
{
    return ox_has_in(im, k) ? nb_strmap_get(&im->shapes, im->node->input[k], NULL) : NULL;
}

nb_status ox_out(ox_import *im, int k, nb_value v)
{
    if (nb_is_none(v)) return nb_builder_status(im->b) ? nb_builder_status(im->b) : NB_ERR_ARG;
    if (k >= (int)im->node->n_output || !*im->node->output[k]) return NB_OK; /* an output the model does not use */
    if (ox_set_value(im, im->node->output[k], v)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    return NB_OK;
}

const Onnx__AttributeProto *ox_attr(const ox_import *im, const char *name)
{
    for (size_t i = 0; i < im->node->n_attribute; i++)
        if (im->node->attribute[i]->name && !strcmp(im->node->attribute[i]->name, name)) return im->node->attribute[i];
    return NULL;
}

int64_t ox_attr_i(const ox_import *im, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = ox_attr(im, name);
    return a && a->has_i ? a->i : def;
}

double ox_attr_f(const ox_import *im, const char *name, double def)
{
    const Onnx__AttributeProto *a = ox_attr(im, name);
    return a && a->has_f ? a->f : def;
}

const char *ox_attr_s(const ox_import *im, const char *name, const char *def)
{
    const Onnx__AttributeProto *a = ox_attr(im, name);
    static _Thread_local char buf[64];
    if (!a || !a->has_s) return def;
    snprintf(buf, sizeof buf, "%.*s", (int)(a->s.len < 63 ? a->s.len : 63), (const char *)a->s.data);
    return buf;
}

/* ---- the graph -------------------------------------------------------------- */

/* A data var for a graph input, shaped as the model says (symbolic dims -1). */
/* An optional(tensor) graph input is read as the tensor: a value given for
 * it is one (nabla's import takes no empty optional). */
static const Onnx__TypeProto *input_type(const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto *tp = vi->type;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && tp->optional_type)
        tp = tp->optional_type->elem_type;
    return tp;
}

static nb_value data_for(ox_import *im, const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto *tp = input_type(vi);
    const Onnx__TypeProto__Tensor *tt =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    nb_dtype dt;
    if (!tt || !tt->has_elem_type || !ox_nabla_dtype(tt->elem_type, &dt) || !tt->shape ||
        tt->shape->n_dim > NB_MAX_DIMS) {
        nb_builder_fail(im->b, NB_ERR_UNSUPPORTED,
                        "onnx import: graph input '%s' is not a tensor of a dtype and rank "
                        "nabla has",
                        vi->name);
        return NB_NONE;
    }
    int64_t shape[NB_MAX_DIMS];
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        shape[d] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0
            ? dim->dim_value
            : -1;
    }
    return nb_data(im->b, vi->name, dt, (int)tt->shape->n_dim, shape);
}

/* A value given for a graph input must be what the model declares: its
 * dtype (float16 and bfloat16 read as float32, as their initializers are),
 * its rank and every dim the model fixes. A program's data var refuses
 * other feeds when it runs; an eager import would compute on them. */
nb_status ox_check_given(ox_import *im, const Onnx__ValueInfoProto *vi, nb_value v)
{
    const Onnx__TypeProto *tp = input_type(vi);
    const Onnx__TypeProto__Tensor *tt =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    if (nb_is_none(v))
        return nb_builder_fail(im->b, NB_ERR_ARG, "onnx import: no value for graph input '%s'", vi->name);
    if (!tt || !tt->has_elem_type) return NB_OK; /* the model declares nothing to check against */
    nb_var_info info = nb_value_info(im->b, v);
    nb_dtype want;
    if (!ox_nabla_dtype(tt->elem_type, &want))
        return nb_builder_fail(im->b, NB_ERR_UNSUPPORTED,
                               "onnx import: graph input '%s' is %s, which nabla has no "
                               "tensors of",
                               vi->name, ox_type_name(tt->elem_type));
    if (info.dtype != want)
        return nb_builder_fail(im->b, NB_ERR_ARG,
                               "onnx import: graph input '%s' is %s (nabla's %s); the value given "
                               "is %s",
                               vi->name, ox_type_name(tt->elem_type), nb_dtype_name(want), nb_dtype_name(info.dtype));
    if (!tt->shape) return NB_OK;
    bool fits = (int)tt->shape->n_dim == info.ndim;
    for (int d = 0; fits && d < info.ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        fits = dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || info.shape[d] < 0 ||
            dim->dim_value == info.shape[d];
    }
    if (fits) return NB_OK;
    char want_s[160] = "", got_s[160] = "";
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        size_t len = strlen(want_s);
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            snprintf(want_s + len, sizeof want_s - len, "%s%lld", d ? ", " : "", (long long)dim->dim_value);
        else snprintf(want_s + len, sizeof want_s - len, "%s?", d ? ", " : "");
    }
    for (int d = 0; d < info.ndim; d++) {
        size_t len = strlen(got_s);
        snprintf(got_s + len, sizeof got_s - len, "%s%lld", d ? ", " : "", (long long)info.shape[d]);
    }
    return nb_builder_fail(im->b, NB_ERR_SHAPE, "onnx import: graph input '%s' is [%s]; the value given is [%s]",
                           vi->name, want_s, got_s);
}

/* In a program, the var of graph output i takes the output's name, so that
 * a model's "logits" is fetched as "logits": unless the var is fed or
 * persistable (its name is the model's already), an earlier output took it,
 * or the name is another var's. */
static nb_status name_output(ox_import *im, const Onnx__GraphProto *g, size_t i, nb_value v)
{
    const char *want = g->output[i]->name;
    if (v.kind != NB_VALUE_VAR || !*want) return NB_OK;
    nb_var *var = v.p;
    nb_block *blk = nb_builder_block(im->b);
    if (var->is_data || var->persistable || !strcmp(var->name, want) || nb_block_find_var(blk, var->name) != var ||
        nb_block_find_var_recursive(blk, want))
        return NB_OK;
    for (size_t k = 0; k < i; k++)
        if (!strcmp(g->output[k]->name, var->name)) return NB_OK;
    nb_status st = nb_block_rename_var(blk, var->name, want);
    return st ? nb_builder_fail(im->b, st, "onnx import: naming graph output '%s': %s", want, nb_last_error()) : NB_OK;
}

/* FLOAT16 and BFLOAT16, which nabla reads as float32: what a cast to them
 * would round, nabla cannot. */
static bool is_narrow(int onnx_type)
{
    return onnx_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || onnx_type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

/* Puts the tensors of vi[0..n) that the graph types FLOAT16 or BFLOAT16 in
 * im->narrow. */
static nb_status mark_narrow(ox_import *im, size_t n, Onnx__ValueInfoProto *const *vi)
{
    for (size_t i = 0; i < n; i++) {
        const Onnx__TypeProto *tp = input_type(vi[i]);
        if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
            is_narrow(tp->tensor_type->elem_type) && nb_strmap_put(&im->narrow, vi[i]->name, (void *)1))
            return NB_ERR_NOMEM;
    }
    return NB_OK;
}

nb_status ox_import_begin(ox_import *im, nb_builder *b, const char *dir, int opset, const Onnx__GraphProto *g)
{
    *im = (ox_import){.b = b, .dir = dir, .opset = opset};
    nb_strmap_init(&im->values);
    nb_strmap_init(&im->protos);
    nb_strmap_init(&im->consts);
    nb_strmap_init(&im->state);
    nb_strmap_init(&im->shapes);
    nb_strmap_init(&im->seqs);
    nb_strmap_init(&im->narrow);
    nb_status st = NB_OK;
    for (size_t i = 0; g && i < g->n_initializer && !st; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (nb_strmap_put(&im->protos, t->name, g->initializer[i]) ||
            (is_narrow(t->data_type) && nb_strmap_put(&im->narrow, t->name, (void *)1)))
            st = NB_ERR_NOMEM;
    }
    if (g && !st) st = mark_narrow(im, g->n_input, g->input);
    if (g && !st) st = mark_narrow(im, g->n_value_info, g->value_info);
    if (g && !st) st = mark_narrow(im, g->n_output, g->output);
    for (size_t i = 0; g && i < g->n_node && !st; i++)
        if (ox_reads_state(g->node[i]->op_type))
            for (size_t k = 3; k < 5 && k < g->node[i]->n_input && !st; k++)
                if (nb_strmap_put(&im->state, g->node[i]->input[k], (void *)1)) st = NB_ERR_NOMEM;
    return st ? nb_builder_fail(b, NB_ERR_NOMEM, "onnx import: out of memory") : NB_OK;
}

void ox_import_end(ox_import *im)
{
    ox_known_free(im);
    ox_seqs_free(im);
    for (int i = 0; i < im->values.n; i++)
        if (im->values.keys[i]) nb_free(im->values.vals[i]);
    for (int i = 0; i < im->shapes.n; i++)
        if (im->shapes.keys[i]) nb_free(im->shapes.vals[i]);
    for (int i = 0; i < im->consts.n; i++)
        if (im->consts.keys[i]) nb_tensor_release(im->consts.vals[i]);
    nb_strmap_free(&im->shapes);
    nb_strmap_free(&im->values);
    nb_strmap_free(&im->protos);
    nb_strmap_free(&im->consts);
    nb_strmap_free(&im->state);
    nb_strmap_free(&im->narrow);
}

nb_status ox_walk_node(ox_import *im)
{
    if (im->node->domain && *im->node->domain && strcmp(im->node->domain, "ai.onnx"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "its domain '%s' is not ONNX's", im->node->domain);
    if (im->opset < 0)
        return ox_node_error(im, NB_ERR_FORMAT, "is of the default ONNX domain, which the model does not import");
    nb_status st = ox_import_node(im);
    return st ? nb_builder_status(im->b) ? nb_builder_status(im->b) : st : NB_OK;
}

static nb_status walk(ox_import *im, const Onnx__GraphProto *g, nb_values inputs, int max_outputs, nb_value *outputs,
                      int *n_outputs)
{
    nb_status st = NB_OK;
    int n_in = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (nb_strmap_get(&im->protos, vi->name, NULL)) continue; /* older exporters list initializers as inputs */
        nb_value v;
        if (inputs.n) {
            if (n_in >= inputs.n) break;
            v = inputs.v[n_in];
            if ((st = ox_check_given(im, vi, v))) return st;
        } else {
            if (!nb_builder_program(im->b))
                return nb_builder_fail(im->b, NB_ERR_ARG,
                                       "onnx import: a builder that computes as it goes needs a "
                                       "value for each graph input ('%s' first); only a program has fed data vars",
                                       vi->name);
            v = data_for(im, vi);
        }
        n_in++;
        if (nb_is_none(v)) return nb_builder_status(im->b) ? nb_builder_status(im->b) : NB_ERR_ARG;
        if (ox_set_value(im, vi->name, v)) return nb_builder_fail(im->b, NB_ERR_NOMEM, "onnx import: out of memory");
    }
    int want = 0;
    for (size_t i = 0; i < g->n_input; i++) want += !nb_strmap_get(&im->protos, g->input[i]->name, NULL);
    if (inputs.n && inputs.n != want)
        return nb_builder_fail(im->b, NB_ERR_ARG, "onnx import: the model has %d graph inputs; %d values were given",
                               want, inputs.n);

    for (size_t i = 0; i < g->n_node; i++) {
        im->node = g->node[i];
        if ((st = ox_walk_node(im))) return st;
    }
    if (im->known && (st = ox_known_guard(im))) return st;
    if (n_outputs) *n_outputs = (int)g->n_output;
    for (size_t i = 0; i < g->n_output; i++) {
        nb_value *v = nb_strmap_get(&im->values, g->output[i]->name, NULL);
        /* A constant the import folded (a Constant, a known Shape) or an
         * initializer may be an output too: it becomes a value here. */
        const nb_tensor *t = v ? NULL : nb_strmap_get(&im->consts, g->output[i]->name, NULL);
        const Onnx__TensorProto *p = v || t ? NULL : nb_strmap_get(&im->protos, g->output[i]->name, NULL);
        nb_tensor *read = NULL;
        if (p && (st = ox_tensor_from_proto(p, im->dir, "an initializer that is a graph output", &read)))
            return nb_builder_fail(im->b, st, "onnx import: %s", nb_last_error());
        if (t || read) {
            nb_value made = nb_constant(im->b, t ? t : read);
            nb_tensor_release(read);
            if (nb_is_none(made) || ox_set_value(im, g->output[i]->name, made))
                return nb_builder_status(im->b) ? nb_builder_status(im->b)
                                                : nb_builder_fail(im->b, NB_ERR_NOMEM, "onnx import: out of memory");
            v = nb_strmap_get(&im->values, g->output[i]->name, NULL);
        }
        if (!v && ox_is_seq(im, g->output[i]->name))
            return nb_builder_fail(im->b, NB_ERR_UNSUPPORTED,
                                   "onnx import: graph output '%s' is a sequence or "
                                   "optional; nabla's import gives tensors",
                                   g->output[i]->name);
        if (!v)
            return nb_builder_fail(im->b, NB_ERR_FORMAT, "onnx import: graph output '%s' is computed by no node",
                                   g->output[i]->name);
        if ((st = name_output(im, g, i, *v))) return st;
        if ((int)i < max_outputs && outputs) outputs[i] = *v;
    }
    return NB_OK;
}

/* The model at path through b: with `inputs` given, or their data vars
 * made; with `known`, a static import's known input values. */
static nb_status import_model(const char *path, nb_builder *b, nb_values inputs, nb_feeds known, int max_outputs,
                              nb_value *outputs, int *n_outputs)
{
    if (n_outputs) *n_outputs = 0;
    if (!b) return nb_error(NB_ERR_ARG, "onnx import: the builder is NULL");
    if (nb_builder_status(b)) return nb_builder_status(b);
    if (!path || (inputs.n && !inputs.v) || inputs.n < 0 || max_outputs < 0 || (max_outputs && !outputs) ||
        known.n < 0 || (known.n && !known.v))
        return nb_builder_fail(b, NB_ERR_ARG, "onnx import: needs a path, and arrays for the inputs and outputs given");
    uint8_t *buf;
    size_t n = 0;
    nb_status st = read_file(path, &buf, &n);
    if (st) return nb_builder_fail(b, st, "%s", nb_last_error());
    ProtobufCAllocator alloc = {pb_alloc, pb_free, NULL};
    Onnx__ModelProto *m = onnx__model_proto__unpack(&alloc, n, buf);
    nb_free(buf);
    if (!m)
        return nb_builder_fail(b, NB_ERR_FORMAT,
                               "onnx import: %s is not an ONNX model (protobuf-c could not "
                               "decode it)",
                               path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path) snprintf(dir, sizeof dir, "/");
    int opset;
    ox_import im;
    st = check_model(m, path, &opset);
    if (st) nb_builder_fail(b, st, "%s", nb_last_error());
    if (ox_import_begin(&im, b, dir, opset, st ? NULL : m->graph) && !st) st = nb_builder_status(b);
    if (!st && known.n) st = ox_known_open(&im, m->graph, known);
    if (!st) st = walk(&im, m->graph, inputs, max_outputs, outputs, n_outputs);
    ox_import_end(&im);
    onnx__model_proto__free_unpacked(m, &alloc);
    return st;
}

nb_status nb_onnx_import(const char *path, nb_builder *b, nb_values inputs, int max_outputs, nb_value *outputs,
                         int *n_outputs)
{
    return import_model(path, b, inputs, NB_NO_FEEDS, max_outputs, outputs, n_outputs);
}

nb_status nb_onnx_import_known(const char *path, nb_builder *b, nb_feeds known, int max_outputs, nb_value *outputs,
                               int *n_outputs)
{
    if (b && !nb_builder_status(b) && !nb_builder_program(b))
        return nb_builder_fail(b, NB_ERR_ARG,
                               "onnx import: nb_onnx_import_known needs a record builder (it builds "
                               "a static program); an eager import knows every value already (nb_onnx_import)");
    return import_model(path, b, NB_NO_VALUES, known, max_outputs, outputs, n_outputs);
}

#endif
