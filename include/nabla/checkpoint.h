/* nabla/checkpoint.h: saving and restoring the state of a training program.
 *
 * The state of a program is the value of every persistable var of its global
 * block (block 0): parameters, optimiser moments, the learning rate, step
 * counters. A checkpoint is a safetensors file (nabla/safetensors.h) holding
 * one tensor per persistable var, under the var's name, plus string metadata
 * of the caller's (the epoch, the step, a data-set position...), so other
 * frameworks can read it.
 *
 * Saving never damages the previous checkpoint: the file is written to
 * "<path>.tmp.<pid>" in the same directory, flushed, fsync'ed, closed,
 * renamed over `path`, and the directory is fsync'ed. A process killed or a
 * machine losing power at any moment leaves `path` holding either the old
 * checkpoint or the new one, whole. On any error the temporary file is
 * removed and `path` is left as it was. A temporary file left by a killed
 * process is removed by the next save to the same path (once that process
 * is gone); loading never looks at it. A replaced file keeps its mode (the
 * temporary file is readable by its owner only until then); a `path` that is
 * a symbolic link is followed, and the file it names is replaced in its own
 * directory, the link kept. Names up to the directory's limit (usually 255
 * bytes) save: a temporary name that would be too long is shortened.
 *
 * For tests: with the environment variable NABLA_TEST_STOP_AFTER_BYTES set to
 * N > 0, a save stops its own process (SIGSTOP) once it has written N bytes
 * of the temporary file, so a test can kill it in the middle of a save
 * deterministically. */
#ifndef NABLA_CHECKPOINT_H
#define NABLA_CHECKPOINT_H

#include "nabla/export.h"

#include "nabla/program.h"
#include "nabla/safetensors.h"
#include "nabla/scope.h"

NB_BEGIN_DECLS

/* Saves the value in `scope` (or its ancestors) of every persistable var of
 * block 0 of `program`, with the metadata pairs of `meta` (may be NULL).
 * NB_ERR_NOT_FOUND, naming every such var, when some have no value in the
 * scope (was the startup program run?); nothing is written then. */
NB_API nb_status nb_checkpoint_save(const char *path, const nb_program *program, nb_scope *scope, const nb_meta *meta);

/* As nb_checkpoint_save, with the float vars stored as `storage` says
 * (nb_safetensors_save_as): NB_STORE_BF16 or NB_STORE_F16 halves the file of
 * an F32 model, for publishing its weights. The values are rounded, so a
 * checkpoint to resume training from is better saved natively. */
NB_API nb_status nb_checkpoint_save_as(const char *path, const nb_program *program, nb_scope *scope,
                                       const nb_meta *meta, nb_float_storage storage);

/* Restores the persistable vars of block 0 of `program` from the checkpoint
 * at `path` into `scope`.
 *
 * Every persistable var is checked against the file first: a var missing in
 * the file, or stored with another dtype, or with a shape that does not fit
 * the var's (a -1 in the var's shape fits any size), is a mismatch; a tensor
 * stored as F16 or BF16 fits a var of either float dtype, and is widened to
 * it (exactly: every 16-bit value is an F32 and an F64 value). All
 * mismatches are reported in one NB_ERR_FORMAT message, each naming the var
 * and the expected and found dtype and shape; the scope is then left exactly
 * as it was. Tensors in the file that are no var of the program are allowed
 * and ignored. A malformed file gives the errors of nb_safetensors_load.
 *
 * A var that already has a tensor of the same dtype and shape in the scope
 * (or an ancestor) gets the loaded values copied into that tensor, so
 * whoever holds it sees them; otherwise the loaded tensor is bound to the
 * name in the scope that held it (or in `scope`).
 *
 * When meta_out is not NULL it receives the loaded file, for reading its
 * metadata (nb_safetensors_meta); it holds the tensors too, so free it
 * (nb_safetensors_free) when done (an F16 or BF16 tensor that an F64 var
 * took is held there widened to F64). It is set only on success. */
NB_API nb_status nb_checkpoint_load(const char *path, const nb_program *program, nb_scope *scope,
                                    nb_safetensors **meta_out);

NB_END_DECLS
#endif
