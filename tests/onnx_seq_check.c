/* Checks ONNX sequences imported into nabla (models written by
 * tests/test_onnx_control.sh), eagerly and as a static program:
 *
 *   rows = SplitToSequence(x [4, 3], axis 0, keepdims 0)
 *   rows = SequenceErase(SequenceInsert(rows, colsum(x), 1), -1)
 *   y = ConcatFromSequence(rows, axis 0, new_axis 1)   = [x0, colsum, x1, x2]
 *   z = SequenceAt(SplitToSequence(x, split [1, 3]), 1) = x[1:4]
 *   n = SequenceLength(rows)                            = 4
 *   k = ConcatFromSequence(SequenceConstruct(split, [0])) = [1, 3, 0]
 *
 * (k's sequence is of constants: a static import tries to fold it, which
 * must leave nothing behind when it does not fold.)
 *
 * against the same rows taken here; the gradient of sum(y) + sum(z) in the
 * program against finite differences; and an If that returns a sequence,
 * which nabla cannot carry, refused naming it.
 *
 *   onnx_seq_check SEQ.onnx IF_SEQ.onnx */
#include <stdio.h>
#include <string.h>
#include "nabla/nabla.h"
#include "test.h"

static const char *seq_path, *if_seq_path;

static double x_at(int r, int c) { return 0.25 * r - 0.5 * c + 0.1 * r * c; }

static nb_tensor *x_tensor(void)
{
    nb_tensor *t;
    if (nb_tensor_new(&t, NB_F64, 2, (int64_t[]){4, 3})) return NULL;
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) nb_tensor_set(t, r * 3 + c, x_at(r, c));
    return t;
}

/* y, z and n as the model should give them. */
static void check_outputs(const nb_tensor *y, const nb_tensor *z, const nb_tensor *n, const nb_tensor *k)
{
    static const double k_want[3] = {1, 3, 0};
    CHECK(k && nb_tensor_numel(k) == 3);
    for (int i = 0; k && i < 3 && nb_tensor_numel(k) == 3; i++) CHECK(nb_tensor_get(k, i) == k_want[i]);
    CHECK(y && y->ndim == 2 && y->shape[0] == 4 && y->shape[1] == 3);
    CHECK(z && z->ndim == 2 && z->shape[0] == 3 && z->shape[1] == 3);
    CHECK(n && nb_tensor_numel(n) == 1 && nb_tensor_get(n, 0) == 4);
    if (!y || !z || nb_tensor_numel(y) != 12 || nb_tensor_numel(z) != 9) return;
    const int y_rows[4] = {0, -1, 1, 2}; /* -1: the column sums */
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) {
            double want = y_rows[r] >= 0 ? x_at(y_rows[r], c) : x_at(0, c) + x_at(1, c) + x_at(2, c) + x_at(3, c);
            CHECK_NEAR(nb_tensor_get(y, r * 3 + c), want, 1e-12);
        }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) CHECK_NEAR(nb_tensor_get(z, r * 3 + c), x_at(r + 1, c), 1e-12);
}

static void test_eager_sequences(void)
{
    nb_builder *b;
    REQUIRE_OK(nb_builder_new_eager(&b));
    nb_tensor *x = x_tensor();
    nb_value out[4];
    int n_out = 0;
    CHECK_OK(nb_onnx_import(seq_path, b, NB_VALUES(nb_eager_value(b, x)), 4, out, &n_out));
    CHECK(n_out == 4);
    if (!nb_builder_status(b) && n_out == 4)
        check_outputs(nb_eager_tensor(out[0]), nb_eager_tensor(out[1]), nb_eager_tensor(out[2]),
                      nb_eager_tensor(out[3]));
    nb_tensor_release(x);
    nb_builder_free(b);
}

static void test_static_sequences_and_their_gradient(void)
{
    nb_program *main_p, *startup;
    nb_builder *b;
    nb_scope *scope;
    nb_executor *e;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_program_new(&startup));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, startup));
    REQUIRE_OK(nb_scope_new(&scope, NULL));
    REQUIRE_OK(nb_executor_new(&e));
    nb_value out[4];
    REQUIRE_OK(nb_onnx_import(seq_path, b, NB_NO_VALUES, 4, out, NULL));
    nb_value loss = nb_add(b, nb_reduce_sum(b, out[0], 0, NULL, false), nb_reduce_sum(b, out[1], 0, NULL, false));
    REQUIRE_OK(nb_builder_status(b));
    nb_tensor *x = x_tensor(), *got[4] = {0};
    CHECK_OK(nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL));
    const char *names[4];
    for (int i = 0; i < 4; i++) names[i] = nb_value_name(out[i]);
    CHECK_OK(nb_executor_run(e, main_p, scope, NB_FEEDS({"x", x}), NB_NAMES_N(4, names), got));
    check_outputs(got[0], got[1], got[2], got[3]);
    nb_gradcheck_report rep;
    CHECK_OK(nb_gradcheck_program(main_p, nb_value_name(loss), NB_NAMES("x"), scope,
                                  &(nb_gradcheck_opts){.feeds = NB_FEEDS({"x", x})}, &rep));
    if (rep.failed) fprintf(stderr, "  worst: %s\n", rep.worst);
    CHECK(rep.checked == 12 && rep.failed == 0);
    for (int i = 0; i < 4; i++) nb_tensor_release(got[i]);
    nb_tensor_release(x);
    nb_executor_free(e);
    nb_scope_free(scope);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
}

/* An If whose branches return sequences: nb_cond carries tensors only. */
static void test_if_returning_a_sequence_is_refused(void)
{
    nb_program *main_p;
    nb_builder *b;
    REQUIRE_OK(nb_program_new(&main_p));
    REQUIRE_OK(nb_builder_new_record(&b, main_p, NULL));
    nb_value y;
    CHECK_ERR(nb_onnx_import(if_seq_path, b, NB_NO_VALUES, 1, &y, NULL), NB_ERR_UNSUPPORTED,
              "is a sequence or optional");
    nb_builder_free(b);
    nb_program_free(main_p);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: onnx_seq_check SEQ.onnx IF_SEQ.onnx\n");
        return 2;
    }
    seq_path = argv[1], if_seq_path = argv[2];
    RUN(test_eager_sequences);
    RUN(test_static_sequences_and_their_gradient);
    RUN(test_if_returning_a_sequence_is_refused);
    return test_report();
}
