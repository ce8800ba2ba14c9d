#!/usr/bin/env bash
# Runs the training-step benchmark of nabla and of PyTorch side by side, on
# the same machine, in one go, with the same number of threads, and prints
# the ratio per case (PyTorch time / nabla time: above 1, nabla is faster).
#
#   bench/run.sh [SCALE]     SCALE < 1 runs fewer steps (a quick look)
#
# Uses build-bench/ (a Release build) and Debian's python3-torch if present.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-1}
threads=${NABLA_BENCH_THREADS:-$(nproc)}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DNABLA_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_train >/dev/null
python=/usr/bin/python3
[ -x "$python" ] || python=python3

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
OMP_NUM_THREADS=$threads ./build-bench/bench/bench_train "$scale" | tee "$out/nabla.txt" >/dev/null
# Debian's PyTorch uses whatever libblas.so.3 points to; the reference BLAS
# makes it ten times slower than it should be, which would flatter nabla.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
    *openblas*|*blis*|*mkl*) ;;
    *) echo "bench: warning: libblas.so.3 is the reference BLAS ($blas); PyTorch's times will be" \
            "unfairly slow. apt-get install libopenblas0-pthread gives it OpenBLAS." >&2 ;;
esac
if "$python" -c 'import torch' 2>/dev/null; then
    "$python" bench/bench_torch.py "$scale" "$threads" > "$out/torch.txt"
    have_torch=1
else
    echo "bench: PyTorch is not installed (apt-get install python3-torch); nabla's times only" >&2
    have_torch=0
fi
echo "training step, median of 7 timings, $threads threads, $(nproc) cores; PyTorch's BLAS: ${blas:-unknown}"
printf '%-10s %12s %12s %8s\n' case nabla_ms torch_ms ratio
while read -r _ name _ ms _ _; do
    if [ $have_torch = 1 ]; then
        tms=$(awk -v n="$name" '$2 == n { print $4 }' "$out/torch.txt")
        printf '%-10s %12.4f %12.4f %8.2f\n' "$name" "$ms" "$tms" "$(awk -v a="$tms" -v b="$ms" 'BEGIN { print a / b }')"
    else
        printf '%-10s %12.4f %12s %8s\n' "$name" "$ms" - -
    fi
done < "$out/nabla.txt"
