/* Private parts of program files: converting programs to and from the bytes
 * of a ProgramFile message (proto/nabla_program.proto). program_file.c adds
 * the files around them. */
#ifndef NABLA_PROGRAM_FILE_INTERNAL_H
#define NABLA_PROGRAM_FILE_INTERNAL_H

#include "nabla/program_file.h"

/* Packs `main` and, when not NULL, `startup`; *buf is malloc'ed. */
nb_status nb_programs_encode(const nb_program *main, const nb_program *startup, uint8_t **buf, size_t *len);

/* Unpacks, validates and rebuilds the programs. `source` names the data in
 * error messages (a file name). `startup` may be NULL when the caller wants
 * the main program only. */
nb_status nb_programs_decode(const uint8_t *buf, size_t len, const char *source, nb_program **main,
                             nb_program **startup);

#endif
