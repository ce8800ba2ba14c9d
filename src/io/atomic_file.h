/* Replacing a file atomically: readers (and a later run after a crash) see
 * either the old file whole or the new one whole, never a mix.
 *
 * nb_atomic_open writes to "<path>.tmp.<pid>" in the same directory (so the
 * final rename never crosses file systems); nb_atomic_commit flushes it,
 * fsyncs it, closes it, renames it over `path` and fsyncs the directory so
 * that the rename itself survives a power cut. Any failure, and
 * nb_atomic_abort, removes the temporary file and leaves `path` untouched.
 *
 * A process killed mid-write leaves its temporary file behind; the next
 * nb_atomic_open of the same path removes such files of processes that no
 * longer exist (so do not give other files such names). Two threads of
 * one process must not write the same path at once (they would share the
 * temporary name).
 *
 * For tests: when the environment variable NABLA_TEST_STOP_AFTER_BYTES holds
 * a number N > 0, the writer, once it has written N bytes of a file, flushes
 * them to the temporary file and stops its own process with SIGSTOP, so that
 * a test can kill it at exactly that point (or let it go on with SIGCONT). */
#ifndef NABLA_IO_ATOMIC_FILE_H
#define NABLA_IO_ATOMIC_FILE_H

#include <stddef.h>
#include "nabla/status.h"

typedef struct nb_atomic_file nb_atomic_file;

nb_status nb_atomic_open(nb_atomic_file **out, const char *path);
nb_status nb_atomic_write(nb_atomic_file *f, const void *data, size_t n);
/* Makes the file `path` durable and frees f, whether or not it succeeds. */
nb_status nb_atomic_commit(nb_atomic_file *f);
/* Drops the new file and frees f (NULL is fine). */
void nb_atomic_abort(nb_atomic_file *f);

#endif
