/* The atomic file writer is public (nabla/atomic_file.h, which says what
 * it promises); the library's savers include it from here. */
#ifndef NABLA_IO_ATOMIC_FILE_H
#define NABLA_IO_ATOMIC_FILE_H

#include "nabla/atomic_file.h"

#endif
