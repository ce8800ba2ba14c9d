/* nabla/program_file.h: saving and loading whole programs.
 *
 * A program file holds one program, or the two programs of a training setup:
 * the main program (forward, backward and optimiser parts) and the startup
 * program that initialises its parameters. The format is protobuf, after
 * PaddlePaddle Fluid's ProgramDesc / BlockDesc / VarDesc / OpDesc; the
 * schema, with what each field means, is proto/nabla_program.proto. Every
 * file is one ProgramFile message, so the same reader takes files of one
 * program and of two; the format version (NB_PROGRAM_FORMAT_VERSION) is
 * written in it, and a file of a newer version is refused with an error that
 * says so (NB_ERR_UNSUPPORTED).
 *
 * A file holds the program's structure, not its values: parameters live in a
 * scope and are saved by checkpoints.
 *
 * Loading rebuilds the program through the public program API: blocks with
 * nb_program_add_block, vars with nb_block_create_var, ops with
 * nb_block_append_op, so every op is checked against its definition again
 * (unknown op types, wrong slots, wrong attribute types are errors) and its
 * output shapes are inferred again; the shapes the file states must agree.
 * Then op roles, role vars and ids, var flags, the random seed and the
 * unique-name counters are restored, so that the loaded program prints, runs
 * and draws random numbers as the saved one does, and names the builder makes
 * in it later do not collide with loaded ones.
 *
 * Files are untrusted input: malformed protobuf, truncated or altered files,
 * block indices that point forward or in cycles, block attributes naming a
 * block that is not a sub-block of the op's own, dtypes or roles out of range,
 * shapes of more than NB_MAX_DIMS dims or dims below -1, slots an op does not
 * have, duplicate names and the like all give an error (NB_ERR_FORMAT
 * mostly, or the error of the program API that refused the op) whose message
 * names the file, the program (main or startup), the block, the op or var, and
 * the problem. On error nothing is returned and nothing leaks. */
#ifndef NABLA_PROGRAM_FILE_H
#define NABLA_PROGRAM_FILE_H

#include "nabla/export.h"

#include <stddef.h>
#include <stdint.h>
#include "nabla/program.h"

NB_BEGIN_DECLS

/* The format version this nabla writes, and the newest it reads. */
#define NB_PROGRAM_FORMAT_VERSION 1

/* Writes `p` to `path` atomically: into a temporary file beside it, synced to
 * disk, then renamed over `path`, so that a crash or a full disk never leaves
 * a half-written file where a good one was. The same writer as checkpoints:
 * mode kept, links followed, leftovers removed (see nabla/checkpoint.h). */
NB_API nb_status nb_program_save(const char *path, const nb_program *p);
/* Reads the program of a file; for a file of two programs, the main one.
 * *out is a new program (free with nb_program_free), NULL on error. */
NB_API nb_status nb_program_load(nb_program **out, const char *path);

/* A training setup: `main` and its `startup` program in one file (startup
 * may be NULL: then this is nb_program_save). */
NB_API nb_status nb_programs_save(const char *path, const nb_program *main, const nb_program *startup);
/* Reads both programs. *startup is NULL when the file holds one program.
 * Both are new programs; on error both are NULL. */
NB_API nb_status nb_programs_load(nb_program **main, nb_program **startup, const char *path);

/* The same bytes as a file, in memory: *buf is nabla's to release with nb_free. */
NB_API nb_status nb_program_serialize(const nb_program *p, uint8_t **buf, size_t *len);
NB_API nb_status nb_programs_serialize(const nb_program *main, const nb_program *startup, uint8_t **buf, size_t *len);
/* Reads the bytes of a program file (the main program, as nb_program_load). */
NB_API nb_status nb_program_deserialize(nb_program **out, const uint8_t *buf, size_t len);
NB_API nb_status nb_programs_deserialize(nb_program **main, nb_program **startup, const uint8_t *buf, size_t len);

NB_END_DECLS

#endif
