/* ONNX's control flow as nabla's (nabla/control.h): If on nb_cond, Loop on
 * nb_while_loop, Scan on nb_scan. Their bodies are graphs in attributes,
 * walked inside the callbacks, so that a static program records them as
 * sub-blocks and an eager import runs them as often as the data says.
 *
 * A sub-graph reads the enclosing graphs' names (ONNX's outer scope) and its
 * own. The import shares one name map for all of them, which ONNX's rule
 * that every name is written once across a model and its sub-graphs makes
 * safe; but what an outer name is made into must live in the outer block,
 * so before a sub-block opens every initializer or constant a sub-graph
 * reads (its own initializers too) becomes a value where the node stands. */
#ifdef NABLA_HAVE_ONNX
#include <stdint.h>
#include <string.h>
#include "nabla/control.h"
#include "nabla/eager.h"
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)
#define MAX_CARRY 60 /* nabla's control ops carry 64 values; Loop adds a counter and a condition */

static const Onnx__GraphProto *graph_attr(ox_import *im, const char *name)
{
    const Onnx__AttributeProto *a = ox_attr(im, name);
    if (!a || !a->g) {
        ox_node_error(im, NB_ERR_FORMAT, "has no graph attribute '%s'", name);
        return NULL;
    }
    return a->g;
}

static bool writes(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_input; i++)
        if (!strcmp(g->input[i]->name, name)) return true;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++)
            if (!strcmp(g->node[i]->output[k], name)) return true;
    return false;
}

/* A name read by g (or a graph nested in it) that is an initializer or a
 * folded constant and no value yet: made one now, in the current block. */
static nb_status lift(ox_import *im, const Onnx__GraphProto *g, const char *name)
{
    if (!*name || writes(g, name) || nb_strmap_get(&im->values, name, NULL)) return NB_OK;
    if (!nb_strmap_get(&im->protos, name, NULL) && !nb_strmap_get(&im->consts, name, NULL)) return NB_OK;
    return nb_is_none(ox_value_named(im, name)) ? nb_builder_status(B) : NB_OK;
}

/* Sub-graphs nest no deeper than this: a file nesting them further would
 * only exhaust the stack. */
#define MAX_NESTING 64

static nb_status prepare_nested(ox_import *im, const Onnx__GraphProto *g, int depth)
{
    if (depth > MAX_NESTING) return ox_unsupported(im, "nests sub-graphs more than 64 deep");
    /* What check_model checks of the main graph, checked of this one. */
    const char *gname = g->name ? g->name : "";
    for (size_t i = 0; i < g->n_input; i++)
        if (!g->input[i]->name)
            return ox_node_error(im, NB_ERR_FORMAT, "sub-graph '%s': input %zu has no name", gname, i);
    for (size_t i = 0; i < g->n_output; i++)
        if (!g->output[i]->name)
            return ox_node_error(im, NB_ERR_FORMAT, "sub-graph '%s': output %zu has no name", gname, i);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        bool named = n->op_type && n->n_output;
        for (size_t k = 0; named && k < n->n_input; k++) named = n->input[k] != NULL;
        for (size_t k = 0; named && k < n->n_output; k++) named = n->output[k] != NULL;
        if (!named)
            return ox_node_error(im, NB_ERR_FORMAT,
                                 "sub-graph '%s': node %zu lacks an op type, an output or a name "
                                 "of an input or output",
                                 gname, i);
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        if (!g->initializer[i]->name || !*g->initializer[i]->name)
            return ox_node_error(im, NB_ERR_FORMAT, "its sub-graph '%s' has an initializer without a name",
                                 g->name ? g->name : "");
        if (nb_strmap_put(&im->protos, g->initializer[i]->name, g->initializer[i]))
            return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    }
    nb_status st = NB_OK;
    for (size_t i = 0; i < g->n_node && !st; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input && !st; k++) st = lift(im, g, n->input[k]);
        for (size_t a = 0; a < n->n_attribute && !st; a++) {
            if (n->attribute[a]->g) st = prepare_nested(im, n->attribute[a]->g, depth + 1);
            for (size_t j = 0; j < n->attribute[a]->n_graphs && !st; j++)
                st = prepare_nested(im, n->attribute[a]->graphs[j], depth + 1);
        }
    }
    for (size_t i = 0; i < g->n_output && !st; i++) st = lift(im, g, g->output[i]->name);
    return st;
}

