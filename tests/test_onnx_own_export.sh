#!/usr/bin/env bash
# nabla's own models exported (issue 42): each case of
# tests/onnx_own_export.c (multi-head attention, the transformer block,
# the attention op itself) is built as a static program and run there, and
# its nb_onnx_export must pass onnx.checker and give nabla's outputs in ONNX
# Runtime (npm's onnxruntime-node, run by tests/onnx_ort.js, relative
# difference 1e-4). A refused export fails like a wrong one: these are
# nabla's own layers. Skipped, saying so, without Debian's python3-onnx,
# nabla's ONNX support, or an onnxruntime-node that npm installs.
set -euo pipefail
build=$1
src=${2:-$(dirname "$0")/..}
source "$src/tests/onnx_skip.bash"
onnx_needs "$build" "onnx" "python3-onnx"
source "$src/tests/onnx_ort.bash"
ort_needs "$build"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0 failed=0
for name in $("$build/tests/onnx_own_export" --list); do
    mkdir "$out/$name"
    if ! "$build/tests/onnx_own_export" "$name" "$out/$name"; then
        echo "$name: not exported"
        failed=$((failed + 1))
        continue
    fi
    if ort_check "$out/$name/$name.onnx" "$out/$name"; then passed=$((passed + 1))
    else failed=$((failed + 1)); fi
done
echo "onnx_own_export: $passed of nabla's own models export and give its outputs in ONNX Runtime, $failed do not"
[ $failed = 0 ] && [ $passed -gt 0 ]
