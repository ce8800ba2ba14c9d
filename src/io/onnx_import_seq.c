/* ONNX's sequences and optionals, held at import time: a sequence is a list
 * of the import's values (nabla has no sequence type for a program to
 * carry), so its length and every position must be known when the node is
 * imported (constants, or in an eager import any value). SplitToSequence and
 * ConcatFromSequence turn it into tensors and back; Optional is a sequence
 * of at most one value. What would need a sequence at run time (one carried
 * by a Loop or returned by an If, a graph input or output) is refused where
 * a tensor was expected, naming the sequence. */
#ifdef NABLA_HAVE_ONNX
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)
#define MAX_SEQ 4096 /* elements; more would be a graph no one unrolls at import */

struct ox_seq {
    int n;
    bool optional; /* an Optional: n is 0 (none) or 1 */
    nb_value v[];
};

static const ox_seq *seq_in(ox_import *im, int k)
{
    const ox_seq *s = ox_has_in(im, k) ? nb_strmap_get(&im->seqs, im->node->input[k], NULL) : NULL;
    if (!s)
        ox_node_error(im, NB_ERR_UNSUPPORTED,
                      "input %d ('%s') is not a sequence the import holds (a sequence "
                      "must be made in the graph by the sequence ops; nabla takes none as a graph input)",
                      k, ox_has_in(im, k) ? im->node->input[k] : "");
    return s;
}

/* Output 0 becomes the list v[0..n). */
static nb_status set_seq(ox_import *im, int n, const nb_value *v, bool optional)
{
    if (n > MAX_SEQ) return ox_unsupported(im, "makes a sequence of more elements than nabla holds at import (4096)");
    ox_seq *s = nb_malloc(sizeof *s + (size_t)(n ? n : 1) * sizeof *v);
    if (!s) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    s->n = n, s->optional = optional;
    if (n) memcpy(s->v, v, (size_t)n * sizeof *v);
    ox_seq *old = nb_strmap_get(&im->seqs, im->node->output[0], NULL);
    if (nb_strmap_put(&im->seqs, im->node->output[0], s)) {
        nb_free(s);
        return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    }
    nb_free(old);
    return NB_OK;
}

bool ox_is_seq(const ox_import *im, const char *name) { return nb_strmap_get(&im->seqs, name, NULL) != NULL; }

void ox_seqs_free(ox_import *im)
{
    for (int i = 0; i < im->seqs.n; i++)
        if (im->seqs.keys[i]) nb_free(im->seqs.vals[i]);
    nb_strmap_free(&im->seqs);
}

/* Input k, a position in a sequence of n elements (negative from the end),
 * checked to lie in [-n, n - 1] (to n when `end_ok`, for an insertion). */
static bool position(ox_import *im, int k, int n, bool end_ok, int *out)
{
    const nb_tensor *t = ox_const_in(im, k);
    if (!t) return false;
    if (nb_tensor_numel(t) != 1 || nb_dtype_is_float(t->dtype)) {
        ox_node_error(im, NB_ERR_ARG, "its position must be one integer; it holds %lld values of %s",
                      (long long)nb_tensor_numel(t), nb_dtype_name(t->dtype));
        return false;
    }
    int64_t p = (int64_t)nb_tensor_get(t, 0);
    if (p < -n || p > n - !end_ok) {
        ox_node_error(im, NB_ERR_ARG, "position %lld is outside a sequence of %d elements", (long long)p, n);
        return false;
    }
    *out = (int)(p < 0 ? p + n : p);
    return true;
}

static nb_status i_sequence_empty(ox_import *im) { return set_seq(im, 0, NULL, false); }

static nb_status i_sequence_construct(ox_import *im)
{
    int n = (int)im->node->n_input;
    if (n > MAX_SEQ) return ox_unsupported(im, "makes a sequence of more elements than nabla holds at import (4096)");
    nb_value *v = nb_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) v[i] = ox_in(im, i);
    nb_status st = nb_builder_status(B) ? nb_builder_status(B) : set_seq(im, n, v, false);
    nb_free(v);
    return st;
}

/* The sequence of input 0 with `x` put at `at` (x NB_NONE: element `at`
 * taken out). */
