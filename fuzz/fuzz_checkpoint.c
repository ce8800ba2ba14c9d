/* libFuzzer harness for checkpoints (nb_checkpoint_load) into the scope of
 * a small program (fuzz_util.h: persistable vars of several dtypes, one 0-d,
 * one with an open size). Build and run: `make fuzz` (fuzz/README). By hand:
 *     build-fuzz/fuzz/fuzz_checkpoint -max_total_time=60 build-fuzz/corpus/checkpoint build-fuzz/seeds/checkpoint
 *
 * Each input is loaded into an empty scope (the loaded tensors are bound
 * there) and, when that works, again into the now filled scope (the values
 * are copied into the tensors it holds). A refused load leaves the scope as
 * it was. */
#include <stdint.h>
#include "fuzz_util.h"
#include "nabla/checkpoint.h"
#include "nabla/scope.h"
#include "nabla/status.h"

static nb_program *program;

static void free_program(void) { nb_program_free(program); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!program) {
        program = fuzz_ckpt_program();
        FUZZ_CHECK(program);
        atexit(free_program);
    }
    const char *path = fuzz_write_file(data, size);
    nb_scope *scope;
    FUZZ_CHECK(!nb_scope_new(&scope, NULL));
    nb_safetensors *meta = NULL;
    nb_clear_error();
    nb_status st = nb_checkpoint_load(path, program, scope, &meta);
    if (st) {
        FUZZ_CHECK(!meta && *nb_last_error() && nb_scope_size(scope) == 0);
    } else {
        FUZZ_CHECK(meta && nb_scope_size(scope) == FUZZ_CKPT_NVARS);
        nb_tensor *kept[FUZZ_CKPT_NVARS];
        for (int i = 0; i < FUZZ_CKPT_NVARS; i++) {
            kept[i] = nb_scope_find(scope, fuzz_ckpt_vars[i].name);
            FUZZ_CHECK(kept[i] && kept[i]->dtype == fuzz_ckpt_vars[i].dtype);
        }
        for (int i = 0; i < nb_safetensors_meta_count(meta); i++)
            FUZZ_CHECK(nb_safetensors_meta(meta, nb_safetensors_meta_key(meta, i)));
        nb_safetensors_free(meta);
        FUZZ_CHECK(!nb_checkpoint_load(path, program, scope, NULL));
        /* Values of the same dtype and shape are copied into the tensors
         * the scope already held. */
        for (int i = 0; i < FUZZ_CKPT_NVARS; i++) FUZZ_CHECK(nb_scope_find(scope, fuzz_ckpt_vars[i].name) == kept[i]);
    }
    nb_scope_free(scope);
    return 0;
}
