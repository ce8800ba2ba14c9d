/* nabla/onnx.h: models in and out of nabla as ONNX files.
 *
 * Export writes the inference part of a static program, with its parameters
 * as initializers, as an ONNX model of opset NB_ONNX_OPSET (IR version 7),
 * readable by onnxruntime, onnx.checker and the frameworks that import ONNX.
 * Import reads an ONNX model (opsets NB_ONNX_MIN_OPSET to NB_ONNX_MAX_OPSET)
 * and emits its graph through a builder: into a static program (a record
 * builder) or at once (an eager builder); its float initializers become
 * trainable parameters, so an imported model fine-tunes like one built in
 * nabla.
 *
 * Export writes these ONNX ops (nabla op -> ONNX): fc and matmul (Gemm,
 * MatMul), the elementwise arithmetic and activations named alike (Add ...
 * Tanh, LeakyRelu, Elu, Softplus), softmax and log_softmax, conv2d (Conv),
 * pool2d (MaxPool, AveragePool, the global pools), batch_norm (its running
 * statistics), layer_norm (decomposed: opset 13 has none), reshape, flatten,
 * transpose, squeeze, unsqueeze, concat, gather and embedding (Gather),
 * reduce_mean, reduce_sum, cast, clip, assign (Identity), dropout (the
 * identity), pad, the comparisons and logic ops (Equal Less Greater
 * LessOrEqual GreaterOrEqual And Or Xor Not), where, sign; gelu, silu, scale, square and rsqrt as their
 * decompositions; fill_constant and assign_value as initializers.
 *
 * Import reads the standard domain's ops a float training framework can
 * express, each as nabla ops (compositions where nabla has no single op, so
 * that every one has gradients and an imported model trains):
 *
 *   math    Add Sub Mul Div Pow Mod Neg Abs Reciprocal Sqrt Exp Log Erf,
 *           Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh, Floor
 *           Ceil Round Sign IsNaN IsInf, Sum Mean Max Min (any count), Gemm
 *           MatMul Einsum, Relu LeakyRelu PRelu Elu Selu Celu Sigmoid
 *           HardSigmoid HardSwish Softplus Softsign ThresholdedRelu Shrink
 *           Mish Gelu Tanh Clip, Softmax LogSoftmax Hardmax, Equal Less
 *           Greater LessOrEqual GreaterOrEqual Not And Or Xor Where BitShift
 *   reduce  ReduceSum Mean Max Min Prod L1 L2 LogSum LogSumExp SumSquare,
 *           ArgMax ArgMin CumSum TopK, Gather GatherElements GatherND,
 *           Scatter ScatterElements ScatterND, OneHot NonZero Compress Trilu
 *   shape   Reshape (allowzero too) Flatten Transpose Squeeze Unsqueeze Concat Split Slice
 *           Expand Tile Pad Range DepthToSpace SpaceToDepth ReverseSequence,
 *           Resize and Upsample (nearest, linear, cubic), Shape Size
 *           ConstantOfShape Constant Cast CastLike Identity Dropout
 *   nn      Conv (1-D to 3-D, dilations, groups, auto_pad) ConvTranspose
 *           (1-D to 3-D), MaxPool (with its Indices) AveragePool LpPool and
 *           the global pools in any rank, BatchNormalization (inference and training mode),
 *           LayerNormalization (with its Mean and InvStdDev outputs),
 *           InstanceNormalization LpNormalization LRN
 *           MeanVarianceNormalization, NegativeLogLikelihoodLoss
 *           SoftmaxCrossEntropyLoss
 *   rnn     RNN GRU LSTM, unrolled over the sequence (its length known at
 *           import)
 *   make    EyeLike HannWindow HammingWindow BlackmanWindow (constants)
 *   quant   QuantizeLinear DequantizeLinear DynamicQuantizeLinear
 *           MatMulInteger ConvInteger (computed in float, exact for 8 bits)
 *   control If Loop Scan (opset 9 on), on nb_cond, nb_while_loop and
 *           nb_scan (nabla/control.h), their sub-graphs reading the outer
 *           scope; a program's Loop with scan outputs needs M known and no
 *           early stop
 *   seq     SequenceEmpty Construct Insert Erase At Length, SplitToSequence
 *           ConcatFromSequence, Optional OptionalHasElement
 *           OptionalGetElement: lists held at import, their positions known
 *           there (no sequence as a graph input or output, Loop carry or If
 *           result)
 *
 * Shapes exporters compute at run time (Shape -> Gather -> Concat ->
 * Reshape, as for x.view(x.size(0), -1)) are folded where every dim is
 * known and followed by symbols where a dim only a run knows stays in its
 * place (ConstantOfShape of one such dim among known ones, as a zero
 * state of the batch's size, is fill_constant_batch_size_like); any other,
 * and shapes, axes or bounds fed as inputs, a static
 * import computes from the inputs' values when it is given them
 * (nb_onnx_import_known). ONNX's backend node tests (tests/test_onnx_node_suite.sh) are
 * part of the test suite.
 *
 * nabla's recurrent layers (nb_layer_lstm, nb_layer_gru, nb_layer_rnn and
 * nb_rnn_sequence: a `recurrent` op whose scan names its cell, see
 * nb_scan_cell) export as one ONNX LSTM, GRU or RNN node each (torch's GRU
 * as linear_before_reset = 1), their weights left as nabla holds them and
 * reordered to ONNX's gate order in the graph, and their zero initial state
 * as ConstantOfShape of the batch size; a stack of layers, or a forward and
 * a reverse one joined by concat, is one node a layer. Any other scan, and
 * the other loops and branches, are refused.
 *
 * Anything else is an error naming it: export names the nabla op and its
 * output var; import names the node, its op type and the model's opset.
 *
 * This is an optional feature: nb_onnx_available() says whether this build
 * has it (it needs ONNX's onnx.proto, Debian's libonnx-dev, at build time);
 * without it the calls return NB_ERR_UNSUPPORTED. */
