/* What the layers share: naming, argument checks, and the record-mode
 * helpers they need beyond nb_emit. */
#ifndef NABLA_LAYER_INTERNAL_H
#define NABLA_LAYER_INTERNAL_H

#include <stdio.h>
#include "nabla/init.h"
#include "nabla/layers.h"
#include "nabla/ops.h"
#include "../builder/builder_internal.h"

#define NB_LAYER_NAME_MAX 256

/* Whether a layer may go on: the builder is usable and has no error, and
 * each of the n values is present (an absent one, with no error yet, is an
 * error naming the layer). */
bool nb_layer_ok(nb_builder *b, const char *layer, int n, const nb_value *vals);

/* The layer's name: `given` when set, else a fresh "<kind>_k" from
 * nb_builder_unique_name (the program's counters in a record builder, the
 * per-step counters of an eager one, so each step finds its parameters). */
bool nb_layer_name(nb_builder *b, const char *kind, const char *given, char *buf, size_t size);
/* A parameter name of a layer, Paddle's way: "<layer>.<suffix>_k". */
bool nb_layer_param_name(nb_builder *b, const char *layer, const char *suffix, char *buf, size_t size);

/* `init` unless it is NB_INIT_DEFAULT, else `def`. */
static inline nb_init nb_init_or(nb_init init, nb_init def) { return init.kind == NB_INIT_DEFAULT ? def : init; }

/* torch's default bias init for a layer whose weight has this fan_in:
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (zeros for fan_in 0). */
nb_init nb_layer_default_bias_init(int64_t fan_in);

/* Whether the dims [from, ndim) of info are all known, with their product. */
bool nb_dims_known(const nb_var_info *info, int from, int64_t *prod);

/* Fails the builder unless x has a float dtype. */
bool nb_layer_need_float(nb_builder *b, const char *layer, nb_value x, nb_var_info *info);

/* Whether nb_layer_activation knows `act` (NULL and "" included), and the
 * builder error for one it does not know, listing those it does. Layers
 * check their activation before creating anything. */
bool nb_activation_known(const char *act);
nb_status nb_activation_unknown_error(nb_builder *b, const char *layer, const char *act);

/* The batch_norm op over in = {X, Scale, Bias, Mean, Variance} as
 * nb_layer_batch_norm emits it (in training mode, the running statistics
 * written back into Mean and Variance), for callers that made the vars
 * themselves (the ONNX importer). Returns Y. */
nb_value nb_batch_norm_of(nb_builder *b, const nb_value in[5], double momentum, double epsilon, bool use_global_stats);

#endif
