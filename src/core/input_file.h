/* Opening a file to load (internal): the preamble every loader of nabla
 * shares, so that they all refuse the same things in the same words. */
#ifndef NABLA_CORE_INPUT_FILE_H
#define NABLA_CORE_INPUT_FILE_H

#include <stdint.h>
#include <stdio.h>
#include "nabla/status.h"

/* Opens path for reading and gives its size: an error "WHAT 'PATH': ..."
 * for a NULL or empty path (NB_ERR_ARG), a file that is not there
 * (NB_ERR_NOT_FOUND), or one that cannot be opened or is not a regular file
 * (a folder, a pipe: NB_ERR_IO, never a size of 2^63). *f is the caller's to
 * fclose; NULL on error. size may be NULL. */
nb_status nb_input_file_open(const char *what, const char *path, FILE **f, uint64_t *size);

/* The same check without opening (for a reader that opens the file its own
 * way, such as zlib's gzopen). */
nb_status nb_input_file_check(const char *what, const char *path, uint64_t *size);

/* The whole of a loader that reads one object from one file: opens path
 * (as nb_input_file_open), allocates a zeroed object of `size` bytes, and
 * has load fill it from the open file of `file_size` bytes. On failure the
 * object is released with destroy and the error names "WHAT 'PATH'"; *out
 * is NULL then. */
typedef nb_status (*nb_input_loader)(FILE *fp, uint64_t file_size, void *obj);
nb_status nb_input_file_load(const char *what, const char *path, size_t size, nb_input_loader load,
                             void (*destroy)(void *obj), void **out);

#endif
