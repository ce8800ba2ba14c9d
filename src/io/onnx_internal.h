/* What ONNX export (onnx_export*.c) and import (onnx_import*.c) share: an
 * arena for the protobuf-c messages an export builds, and the conversions
 * between nabla's tensors and dtypes and ONNX's TensorProto. Built only with
 * NABLA_HAVE_ONNX (libonnx-dev's onnx.proto, see CMakeLists.txt). */
#ifndef NABLA_IO_ONNX_INTERNAL_H
#define NABLA_IO_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include "nabla/builder.h"
#include "nabla/executor.h"
#include "nabla/program.h"
#include "nabla/tensor.h"
#include "onnx.pb-c.h"
#include "../core/strmap.h"
#include "../builder/builder_internal.h"

/* Every message of an export comes from one arena, freed at once when the
 * model has been packed: a half-built model never needs unpicking. A failed
 * allocation returns NULL and sets `failed`, so code can check once. */
typedef struct ox_chunk ox_chunk;
typedef struct ox_arena {
    ox_chunk *head;
    size_t left; /* bytes free in head */
    bool failed;
} ox_arena;

void *ox_alloc(ox_arena *a, size_t size); /* zeroed, 16-byte aligned */
char *ox_strdup(ox_arena *a, const char *s);
void ox_arena_free(ox_arena *a);

/* ONNX's TensorProto.DataType of a nabla dtype, and back (false for an ONNX
 * type nabla has no dtype for; FLOAT16 and BFLOAT16 map to float32, which
 * ox_tensor_from_proto converts to). */
int ox_onnx_type(nb_dtype dt);
bool ox_nabla_dtype(int onnx_type, nb_dtype *out);
const char *ox_type_name(int onnx_type); /* "FLOAT", "INT64", ... */

/* A TensorProto named `name` holding t's values (any strides) as raw
 * little-endian bytes, from the arena. */
Onnx__TensorProto *ox_tensor_proto(ox_arena *a, const char *name, const nb_tensor *t);

/* The tensor a TensorProto holds: its values from raw_data, the typed
 * fields, or an external-data file (a location relative to `model_dir`,
 * which must stay inside it). `what` names the tensor in errors. */
nb_status ox_tensor_from_proto(const Onnx__TensorProto *p, const char *model_dir, const char *what, nb_tensor **out);

/* ---- export ---------------------------------------------------------------
 * onnx_export.c walks the program and writes the model; onnx_export_ops.c
 * turns each nabla op into nodes through these helpers. */

typedef struct ox_export {
    ox_arena a;
    const nb_block *blk;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    int n_tmp;
    const nb_strmap *needed; /* the vars the fetches need, kept ops' inputs and the fetches */
} ox_export;

/* A fresh value name made from `base` ("fc_0.tmp_0" -> "fc_0.tmp_0/3"). */
const char *ox_tmp(ox_export *e, const char *base);
/* Appends a node of `type` reading in[0..n_in) ("" for an absent optional
 * input) and writing `out`; NULL when out of memory (e->a.failed). */
Onnx__NodeProto *ox_node(ox_export *e, const char *type, int n_in, const char *const *in, const char *out);
/* The same with outputs out[0..n_out). */
Onnx__NodeProto *ox_node_outs(ox_export *e, const char *type, int n_in, const char *const *in, int n_out,
                              const char *const *out);
/* Whether a kept op reads `name` or a fetch is it: an op's extra output
 * that nothing needs may go unmade. */
bool ox_needed(const ox_export *e, const char *name);
void ox_attr_int(ox_export *e, Onnx__NodeProto *n, const char *name, int64_t v);
void ox_attr_float(ox_export *e, Onnx__NodeProto *n, const char *name, double v);
void ox_attr_ints(ox_export *e, Onnx__NodeProto *n, const char *name, int count, const int64_t *v);
void ox_attr_string(ox_export *e, Onnx__NodeProto *n, const char *name, const char *v);
void ox_attr_tensor(ox_export *e, Onnx__NodeProto *n, const char *name, const nb_tensor *t);
/* Initializers made by the export: a scalar of dtype dt, and a 1-D int64
 * list (shapes, axes). Their names, or NULL when out of memory. */
const char *ox_scalar(ox_export *e, nb_dtype dt, double v);
const char *ox_int64s(ox_export *e, int count, const int64_t *v);
/* Adds t (not kept) as an initializer named `name`. */
bool ox_add_init(ox_export *e, const char *name, const nb_tensor *t);

/* The nodes of one op of the pruned program (onnx_export_ops.c);
 * NB_ERR_UNSUPPORTED naming it when it has no ONNX form. */
nb_status ox_export_op(ox_export *e, const nb_op *op);
/* nabla's recurrent layers as ONNX's LSTM, GRU and RNN, and the zero state
 * they start from (onnx_export_rnn.c). */
nb_status ox_export_recurrent(ox_export *e, const nb_op *op);
nb_status ox_export_fill_batch_like(ox_export *e, const nb_op *op);

