/* forward_program: the forward part of a small classifier,
 *
 *     x = layer.data("x"); h = relu(fc(x)); y = softmax(fc(h))
 *
 * built as a static program, initialised by its startup program, and run
 * twice with different batch sizes by the executor. */
#include <stdio.h>
#include <stdlib.h>
#include "nabla/nabla.h"

#define CHECK(expr)                                                                    \
    do {                                                                               \
        nb_status st_ = (expr);                                                        \
        if (st_) {                                                                     \
            fprintf(stderr, "forward_program: %s: %s\n", nb_status_name(st_), nb_last_error()); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* A fully connected layer: parameters W [in, out] (uniform) and b [out] (zero). */
static nb_value fc(nb_builder *b, nb_value x, int64_t in, int64_t out, const char *name)
{
    char wname[64], bname[64];
    snprintf(wname, sizeof wname, "%s.w_0", name);
    snprintf(bname, sizeof bname, "%s.b_0", name);
    double bound = 1.0 / (double)in;
    nb_value w = nb_param(b, wname, NB_F32, 2, (int64_t[]){in, out}, nb_init_uniform(-bound, bound));
    nb_value bias = nb_param(b, bname, NB_F32, 1, (int64_t[]){out}, nb_init_zeros());
    return nb_fc(b, x, w, bias, 1);
}

int main(void)
{
    nb_program *prog, *startup;
    nb_builder *b;
    CHECK(nb_program_new(&prog));
    CHECK(nb_program_new(&startup));
    CHECK(nb_builder_new_record(&b, prog, startup));

    nb_value x = nb_data(b, "x", NB_F32, 2, (int64_t[]){-1, 4});
    nb_value h = nb_relu(b, fc(b, x, 4, 8, "fc_0"));
    nb_value y = nb_softmax(b, fc(b, h, 8, 3, "fc_1"), -1);
    CHECK(nb_builder_status(b)); /* one check for the whole model */
    const char *fetch = nb_value_name(y);

    printf("The forward program nabla recorded:\n\n");
    nb_program_print(prog, stdout);

    nb_executor *ex;
    nb_scope *scope;
    CHECK(nb_executor_new(&ex));
    CHECK(nb_scope_new(&scope, NULL));
    CHECK(nb_executor_run(ex, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL)); /* initialise W and b once */

    for (int64_t batch = 2; batch <= 3; batch++) {
        nb_tensor *xt, *yt;
        CHECK(nb_tensor_new(&xt, NB_F32, 2, (int64_t[]){batch, 4}));
        for (int64_t i = 0; i < batch * 4; i++) nb_tensor_set(xt, i, (double)(i % 5) - 2.0);
        CHECK(nb_executor_run(ex, prog, scope, NB_FEEDS({"x", xt}), NB_NAMES_N(1, &fetch), &yt));
        printf("\nbatch of %lld, x =\n", (long long)batch);
        nb_tensor_print(xt, stdout);
        printf("y = softmax(fc(relu(fc(x)))) =\n");
        nb_tensor_print(yt, stdout);
        nb_tensor_release(xt);
        nb_tensor_release(yt);
    }
    nb_scope_free(scope);
    nb_executor_free(ex);
    nb_builder_free(b);
    nb_program_free(startup);
    nb_program_free(prog);
    return 0;
}
