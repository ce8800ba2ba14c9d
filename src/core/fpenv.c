/* The choice behind nb_fpmode_enter (fpenv.h). */
#include "fpenv.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int flush_choice = -1; /* -1: NABLA_FLUSH_DENORMALS not read yet */

bool nb_fpmode_flush(void)
{
    int c = atomic_load_explicit(&flush_choice, memory_order_relaxed);
    if (c < 0) {
        const char *e = getenv("NABLA_FLUSH_DENORMALS");
        c = !(e && strcmp(e, "0") == 0);
        atomic_store_explicit(&flush_choice, c, memory_order_relaxed);
    }
    return c;
}

void nb_fpmode_set_flush(bool flush) { atomic_store_explicit(&flush_choice, flush, memory_order_relaxed); }
