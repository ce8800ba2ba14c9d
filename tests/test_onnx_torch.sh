#!/usr/bin/env bash
# PyTorch's own exports (issue 42): the modules of tests/onnx_torch_gen.py
# (Linear, the convolutions, norms, pools and activations, Embedding,
# chunk/split, Upsample, MultiheadAttention, TransformerEncoderLayer, LSTM,
# GRU, a GPT-2 block ...), exported by torch.onnx.export at opsets 13 and
# 17, import into nabla (eagerly and as static programs), give PyTorch's eval-mode outputs, and give torch
# autograd's gradients of one scalar loss with respect to the inputs and to
# every parameter (tests/onnx_torch_check.c). Prints the table of results;
# skipped, saying so, without Debian's python3-torch and python3-onnx or
# without nabla's ONNX support.
set -euo pipefail
build=$1
src=${2:-$(dirname "$0")/..}
py=/usr/bin/python3
source "$src/tests/onnx_skip.bash"
onnx_needs "$build" "onnx, torch" "python3-onnx and python3-torch"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -W ignore "$src/tests/onnx_torch_gen.py" "$out" 2>"$out/gen.log" | sed 's/^/exported /' ||
    { cat "$out/gen.log"; exit 1; }
failed=0
total=0
for npz in "$out"/*.npz; do
    name=$(basename "$npz" .npz)
    for model in "$out/$name".op*.onnx; do
        total=$((total + 1))
        "$build/tests/onnx_torch_check" "$model" "$npz" || failed=$((failed + 1))
    done
done
echo "onnx_torch: $((total - failed)) of $total exports import (eagerly and as static programs), match PyTorch in eval mode and match its gradients"
[ $failed = 0 ]
