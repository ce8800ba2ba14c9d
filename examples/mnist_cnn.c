/* mnist_cnn: a LeNet-like network (two 5x5 convolutions with max pooling,
 * then two fully connected layers) trained on MNIST. */
#include "mnist_common.h"

int main(int argc, char **argv)
{
    mnist_args a = {.epochs = 3, .batch = 64, .lr = 1e-3, .seed = 1};
    mnist_parse(argc, argv, &a);
    mnist_model m;
    mnist_begin(&a, &m);
    nb_builder *b = m.b;

    nb_value x = nb_layer_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_layer_data(b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value img = nb_reshape(b, x, 4, (int64_t[]){-1, 1, 28, 28});
    nb_conv2d_opts relu = {.act = "relu"};
    nb_value h = nb_layer_pool2d(b, nb_layer_conv2d(b, img, 20, 5, &relu), "max", 2, 2, 0); /* 20x12x12 */
    h = nb_layer_pool2d(b, nb_layer_conv2d(b, h, 50, 5, &relu), "max", 2, 2, 0);             /* 50x4x4 */
    h = nb_layer_fc(b, nb_flatten(b, h, 1, -1), 500, "relu");
    nb_value y = nb_layer_fc(b, h, 10, NULL);
    nb_value cost = nb_layer_softmax_cross_entropy(b, y, l);
    nb_value acc = nb_layer_accuracy(b, y, l, 1);
    return mnist_finish(&a, &m, cost, acc);
}
