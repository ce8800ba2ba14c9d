/* Folding at import: a node whose every input the import knows as a
 * constant is computed there, and its outputs become constants too.
 *
 * Exporters compute shapes, bounds and scales with ordinary ops on
 * constants: torch's chunk divides a gathered dim (Shape, Gather, Add, Div,
 * Mul into Slice), its Upsample joins float scales (Concat of Constants into
 * Resize), nn.MultiheadAttention slices its packed projection with bounds
 * worked out the same way. An eager import knows those values anyway; a
 * static program must know them at build time, since nabla's ops take them
 * as attributes. Running the node on an eager builder of its own gives the
 * values through the very importer that would have recorded it, so the fold
 * means what the op means. */
#ifdef NABLA_HAVE_ONNX
#include <string.h>
#include "nabla/eager.h"
#include "onnx_internal.h"

/* Large constants stay ops of the program: folding is for shapes and the
 * like, not for baking computations on weights into it. */
#define FOLD_MAX_ELEMENTS 65536

/* Ops whose outputs are not a function of their inputs' values. */
static bool is_random(const char *op_type)
{
    static const char *const random[] = {"RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial",
                                         "Dropout"};
    for (size_t i = 0; i < sizeof random / sizeof *random; i++)
        if (!strcmp(op_type, random[i])) return true;
    return false;
}

/* Input k as a constant the import holds (a Constant node's value or one it
 * folded, or an initializer that is not a float, which a float one would
 * be: a parameter), or NULL, leaving no error. */
static const nb_tensor *known_const(ox_import *im, int k)
{
    const char *name = im->node->input[k];
    if (nb_strmap_get(&im->values, name, NULL) || nb_strmap_get(&im->shapes, name, NULL)) return NULL;
    const Onnx__TensorProto *p = nb_strmap_get(&im->protos, name, NULL);
    nb_dtype dt;
    if (p && (!ox_nabla_dtype(p->data_type, &dt) || nb_dtype_is_float(dt))) return NULL;
    if (!p && !nb_strmap_get(&im->consts, name, NULL)) return NULL;
    const nb_tensor *t = ox_const_in(im, k);
    return t && nb_tensor_numel(t) <= FOLD_MAX_ELEMENTS ? t : NULL;
}

static void free_values(nb_strmap *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->keys[i]) nb_free(m->vals[i]);
    nb_strmap_free(m);
}

static void free_consts(nb_strmap *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->keys[i]) nb_tensor_release(m->vals[i]);
    nb_strmap_free(m);
}

/* The node on an eager builder, its inputs the constants; its outputs
 * (values or constants of the sub-import) into im's constants. */
static nb_status run_folded(ox_import *im, nb_builder *eb, const nb_tensor *const *in)
{
    ox_import sub = {.b = eb, .dir = im->dir, .opset = im->opset, .node = im->node};
    nb_strmap_init(&sub.values), nb_strmap_init(&sub.protos), nb_strmap_init(&sub.consts);
    nb_strmap_init(&sub.state), nb_strmap_init(&sub.shapes), nb_strmap_init(&sub.seqs);
    nb_status st = NB_OK;
    for (size_t k = 0; k < im->node->n_input && !st; k++) {
        if (!in[k]) continue;
        nb_value *v = nb_malloc(sizeof *v);
        if (!v) {
            st = NB_ERR_NOMEM;
            break;
        }
        *v = nb_eager_value(eb, (nb_tensor *)in[k]);
        if (nb_strmap_put(&sub.values, im->node->input[k], v)) nb_free(v), st = NB_ERR_NOMEM;
    }
    if (!st) st = ox_import_node(&sub);
    for (size_t k = 0; k < im->node->n_output && !st; k++) {
        const char *name = im->node->output[k];
        if (!*name) continue;
        nb_value *v = nb_strmap_get(&sub.values, name, NULL);
        nb_tensor *t = v ? nb_eager_tensor(*v) : nb_strmap_get(&sub.consts, name, NULL), *copy;
        if (!t) st = NB_ERR_NOT_FOUND;
        else if (!(st = nb_tensor_clone(&copy, t))) st = ox_set_const(im, (int)k, copy);
    }
    free_values(&sub.values), free_consts(&sub.consts);
    nb_strmap_free(&sub.protos), nb_strmap_free(&sub.state), free_values(&sub.shapes);
    ox_seqs_free(&sub); /* a sequence op folded makes a list, not a constant: it does not fold */
    return st;
}

bool ox_fold_node(ox_import *im)
{
    const Onnx__NodeProto *n = im->node;
    if (!nb_builder_program(im->b) || is_random(n->op_type) || n->n_input == 0 || n->n_input > 64) return false;
    const nb_tensor *in[64] = {0};
    bool any = false;
    for (size_t k = 0; k < n->n_input; k++) {
        if (!*n->input[k]) continue;
        if (!(in[k] = known_const(im, (int)k))) return false;
        any = true;
    }
    nb_builder *eb;
    if (!any || nb_builder_new_eager(&eb)) return false;
    nb_grad_mode_push(false);
    nb_status st = run_folded(im, eb, in);
    nb_grad_mode_pop();
    nb_builder_free(eb);
    /* A node that does not fold is imported as the op it is, which says
     * what stops it if anything does. */
    return st == NB_OK;
}

#endif
