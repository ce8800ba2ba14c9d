/* nb_vmap_emit on a record builder: not yet (see vmap.c for the eager one). */
#include "vmap_internal.h"
#include "../builder/builder_internal.h"

nb_status nb_vmap_record(nb_builder *b, const nb_function *f, const nb_vmap_opts *opts, const nb_value *in,
                         nb_value *out)
{
    (void)f, (void)opts, (void)in, (void)out;
    return nb_builder_fail(b, NB_ERR_UNSUPPORTED, "vmap: record builders are not supported yet");
}
