/* Gradient-check cases of the recurrent family: lstm_cell (Gates [.., 4H],
 * C [.., H]) and its fused gradient, whose composite rules slice the gates
 * by H and pad their parts back together. Both outputs enter the loss. */
#include "cases.h"

const nb_gradcheck_case nb_gc_rnn[] = {
    {.op = "lstm_cell", .name = "[3, 8], H 2", .n_in = 2, .in = {GC_F_RANGE(-2, 2, 3, 8), GC_F_RANGE(-1, 1, 3, 2)}},
    {.op = "lstm_cell",
     .name = "[2, 2, 12], H 3",
     .n_in = 2,
     .in = {GC_F_RANGE(-2, 2, 2, 2, 12), GC_F_RANGE(-1, 1, 2, 2, 3)}},
    {.op = "lstm_cell_grad",
     .name = "[3, 8], H 2",
     .n_in = 5,
     .in = {GC_F_RANGE(-2, 2, 3, 8), GC_F_RANGE(-1, 1, 3, 2), GC_F_RANGE(-1, 1, 3, 2), GC_F_RANGE(-1, 1, 3, 2),
            GC_F_RANGE(-1, 1, 3, 2)}},
    {.op = NULL},
};
