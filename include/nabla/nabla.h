/* nabla/nabla.h: everything: every public header, in the order they build
 * on each other (nabla/elementwise_ops.h comes through nabla/ops.h). */
#ifndef NABLA_H
#define NABLA_H

#include "nabla/export.h"
#include "nabla/status.h"
#include "nabla/device.h"
#include "nabla/dtype.h"
#include "nabla/tensor.h"
#include "nabla/rng.h"
#include "nabla/attr.h"
#include "nabla/op.h"
#include "nabla/program.h"
#include "nabla/builder.h"
#include "nabla/scope.h"
#include "nabla/executor.h"
#include "nabla/ops.h"
#include "nabla/autodiff.h"
#include "nabla/init.h"
#include "nabla/layers.h"
#include "nabla/optimizer.h"
#include "nabla/reader.h"
#include "nabla/data.h"
#include "nabla/program_file.h"
#include "nabla/checkpoint.h"
#include "nabla/train.h"
#include "nabla/eager.h"
#include "nabla/transforms.h"
#include "nabla/vmap.h"
#include "nabla/control.h"
#include "nabla/recurrent.h"
#include "nabla/text.h"
#include "nabla/gradcheck.h"
#include "nabla/kernel.h"
#include "nabla/safetensors.h"
#include "nabla/onnx.h"
#include "nabla/npy.h"
#include "nabla/atomic_file.h"
#include "nabla/comm.h"
#include "nabla/data_parallel.h"

#define NABLA_VERSION_MAJOR 0
#define NABLA_VERSION_MINOR 1
#define NABLA_VERSION_PATCH 0
#define NABLA_VERSION "0.1.0"

#endif
