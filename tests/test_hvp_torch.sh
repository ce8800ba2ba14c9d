#!/usr/bin/env bash
# Issue 13's example against PyTorch: a second derivative through a loop
# whose trip count depends on the data,
#     h = x W;  while (sum(h) < 30) h = 1.3 h + 0.4 tanh(h);  f = sum(sin(h) h),
# H t with respect to W by reverse over reverse and forward over reverse in a
# static program and by double backward on the tape (tests/hvp_check.c),
# each equal to torch.autograd's Hessian-vector product to 1e-10. Skipped,
# saying so, without Debian's python3-torch.
set -euo pipefail
build=$1
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "skipped: Debian's python3-torch is needed (make test installs it)"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" - "$out" write <<'PY'
import sys, numpy as np
rng = np.random.default_rng(13)
for name, shape in (("x", (2, 3)), ("W", (3, 4)), ("t", (3, 4))):
    rng.uniform(0.2, 1.0, shape).astype(np.float64).tofile("%s/%s.f64" % (sys.argv[1], name))
PY
"$build/tests/hvp_check" "$out"
"$py" - "$out" <<'PY'
import sys, numpy as np, torch
d = sys.argv[1]
load = lambda n, s: torch.from_numpy(np.fromfile("%s/%s.f64" % (d, n), np.float64).reshape(s))
x, W, t = load("x", (2, 3)), load("W", (3, 4)), load("t", (3, 4))
trips = 0
def f(W):
    global trips
    h = x @ W
    trips = 0
    while h.sum() < 30:
        h = 1.3 * h + 0.4 * torch.tanh(h)
        trips += 1
    return (torch.sin(h) * h).sum()
_, hvp = torch.autograd.functional.hvp(f, W, t)
assert trips > 1, trips
for way in ("rr", "fr", "eager"):
    got = load(way, (3, 4))
    err = (got - hvp).abs().max().item()
    print("%-6s H t against PyTorch (%d iterations): largest difference %.3g" % (way, trips, err))
    assert err <= 1e-10 * (1 + hvp.abs().max().item()), way
PY
echo "1 passed, 0 failed"