static nb_status prepare(ox_import *im, const Onnx__GraphProto *g) { return prepare_nested(im, g, 1); }

/* g's nodes through the builder, its inputs bound to in[0..n_in), its
 * outputs into out[0..n_out). im->node is the control node again after. */
static nb_status walk_graph(ox_import *im, const Onnx__GraphProto *g, int n_in, const nb_value *in, int n_out,
                            nb_value *out)
{
    const Onnx__NodeProto *self = im->node;
    if ((int)g->n_input != n_in || (int)g->n_output != n_out)
        return ox_node_error(im, NB_ERR_FORMAT,
                             "its sub-graph '%s' has %zu inputs and %zu outputs; %d and %d are "
                             "expected",
                             g->name ? g->name : "", g->n_input, g->n_output, n_in, n_out);
    for (int i = 0; i < n_in; i++)
        if (ox_set_value(im, g->input[i]->name, in[i])) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    nb_status st = NB_OK;
    for (size_t i = 0; i < g->n_node && !st; i++) {
        im->node = g->node[i];
        st = ox_walk_node(im);
    }
    im->node = self;
    if (st) return st;
    for (int i = 0; i < n_out; i++) {
        const char *name = g->output[i]->name;
        nb_value *v = nb_strmap_get(&im->values, name, NULL);
        out[i] = v ? *v : ox_value_named(im, name); /* a Constant of the sub-graph */
        if (nb_is_none(out[i])) return nb_builder_status(B) ? nb_builder_status(B) : NB_ERR_ARG;
    }
    return NB_OK;
}

/* nabla's control ops list each outer value once among their inputs: a
 * value both given as a loop's initial value (or sequence) and read by name
 * in the body is bound only as the former, and a fed data var read so is
 * then missing from the step's scope ("data var 'x' was not fed"). A copy
 * gives the initial value a name of its own. */
static nb_value own_name(ox_import *im, nb_value v)
{
    nb_var *var = ox_var(v);
    return var && var->is_data ? nb_assign(B, v) : v;
}

/* ---- If ---------------------------------------------------------------------- */

typedef struct if_ctx {
    ox_import *im;
    const Onnx__GraphProto *then_g, *else_g;
} if_ctx;

static nb_status then_branch(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)b, (void)in;
    if_ctx *c = ctx;
    return walk_graph(c->im, c->then_g, 0, NULL, (int)c->im->node->n_output, out);
}

static nb_status else_branch(nb_builder *b, const nb_value *in, nb_value *out, void *ctx)
{
    (void)b, (void)in;
    if_ctx *c = ctx;
    return walk_graph(c->im, c->else_g, 0, NULL, (int)c->im->node->n_output, out);
}

static nb_status i_if(ox_import *im)
{
    if_ctx c = {im, graph_attr(im, "then_branch"), graph_attr(im, "else_branch")};
    nb_value pred = ox_in(im, 0);
    if (!c.then_g || !c.else_g || nb_is_none(pred)) return nb_builder_status(B);
    int n_out = (int)im->node->n_output;
    if (n_out > MAX_CARRY) return ox_unsupported(im, "has more outputs than nabla's cond carries");
    nb_status st = prepare(im, c.then_g);
    if (!st) st = prepare(im, c.else_g);
    if (st) return st;
    nb_branches br = {then_branch, else_branch, &c};
    nb_value out[MAX_CARRY];
    if ((st = nb_cond(B, pred, &br, NB_VALUES_N(0, NULL), n_out, out))) return st;
    for (int i = 0; i < n_out; i++)
        if ((st = ox_out(im, i, out[i]))) return st;
    return NB_OK;
}

/* ---- Loop --------------------------------------------------------------------
 * carry = (iteration, condition, v...): the loop runs while the condition
 * holds and the iteration is below the trip count M, when M is given. The
 * body's scan outputs are stacked: eagerly as they come. A program stacks
 * them only where it knows their number: with M known and a condition that
 * cannot stop the loop earlier, the Loop is a scan over the iterations
 * 0..M-1 (nb_scan, whose step outputs stack whatever their shape). */

