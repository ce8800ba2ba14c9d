#!/usr/bin/env bash
# ONNX's own conformance suite, the backend node tests: generated from the
# installed onnx package's case generators (tests/onnx_node_gen.py), each
# model imported by nabla and run eagerly and as a static program
# (tests/onnx_node_run.c; the static import is given the inputs' values,
# nb_onnx_import_known). Fails on any wrong result, crash or hang, and
# when fewer tests pass than the floor below (raise it as ops are added).
# Skipped, saying so, without Debian's python3-onnx or nabla's ONNX support.
set -euo pipefail
build=$1
src=$2
py=/usr/bin/python3
# The floor: eager passes, static passes.
min_pass=${NABLA_ONNX_MIN_PASS:-810,809}

if ! "$py" -c 'import onnx.backend.test.case.node' 2>/dev/null; then
    echo "skipped: Debian's python3-onnx is needed (make test installs it)"
    exit 0
fi
if ! grep -q '^NABLA_ONNX_PROTO:FILEPATH=/' "$build/CMakeCache.txt"; then
    echo "skipped: this build has no ONNX support (libonnx-dev was not found when it was configured)"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" "$src/tests/onnx_node_gen.py" "$out"
"$build/tests/onnx_node_run" "$out" --min-pass "$min_pass"