/* A nabla op's ONNX form: the ONNX op that takes the same inputs in the
 * same order, or a function. ox_export_op looks in onnx_export_ops.c's own
 * rows, then in each family's list (onnx_export_<family>.c), which ends at
 * a row whose `op` is NULL. */
typedef struct ox_exporter {
    const char *op;
    const char *onnx;
    nb_status (*fn)(ox_export *e, const nb_op *op);
} ox_exporter;

/* The input slots of op (a mask) whose values its ONNX form does not read,
 * only their vars' shapes (onnx_export_nn.c). */
unsigned ox_export_unread(const nb_op *op);

extern const ox_exporter ox_exports_shape[]; /* slicing, splitting, stacking */
extern const ox_exporter ox_exports_nn[];    /* transposed convolution, attention */

/* ---- import -----------------------------------------------------------------
 * onnx_import.c reads the model and walks the graph; onnx_import_ops.c turns
 * each node into nabla ops through these helpers. */

/* A shape computed at run time (a Shape node's output, and what Gather,
 * Unsqueeze, Concat and Cast make of it) that the import follows by symbols,
 * as PyTorch's exporter writes x.view(x.size(0), -1): each entry a known
 * number, or dim `dim` of value `of`, whose size only a run knows. */
typedef struct ox_shape {
    int n;
    bool scalar;                    /* one entry, 0-d (Gather with a scalar index) */
    int64_t value[2 * NB_MAX_DIMS]; /* where dim < 0 */
    int dim[2 * NB_MAX_DIMS];
    nb_value of[2 * NB_MAX_DIMS];
    nb_value whole; /* the value it is the whole shape of, or NB_NONE */
} ox_shape;

typedef struct ox_known ox_known;
typedef struct ox_seq ox_seq;

typedef struct ox_import {
    nb_builder *b;
    const char *dir; /* the model's folder, for external data */
    int opset;
    nb_strmap values; /* name -> nb_value (nb_malloc'ed): what the graph has computed so far */
    nb_strmap protos; /* name -> Onnx__TensorProto: initializers */
    nb_strmap consts; /* name -> nb_tensor: initializers and Constant values read as constants */
    nb_strmap state;  /* initializers that become state rather than parameters */
    nb_strmap shapes; /* name -> ox_shape (nb_malloc'ed): shapes computed at run time, followed symbolically */
    nb_strmap seqs;   /* name -> ox_seq (nb_malloc'ed): sequences and optionals, lists of values (onnx_import_seq.c) */
    nb_strmap narrow; /* names the graph types FLOAT16 or BFLOAT16, whose values nabla holds as float32 */
    const Onnx__NodeProto *node;
    ox_known *known; /* a static import's values computed on known inputs (nb_onnx_import_known), or NULL */
} ox_import;

/* The maps of an import of graph g into b (initializers, the state that
 * BatchNormalization reads), and their release. */
nb_status ox_import_begin(ox_import *im, nb_builder *b, const char *dir, int opset, const Onnx__GraphProto *g);
/* The var of a value of a program, which the import's passes over a program
 * read and mark; NULL for NB_NONE and for a tensor. */
static inline nb_var *ox_var(nb_value v) { return v.kind == NB_VALUE_VAR ? (nb_var *)v.p : NULL; }
void ox_import_end(ox_import *im);
/* The node im->node, after checking its domain, through ox_import_node. */
nb_status ox_walk_node(ox_import *im);
/* Whether v, given for graph input vi, is of the dtype and dims it declares
 * (NB_ERR_ARG or NB_ERR_SHAPE naming it otherwise); and names a value. */
nb_status ox_check_given(ox_import *im, const Onnx__ValueInfoProto *vi, nb_value v);
nb_status ox_set_value(ox_import *im, const char *name, nb_value v);

/* ---- values known at import (onnx_import_known.c) ---------------------------
 * A static import given the values its graph inputs will have computes, on
 * them and eagerly, what a shape, axes, pads, bounds or count input needs
 * and nabla's ops take at build time; only the nodes that value depends on
 * run. Each such value remembers the graph inputs it was computed from: by
 * their shape only (through Shape or Size) or by their values. At the end
 * ox_known_guard fixes the program to them, so that it cannot give a stale
 * result: an input read by shape gets the known dims, one read by value
 * becomes a constant of the program that no feed can replace. */
nb_status ox_known_open(ox_import *im, const Onnx__GraphProto *g, nb_feeds known);
/* The value of `name` computed on the known inputs (borrowed, alive until the
 * import ends); NULL with the node's error when it cannot be. */
const nb_tensor *ox_known_value(ox_import *im, const char *name);
/* Every output of the node, computed on the known inputs, made a constant of
 * the import. */
nb_status ox_known_fold(ox_import *im);
nb_status ox_known_guard(ox_import *im);
void ox_known_free(ox_import *im);

/* An error about the node being imported, naming it, its op type and the
 * opset; it is also the builder's. */
nb_status ox_node_error(ox_import *im, nb_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The node's input k as a value (an initializer or constant made a var or
 * constant on first use); NB_NONE with the error set when it has none. */
