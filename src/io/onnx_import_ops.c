/* Each ONNX node as nabla ops: the dispatch over the families' tables
 * (onnx_import_<family>.c, one row an op type: those whose nabla twin takes
 * the same inputs in the same order need only its name; the others have a
 * function), and the core of the walk: constants, casts, and the shapes
 * exporters compute at run time (Shape -> Gather -> Concat -> Reshape). */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)

static nb_status i_reshape(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    int64_t shape[NB_MAX_DIMS];
    const ox_shape *rs = ox_shape_in(im, 1);
    if (rs && !nb_is_none(x)) {
        /* A dim of x that only a run knows can stay where it is (0: copy). */
        bool kept = rs->n <= NB_MAX_DIMS, allowzero = ox_attr_i(im, "allowzero", 0) != 0;
        for (int i = 0; kept && i < rs->n; i++) {
            if (rs->dim[i] < 0) shape[i] = rs->value[i], kept = !allowzero || rs->value[i];
            else if (rs->of[i].p == x.p && rs->dim[i] == i) shape[i] = 0;
            else kept = false;
        }
        if (kept) return ox_out(im, 0, nb_reshape(B, x, rs->n, shape));
        /* Else the shape's value on the known inputs, where they are. */
        if (!im->known && rs->n > NB_MAX_DIMS) return ox_unsupported(im, "reshapes to more dims than nabla has");
        if (!im->known) return ox_unsupported(im, "reshapes to a shape whose size a run decides and that moves a dim");
    }
    int n = ox_const_ints(im, 1, shape, NB_MAX_DIMS);
    if (n < -1 || nb_is_none(x)) return nb_builder_status(B);
    if (n > NB_MAX_DIMS) return ox_unsupported(im, "reshapes to more dims than nabla has");
    /* allowzero=1 reads a 0 as a dim of size 0, not as a copy (then no dim
     * is -1, and x has no elements): x takes the shape of an empty fill. */
    bool zero = false;
    for (int i = 0; ox_attr_i(im, "allowzero", 0) && i < n; i++) zero |= shape[i] == 0;
    if (zero) {
        nb_var_info xi = nb_value_info(B, x);
        bool empty = false, known = true;
        for (int d = 0; d < xi.ndim; d++) empty |= xi.shape[d] == 0, known &= xi.shape[d] >= 0;
        char a[NB_SHAPE_STR_MAX];
        if (known && !empty) /* else reshape_as checks, when a run knows */
            return ox_node_error(im, NB_ERR_SHAPE, "has allowzero=1 and a 0 in its shape, for X of shape %s",
                                 nb_shape_str(a, sizeof a, xi.ndim, xi.shape));
        return ox_out(im, 0, nb_reshape_as(B, x, nb_fill_constant(B, xi.dtype, n, shape, 0)));
    }
    return ox_out(im, 0, nb_reshape(B, x, n, shape));
}

/* The ONNX type a Cast names: an int from opset 6, a type name before. */
static int cast_target(ox_import *im)
{
    if (im->opset >= 6) return (int)ox_attr_i(im, "to", 0);
    const char *name = ox_attr_s(im, "to", "");
    for (int t = 1; t <= ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16; t++)
        if (!strcmp(name, ox_type_name(t))) return t;
    return 0;
}

static nb_status cast_to(ox_import *im, nb_value x, int to)
{
    nb_dtype dt;
    if (!ox_nabla_dtype(to, &dt) || to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
        to == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16)
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "casts to %s, which nabla has no dtype for", ox_type_name(to));
    /* nabla holds int8, int16, uint16 and uint32 widened: a cast to one
     * would not wrap or saturate as the narrow type does. */
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 || to == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 ||
        to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16 || to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32)
        return ox_node_error(im, NB_ERR_UNSUPPORTED,
                             "casts to %s, which nabla holds widened (a cast to it could not "
                             "wrap)",
                             ox_type_name(to));
    return ox_out(im, 0, nb_cast(B, x, dt));
}

static nb_status i_cast(ox_import *im) { return cast_to(im, ox_in(im, 0), cast_target(im)); }

/* CastLike: to the dtype of input 1. A like that the graph types FLOAT16
 * or BFLOAT16 is float32 here, and a cast to it would not round as the
 * narrow type does: refused, as Cast to them is. */
