#!/usr/bin/env bash
# An independent runtime checks nabla's exports (issue 42): the PyTorch
# module exports of tests/onnx_torch_gen.py (opset 13), imported into a
# program and exported again by nb_onnx_export, pass onnx.checker and give
# nabla's outputs in ONNX Runtime (npm's onnxruntime-node, run by
# tests/onnx_ort.js). An export nabla refuses says why and is counted; a
# wrong result fails. (The fine-tuned torchvision models go through ONNX
# Runtime in tests/test_onnx_finetune.sh.) Skipped, saying so, without
# Debian's python3-torch and python3-onnx, nabla's ONNX support, or an
# onnxruntime-node that npm installs.
set -euo pipefail
build=$1
src=${2:-$(dirname "$0")/..}
py=/usr/bin/python3
# The least number of the module exports that must go through.
min_pass=46
source "$src/tests/onnx_skip.bash"
onnx_needs "$build" "onnx, torch" "python3-onnx and python3-torch"
source "$src/tests/onnx_ort.bash"
ort_needs "$build"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -W ignore "$src/tests/onnx_torch_gen.py" "$out" >/dev/null 2>"$out/gen.log" || { cat "$out/gen.log"; exit 1; }
passed=0 refused=0 failed=0
for npz in "$out"/*.npz; do
    name=$(basename "$npz" .npz)
    mkdir "$out/$name"
    rc=0
    "$build/tests/onnx_torch_check" --export "$out/$name.op13.onnx" "$npz" "$out/$name/$name.onnx" "$out/$name" || rc=$?
    if [ $rc = 3 ]; then refused=$((refused + 1)); continue; fi
    if [ $rc != 0 ]; then failed=$((failed + 1)); continue; fi
    if ort_check "$out/$name/$name.onnx" "$out/$name"; then passed=$((passed + 1))
    else failed=$((failed + 1)); fi
done
echo "onnx_ort: $passed exports pass onnx.checker and give nabla's outputs in ONNX Runtime;" \
     "$refused refused by nb_onnx_export, $failed wrong"
[ $failed = 0 ] && [ $passed -ge $min_pass ]
