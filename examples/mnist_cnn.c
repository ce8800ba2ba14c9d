/* mnist_cnn: a LeNet-like network (two 5x5 convolutions with max pooling,
 * then two fully connected layers) trained on MNIST. */
#include "mnist_common.h"

int main(int argc, char **argv)
{
    mnist_args a = {.epochs = 3, .batch = 64, .lr = 1e-3, .seed = 1};
    mnist_parse(argc, argv, &a);

    nb_program *main_p, *startup;
    nb_builder *b;
    die_on(nb_program_new(&main_p), "program");
    die_on(nb_program_new(&startup), "program");
    nb_program_set_seed(main_p, a.seed);
    nb_program_set_seed(startup, a.seed);
    die_on(nb_builder_new_record(&b, main_p, startup), "builder");

    nb_value x = nb_layer_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_layer_data(b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value img = nb_reshape(b, x, 4, (int64_t[]){-1, 1, 28, 28});
    nb_conv2d_opts c1 = {.act = "relu"}, c2 = {.act = "relu"};
    nb_value h = nb_layer_pool2d(b, nb_layer_conv2d(b, img, 20, 5, &c1), "max", 2, 2, 0); /* 20x12x12 */
    h = nb_layer_pool2d(b, nb_layer_conv2d(b, h, 50, 5, &c2), "max", 2, 2, 0);             /* 50x4x4 */
    h = nb_layer_fc(b, nb_flatten(b, h, 1, -1), 500, "relu");
    nb_value y = nb_layer_fc(b, h, 10, NULL);
    nb_value cost = nb_layer_softmax_cross_entropy(b, y, l);
    nb_value acc = nb_layer_accuracy(b, y, l, 1);
    if (nb_builder_status(b)) {
        fprintf(stderr, "model: %s\n", nb_builder_error(b));
        return 1;
    }
    /* Adam, with the learning rate decayed to zero along a cosine over the run. */
    nb_optimizer opt = nb_adam(a.lr);
    opt.schedule = (nb_lr_schedule){.kind = "cosine", .total_steps = a.epochs * mnist_steps_per_epoch(a.batch)};
    nb_backward_result grads;
    die_on(nb_minimize(&opt, main_p, startup, nb_value_name(cost), 0, NULL, 0, NULL, &grads), "minimize");

    int rc = mnist_train(&a, main_p, startup, nb_value_name(cost), nb_value_name(acc));
    nb_backward_result_free(&grads);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(main_p);
    return rc;
}
