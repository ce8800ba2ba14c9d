/* libFuzzer harness for ONNX models (nb_onnx_import). Build and run: `make
 * fuzz` (fuzz/README). One run by hand:
 *     build-fuzz/fuzz/fuzz_onnx -max_total_time=60 build-fuzz/corpus/onnx build-fuzz/seeds/onnx
 *
 * A model that imports into a record builder must also be a program that
 * runs: its startup program (the initializers) runs clean, and, when its
 * only input is a float matrix, so does its main program on a small batch;
 * either may fail only with an error set, never crash. An import that fails
 * leaves the builder failed with a message. In a build without ONNX the
 * harness checks that the call says so. */
#include <stdint.h>
#include "fuzz_util.h"
#include "nabla/nabla.h"

/* Whether every var of the program is small (unknown dims counted as the
 * batch of 2 run here): a few bytes of a model can ask for a fill or a pad
 * of any size, which would be the machine's limit, not a finding. */
static bool small(const nb_program *p)
{
    for (int k = 0; k < p->n_blocks; k++)
        for (int i = 0; i < p->blocks[k]->n_vars; i++) {
            const nb_var *v = p->blocks[k]->vars[i];
            double n = 1;
            for (int d = 0; d < v->ndim; d++) n *= v->shape[d] < 0 ? 2 : (double)v->shape[d];
            if (n > (1 << 22)) return false;
        }
    return true;
}

/* Runs the imported programs; a failure must come with a message. */
static void run_imported(nb_program *main_p, nb_program *startup, nb_value out)
{
    nb_scope *scope;
    nb_executor *e;
    FUZZ_CHECK(!nb_scope_new(&scope, NULL) && !nb_executor_new(&e));
    nb_status st = nb_executor_run(e, startup, scope, NB_NO_FEEDS, NB_NO_NAMES, NULL);
    FUZZ_CHECK(!st || *nb_last_error());
    const nb_block *g = nb_program_global_block(main_p);
    const nb_var *feed = NULL;
    int n_data = 0;
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->is_data) feed = g->vars[i], n_data++;
    if (!st && n_data == 1 && feed->dtype == NB_F32 && feed->ndim == 2 && feed->shape[1] > 0 &&
        feed->shape[1] <= 4096) {
        nb_tensor *x, *y = NULL;
        FUZZ_CHECK(!nb_tensor_full(&x, NB_F32, 2, (int64_t[]){2, feed->shape[1]}, 0.5));
        const char *fetch = nb_value_name(out);
        st = nb_executor_run(e, main_p, scope, NB_FEEDS({feed->name, x}), NB_NAMES(fetch), &y);
        FUZZ_CHECK(!st || *nb_last_error());
        nb_tensor_release(x);
        nb_tensor_release(y);
    }
    nb_executor_free(e);
    nb_scope_free(scope);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FUZZ_CHECK(!nb_control_register_ops());
    const char *path = fuzz_write_file(data, size);
    nb_program *main_p, *startup;
    nb_builder *b;
    FUZZ_CHECK(!nb_program_new(&main_p) && !nb_program_new(&startup) && !nb_builder_new_record(&b, main_p, startup));
    nb_value out[4];
    int n_out = -1;
    nb_clear_error();
    nb_status st = nb_onnx_import(path, b, NB_NO_VALUES, 4, out, &n_out);
    if (!nb_onnx_available()) FUZZ_CHECK(st == NB_ERR_UNSUPPORTED);
    FUZZ_CHECK(st ? nb_builder_status(b) == st && *nb_builder_error(b) : n_out >= 0);
    if (!st && n_out >= 1 && small(main_p)) run_imported(main_p, startup, out[0]);
    nb_builder_free(b);
    nb_program_free(main_p);
    nb_program_free(startup);
    return 0;
}
