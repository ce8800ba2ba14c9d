/* Finding the examples' data sets: nabla's own search (nb_data_find, see
 * nabla/data.h: --data, $NABLA_DATA, data/ folders here and beside the
 * program), then, when --data was not given, the folder the build names as
 * NABLA_DATA_DIR (CMake's cache variable of that name; by default the
 * project's data folder, shared/data beside the source tree). The library
 * itself knows no such folder. */
#ifndef NABLA_EXAMPLES_EXAMPLE_DATA_H
#define NABLA_EXAMPLES_EXAMPLE_DATA_H

#include <stddef.h>
#include "nabla/nabla.h"

/* The printable name of the build's data folder ("none" without one). */
#ifdef NABLA_DATA_DIR
#define EXAMPLE_DATA_DIR_TEXT NABLA_DATA_DIR
#else
#define EXAMPLE_DATA_DIR_TEXT "none"
#endif

/* nb_data_find, then the build's data folder. */
static inline nb_status example_data_find(const char *cli, const char *dataset, char *out, size_t size)
{
    nb_status st = nb_data_find(cli, dataset, out, size);
#ifdef NABLA_DATA_DIR
    /* The second search looks in the build's folder first, then in every
     * place the first did, so its error lists them all. */
    if (st == NB_ERR_NOT_FOUND && !(cli && cli[0])) st = nb_data_find(NABLA_DATA_DIR, dataset, out, size);
#endif
    return st;
}

/* nb_data_find_file, then the build's data folder. */
static inline nb_status example_data_find_file(const char *cli, const char *dataset, const char *file, char *out,
                                               size_t size)
{
    nb_status st = nb_data_find_file(cli, dataset, file, out, size);
#ifdef NABLA_DATA_DIR
    if (st == NB_ERR_NOT_FOUND && !(cli && cli[0])) st = nb_data_find_file(NABLA_DATA_DIR, dataset, file, out, size);
#endif
    return st;
}

#endif
