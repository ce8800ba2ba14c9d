#!/usr/bin/env bash
# ONNX control flow imported into nabla: a model made here with onnx.helper
# (an If on a computed predicate, whose branches read outer-scope values, a
# Loop with a trip count and a condition computed by its body, a counted Loop
# with a scan output whose shape the body leaves undeclared, and a Scan along
# axis 1 with mixed directions) checked by
# tests/onnx_control_check.c eagerly and as a static program, outputs against
# the arithmetic written there and gradients against finite differences; and
# sequences (SplitToSequence, SequenceInsert/Erase/At/Length,
# ConcatFromSequence) by tests/onnx_seq_check.c, with an If returning a
# sequence, which must be refused.
set -euo pipefail
build=$1
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if ! "$py" -c 'import onnx' 2>/dev/null; then
    echo "skipped: Debian's python3-onnx is needed (make test installs it)"
    exit 0
fi
if ! grep -q '^NABLA_ONNX_PROTO:FILEPATH=/' "$build/CMakeCache.txt"; then
    echo "skipped: this build has no ONNX support (libonnx-dev was not found when it was configured)"
    exit 0
fi

"$py" - "$out/control.onnx" "$out/deep.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

D = T.DOUBLE
def vec(name): return h.make_tensor_value_info(name, D, [3])
def scalar(name, t): return h.make_tensor_value_info(name, t, [])

then_g = h.make_graph([h.make_node("Mul", ["x", "w"], ["xw_t"]), h.make_node("Tanh", ["xw_t"], ["t_then"])],
                      "then", [], [vec("t_then")])
else_g = h.make_graph([h.make_node("Mul", ["x", "x"], ["t_else"])], "else", [], [vec("t_else")])
body = h.make_graph([
    h.make_node("Mul", ["v_in", "w"], ["vw"]),
    h.make_node("Cast", ["i"], ["i_f"], to=D),
    h.make_node("Mul", ["x", "i_f"], ["xi"]),
    h.make_node("Add", ["vw", "xi"], ["v_out"]),
    h.make_node("Mul", ["v_out", "v_out"], ["sq"]),
    h.make_node("ReduceSum", ["sq"], ["sq_sum"], keepdims=0),
    h.make_node("Less", ["sq_sum", "limit"], ["cond_out"]),
], "body", [scalar("i", T.INT64), scalar("cond_in", T.BOOL), vec("v_in")], [scalar("cond_out", T.BOOL), vec("v_out")])
# Counted: no condition of its own, a scan output (u_k * x, stacked).
counted = h.make_graph([
    h.make_node("Identity", ["c_in"], ["c_out"]),
    h.make_node("Mul", ["u_in", "w"], ["u_out"]),
    h.make_node("Mul", ["u_out", "x"], ["u_scan"]),
], "counted", [scalar("j", T.INT64), scalar("c_in", T.BOOL), vec("u_in")],
   [scalar("c_out", T.BOOL), vec("u_out"), h.make_tensor_value_info("u_scan", D, None)])
# Scan: columns of m = x w^T from the last (axis 1, reversed) beside the
# elements of x in order; s' = s * column + x_t, stacked along axis 1.
scan_body = h.make_graph([
    h.make_node("Mul", ["s_in", "col"], ["s_col"]),
    h.make_node("Add", ["s_col", "x_t"], ["s_out"]),
    h.make_node("Identity", ["s_out"], ["s_y"]),
], "scan_body", [vec("s_in"), vec("col"), scalar("x_t", D)], [vec("s_out"), vec("s_y")])
graph = h.make_graph([
    h.make_node("Mul", ["x", "w"], ["xw"]),
    h.make_node("ReduceSum", ["xw"], ["s"], keepdims=0),
    h.make_node("Greater", ["s", "zero"], ["p"]),
    h.make_node("If", ["p"], ["t"], then_branch=then_g, else_branch=else_g),
    h.make_node("Loop", ["trips", "go", "t"], ["y"], body=body),
    h.make_node("Loop", ["trips", "", "x"], ["u", "us"], body=counted),
    h.make_node("Unsqueeze", ["x", "one_axis"], ["x_col"]),
    h.make_node("Unsqueeze", ["w", "zero_axis"], ["w_row"]),
    h.make_node("Mul", ["x_col", "w_row"], ["m"]),
    h.make_node("Scan", ["x", "m", "x"], ["sf", "sy"], body=scan_body, num_scan_inputs=2,
                scan_input_axes=[1, 0], scan_input_directions=[1, 0], scan_output_axes=[1]),
    h.make_node("Mul", ["sy", "pos"], ["syw"]),
], "control", [vec("x")], [vec("y"), vec("u"), h.make_tensor_value_info("us", D, [4, 3]), vec("sf"),
                           h.make_tensor_value_info("syw", D, [3, 3])], initializer=[
    nh.from_array(np.array([0.5, -0.3, 0.8]), "w"),
    nh.from_array(np.array(0.0), "zero"),
    nh.from_array(np.array(22.0), "limit"),
    nh.from_array(np.array(4, dtype=np.int64), "trips"),
    nh.from_array(np.array(True), "go"),
    nh.from_array(np.array([1], dtype=np.int64), "one_axis"),
    nh.from_array(np.array([0], dtype=np.int64), "zero_axis"),
    nh.from_array(np.arange(1.0, 10.0).reshape(3, 3), "pos"),
])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])

