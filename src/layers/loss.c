/* Losses reduced to a scalar, and accuracy. */
#include "layer_internal.h"

nb_value nb_layer_mse(nb_builder *b, nb_value y, nb_value label)
{
    if (!nb_layer_ok(b, "mse", 2, (nb_value[]){y, label})) return NB_NONE;
    return nb_mse_loss(b, y, label, "mean");
}

nb_value nb_layer_softmax_cross_entropy(nb_builder *b, nb_value logits, nb_value label)
{
    if (!nb_layer_ok(b, "softmax_cross_entropy", 2, (nb_value[]){logits, label})) return NB_NONE;
    nb_var_info li = nb_value_info(b, logits);
    if (li.ndim != 2) {
        char s[NB_SHAPE_STR_MAX];
        nb_builder_fail(b, NB_ERR_SHAPE, "softmax_cross_entropy: logits have shape %s; they must be [B, C]",
                        nb_shape_str(s, sizeof s, li.ndim, li.shape));
        return NB_NONE;
    }
    /* The op checks the labels ([B] or [B, 1], integer) against the logits. */
    nb_value per_example = nb_softmax_with_cross_entropy(b, logits, label, NULL);
    return nb_reduce_mean(b, per_example, 0, NULL, false);
}

nb_value nb_layer_bce_with_logits(nb_builder *b, nb_value x, nb_value label)
{
    if (!nb_layer_ok(b, "bce_with_logits", 2, (nb_value[]){x, label})) return NB_NONE;
    return nb_bce_with_logits(b, x, label, "mean");
}

nb_value nb_layer_accuracy(nb_builder *b, nb_value scores, nb_value label, int k)
{
    if (!nb_layer_ok(b, "accuracy", 2, (nb_value[]){scores, label})) return NB_NONE;
    return nb_accuracy(b, scores, label, k);
}