static nb_status edited(ox_import *im, const ox_seq *s, int at, nb_value x)
{
    bool insert = !nb_is_none(x);
    nb_value *v = nb_malloc((size_t)(s->n + 1) * sizeof *v);
    if (!v) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    memcpy(v, s->v, (size_t)at * sizeof *v);
    if (insert) v[at] = x;
    memcpy(v + at + insert, s->v + at + !insert, (size_t)(s->n - at - !insert) * sizeof *v);
    nb_status st = set_seq(im, s->n + (insert ? 1 : -1), v, false);
    nb_free(v);
    return st;
}

static nb_status i_sequence_insert(ox_import *im)
{
    const ox_seq *s = seq_in(im, 0);
    nb_value x = ox_in(im, 1);
    int at = s ? s->n : 0;
    if (!s || nb_is_none(x) || (ox_has_in(im, 2) && !position(im, 2, s->n, true, &at))) return nb_builder_status(B);
    return edited(im, s, at, x);
}

static nb_status i_sequence_erase(ox_import *im)
{
    const ox_seq *s = seq_in(im, 0);
    if (!s) return nb_builder_status(B);
    if (!s->n) return ox_node_error(im, NB_ERR_ARG, "erases from an empty sequence");
    int at = s->n - 1;
    if (ox_has_in(im, 1) && !position(im, 1, s->n, false, &at)) return nb_builder_status(B);
    return edited(im, s, at, NB_NONE);
}

static nb_status i_sequence_at(ox_import *im)
{
    const ox_seq *s = seq_in(im, 0);
    int at;
    if (!s || !position(im, 1, s->n, false, &at)) return nb_builder_status(B);
    return ox_out(im, 0, s->v[at]);
}

/* Its length as a constant, so that shapes and bounds may read it. */
static nb_status i_sequence_length(ox_import *im)
{
    const ox_seq *s = seq_in(im, 0);
    if (!s) return nb_builder_status(B);
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_I64, 0, NULL)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    nb_tensor_set(t, 0, s->n);
    return ox_set_const(im, 0, t);
}

/* SplitToSequence: pieces along `axis` of the sizes `split` gives (one
 * size: equal pieces and a shorter last; a list: those sizes; none: pieces
 * of 1, squeezed unless keepdims). */
static nb_status i_split_to_sequence(ox_import *im)
{
    nb_value x = ox_in(im, 0);
    if (nb_is_none(x)) return nb_builder_status(B);
    nb_var_info info = nb_value_info(B, x);
    int64_t axis = ox_attr_i(im, "axis", 0);
    if (axis < -info.ndim || axis >= info.ndim)
        return ox_node_error(im, NB_ERR_ARG, "axis %lld is outside the input's %d dims", (long long)axis, info.ndim);
    if (axis < 0) axis += info.ndim;
    int64_t len = info.shape[axis];
    if (len < 0) return ox_unsupported(im, "splits a dim whose size only a run knows");
    int64_t sizes[MAX_SEQ];
    int n = 0;
    bool squeeze = false;
    if (!ox_has_in(im, 1)) {
        squeeze = !ox_attr_i(im, "keepdims", 1);
        if (len > MAX_SEQ) return ox_unsupported(im, "makes more pieces than nabla holds at import (4096)");
        for (n = 0; n < len; n++) sizes[n] = 1;
    } else {
        const nb_tensor *t = ox_const_in(im, 1);
        if (!t) return nb_builder_status(B);
        int64_t count = nb_tensor_numel(t);
        if (t->ndim == 0) {
            int64_t each = (int64_t)nb_tensor_get(t, 0);
            if (each < 1) return ox_node_error(im, NB_ERR_ARG, "splits into pieces of %lld", (long long)each);
            if ((len + each - 1) / each > MAX_SEQ)
                return ox_unsupported(im, "makes more pieces than nabla holds at import (4096)");
            for (int64_t at = 0; at < len; at += each) sizes[n++] = at + each <= len ? each : len - at;
        } else {
            int64_t total = 0;
            if (count > MAX_SEQ) return ox_unsupported(im, "makes more pieces than nabla holds at import (4096)");
            for (n = 0; n < count; n++) {
                sizes[n] = (int64_t)nb_tensor_get(t, n);
                if (sizes[n] < 0)
                    return ox_node_error(im, NB_ERR_ARG, "piece %d has size %lld", n, (long long)sizes[n]);
                total += sizes[n];
            }
            if (total != len)
                return ox_node_error(im, NB_ERR_SHAPE, "its pieces add up to %lld along axis %lld, of size %lld",
                                     (long long)total, (long long)axis, (long long)len);
        }
    }
    nb_value *v = nb_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        int64_t end = start + sizes[i];
        v[i] = nb_slice(B, x, 1, &axis, &start, &end);
        if (squeeze) v[i] = nb_squeeze(B, v[i], 1, &axis);
        start = end;
    }
    nb_status st = nb_builder_status(B) ? nb_builder_status(B) : set_seq(im, n, v, false);
    nb_free(v);
    return st;
}