static nb_status i_cast_like(ox_import *im)
{
    nb_value x = ox_in(im, 0), like = ox_in(im, 1);
    if (nb_builder_status(B)) return nb_builder_status(B);
    if (nb_strmap_get(&im->narrow, im->node->input[1], NULL))
        return ox_node_error(im, NB_ERR_UNSUPPORTED,
                             "casts to the type of '%s', FLOAT16 or BFLOAT16, which nabla "
                             "holds as float32 (a cast would not round to it)",
                             im->node->input[1]);
    return ox_out(im, 0, nb_cast(B, x, nb_value_info(B, like).dtype));
}

static nb_status i_identity(ox_import *im) { return ox_out(im, 0, ox_in(im, 0)); }

/* A scalar input or attribute of Dropout: ratio (input 1 from opset 12, an
 * attribute before) and training_mode (input 2, opset 12 on). */
static bool dropout_arg(ox_import *im, int k, const char *attr, double def, double *out)
{
    *out = def;
    if (im->opset < 12) {
        *out = ox_attr_f(im, attr, def);
        return true;
    }
    if (!ox_has_in(im, k)) return true;
    const nb_tensor *t = ox_const_in(im, k);
    if (!t) return false;
    if (nb_tensor_numel(t) != 1) {
        ox_node_error(im, NB_ERR_FORMAT, "its %s holds %lld values, not one", attr, (long long)nb_tensor_numel(t));
        return false;
    }
    *out = nb_tensor_get(t, 0);
    return true;
}

/* Dropout at inference, or with nothing to drop, is the identity, and its
 * mask all true. In training mode it draws a mask, which an import cannot
 * reproduce and should not hide: it is refused. (Opset 1-6 train unless
 * is_test is set.) */
static nb_status i_dropout(ox_import *im)
{
    double ratio, training = im->opset < 7 ? !ox_attr_i(im, "is_test", 0) : 0;
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x) || !dropout_arg(im, 1, "ratio", 0.5, &ratio)) return nb_builder_status(B);
    if (im->opset >= 12 && !dropout_arg(im, 2, "training_mode", 0, &training)) return nb_builder_status(B);
    if (training && ratio != 0)
        return ox_unsupported(im, "is in training mode (a random mask); nabla imports Dropout for inference");
    nb_status st = ox_out(im, 0, x);
    if (!st && im->node->n_output > 1 && *im->node->output[1])
        st = ox_out(im, 1, nb_cast(B, nb_ones_like(B, x), NB_BOOL));
    return st;
}

/* Constant's value: a tensor, or from opset 12 one of the typed forms. */
static nb_status i_constant(ox_import *im)
{
    const Onnx__AttributeProto *a = ox_attr(im, "value");
    nb_tensor *t;
    if (a && a->t) {
        char what[256];
        snprintf(what, sizeof what, "constant '%.200s'", im->node->output[0]);
        nb_status st = ox_tensor_from_proto(a->t, ".", what, &t);
        if (st) return ox_node_error(im, st, "%s", nb_last_error());
        return ox_set_const(im, 0, t);
    }
    const Onnx__AttributeProto *f = ox_attr(im, "value_float"), *fs = ox_attr(im, "value_floats");
    const Onnx__AttributeProto *i = ox_attr(im, "value_int"), *is = ox_attr(im, "value_ints");
    int64_t n = fs ? (int64_t)fs->n_floats : is ? (int64_t)is->n_ints : 1;
    nb_status st = f || fs ? nb_tensor_new(&t, NB_F32, fs ? 1 : 0, &n)
        : i || is          ? nb_tensor_new(&t, NB_I64, is ? 1 : 0, &n)
                           : ox_unsupported(im,
                                            "has no value nabla reads (value, value_float(s) or value_int(s); "
                                                     "strings and sparse tensors are not read)");
    if (st) return st == NB_ERR_NOMEM ? ox_node_error(im, st, "out of memory") : st;
    for (int64_t k = 0; k < n; k++) {
        if (f || fs) ((float *)nb_tensor_data(t))[k] = fs ? fs->floats[k] : f->f;
        else ((int64_t *)nb_tensor_data(t))[k] = is ? is->ints[k] : i->i;
    }
    return ox_set_const(im, 0, t);
}

/* An int64 list (or a scalar, 0-d) as a constant output of the node. */
static nb_status const_ints_out(ox_import *im, int n, const int64_t *v, bool scalar)
{
    nb_tensor *t;
    int64_t len = n;
    nb_status st = nb_tensor_new(&t, NB_I64, scalar ? 0 : 1, &len);
    if (st) return ox_node_error(im, st, "out of memory");
    for (int k = 0; k < n; k++) ((int64_t *)nb_tensor_data(t))[k] = v[k];
    return ox_set_const(im, 0, t);
}