#ifndef NABLA_ONNX_H
#define NABLA_ONNX_H

#include "nabla/export.h"

#include "nabla/builder.h"
#include "nabla/executor.h"
#include "nabla/scope.h"

NB_BEGIN_DECLS

#define NB_ONNX_OPSET 13     /* what export writes */
#define NB_ONNX_MIN_OPSET 1  /* what import reads */
#define NB_ONNX_MAX_OPSET 17

NB_API bool nb_onnx_available(void);

/* Writes to `path` (atomically) the ops of block 0 of `program` that compute
 * the vars `fetches` for inference: ops of the forward role only (no loss,
 * backward or optimiser op), pruned to what the fetches need; batch_norm
 * uses its running statistics and dropout is the identity (attention's
 * dropout too). scaled_dot_product_attention becomes the ONNX ops it fuses
 * (MatMul, Mul, Add for its mask, Where for causality, Softmax, MatMul) and
 * conv2d_grad's input gradient ConvTranspose, so that nabla's own attention
 * and transformer layers and an imported ConvTranspose export. The vars the
 * pruned ops read that the user feeds (nb_data) become the graph's inputs,
 * in the order the program declares them; persistable vars become
 * initializers holding their values in `scope` (NB_ERR_NOT_FOUND naming the
 * var when the scope lacks one: run the startup program, or train, first).
 * A dimension of -1 becomes a symbolic dimension ("N" for the first).
 * NB_ERR_UNSUPPORTED names an op with no ONNX form (control flow among them,
 * but for the recurrent layers' scans);
 * models over 2 GB, which need external data, are refused. */
NB_API nb_status nb_onnx_export(const nb_program *program, nb_scope *scope, nb_names fetches, const char *path);

