/* mnist_mlp: the program of the design documents (seed 001), in C:
 *
 *     x = layer.data("images"); l = layer.data("label"); y = layer.fc(x)
 *     cost = layer.mse(y, l); optimize(cost); train(cost, reader=mnist.train())
 *
 * with a hidden layer and softmax cross-entropy, which is what reaches 98%. */
#include "mnist_common.h"

int main(int argc, char **argv)
{
    mnist_args a = {.epochs = 5, .batch = 64, .lr = 2e-3, .seed = 1};
    mnist_parse(argc, argv, &a);
    mnist_model m;
    mnist_begin(&a, &m);
    nb_builder *b = m.b;

    nb_value x = nb_layer_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_layer_data(b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value h = nb_layer_fc(b, x, 256, "relu");
    nb_value y = nb_layer_fc(b, h, 10, NULL);
    nb_value cost = nb_layer_softmax_cross_entropy(b, y, l);
    nb_value acc = nb_layer_accuracy(b, y, l, 1);
    return mnist_finish(&a, &m, cost, acc);
}
