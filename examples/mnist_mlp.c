/* mnist_mlp: the classic Fluid-style first program, in C:
 *
 *     x = layer.data("images"); l = layer.data("label"); y = layer.fc(x)
 *     cost = layer.mse(y, l); optimize(cost); train(cost, reader=mnist.train())
 *
 * with a hidden layer and softmax cross-entropy, which is what reaches 98%.
 * With --eager the same model function runs in eager mode instead. */
#include "mnist_common.h"

/* The model, written once: a static program or eager mode runs it. */
static nb_value mlp(nb_builder *b, nb_value x)
{
    nb_value h = nb_layer_fc(b, x, 256, "relu", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

int main(int argc, char **argv)
{
    mnist_args a = {.epochs = 5, .batch = 64, .lr = 2e-3, .seed = 1};
    mnist_parse(argc, argv, &a);
    return mnist_run(&a, mlp);
}