typedef struct loop_ctx {
    ox_import *im;
    const Onnx__GraphProto *body;
    nb_value trips; /* M, or NB_NONE */
    int n_v, n_scan;
    nb_var_info cond_info;
    nb_value *ys; /* eager: n_scan values per iteration */
    int64_t n_iter, cap_iter;
} loop_ctx;

static nb_status loop_cond(nb_builder *b, const nb_value *carry, nb_value *pred, void *ctx)
{
    loop_ctx *c = ctx;
    *pred = carry[1];
    if (!nb_is_none(c->trips)) *pred = nb_logical_and(b, *pred, nb_less(b, carry[0], c->trips));
    return nb_builder_status(b);
}

static nb_status keep_ys(loop_ctx *c, const nb_value *ys)
{
    if (c->n_iter == c->cap_iter) {
        int64_t cap = c->cap_iter ? 2 * c->cap_iter : 16;
        nb_value *grown = nb_realloc(c->ys, (size_t)(cap * c->n_scan) * sizeof *grown);
        if (!grown) return ox_node_error(c->im, NB_ERR_NOMEM, "out of memory");
        c->ys = grown, c->cap_iter = cap;
    }
    memcpy(c->ys + c->n_iter++ * c->n_scan, ys, (size_t)c->n_scan * sizeof *ys);
    return NB_OK;
}

static nb_status loop_body(nb_builder *b, const nb_value *carry, nb_value *next, void *ctx)
{
    loop_ctx *c = ctx;
    /* The body reads the iteration and the condition as ONNX's 0-d tensors. */
    nb_value in[2 + MAX_CARRY], out[1 + 2 * MAX_CARRY];
    in[0] = carry[0];
    in[1] = nb_reshape(b, carry[1], 0, NULL);
    memcpy(in + 2, carry + 2, (size_t)c->n_v * sizeof *in);
    nb_status st = walk_graph(c->im, c->body, 2 + c->n_v, in, 1 + c->n_v + c->n_scan, out);
    if (st) return st;
    next[0] = nb_add(b, carry[0], ox_const_scalar(c->im, NB_I64, 1));
    next[1] = nb_reshape(b, out[0], c->cond_info.ndim, c->cond_info.shape);
    memcpy(next + 2, out + 1, (size_t)c->n_v * sizeof *next);
    return c->n_scan ? keep_ys(c, out + 1 + c->n_v) : nb_builder_status(b);
}

/* One iteration of a program's counted Loop: x_t is its number. */
static nb_status counted_step(nb_builder *b, const nb_value *carry, const nb_value *x_t, nb_value *next, nb_value *y_t,
                              void *ctx)
{
    loop_ctx *c = ctx;
    nb_value in[2 + MAX_CARRY], out[1 + 2 * MAX_CARRY];
    in[0] = x_t[0];
    in[1] = ox_const_scalar(c->im, NB_BOOL, 1);
    memcpy(in + 2, carry, (size_t)c->n_v * sizeof *in);
    nb_status st = walk_graph(c->im, c->body, 2 + c->n_v, in, 1 + c->n_v + c->n_scan, out);
    if (st) return st;
    memcpy(next, out + 1, (size_t)c->n_v * sizeof *next);
    memcpy(y_t, out + 1 + c->n_v, (size_t)c->n_scan * sizeof *y_t);
    return nb_builder_status(b);
}

/* Whether the body's condition output is its condition input unchanged:
 * only such a loop runs exactly M times. */
static bool keeps_condition(const Onnx__GraphProto *g)
{
    const char *in = g->input[1]->name, *out = g->output[0]->name;
    if (!strcmp(in, out)) return true;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!strcmp(n->op_type, "Identity") && n->n_input == 1 && n->n_output == 1 && !strcmp(n->output[0], out))
            return !strcmp(n->input[0], in);
    }
    return false;
}