nb_value ox_in(ox_import *im, int k);
bool ox_has_in(const ox_import *im, int k); /* present and not "" */
/* The value named `name`, as ox_in makes it; control flow (onnx_import_control.c)
 * makes the outer-scope names a sub-graph reads values before it enters the
 * sub-block, so that the graph's later nodes share them. */
nb_value ox_value_named(ox_import *im, const char *name);
/* Input k as a constant tensor (a borrowed initializer or Constant value),
 * for shapes and axes; NULL with an error when it is computed at run time. */
const nb_tensor *ox_const_in(ox_import *im, int k);
/* Gives output k of a Constant node its value (t, taken over). */
nb_status ox_set_const(ox_import *im, int k, nb_tensor *t);
/* Gives output 0 of the node the run-time shape s; ox_shape_in gives the
 * shape input k is, or NULL when it is not one. */
nb_status ox_set_shape(ox_import *im, const ox_shape *s);
const ox_shape *ox_shape_in(const ox_import *im, int k);
/* Names output k of the node. */
nb_status ox_out(ox_import *im, int k, nb_value v);

/* The node's attribute `name`, or NULL; and its value with a default. */
const Onnx__AttributeProto *ox_attr(const ox_import *im, const char *name);
int64_t ox_attr_i(const ox_import *im, const char *name, int64_t def);
double ox_attr_f(const ox_import *im, const char *name, double def);
const char *ox_attr_s(const ox_import *im, const char *name, const char *def);

/* Reading arguments (onnx_import_args.c). ox_unsupported: NB_ERR_UNSUPPORTED
 * naming the node, with `why`. ox_rank: v's number of dims. ox_attr_list:
 * an ints attribute into out[0..max), its count (max + 1 when longer), -1
 * when absent. ox_const_ints: input k, a constant int tensor, likewise (-2
 * with an error when it is not one). ox_axes: the axes of Squeeze, Unsqueeze
 * and the reductions, an input from opset 13 and an attribute before (-1:
 * none given, -2: an error). ox_same: output 0 is nabla's `op` of the
 * node's first n_in inputs. */
nb_status ox_unsupported(ox_import *im, const char *why);
int ox_rank(ox_import *im, nb_value v);
int ox_attr_list(ox_import *im, const char *name, int64_t *out, int max);
int ox_const_ints(ox_import *im, int k, int64_t *out, int max);
int ox_axes(ox_import *im, int64_t *axes);
nb_status ox_same(ox_import *im, const char *op, int n_in);
/* A 0-d constant of dtype dt, broadcast against whatever it meets. */
nb_value ox_const_scalar(ox_import *im, nb_dtype dt, double v);

/* One family's rows (onnx_import_<family>.c): an ONNX op type and either the
 * nabla op that takes the same inputs in the same order, or a function.
 * Each list ends at a row whose `onnx` is NULL. */
typedef struct ox_importer {
    const char *onnx;
    const char *op;
    int n_in;
    nb_status (*fn)(ox_import *im);
} ox_importer;
/* A table's entries: ONNX's op `onnx` imported by the file's function
 * i_<fn>, or as nabla's op `op` with its first n_in inputs. A table is
 * packed several entries to a line, so it is kept from clang-format. */
#define OX_FN(onnx, fn) {#onnx, 0, 0, i_##fn}
#define OX_AS(onnx, op, n_in) {#onnx, #op, n_in, 0}

extern const ox_importer ox_imports_math[];    /* arithmetic, activations, products, softmax */
extern const ox_importer ox_imports_reduce[];  /* reductions, gathers and scatters */
extern const ox_importer ox_imports_shape[];   /* moving, joining, slicing, padding, resizing */
extern const ox_importer ox_imports_nn[];      /* convolutions, pools, normalisations, losses */
extern const ox_importer ox_imports_rnn[];     /* RNN, GRU, LSTM */
extern const ox_importer ox_imports_make[];    /* tensors made from a shape or size: EyeLike, windows */
extern const ox_importer ox_imports_quant[];   /* linear quantization */
extern const ox_importer ox_imports_seq[];     /* sequences and optionals, held at import time */
extern const ox_importer ox_imports_control[]; /* If, Loop, Scan: sub-graphs on nb_cond, nb_while_loop, nb_scan */

/* Whether `name` is a sequence or optional the import holds, and their
 * release (onnx_import_seq.c). */
bool ox_is_seq(const ox_import *im, const char *name);
void ox_seqs_free(ox_import *im);

/* The node through b (onnx_import_ops.c); NB_ERR_UNSUPPORTED naming it when
 * nabla has no form for it. */
nb_status ox_import_node(ox_import *im);
/* Computes at once, as constants, the outputs of a node of a program whose
 * every input is a constant of the import (onnx_import_fold.c); false, and
 * nothing done, when it is not one or does not fold. */
bool ox_fold_node(ox_import *im);
/* In a program, an Identity of a float initializer as a parameter of its
 * own (onnx_import_unshare.c); false when the node is not one. */
bool ox_unshare_initializer(ox_import *im, nb_status *st);
/* Whether op_type reads inputs 3 and 4 as running statistics (state). */
bool ox_reads_state(const char *op_type);

#endif