/* ConcatFromSequence: the elements joined along `axis`, or stacked along a
 * new one (new_axis). */
static nb_status i_concat_from_sequence(ox_import *im)
{
    const ox_seq *s = seq_in(im, 0);
    if (!s) return nb_builder_status(B);
    if (!s->n) return ox_unsupported(im, "joins an empty sequence, whose shape and dtype nabla does not know");
    bool stack = ox_attr_i(im, "new_axis", 0) != 0;
    int rank = ox_rank(im, s->v[0]) + stack;
    int64_t axis = ox_attr_i(im, "axis", 0);
    if (axis < -rank || axis >= rank)
        return ox_node_error(im, NB_ERR_ARG, "axis %lld is outside the result's %d dims", (long long)axis, rank);
    if (axis < 0) axis += rank;
    nb_value y = stack ? nb_stack(B, s->n, s->v, (int)axis) : nb_concat(B, s->n, s->v, (int)axis);
    return ox_out(im, 0, y);
}

/* Optional(x): x, held as a sequence of one; Optional() with no input:
 * none. */
static nb_status i_optional(ox_import *im)
{
    if (!ox_has_in(im, 0)) return set_seq(im, 0, NULL, true);
    if (ox_is_seq(im, im->node->input[0]))
        return ox_unsupported(im, "wraps a sequence, which nabla holds only as a list of tensors");
    nb_value x = ox_in(im, 0);
    return nb_is_none(x) ? nb_builder_status(B) : set_seq(im, 1, &x, true);
}

/* Whether input 0 holds an element: a tensor (a graph input of optional
 * type given a value), a sequence or a full Optional do; a missing input and
 * an empty Optional do not. */
static nb_status i_optional_has_element(ox_import *im)
{
    bool has = false;
    if (ox_has_in(im, 0)) {
        const ox_seq *s = nb_strmap_get(&im->seqs, im->node->input[0], NULL);
        if (s) has = !s->optional || s->n;
        else if (nb_is_none(ox_in(im, 0))) return nb_builder_status(B);
        else has = true;
    }
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_BOOL, 0, NULL)) return ox_node_error(im, NB_ERR_NOMEM, "out of memory");
    nb_tensor_set(t, 0, has);
    return ox_set_const(im, 0, t);
}

static nb_status i_optional_get_element(ox_import *im)
{
    const ox_seq *s = ox_has_in(im, 0) ? nb_strmap_get(&im->seqs, im->node->input[0], NULL) : NULL;
    if (!s) return ox_out(im, 0, ox_in(im, 0)); /* a tensor given for an optional input */
    if (!s->optional) return set_seq(im, s->n, s->v, false);
    if (!s->n) return ox_node_error(im, NB_ERR_ARG, "reads the element of an empty optional");
    return ox_out(im, 0, s->v[0]);
}

/* clang-format off */
const ox_importer ox_imports_seq[] = {
    OX_FN(SequenceEmpty, sequence_empty), OX_FN(SequenceConstruct, sequence_construct),
    OX_FN(SequenceInsert, sequence_insert), OX_FN(SequenceErase, sequence_erase), OX_FN(SequenceAt, sequence_at),
    OX_FN(SequenceLength, sequence_length), OX_FN(SplitToSequence, split_to_sequence),
    OX_FN(ConcatFromSequence, concat_from_sequence), OX_FN(Optional, optional),
    OX_FN(OptionalHasElement, optional_has_element), OX_FN(OptionalGetElement, optional_get_element),
    {0},
};
/* clang-format on */

#endif