static nb_status counted_loop(ox_import *im, loop_ctx *c)
{
    const nb_tensor *m = ox_has_in(im, 0) ? ox_const_in(im, 0) : NULL;
    const nb_tensor *cond = ox_has_in(im, 1) ? ox_const_in(im, 1) : NULL;
    nb_builder_clear_error(B);
    if (!m || nb_tensor_numel(m) != 1 || nb_tensor_get(m, 0) < 1 || nb_tensor_get(m, 0) > INT32_MAX)
        return ox_unsupported(im,
                              "has scan outputs, whose length a static program must know: the trip count M must "
                              "be known at import (a constant, or computed from nb_onnx_import_known's inputs) and "
                              "at least 1");
    if ((ox_has_in(im, 1) && (!cond || nb_tensor_numel(cond) != 1 || nb_tensor_get(cond, 0) == 0)) ||
        !keeps_condition(c->body))
        return ox_unsupported(im,
                              "has scan outputs and may stop before M iterations (its condition is not "
                              "constant true), so their length only a run knows");
    int64_t trips = (int64_t)nb_tensor_get(m, 0);
    nb_tensor *iota;
    if (nb_tensor_new(&iota, NB_I64, 1, &trips)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    for (int64_t t = 0; t < trips; t++) nb_tensor_set(iota, t, (double)t);
    nb_value xs = nb_constant(B, iota), init[MAX_CARRY], final[MAX_CARRY], ys[MAX_CARRY];
    nb_tensor_release(iota);
    for (int i = 0; i < c->n_v; i++) init[i] = own_name(im, ox_in(im, 2 + i));
    nb_status st = nb_builder_status(B);
    if (!st) st = prepare(im, c->body);
    nb_scan_io io = {NB_VALUES_N(c->n_v, init), NB_VALUES_N(1, &xs), c->n_scan, final, ys, false};
    if (!st) st = nb_scan(B, counted_step, c, &io);
    for (int i = 0; i < c->n_v && !st; i++) st = ox_out(im, i, final[i]);
    for (int k = 0; k < c->n_scan && !st; k++) st = ox_out(im, c->n_v + k, ys[k]);
    return st;
}

/* Eagerly, the iterations' scan outputs stacked along a new axis 0. */
static nb_status stack_ys(ox_import *im, loop_ctx *c)
{
    nb_status st = NB_OK;
    if (c->n_scan && !c->n_iter)
        return ox_unsupported(im, "ran no iteration, so the shape of its scan outputs is unknown");
    nb_value *parts = c->n_scan ? nb_malloc((size_t)c->n_iter * sizeof *parts) : NULL;
    if (c->n_scan && !parts) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    for (int k = 0; k < c->n_scan && !st; k++) {
        for (int64_t t = 0; t < c->n_iter; t++) parts[t] = c->ys[t * c->n_scan + k];
        st = ox_out(im, c->n_v + k, nb_stack(B, (int)c->n_iter, parts, 0));
    }
    nb_free(parts);
    return st;
}

static nb_status i_loop(ox_import *im)
{
    loop_ctx c = {.im = im, .body = graph_attr(im, "body"), .trips = NB_NONE};
    if (!c.body) return nb_builder_status(B);
    c.n_v = (int)im->node->n_input - 2;
    c.n_scan = (int)im->node->n_output - c.n_v;
    if (c.n_v < 0 || c.n_scan < 0 || (int)c.body->n_input != 2 + c.n_v || (int)c.body->n_output != 1 + c.n_v + c.n_scan)
        return ox_node_error(im, NB_ERR_FORMAT,
                             "has %zu inputs and %zu outputs, and its body %zu and %zu: they do "
                             "not fit (M, cond, v... -> v..., scans...; body: i, cond, v... -> cond, v..., scans...)",
                             im->node->n_input, im->node->n_output, c.body->n_input, c.body->n_output);
    if (2 + c.n_v + c.n_scan > MAX_CARRY) return ox_unsupported(im, "carries more values than nabla's while loop");
    if (c.n_scan && nb_builder_program(B)) return counted_loop(im, &c);
    nb_value carry[MAX_CARRY], final[MAX_CARRY];
    carry[0] = nb_fill_constant(B, NB_I64, 0, NULL, 0);
    if (ox_has_in(im, 0)) c.trips = nb_reshape(B, ox_in(im, 0), 0, NULL);
    carry[1] = ox_has_in(im, 1) ? own_name(im, ox_in(im, 1)) : nb_fill_constant(B, NB_BOOL, 0, NULL, 1);
    for (int i = 0; i < c.n_v; i++) carry[2 + i] = own_name(im, ox_in(im, 2 + i));
    nb_status st = nb_builder_status(B);
    if (st) return st;
    c.cond_info = nb_value_info(B, carry[1]);
    if (!st) st = prepare(im, c.body);
    if (!st) st = nb_while_loop(B, loop_cond, loop_body, &c, NB_VALUES_N(2 + c.n_v, carry), final);
    for (int i = 0; i < c.n_v && !st; i++) st = ox_out(im, i, final[2 + i]);
    if (!st) st = stack_ys(im, &c);
    nb_free(c.ys);
    return st;
}

/* ---- Scan --------------------------------------------------------------------
 * From opset 9: N states carried, M sequences sliced along their axis 0 (the
 * axes and directions nabla's scan has), K step outputs stacked. */

typedef struct scan_ctx {
    ox_import *im;
    const Onnx__GraphProto *body;
    int n_state, n_xs, n_ys;
} scan_ctx;

static nb_status scan_step(nb_builder *b, const nb_value *carry, const nb_value *x_t, nb_value *next, nb_value *y_t,
                           void *ctx)
{
    (void)b;
    scan_ctx *c = ctx;
    nb_value in[2 * MAX_CARRY], out[2 * MAX_CARRY];
    memcpy(in, carry, (size_t)c->n_state * sizeof *in);
    memcpy(in + c->n_state, x_t, (size_t)c->n_xs * sizeof *in);
    nb_status st = walk_graph(c->im, c->body, c->n_state + c->n_xs, in, c->n_state + c->n_ys, out);
    if (st) return st;
    memcpy(next, out, (size_t)c->n_state * sizeof *next);
    memcpy(y_t, out + c->n_state, (size_t)c->n_ys * sizeof *y_t);
    return NB_OK;
}

/* Attribute `name`, one entry per input or output (n), into out; absent:
 * all 0. Each entry must lie in [lo, hi) (negative axes counted from `rank`
 * when rank > 0). */
static bool per_value(ox_import *im, const char *name, int n, int64_t lo, int64_t hi, int64_t *out)
{
    int got = ox_attr_list(im, name, out, MAX_CARRY);
    if (got < 0) {
        memset(out, 0, (size_t)n * sizeof *out);
        return true;
    }
    if (got != n) {
        ox_node_error(im, NB_ERR_FORMAT, "%s has %d entries for %d values", name, got, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (out[i] < lo || out[i] >= hi) {
            ox_node_error(im, NB_ERR_ARG, "%s[%d] is %lld, outside [%lld, %lld)", name, i, (long long)out[i],
                          (long long)lo, (long long)hi);
            return false;
        }
    return true;
}

/* x with axis `from` moved to `to`, the others in order. */
static nb_value move_axis(ox_import *im, nb_value x, int from, int to)
{
    int rank = ox_rank(im, x);
    if (from == to || rank < 0) return x;
    int64_t perm[NB_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < rank; d++)
        if (d != from) perm[k++] = d;
    memmove(perm + to + 1, perm + to, (size_t)(rank - 1 - to) * sizeof *perm);
    perm[to] = from;
    return nb_transpose(B, x, rank, perm);
}

/* x with its axis 0 reversed (its length must be known at import). */
static nb_value reversed(ox_import *im, nb_value x)
{
    nb_var_info info = nb_value_info(B, x);
    if (info.ndim < 1 || info.shape[0] < 0) {
        ox_unsupported(im, "reverses a sequence whose length only a run knows (to mix scan directions)");
        return NB_NONE;
    }
    nb_tensor *idx;
    if (nb_tensor_new(&idx, NB_I64, 1, &info.shape[0])) {
        ox_node_error(im, NB_ERR_NOMEM, "out of memory");
        return NB_NONE;
    }
    for (int64_t t = 0; t < info.shape[0]; t++) nb_tensor_set(idx, t, (double)(info.shape[0] - 1 - t));
    nb_value y = nb_gather(B, x, nb_constant(B, idx), 0);
    nb_tensor_release(idx);
    return y;
}

static nb_status i_scan(ox_import *im)
{
    if (im->opset < 9)
        return ox_unsupported(im,
                              "is opset 8's Scan, with a batch axis and sequence_lens, which nabla does not "
                              "import (opset 9's form it does)");
    scan_ctx c = {.im = im, .body = graph_attr(im, "body")};
    if (!c.body) return nb_builder_status(B);
    c.n_xs = (int)ox_attr_i(im, "num_scan_inputs", -1);
    c.n_state = (int)im->node->n_input - c.n_xs;
    c.n_ys = (int)im->node->n_output - c.n_state;
    if (c.n_xs < 1 || c.n_state < 0 || c.n_ys < 0)
        return ox_node_error(im, NB_ERR_FORMAT, "has num_scan_inputs %d with %zu inputs and %zu outputs", c.n_xs,
                             im->node->n_input, im->node->n_output);
    if (c.n_state + c.n_xs > MAX_CARRY || c.n_ys > MAX_CARRY)
        return ox_unsupported(im, "carries more values than nabla's scan");
    nb_value init[MAX_CARRY], xs[MAX_CARRY], final[MAX_CARRY], ys[MAX_CARRY];
    int64_t in_axis[MAX_CARRY], in_dir[MAX_CARRY], out_axis[MAX_CARRY], out_dir[MAX_CARRY];
    if (!per_value(im, "scan_input_directions", c.n_xs, 0, 2, in_dir) ||
        !per_value(im, "scan_output_directions", c.n_ys, 0, 2, out_dir) ||
        !per_value(im, "scan_input_axes", c.n_xs, -NB_MAX_DIMS, NB_MAX_DIMS, in_axis) ||
        !per_value(im, "scan_output_axes", c.n_ys, -NB_MAX_DIMS - 1, NB_MAX_DIMS + 1, out_axis))
        return nb_builder_status(B);
    for (int i = 0; i < c.n_state; i++) init[i] = own_name(im, ox_in(im, i));
    /* nabla scans axis 0 one way: a sequence along another axis is moved
     * there, and one read the other way reversed. With every input reversed
     * the scan runs backwards instead, storing each step at its time index. */
    bool backwards = true;
    for (int i = 0; i < c.n_xs; i++) backwards = backwards && in_dir[i] == 1;
    for (int i = 0; i < c.n_xs && !nb_builder_status(B); i++) {
        nb_value x = ox_in(im, c.n_state + i);
        int rank = ox_rank(im, x);
        if (rank < 1) return nb_builder_status(B) ? nb_builder_status(B) : ox_unsupported(im, "scans a 0-d input");
        int64_t axis = in_axis[i] < 0 ? in_axis[i] + rank : in_axis[i];
        if (axis < 0 || axis >= rank)
            return ox_node_error(im, NB_ERR_ARG, "scan input %d is scanned along axis %lld of its %d", i,
                                 (long long)in_axis[i], rank);
        x = move_axis(im, x, (int)axis, 0);
        if (in_dir[i] && !backwards) x = reversed(im, x);
        xs[i] = own_name(im, x);
    }
    nb_status st = nb_builder_status(B);
    if (!st) st = prepare(im, c.body);
    nb_scan_io io = {NB_VALUES_N(c.n_state, init), NB_VALUES_N(c.n_xs, xs), c.n_ys, final, ys, backwards};
    if (!st) st = nb_scan(B, scan_step, &c, &io);
    for (int i = 0; i < c.n_state && !st; i++) st = ox_out(im, i, final[i]);
    for (int k = 0; k < c.n_ys && !st; k++) {
        /* ys[k] is in time order; ONNX's is in iteration order (prepended
         * for direction 1), which a backward scan reverses. */
        nb_value y = ys[k];
        if ((out_dir[k] == 1) != backwards) y = reversed(im, y);
        int rank = nb_is_none(y) ? 0 : ox_rank(im, y);
        int64_t axis = out_axis[k] < 0 ? out_axis[k] + rank : out_axis[k];
        if (!nb_is_none(y) && (axis < 0 || axis >= rank))
            return ox_node_error(im, NB_ERR_ARG, "scan output %d is stacked along axis %lld of its %d", k,
                                 (long long)out_axis[k], rank);
        if (!nb_is_none(y)) y = move_axis(im, y, 0, (int)axis);
        st = ox_out(im, c.n_state + k, y);
    }
    return st;
}

/* clang-format off */
const ox_importer ox_imports_control[] = {
    OX_FN(If, if), OX_FN(Loop, loop), OX_FN(Scan, scan),
    {0},
};
/* clang-format on */

#endif