/* Size: the element count, a constant when the import knows every dim. */
static nb_status i_size(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info info = nb_value_info(B, x);
    int64_t n = 1;
    for (int d = 0; d < info.ndim; d++) {
        if (info.shape[d] < 0 && im->known) return ox_known_fold(im);
        if (info.shape[d] < 0)
            return ox_unsupported(im, "counts the elements of a tensor whose shape only a run knows");
        n *= info.shape[d];
    }
    return const_ints_out(im, 1, &n, true);
}

/* Shape: a constant when the import knows every dim (as it always does
 * eagerly), else a shape followed by symbols. Opset 15's start and end
 * take a slice of the dims, clamped as Python's. */
static nb_status i_shape(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info info = nb_value_info(B, x);
    int r = info.ndim;
    int64_t start = ox_attr_i(im, "start", 0), end = ox_attr_i(im, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    ox_shape s = {.n = (int)(end - start), .whole = start == 0 && end == r ? x : NB_NONE};
    bool known = true;
    for (int d = (int)start; d < end; d++) {
        int i = d - (int)start;
        s.dim[i] = info.shape[d] >= 0 ? -1 : d;
        s.value[i] = info.shape[d];
        s.of[i] = x;
        known &= info.shape[d] >= 0;
    }
    return known ? const_ints_out(im, s.n, s.value, false) : ox_set_shape(im, &s);
}

/* Whether input k is an int constant of at most a shape's entries, 0-d or
 * 1-d, with no error left behind when it is not. */
static bool small_int_const(ox_import *im, int k)
{
    if (!ox_has_in(im, k) || nb_strmap_get(&im->values, im->node->input[k], NULL)) return false;
    const char *name = im->node->input[k];
    if (!nb_strmap_get(&im->consts, name, NULL) && !nb_strmap_get(&im->protos, name, NULL)) return false;
    const nb_tensor *t = ox_const_in(im, k);
    return t && (t->dtype == NB_I64 || t->dtype == NB_I32) && t->ndim <= 1 && nb_tensor_numel(t) <= 2 * NB_MAX_DIMS;
}

/* Input k as a run-time shape: one, or an int constant made one. */
static bool shape_or_const(ox_import *im, int k, ox_shape *out)
{
    const ox_shape *s = ox_shape_in(im, k);
    if (s) {
        *out = *s;
        return true;
    }
    const nb_tensor *t = ox_const_in(im, k);
    if (!t || (t->dtype != NB_I64 && t->dtype != NB_I32) || t->ndim > 1 || nb_tensor_numel(t) > 2 * NB_MAX_DIMS)
        return false;
    *out = (ox_shape){.n = (int)nb_tensor_numel(t), .scalar = t->ndim == 0};
    for (int i = 0; i < out->n; i++) out->dim[i] = -1, out->value[i] = (int64_t)nb_tensor_get(t, i);
    return true;
}

/* Gather, Unsqueeze, Concat and Cast on run-time shapes. Returns false when
 * the node's inputs are no run-time shape (the node is imported as usual). */
static bool shape_node(ox_import *im, nb_status *st)
{
    const char *type = im->node->op_type;
    bool known =
        !strcmp(type, "Cast") || !strcmp(type, "Unsqueeze") || !strcmp(type, "Gather") || !strcmp(type, "Concat");
    int n_in = !strcmp(type, "Concat") ? (int)im->node->n_input : 1;
    bool any = false, all_small = known;
    for (int k = 0; k < n_in; k++) {
        any |= ox_shape_in(im, k) != NULL;
        all_small &= ox_shape_in(im, k) || small_int_const(im, k);
    }
    /* Int constants through these ops fold into constants (the -1 of
     * x.view(x.size(0), -1) arrives as Unsqueeze of a Constant): a scalar
     * unsqueezed, a cast between ints, a gather or a concat of int lists. */
    bool fold = !any && all_small;
    int64_t to = ox_attr_i(im, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    if (!strcmp(type, "Cast") && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
        to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        fold = false;
    if (fold && !strcmp(type, "Unsqueeze")) {
        const nb_tensor *t = ox_const_in(im, 0);
        fold = t && t->ndim == 0;
    }
    if (!any && !fold) return false;
    ox_shape c0, r = {0};
    const ox_shape *s0 = ox_shape_in(im, 0);
    if (!s0 && shape_or_const(im, 0, &c0)) s0 = &c0;
    *st = NB_OK;
    if (!strcmp(type, "Cast")) {
        r = *s0;
    } else if (!strcmp(type, "Unsqueeze")) {
        if (!s0->scalar) *st = ox_unsupported(im, "unsqueezes a run-time shape of more than one entry");
        r = *s0;
        r.scalar = false;
    } else if (!strcmp(type, "Gather")) {
        const nb_tensor *idx = ox_const_in(im, 1);
        if (!idx || ox_attr_i(im, "axis", 0) != 0 || nb_tensor_numel(idx) > 2 * NB_MAX_DIMS) {
            *st = idx ? ox_unsupported(im, "gathers from a run-time shape with other than constant indices on axis 0")
                      : nb_builder_status(B);
            return true;
        }
        r.scalar = idx->ndim == 0;
        r.n = (int)nb_tensor_numel(idx);
        for (int i = 0; i < r.n && !*st; i++) {
            int64_t j = (int64_t)nb_tensor_get(idx, i);
            if (j < 0) j += s0->n;
            if (j < 0 || j >= s0->n)
                *st = ox_node_error(im, NB_ERR_ARG, "index %lld is out of the shape's %d entries", (long long)j, s0->n);
            else r.value[i] = s0->value[j], r.dim[i] = s0->dim[j], r.of[i] = s0->of[j];
        }
    } else if (!strcmp(type, "Concat")) {
        for (int k = 0; k < (int)im->node->n_input && !*st; k++) {
            ox_shape part;
            if (!shape_or_const(im, k, &part))
                *st = ox_unsupported(im, "joins a run-time shape with what is not an int constant");
            else if (r.n + part.n > 2 * NB_MAX_DIMS) *st = ox_unsupported(im, "makes a shape of too many entries");
            else {
                memcpy(r.value + r.n, part.value, (size_t)part.n * sizeof *r.value);
                memcpy(r.dim + r.n, part.dim, (size_t)part.n * sizeof *r.dim);
                memcpy(r.of + r.n, part.of, (size_t)part.n * sizeof *r.of);
                r.n += part.n;
            }
        }
    } else {
        /* Another op reads the shape as a value: with known inputs, ox_in
         * makes it the constant it is on them. */
        if (im->known) return false;
        *st = ox_unsupported(im,
                             "uses a shape computed at run time, which nabla follows only through Gather, Unsqueeze, "
                             "Concat and Cast into Reshape and ConstantOfShape");
        return true;
    }
    if (*st) return true;
    if (!fold) {
        *st = ox_set_shape(im, &r);
        return true;
    }
    nb_tensor *t;
    int64_t n = r.n;
    if ((*st = nb_tensor_new(&t, NB_I64, r.scalar ? 0 : 1, &n))) return true;
    for (int i = 0; i < r.n; i++) ((int64_t *)nb_tensor_data(t))[i] = r.value[i];
    *st = ox_set_const(im, 0, t);
    return true;
}

/* ConstantOfShape of a shape pieced together at run time: known sizes and
 * one dim of one value, say [1, B, H] with B = x's dim 1 (torch's
 * h0 = zeros(1, x.size(1), H), nb_onnx_export's zero state of a recurrent
 * layer), is fill_constant_batch_size_like; another is refused. */
static nb_status fill_batch_like(ox_import *im, const ox_shape *rs, nb_dtype dt, double fill)
{
    int at = -1;
    for (int i = 0; i < rs->n; i++)
        if (rs->dim[i] >= 0) at = at == -1 ? i : -2;
    if (at < 0 || rs->scalar || rs->n > NB_MAX_DIMS)
        return ox_unsupported(im, "fills a shape pieced together at run time of more than one unknown dim");
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0; i < rs->n; i++) shape[i] = i == at ? 1 : rs->value[i];
    nb_attr a[] = {NB_ATTR_INTS_N("shape", rs->n, shape), NB_ATTR_INT("dtype", dt), NB_ATTR_FLOAT("value", fill),
                   NB_ATTR_INT("input_dim_idx", rs->dim[at]), NB_ATTR_INT("output_dim_idx", at)};
    return ox_out(im, 0, nb_emit1(B, "fill_constant_batch_size_like", NB_VALUES(rs->of[at]), NB_ATTRS_N(5, a)));
}

/* ConstantOfShape: of a Shape node's value, a fill like that value; of a
 * constant shape, fill_constant. */
static nb_status i_constant_of_shape(ox_import *im)
{
    const Onnx__AttributeProto *a = ox_attr(im, "value");
    nb_tensor *v = NULL;
    double fill = 0;
    nb_dtype dt = NB_F32;
    if (a && a->t) {
        nb_status st = ox_tensor_from_proto(a->t, ".", "ConstantOfShape's value", &v);
        if (st) return ox_node_error(im, st, "%s", nb_last_error());
        if (nb_tensor_numel(v) != 1) {
            nb_tensor_release(v);
            return ox_node_error(im, NB_ERR_FORMAT, "its value holds %lld elements, not one",
                                 (long long)nb_tensor_numel(v));
        }
        fill = nb_tensor_get(v, 0), dt = v->dtype;
        nb_tensor_release(v);
    }
    const ox_shape *rs = ox_shape_in(im, 0);
    nb_value like = rs ? rs->whole : NB_NONE;
    if (rs && nb_is_none(like) && !im->known) return fill_batch_like(im, rs, dt, fill);
    if (!nb_is_none(like)) {
        nb_value y = fill == 0 ? nb_fill_zeros_like(B, like) : nb_ones_like(B, like);
        if (fill != 0 && fill != 1) y = nb_scale(B, y, fill, 0);
        if (nb_value_info(B, like).dtype != dt) y = nb_cast(B, y, dt);
        return ox_out(im, 0, y);
    }
    int64_t shape[NB_MAX_DIMS];
    int n = ox_const_ints(im, 0, shape, NB_MAX_DIMS);
    if (n < 0) return nb_builder_status(B);
    if (n > NB_MAX_DIMS) return ox_unsupported(im, "makes more dims than nabla has");
    return ox_out(im, 0, nb_fill_constant(B, dt, n, shape, fill));
}

/* ---- the table -------------------------------------------------------------- */

/* clang-format off */
static const ox_importer core[] = {
    OX_FN(Reshape, reshape), OX_FN(Cast, cast), OX_FN(Identity, identity), OX_FN(Dropout, dropout),
    OX_FN(Constant, constant), OX_FN(Shape, shape), OX_FN(ConstantOfShape, constant_of_shape),
    OX_FN(CastLike, cast_like), OX_FN(Size, size),
    {0},
};
/* clang-format on */

/* Every family's rows, each list ending at a row without a name. */
static const ox_importer *const families[] = {core,           ox_imports_math,   ox_imports_reduce, ox_imports_shape,
                                              ox_imports_nn,  ox_imports_rnn,    ox_imports_make,   ox_imports_quant,
                                              ox_imports_seq, ox_imports_control};

static const ox_importer *find_importer(const char *op_type)
{
    for (size_t f = 0; f < sizeof families / sizeof *families; f++)
        for (const ox_importer *m = families[f]; m->onnx; m++)
            if (!strcmp(m->onnx, op_type)) return m;
    return NULL;
}

bool ox_reads_state(const char *op_type) { return op_type && !strcmp(op_type, "BatchNormalization"); }

nb_status ox_import_node(ox_import *im)
{
    nb_status sst;
    if (strcmp(im->node->op_type, "Reshape") && strcmp(im->node->op_type, "ConstantOfShape") && shape_node(im, &sst))
        return sst;
    if (ox_fold_node(im)) return NB_OK;
    if (ox_unshare_initializer(im, &sst)) return sst;
    /* Opsets 1-6 broadcast the second operand along `axis`, where numpy's
     * rule (ONNX's since 7) aligns the last dims: refused. Without an axis
     * the two rules agree. */
    if (im->opset < 7 && ox_attr_i(im, "broadcast", 0) && ox_attr(im, "axis"))
        return ox_node_error(im, NB_ERR_UNSUPPORTED,
                             "broadcasts along axis %lld (opset 1-6's rule), which nabla "
                             "does not",
                             (long long)ox_attr_i(im, "axis", 0));
    const ox_importer *m = find_importer(im->node->op_type);
    if (!m) return ox_unsupported(im, "nabla has no import for this op type");
    if (!m->fn && (int)im->node->n_input != m->n_in)
        return ox_node_error(im, NB_ERR_UNSUPPORTED, "has %zu inputs; nabla's %s takes %d", im->node->n_input, m->op,
                             m->n_in);
    nb_status st = m->fn ? m->fn(im) : ox_same(im, m->op, m->n_in);
    nb_status bst = nb_builder_status(B);
    if (!bst && !st) return NB_OK;
    /* An op's own error (a shape that does not fit, say) gets the node's name. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", bst ? nb_builder_error(B) : nb_last_error());
    if (strncmp(msg, "onnx import:", 12)) {
        nb_builder_clear_error(B);
        return ox_node_error(im, bst ? bst : st, "%s", msg);
    }
    return bst ? bst : st;
}

#endif
