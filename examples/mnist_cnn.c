/* mnist_cnn: a LeNet-like network (two 5x5 convolutions with max pooling,
 * then two fully connected layers) trained on MNIST. With --eager the same
 * model function runs in eager mode instead. */
#include "mnist_common.h"

/* The model, written once: a static program or eager mode runs it. */
static nb_value lenet(nb_builder *b, nb_value x)
{
    nb_value img = nb_reshape(b, x, 4, (int64_t[]){-1, 1, 28, 28});
    nb_conv2d_opts relu = {.act = "relu"};
    nb_value h = nb_layer_pool2d(b, nb_layer_conv2d(b, img, 20, 5, &relu), "max", 2,
                                 &(nb_pool2d_opts){.stride = 2}); /* 20x12x12 */
    h = nb_layer_pool2d(b, nb_layer_conv2d(b, h, 50, 5, &relu), "max", 2, &(nb_pool2d_opts){.stride = 2}); /* 50x4x4 */
    h = nb_layer_fc(b, nb_flatten(b, h, 1, -1), 500, "relu", NULL);
    return nb_layer_fc(b, h, 10, NULL, NULL);
}

int main(int argc, char **argv)
{
    mnist_args a = {.epochs = 3, .batch = 64, .lr = 1e-3, .seed = 1};
    mnist_parse(argc, argv, &a);
    return mnist_run(&a, lenet);
}
