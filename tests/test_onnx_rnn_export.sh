#!/usr/bin/env bash
# nabla's own recurrent layers go out as ONNX's LSTM, GRU and RNN (issue 42):
# tests/onnx_rnn_export.c builds nb_layer_lstm, nb_layer_gru and
# nb_layer_rnn programs (initial states given or zeros, forward and
# reverse, without bias, a bidirectional pair, a stack), exports each,
# checks that nabla re-imports it to the same numbers and that other scans
# are refused; here each export must pass onnx.checker, hold one ONNX
# recurrent node a layer (no loop, no unrolled step), and give nabla's
# outputs in ONNX Runtime (npm's onnxruntime-node, run by tests/onnx_ort.js).
# A wrong result fails. Skipped, saying so, without Debian's python3-onnx,
# nabla's ONNX support, or an onnxruntime-node that npm installs.
set -euo pipefail
build=$1
src=${2:-$(dirname "$0")/..}
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# nabla's own checks first, which need neither Python nor Node.js; a
# failure (a re-import that differs) still leaves the exports for ONNX
# Runtime to judge.
nabla_rc=0
"$build/tests/onnx_rnn_export" "$out" || nabla_rc=$?
[ $nabla_rc = 0 ] || echo "onnx_rnn_export: nabla's own checks failed"
source "$src/tests/onnx_skip.bash"
if ! "$py" -c "import onnx" 2>/dev/null; then
    echo "skipped: onnx.checker and ONNX Runtime's checks: Debian's python3-onnx is needed (make test installs it)"
    exit $nabla_rc
fi
onnx_needs "$build" "onnx" "python3-onnx"
source "$src/tests/onnx_ort.bash"
ort_install "$build"
if [ -z "$ort_dir" ]; then
    echo "skipped: ONNX Runtime's check, which needs onnxruntime-node: $ort_why"
    exit $nabla_rc
fi
# How many ONNX recurrent nodes each case's layers make.
declare -A layers=([lstm_bidirectional]="LSTM LSTM" [lstm_gru_stacked]="LSTM GRU")
passed=0 failed=0
for dir in "$out"/*/; do
    [ -f "$dir/nabla_out0.npy" ] || continue
    name=$(basename "$dir")
    model=$dir/$name.onnx
    case $name in lstm*) want=LSTM ;; gru*) want=GRU ;; *) want=RNN ;; esac
    want=${layers[$name]:-$want}
    got=$("$py" -c "
import onnx, sys
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
print(' '.join(n.op_type for n in m.graph.node if n.op_type in ('LSTM', 'GRU', 'RNN', 'Loop', 'Scan')))
" "$model") || { echo "$name: nabla's export fails onnx.checker"; failed=$((failed + 1)); continue; }
    if [ "$got" != "$want" ]; then
        echo "$name: the export's recurrent nodes are '$got', not '$want'"
        failed=$((failed + 1))
        continue
    fi
    if node "$src/tests/onnx_ort.js" "$ort_dir" "$model" "$dir" 1e-5; then passed=$((passed + 1))
    else failed=$((failed + 1)); fi
done
echo "onnx_rnn_export: $passed exports pass onnx.checker and give nabla's outputs in ONNX Runtime; $failed wrong"
[ $nabla_rc = 0 ] && [ $failed = 0 ] && [ $passed -gt 0 ]
