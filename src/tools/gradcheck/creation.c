/* Gradient-check cases of the creation family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_creation[] = {
    {.op = NULL},
};
