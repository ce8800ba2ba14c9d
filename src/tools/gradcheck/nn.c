/* Gradient-check cases of the nn family. */
#include "cases.h"

const nb_gradcheck_case nb_gc_nn[] = {
    {.op = NULL},
};
