#!/usr/bin/env bash
# examples/per_example_grads (DP-SGD) end to end on a small MNIST-shaped data
# set this test writes (IDX files: 2000 training images, 600 under the
# sanitizers, and 500 test images, whose class lights a block of pixels,
# with noise): --check (per-example gradients by vmap of grad equal
# nb_grad run on each example alone), a two-epoch run whose private and
# plain models both learn the classes, and the errors. The real MNIST run
# (>= 95%) is in bench/RESULTS.md.
set -euo pipefail
build=$1
ex=$build/examples/per_example_grads
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python=/usr/bin/python3
[ -x "$python" ] || python=python3
# Under the sanitizers 600 training images, not 2000: a step took 0.8 s
# under ThreadSanitizer, and the classes are learnt from 400.
n_train=2000
grep -qE '^NABLA_(SANITIZE|TSAN):BOOL=ON' "$build/CMakeCache.txt" && n_train=600
"$python" - "$out" "$n_train" <<'EOF'
import random, struct, sys
random.seed(3)
def write(prefix, n):
    labels = [random.randrange(10) for _ in range(n)]
    pixels = bytearray()
    for c in labels:
        img = [random.randrange(60) for _ in range(784)]
        row, col = divmod(c, 5)
        for r in range(6 + 10 * row, 14 + 10 * row):
            for k in range(2 + 5 * col, 6 + 5 * col):
                img[r * 28 + k] = 200 + random.randrange(56)
        pixels += bytes(img)
    with open(f"{sys.argv[1]}/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + pixels)
    with open(f"{sys.argv[1]}/{prefix}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
write("train", int(sys.argv[2]))
write("t10k", 500)
EOF

"$ex" --data "$out" --batch 64 --check > "$out/check.txt"
grep -q '^check: 64 examples, per-example gradients by vmap of grad vs one by one: largest difference ' "$out/check.txt" \
    || { cat "$out/check.txt"; echo "no check line"; exit 1; }
echo "ok   --check: $(cat "$out/check.txt")"

"$ex" --data "$out" --epochs 2 --batch 50 --lr 0.05 > "$out/log.txt"
grep -q '^epoch 2: test accuracy [0-9.]* (DP-SGD), [0-9.]* (plain SGD); ms per step [0-9.]* (DP-SGD: per-example gradients, clipping, noise), [0-9.]* (plain)$' "$out/log.txt" \
    || { cat "$out/log.txt"; echo "no epoch line"; exit 1; }
priv=$(sed -n 's/^epoch 2: test accuracy \([0-9.]*\) (DP-SGD), \([0-9.]*\).*/\1/p' "$out/log.txt")
plain=$(sed -n 's/^epoch 2: test accuracy \([0-9.]*\) (DP-SGD), \([0-9.]*\).*/\2/p' "$out/log.txt")
# Ten well-separated classes: both learn them (a guess is 0.1).
awk -v p="$priv" -v q="$plain" 'BEGIN { exit !(p > 0.8 && q > 0.8) }' \
    || { cat "$out/log.txt"; echo "accuracy: DP-SGD $priv, plain $plain"; exit 1; }
grep -q "^test accuracy: $priv$" "$out/log.txt" || { cat "$out/log.txt"; echo "no final accuracy"; exit 1; }
echo "ok   two epochs: DP-SGD $priv, plain $plain"

# Errors: a message and a nonzero exit.
source "$(dirname "$0")/expect_fail.bash"
expect_fail "--noise: expected a number in [0, 100], got 'lots'" "$ex" --data "$out" --noise lots
expect_fail "unknown argument 'extra'" "$ex" --data "$out" extra
expect_fail "usage:" "$ex" --data "$out" --frobnicate 3
