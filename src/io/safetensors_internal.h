/* What the safetensors writer (safetensors.c) and reader
 * (safetensors_read.c) share. */
#ifndef NABLA_IO_SAFETENSORS_INTERNAL_H
#define NABLA_IO_SAFETENSORS_INTERNAL_H

#include "nabla/safetensors.h"

struct nb_safetensors {
    int n;
    char **names; /* in the order of their data in the file */
    nb_tensor **tensors;
    unsigned char *stored; /* the nb_st_dtype each tensor has in the file */
    int *by_name;          /* indices sorted by name, for lookups */
    int n_meta;
    char **meta_keys; /* sorted */
    char **meta_values;
};

/* The dtypes a safetensors file can hold that nabla reads and writes:
 * nabla's six, and the 16-bit floats, which are F32 tensors in memory. */
typedef enum nb_st_dtype {
    NB_ST_BOOL,
    NB_ST_U8,
    NB_ST_F16,
    NB_ST_BF16,
    NB_ST_I32,
    NB_ST_F32,
    NB_ST_F64,
    NB_ST_I64,
    NB_ST_DTYPE_COUNT
} nb_st_dtype;

/* "F32" for NB_ST_F32, ...; "?" for no valid value. */
const char *nb_st_dtype_name(int t);
/* Bytes per element in the file. */
size_t nb_st_dtype_size(nb_st_dtype t);
/* The dtype of the tensor that holds it in memory (NB_F32 for F16, BF16). */
nb_dtype nb_st_dtype_loaded(nb_st_dtype t);
/* The file dtype of a tensor of dtype t saved with `storage`. */
nb_st_dtype nb_st_dtype_stored(nb_dtype t, nb_float_storage storage);
/* Parses a safetensors dtype name: NB_OK, NB_ERR_UNSUPPORTED for a valid
 * safetensors dtype nabla has no counterpart for, NB_ERR_FORMAT for an
 * unknown name. Sets no error text. */
nb_status nb_st_dtype_parse(const char *name, nb_st_dtype *out);

/* The index (in file order) of the tensor named `name`, or -1. */
int nb_st_find_index(const nb_safetensors *f, const char *name);

/* Sorts f->by_name; NB_ERR_NOMEM on failure. */
nb_status nb_st_index(nb_safetensors *f);

/* safetensors data is little-endian; on a big-endian host every element is
 * byte-swapped on its way to and from the file. */
bool nb_st_host_is_little_endian(void);
void nb_st_swap_bytes(void *data, size_t count, size_t elem_size);

#endif
