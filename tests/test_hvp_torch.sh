#!/usr/bin/env bash
# Second derivatives through control flow against PyTorch (issue 13): H t
# with respect to W, by reverse over reverse and forward over reverse in a
# static program and by double backward on the tape (tests/hvp_check.c says
# the models: issue 13's data-dependent while, cond down either branch, a
# net, and an LSTM scanned over time, whose loss a gradient penalty takes),
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
for model in while cond1 cond0 net lstm; do
    "$py" - "$out" "$model" <<'PY'
import sys, numpy as np
d, model = sys.argv[1:]
rng = np.random.default_rng(13)
lstm = model == "lstm"
shapes = {"x": (3, 2, 3) if lstm else (2, 3), "W": (5, 8) if lstm else (3, 4)}
shapes["t"] = shapes["W"]
lo = -1.0 if lstm else 0.2
for name in ("x", "W", "t"):
    rng.uniform(lo, 1.0, shapes[name]).astype(np.float64).tofile("%s/%s.f64" % (d, name))
PY
    "$build/tests/hvp_check" "$out" "$model"
    "$py" - "$out" "$model" <<'PY'
import sys, numpy as np, torch
d, model = sys.argv[1:]
lstm = model == "lstm"
load = lambda n, s: torch.from_numpy(np.fromfile("%s/%s.f64" % (d, n), np.float64).reshape(s))
x = load("x", (3, 2, 3) if lstm else (2, 3))
W = load("W", (5, 8) if lstm else (3, 4))
t = load("t", tuple(W.shape))
def f(W):
    if model == "while":
        h = x @ W
        while h.sum() < 30:
            h = 1.3 * h + 0.4 * torch.tanh(h)
        return (torch.sin(h) * h).sum()
    if model.startswith("cond"):
        p = x @ W
        if p.sum() > (-100 if model == "cond1" else 100):
            return (torch.tanh(p) ** 2 * p).sum()
        return 2 * torch.sin(p).sum()
    if model == "net":
        o = torch.tanh(x @ W)
        return (o * o).sum() + torch.sin(o).sum()
    h = torch.zeros(2, 2, dtype=torch.float64)
    c = torch.zeros(2, 2, dtype=torch.float64)
    for x_t in x:
        i, fg, g, o = (torch.cat([x_t, h], 1) @ W).chunk(4, 1)
        c = torch.sigmoid(fg) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return (h * h).sum()
_, hvp = torch.autograd.functional.hvp(f, W, t)
assert hvp.abs().max().item() > 1e-3, "a trivial H t would prove nothing"
for way in ("rr", "fr", "eager"):
    got = load(way, tuple(W.shape))
    err = (got - hvp).abs().max().item()
    print("%-6s %-6s H t against PyTorch: largest difference %.3g" % (model, way, err))
    assert err <= 1e-10 * (1 + hvp.abs().max().item()), (model, way)
PY
done
echo "1 passed, 0 failed"
