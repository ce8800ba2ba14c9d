#!/usr/bin/env bash
# `nabla dot --example` writes DOT that Graphviz renders, holding the
# forward part (data, fc, mse), the backward part nabla appended, and
# parameters drawn as double circles.
set -euo pipefail
build=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/nabla" dot --example -o "$out/p.dot"
for want in '"b0:images"' 'label="fc"' 'label="mse_loss"' 'label="fc.w@GRAD' 'shape=doublecircle' \
            'fillcolor="#f4cccc"' 'label="ones_like"'; do
    grep -qF -- "$want" "$out/p.dot" || { echo "missing from the drawing: $want"; exit 1; }
done
# --fused draws the executor's fused groups as clusters; the example's
# gradient has one (div and scale over the loss's scalar).
"$build/nabla" dot --example --fused -o "$out/f.dot"
for want in 'subgraph cluster_fused0' 'label="fused 0"' 'label="mse_loss"'; do
    grep -qF -- "$want" "$out/f.dot" || { echo "missing from the fused drawing: $want"; exit 1; }
done
NABLA_FUSE=0 "$build/nabla" dot --example --fused -o "$out/n.dot"
! grep -qF cluster_fused "$out/n.dot" || { echo "NABLA_FUSE=0 still drew fused groups"; exit 1; }
command -v dot >/dev/null || { echo "graphviz is not installed (make test installs it)"; exit 1; }
dot -Tpng "$out/p.dot" -o "$out/p.png"
dot -Tpng "$out/f.dot" -o "$out/f.png"
# A PNG starts with \x89PNG.
[ "$(head -c 4 "$out/p.png" | od -An -c | tr -d ' ')" = '211PNG' ] || { echo "dot did not write a PNG"; exit 1; }
echo "1 passed, 0 failed"
