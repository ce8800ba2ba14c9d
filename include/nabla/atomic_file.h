/* nabla/atomic_file.h: replacing a file atomically. Readers (and a later
 * run after a crash) see either the old file whole or the new one whole,
 * never a mix. Program files,
 * checkpoints (safetensors) and .npy files are all saved through here, and
 * so can a program's own formats be:
 *
 *     nb_atomic_file *f;
 *     nb_status st = nb_atomic_open(&f, "model.bin");
 *     if (!st && (st = nb_atomic_write(f, header, sizeof header))) nb_atomic_abort(f);
 *     else if (!st) st = nb_atomic_commit(f);   // frees f in any case
 *
 * nb_atomic_open writes to a temporary file "<name>.tmp.<pid>" (".tmp.<pid>.<n>"
 * when that name is taken) in the same directory as the file (so the final
 * rename never crosses file systems); nb_atomic_commit flushes it, fsyncs it,
 * closes it, renames it over the file and fsyncs the directory so that the
 * rename itself survives a power cut. Any failure, and nb_atomic_abort,
 * removes the temporary file and leaves the file untouched.
 *
 * What the new file keeps of the old one:
 *  - its permissions (and owner and group, where the process may set them);
 *    a new file gets 0666 less the umask, as fopen would give it;
 *  - its links: when `path` is a symbolic link (or a chain of them), the file
 *    it points to is the one replaced, in that file's directory, and the
 *    link stays as it was. A link to nothing yet makes its target.
 *
 * A file name near the file system's limit (NAME_MAX) would make "<name>.tmp.
 * <pid>" too long: then the temporary name starts with as much of the name as
 * fits, then "~" and a hash of the whole name.
 *
 * A process killed mid-write leaves its temporary file behind; the next
 * nb_atomic_open of the same file removes such files of processes that no
 * longer exist (so do not give other files such names).
 *
 * For tests: when the environment variable NABLA_TEST_STOP_AFTER_BYTES holds
 * a number N > 0, the writer, once it has written N bytes of a file, flushes
 * them to the temporary file and stops its own process with SIGSTOP, so that
 * a test can kill it at exactly that point (or let it go on with SIGCONT). */
#ifndef NABLA_ATOMIC_FILE_H
#define NABLA_ATOMIC_FILE_H

#include <stddef.h>

#include "nabla/export.h"

#include "nabla/status.h"

NB_BEGIN_DECLS

typedef struct nb_atomic_file nb_atomic_file;

/* Starts the new file of `path` (its temporary file). NB_ERR_ARG for a
 * NULL argument, NB_ERR_IO when the temporary file cannot be made. */
NB_API nb_status nb_atomic_open(nb_atomic_file **out, const char *path);
/* Appends n bytes. On failure f stays open: nb_atomic_abort it. */
NB_API nb_status nb_atomic_write(nb_atomic_file *f, const void *data, size_t n);
/* Makes the file `path` durable and frees f, whether or not it succeeds. */
NB_API nb_status nb_atomic_commit(nb_atomic_file *f);
/* Drops the new file and frees f (NULL is fine). */
NB_API void nb_atomic_abort(nb_atomic_file *f);

NB_END_DECLS

#endif
