/* Private parts of the program model. */
#ifndef NABLA_PROGRAM_INTERNAL_H
#define NABLA_PROGRAM_INTERNAL_H

#include "nabla/program.h"
#include "../core/strmap.h"
#include "../ops/op_internal.h"

/* The next index of counter `key` whose name, formatted by fmt with the
 * index (e.g. "fc_%d.tmp_0"), no block of the program holds yet. Op outputs
 * count apart from the layer names of nb_program_unique_name, so that layer
 * fc_1 follows fc_0 whatever ops fc_0 emitted. */
nb_status nb_program_unique_index(nb_program *p, const char *key, const char *fmt, int *out);
void nb_op_free(nb_op *op);
/* Mixes two 64-bit values into a seed (splitmix64's finaliser). */
uint64_t nb_mix_seed(uint64_t a, uint64_t b);
/* The seed a random op draws from: its "seed" attribute when nonzero, else
 * one mixed from the program's seed and the op's id. A recomputed copy of
 * the op is given this seed, so that it draws what the original drew. */
uint64_t nb_op_seed(const nb_program *p, const nb_op *op);
nb_op *nb_op_clone(const nb_op *op);
/* Inserts an already-built op at pos (no checks); bumps the version. */
nb_status nb_block_push_op(nb_block *b, int pos, nb_op *op);

/* nb_program_to_dot, with block 0's ops of each fused group drawn in a
 * cluster when `group` (op i's group, or -1) is given. */
nb_status nb_program_dot_write(const nb_program *p, FILE *f, const int *group);
/* nb_block_append_op at position `pos` (0 to the block's op count). */
nb_status nb_block_insert_op(nb_block *b, int pos, const char *type, nb_names in, nb_names out, nb_attrs attrs,
                             nb_op **op_out);

#endif
