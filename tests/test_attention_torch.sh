#!/usr/bin/env bash
# scaled_dot_product_attention against PyTorch (issue 20): the output and the
# gradients of sum(out * r) with respect to Q, K and V, in float64, with and
# without the causal mask, with an additive mask, and with sizes that cross
# the kernels' 64-wide blocks, equal torch's to 1e-6 (tests/attention_check.c
# runs the fused op on the tape). The reference is
# torch.nn.functional.scaled_dot_product_attention where torch has it (2.0
# and later), and otherwise the same softmax(q k^T / sqrt(D) + mask) v
# written out in torch. Skipped, saying so, without Debian's python3-torch.
set -euo pipefail
build=$1
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "skipped: Debian's python3-torch is needed (make test installs it)"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# B H T S D DV CAUSAL MASK
while read -r B H T S D DV CAUSAL MASK; do
    "$py" - "$out" "$B" "$H" "$T" "$S" "$D" "$DV" "$MASK" <<'PY'
import sys, numpy as np
d = sys.argv[1]
B, H, T, S, D, DV, M = map(int, sys.argv[2:])
rng = np.random.default_rng(B * 1000 + T * 10 + S)
for name, shape in (("q", (B, H, T, D)), ("k", (B, H, S, D)), ("v", (B, H, S, DV)), ("r", (B, H, T, DV))):
    rng.standard_normal(shape).astype(np.float64).tofile("%s/%s.f64" % (d, name))
if M:
    m = rng.standard_normal((T, S))
    m[rng.random((T, S)) < 0.2] = -np.inf
    m[:, 0] = 0.0  # every row sees a key
    m.astype(np.float64).tofile("%s/mask.f64" % d)
PY
    "$build/tests/attention_check" "$out" "$B" "$H" "$T" "$S" "$D" "$DV" "$CAUSAL" "$MASK"
    "$py" - "$out" "$B" "$H" "$T" "$S" "$D" "$DV" "$CAUSAL" "$MASK" <<'PY'
import sys, math, numpy as np, torch
import torch.nn.functional as F
d = sys.argv[1]
B, H, T, S, D, DV, C, M = map(int, sys.argv[2:])
load = lambda n, s: torch.from_numpy(np.fromfile("%s/%s.f64" % (d, n), np.float64).reshape(s))
q, k, v = (load(n, s).requires_grad_() for n, s in (("q", (B, H, T, D)), ("k", (B, H, S, D)), ("v", (B, H, S, DV))))
r = load("r", (B, H, T, DV))
mask = load("mask", (T, S)) if M else None
if hasattr(F, "scaled_dot_product_attention"):
    ref = "F.scaled_dot_product_attention"
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=bool(C))
else:
    ref = "torch " + torch.__version__ + " (softmax(q k^T / sqrt(D) + mask) v)"
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    if mask is not None:
        s = s + mask
    if C:
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool).tril().logical_not(), float("-inf"))
    o = torch.softmax(s, -1) @ v
gq, gk, gv = torch.autograd.grad((o * r).sum(), (q, k, v))
worst = 0.0
for name, want, shape in (("out", o, o.shape), ("dq", gq, q.shape), ("dk", gk, k.shape), ("dv", gv, v.shape)):
    got = load(name, tuple(shape))
    err = (got - want.detach()).abs().max().item()
    worst = max(worst, err)
    if not err <= 1e-6:
        sys.exit("FAIL %s: B %d H %d T %d S %d D %d Dv %d causal %d mask %d: max |nabla - torch| = %g"
                 % (name, B, H, T, S, D, DV, C, M, err))
print("ok   B %d H %d T %3d S %3d D %2d Dv %2d causal %d mask %d: max |nabla - torch| %.1e (vs %s)"
      % (B, H, T, S, D, DV, C, M, worst, ref))
PY
done <<'CASES'
2 3 5 7 4 3 0 0
2 3 7 7 4 4 1 0
1 2 100 150 16 8 0 0
1 2 150 150 16 16 1 0
2 2 70 130 8 8 1 0
1 2 9 11 5 6 0 1
1 1 80 80 8 8 1 1
CASES
