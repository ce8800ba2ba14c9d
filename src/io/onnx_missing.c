/* nabla/onnx.h in a build without ONNX's proto (libonnx-dev was not found
 * when it was configured): the calls say so. */
#ifndef NABLA_HAVE_ONNX
#include "nabla/onnx.h"

static nb_status missing(const char *what)
{
    return nb_error(NB_ERR_UNSUPPORTED,
                    "%s: this build of nabla has no ONNX support (it needs onnx.proto from "
                    "libonnx-dev at build time: apt-get install libonnx-dev, then rebuild)",
                    what);
}

bool nb_onnx_available(void) { return false; }

nb_status nb_onnx_export(const nb_program *program, nb_scope *scope, nb_names fetches, const char *path)
{
    (void)program, (void)scope, (void)fetches, (void)path;
    return missing("onnx export");
}

nb_status nb_onnx_import(const char *path, nb_builder *b, nb_values inputs, int max_outputs, nb_value *outputs,
                         int *n_outputs)
{
    (void)path, (void)inputs, (void)max_outputs, (void)outputs;
    if (n_outputs) *n_outputs = 0;
    nb_status st = missing("onnx import");
    return b ? nb_builder_fail(b, st, "%s", nb_last_error()) : st;
}
#else
typedef int nb_onnx_missing_unused; /* ISO C wants something in a file */
#endif
