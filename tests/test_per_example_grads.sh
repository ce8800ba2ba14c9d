#!/usr/bin/env bash
# examples/per_example_grads (DP-SGD with per-example gradients from nb_vmap
# of nb_grad) for a few steps on MNIST: its epoch line with the time per
# step beside the plain gradient's, and a test accuracy that training
# raised above chance. Skipped where the MNIST files are missing.
set -euo pipefail
build=$1
src=$2
data=$(cd "$src/../shared/data" 2>/dev/null && pwd || true)
if [ -z "$data" ] || [ ! -d "$data/mnist" ]; then
    echo "skipped: no MNIST under ../shared/data"
    exit 0
fi
out=$("$build/examples/per_example_grads" --data "$data/mnist" --epochs 1 --steps 40 --batch 32)
echo "$out"
echo "$out" | grep -Eq '^epoch 1: test accuracy 0\.[0-9]{4}, [0-9.]+ ms per DP-SGD step \(per-example gradients by vmap\), [0-9.]+ ms per plain gradient$' \
    || { echo "no epoch line"; exit 1; }
acc=$(echo "$out" | sed -n 's/^test accuracy: //p')
awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || { echo "test accuracy $acc after 40 steps"; exit 1; }
"$build/examples/per_example_grads" --batch 0 2>/dev/null && { echo "--batch 0 was accepted"; exit 1; }
echo "ok"
