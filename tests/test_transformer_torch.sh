#!/usr/bin/env bash
# nb_layer_transformer_block against PyTorch: nn.TransformerEncoderLayer
# (norm_first, activation gelu, batch_first, dropout 0, float64) given
# nabla's parameters (tests/transformer_check.c draws them and writes them,
# the block's output and the gradients of sum(out * R), from a static
# program and from the tape), without and with a causal mask. The outputs
# and every parameter's gradient agree to 1e-9. Skipped, saying so, without
# Debian's python3-torch.
set -euo pipefail
build=$1
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "skipped: Debian's python3-torch is needed (make test installs it)"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for causal in 0 1; do
    "$py" - "$out" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(20)
for name in ("x", "r"):
    rng.uniform(-1.0, 1.0, (2, 5, 8)).astype(np.float64).tofile("%s/%s.f64" % (sys.argv[1], name))
PY
    "$build/tests/transformer_check" "$out" "$causal"
    "$py" - "$out" "$causal" <<'PY'
import sys, numpy as np, torch
d, causal = sys.argv[1], sys.argv[2] == "1"
B, T, E, H, MLP = 2, 5, 8, 2, 12
load = lambda n, *s: torch.from_numpy(np.fromfile("%s/%s.f64" % (d, n), np.float64).reshape(s))
names = open(d + "/params.txt").read().split()
assert len(names) == 16, names
layer = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=MLP, dropout=0.0, activation="gelu",
                                         batch_first=True, norm_first=True, dtype=torch.float64)
# nabla's fc weights are [in, out], torch's Linear [out, in]; torch packs the
# q, k and v projections into in_proj_weight [3E, E].
def w(n): return load(n + ".w_0", *{"fc1": (E, MLP), "fc2": (MLP, E)}.get(n.split(".")[-1], (E, E))).T
def b(n): return load(n + ".b_0", MLP if n.endswith("fc1") else E)
ln = lambda n: load(n + ".w_0", E)
p = "block_0"
with torch.no_grad():
    layer.self_attn.in_proj_weight.copy_(torch.cat([w(p + ".attn.q"), w(p + ".attn.k"), w(p + ".attn.v")]))
    layer.self_attn.in_proj_bias.copy_(torch.cat([b(p + ".attn.q"), b(p + ".attn.k"), b(p + ".attn.v")]))
    layer.self_attn.out_proj.weight.copy_(w(p + ".attn.o"))
    layer.self_attn.out_proj.bias.copy_(b(p + ".attn.o"))
    layer.linear1.weight.copy_(w(p + ".fc1"))
    layer.linear1.bias.copy_(b(p + ".fc1"))
    layer.linear2.weight.copy_(w(p + ".fc2"))
    layer.linear2.bias.copy_(b(p + ".fc2"))
    layer.norm1.weight.copy_(ln(p + ".ln1"))
    layer.norm1.bias.copy_(b(p + ".ln1"))
    layer.norm2.weight.copy_(ln(p + ".ln2"))
    layer.norm2.bias.copy_(b(p + ".ln2"))
x, r = load("x", B, T, E), load("r", B, T, E)
mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1) if causal else None
y = layer(x, src_mask=mask)
(y * r).sum().backward()
# Each nabla gradient, as torch computed it (transposed and cut from the
# packed projections as the weights were put in).
ipw, ipb = layer.self_attn.in_proj_weight.grad, layer.self_attn.in_proj_bias.grad
want = {}
for i, part in enumerate("qkv"):
    want[p + ".attn.%s.w_0" % part] = ipw[i * E:(i + 1) * E].T
    want[p + ".attn.%s.b_0" % part] = ipb[i * E:(i + 1) * E]
for n, m in (("attn.o", layer.self_attn.out_proj), ("fc1", layer.linear1), ("fc2", layer.linear2)):
    want["%s.%s.w_0" % (p, n)] = m.weight.grad.T
    want["%s.%s.b_0" % (p, n)] = m.bias.grad
for n, m in (("ln1", layer.norm1), ("ln2", layer.norm2)):
    want["%s.%s.w_0" % (p, n)] = m.weight.grad
    want["%s.%s.b_0" % (p, n)] = m.bias.grad
assert sorted(want) == sorted(names), (sorted(want), sorted(names))
assert y.abs().max().item() > 0.1, "a trivial output would prove nothing"
worst = {}
for way, suffix in (("static", ""), ("eager", ".eager")):
    got = load("out" + suffix, B, T, E)
    err = (got - y.detach()).abs().max().item()
    assert err <= 1e-9, ("output", way, err)
    worst[way] = err
    for n in names:
        g = load(n + ".grad" + suffix, *want[n].shape)
        err = (g - want[n]).abs().max().item()
        assert err <= 1e-9 * (1 + want[n].abs().max().item()), (n, way, err)
        worst[way] = max(worst[way], err)
print("causal %d: output and 16 parameter gradients against PyTorch: largest difference %.3g (static), %.3g (eager)"
      % (causal, worst["static"], worst["eager"]))
PY
done
echo "1 passed, 0 failed"
