/* Entry points of the data loaders that the tests drive with their own
 * settings; not part of the public API. */
#ifndef NABLA_DATA_INTERNAL_H
#define NABLA_DATA_INTERNAL_H

#include <stdint.h>
#include "nabla/data.h"

/* nb_idx_load, reading a gzip payload of at most direct_max bytes straight
 * into the tensor and a larger one into a buffer that grows with what the
 * file really holds (nb_idx_load uses NB_IDX_DIRECT_MAX). */
#define NB_IDX_DIRECT_MAX ((int64_t)64 << 20)
nb_status nb_idx_load_with(const char *path, nb_tensor **out, int64_t direct_max);

/* nb_data_find, with the running program's path given (NULL: none). */
nb_status nb_data_find_from(const char *cli_dir, const char *dataset, const char *exe_path, char *out_dir, size_t size);
/* nb_data_find_file, likewise. */
nb_status nb_data_find_file_from(const char *cli, const char *dataset, const char *file, const char *exe_path,
                                 char *out_path, size_t size);

#endif
