/* What the safetensors writer (safetensors.c) and reader
 * (safetensors_read.c) share. */
#ifndef NABLA_IO_SAFETENSORS_INTERNAL_H
#define NABLA_IO_SAFETENSORS_INTERNAL_H

#include "nabla/safetensors.h"

struct nb_safetensors {
    int n;
    char **names;        /* in the order of their data in the file */
    nb_tensor **tensors;
    int *by_name;        /* indices sorted by name, for lookups */
    int n_meta;
    char **meta_keys;    /* sorted */
    char **meta_values;
};

/* "F32" for NB_F32, ... */
const char *nb_st_dtype_name(nb_dtype t);
/* Parses a safetensors dtype name: NB_OK, NB_ERR_UNSUPPORTED for a valid
 * safetensors dtype nabla has no counterpart for, NB_ERR_FORMAT for an
 * unknown name. Sets no error text. */
nb_status nb_st_dtype_parse(const char *name, nb_dtype *out);

/* Sorts f->by_name; NB_ERR_NOMEM on failure. */
nb_status nb_st_index(nb_safetensors *f);

/* safetensors data is little-endian; on a big-endian host every element is
 * byte-swapped on its way to and from the file. */
bool nb_st_host_is_little_endian(void);
void nb_st_swap_bytes(void *data, size_t count, size_t elem_size);

#endif
