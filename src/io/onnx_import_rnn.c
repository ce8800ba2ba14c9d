/* ONNX's recurrent ops (RNN, GRU, LSTM) as nabla ops. */
#ifdef NABLA_HAVE_ONNX
#include <float.h>
#include <string.h>
#include "nabla/ops.h"
#include "onnx_internal.h"

#define B (im->b)



const ox_importer ox_imports_rnn[] = {

    {0},
};

#endif