# Ifs nested 70 deep: refused (past 64) rather than taking the stack.
leaf = lambda d: h.make_graph([h.make_node("Identity", ["x"], ["e%d" % d])], "e%d" % d, [], [vec("e%d" % d)])
inner = h.make_graph([h.make_node("Identity", ["x"], ["r70"])], "g70", [], [vec("r70")])
for d in range(69, -1, -1):
    node = h.make_node("If", ["p"], ["r%d" % d], then_branch=inner, else_branch=leaf(d))
    inner = h.make_graph([node], "g%d" % d, [], [vec("r%d" % d)])
graph = h.make_graph(list(inner.node), "deep", [scalar("p", T.BOOL), vec("x")], [vec("r0")])
onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), sys.argv[2])
PY
"$build/tests/onnx_control_check" "$out/control.onnx" "$out/deep.onnx"

"$py" - "$out/seq.onnx" "$out/if_seq.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

D = T.DOUBLE
graph = h.make_graph([
    h.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
    h.make_node("ReduceSum", ["x", "axis0"], ["colsum"], keepdims=0),
    h.make_node("SequenceInsert", ["rows", "colsum", "one"], ["rows2"]),
    h.make_node("SequenceErase", ["rows2", "minus_one"], ["rows3"]),
    h.make_node("ConcatFromSequence", ["rows3"], ["y"], axis=0, new_axis=1),
    h.make_node("SplitToSequence", ["x", "split"], ["parts"], axis=0),
    h.make_node("SequenceAt", ["parts", "one"], ["z"]),
    h.make_node("SequenceLength", ["rows3"], ["n"]),
    h.make_node("SequenceConstruct", ["split", "axis0"], ["consts"]),
    h.make_node("ConcatFromSequence", ["consts"], ["k"], axis=0),
], "seq", [h.make_tensor_value_info("x", D, [4, 3])],
   [h.make_tensor_value_info("y", D, [4, 3]), h.make_tensor_value_info("z", D, [3, 3]),
    h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("k", T.INT64, [3])],
   initializer=[nh.from_array(np.array([0], dtype=np.int64), "axis0"),
                nh.from_array(np.array(1, dtype=np.int64), "one"),
                nh.from_array(np.array(-1, dtype=np.int64), "minus_one"),
                nh.from_array(np.array([1, 3], dtype=np.int64), "split")])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])

branch = lambda name, op: h.make_graph([h.make_node(op, ["a"], ["a_" + name]),
                                        h.make_node("SequenceConstruct", ["a_" + name], ["s_" + name])], name, [],
                                       [h.make_tensor_sequence_value_info("s_" + name, D, [2])])
graph = h.make_graph([
    h.make_node("If", ["p"], ["s"], then_branch=branch("then", "Neg"), else_branch=branch("else", "Abs")),
    h.make_node("SequenceAt", ["s", "zero"], ["y"]),
], "if_seq", [h.make_tensor_value_info("p", T.BOOL, []), h.make_tensor_value_info("a", D, [2])],
   [h.make_tensor_value_info("y", D, [2])], initializer=[nh.from_array(np.array(0, dtype=np.int64), "zero")])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[2])
PY
"$build/tests/onnx_seq_check" "$out/seq.onnx" "$out/if_seq.onnx"
