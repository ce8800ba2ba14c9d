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

    nb_program *main_p, *startup;
    nb_builder *b;
    die_on(nb_program_new(&main_p), "program");
    die_on(nb_program_new(&startup), "program");
    nb_program_set_seed(main_p, a.seed);
    nb_program_set_seed(startup, a.seed);
    die_on(nb_builder_new_record(&b, main_p, startup), "builder");

    nb_value x = nb_layer_data(b, "images", NB_F32, 2, (int64_t[]){-1, 784});
    nb_value l = nb_layer_data(b, "label", NB_I64, 2, (int64_t[]){-1, 1});
    nb_value h = nb_layer_fc(b, x, 256, "relu");
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
