/* Initializers that an exporter shared between parameters.
 *
 * PyTorch's exporter (torch.onnx.export, 1.13) keeps one initializer for
 * parameters and buffers of equal values (every fresh batch norm's weights
 * are ones, its biases and running means zeros) and gives it to each user
 * through an Identity named after the original tensor ("layer4.1.bn2.weight"
 * reads "layer4.0.bn1.weight"). Inference does not mind; training does: one
 * shared parameter would take the sum of every layer's gradient. So in a
 * program an Identity of a float initializer makes a parameter of its own,
 * named as its output and holding the initializer's values, which is the
 * model as it was before export. (A batch norm that reads one as running
 * statistics turns it into state, onnx_import_nn.c.) An eager builder's
 * parameters are found by name at each import, and keep the shared one. */
#ifdef NABLA_HAVE_ONNX
#include <stdio.h>
#include <string.h>
#include "nabla/init.h"
#include "onnx_internal.h"

bool ox_unshare_initializer(ox_import *im, nb_status *st)
{
    const Onnx__NodeProto *n = im->node;
    if (!nb_builder_program(im->b) || strcmp(n->op_type, "Identity") || n->n_input != 1 || n->n_output != 1)
        return false;
    const Onnx__TensorProto *p = nb_strmap_get(&im->protos, n->input[0], NULL);
    nb_dtype dt;
    if (!p || !ox_nabla_dtype(p->data_type, &dt) || !nb_dtype_is_float(dt) ||
        nb_strmap_get(&im->state, n->input[0], NULL))
        return false;
    const char *name = n->output[0];
    if (!*name || nb_strmap_get(&im->protos, name, NULL) || nb_block_find_var_recursive(nb_builder_block(im->b), name))
        return false;
    nb_tensor *t;
    char what[300];
    snprintf(what, sizeof what, "initializer '%.256s'", n->input[0]);
    if ((*st = ox_tensor_from_proto(p, im->dir, what, &t))) {
        *st = ox_node_error(im, *st, "%s", nb_last_error());
        return true;
    }
    nb_value v = nb_param_from(im->b, name, t);
    nb_tensor_release(t);
    *st = nb_is_none(v) ? nb_builder_status(im->b) : ox_out(im, 0, v);
    return true;
}

#endif