/* Reads the ONNX model at `path` and emits its graph through `b`.
 *
 * `inputs` gives a value for each graph input that is not an initializer, in
 * the graph's order; with inputs.n == 0 a record builder makes them data
 * vars (nb_data) named and shaped as in the model, symbolic dims -1. Each
 * initializer becomes a var named as in the model: a float one used as a
 * weight a trainable parameter (nb_param_from), BatchNormalization's running
 * mean and variance persistable state (nb_persistable_from); ints read as
 * shapes or axes stay constants of the import. An eager builder that already
 * holds parameters of those names uses them, as nb_param does, so that a
 * training loop can import the model at every step.
 *
 * The imported graph is a model to train, as one built with nabla's layers:
 * BatchNormalization is batch_norm in training mode (running statistics
 * updated), so evaluate through nb_program_clone_for_test or an eager
 * builder's test mode, where it uses the running statistics as ONNX does;
 * Identity, and Dropout at inference, are the identity (Dropout's mask all
 * true); Dropout in training mode with a ratio above 0 is refused.
 *
 * Every opset from 1 is read: an op whose meaning changed between opsets is
 * read in the form of the model's opset, or refused naming what it does not
 * follow (opset 1-6's broadcasting along an axis, say). Inputs that nabla's
 * ops take as attributes (shapes, axes, pads, bounds) must be constants in a
 * static program (or known: nb_onnx_import_known); an eager import knows
 * every value, so they may also be computed by the graph or fed. With `inputs` given, each value must have
 * the dtype the model declares (float16 and bfloat16 as float32) and every
 * dim it fixes: NB_ERR_ARG and NB_ERR_SHAPE name the input otherwise.
 *
 * The graph's outputs are written to outputs[0..max_outputs) and their count
 * to *n_outputs (may be NULL); in a program each output's var is named as
 * the graph output (unless that var is fed, persistable or already named). External-data tensors are read from files
 * beside the model (never outside its folder); float16 and bfloat16
 * initializers become float32, and int8, int16 and uint16 ones int32 and
 * uint32 ones int64 (graph inputs of those types likewise). NB_ERR_FORMAT for a file that is not a valid
 * ONNX model, NB_ERR_UNSUPPORTED naming the node, op type and opset for
 * what nabla cannot import. Errors are also the builder's. */
NB_API nb_status nb_onnx_import(const char *path, nb_builder *b, nb_values inputs, int max_outputs, nb_value *outputs,
                                int *n_outputs);

/* nb_onnx_import into a static program (a record builder; NB_ERR_ARG for an
 * eager one) whose graph inputs are data vars, given the values they will
 * be fed: `known` names graph inputs (NB_ERR_ARG for another name) with a
 * value each, checked as nb_onnx_import checks `inputs`.
 *
 * nabla's ops take shapes, axes, pads, bounds, counts (Range's, TopK's k,
 * OneHot's depth) and the like when they are built, and many models compute
 * them at run time: from Shape, or from a graph input. Where the import
 * needs one that is neither a constant nor a shape it follows symbolically,
 * it computes it from the known values, eagerly, running only the nodes it
 * depends on, and builds the op with it. The program is then fixed to what
 * it was computed from, so that no run gives a stale result:
 *   - a graph input read only through its shape (Shape, Size) is declared
 *     with the known dims: a feed of other dims is refused when it runs
 *     (NB_ERR_SHAPE naming it);
 *   - a graph input read by value becomes a constant var of that name,
 *     holding the known value, and is no longer a data var: a feed of it is
 *     refused as read-only (NB_ERR_ARG naming it).
 * Other inputs stay data vars with their symbolic dims. To run on other
 * values of a fixed input, import again with them. A value
 * computed from a float initializer (a parameter, which training changes)
 * is refused; so is one that needs an input `known` does not give. */
NB_API nb_status nb_onnx_import_known(const char *path, nb_builder *b, nb_feeds known, int max_outputs,
                                      nb_value *outputs, int *n_outputs);

NB_END_DECLS

#endif
