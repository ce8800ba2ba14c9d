#!/usr/bin/env bash
# nabla's f16/bf16 conversions (src/core/half.c) agree bit for bit with
# PyTorch's (torch.tensor(x, dtype=torch.float16 / torch.bfloat16), and back
# with .float()) and, from doubles, with NumPy's float64 -> float16, which
# rounds once as nabla does (PyTorch goes through float32 first). The values
# travel as raw arrays through files: test_safetensors_half --convert DIR.
# Skipped, with a line saying so, where Debian's python3 has no torch.
#
#   tests/test_safetensors_half_torch.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "skipped: $py has no torch (Debian: python3-torch)"
    echo "0 passed, 0 failed"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$py" - "$out" <<'PY'
import sys, warnings, numpy as np
warnings.simplefilter("ignore")  # the overflowing casts are meant
d = sys.argv[1]
rng = np.random.default_rng(18)
# Random bit patterns (every exponent), values around the f16 range, the
# halfway points of both formats and their neighbours, special values.
bits = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
x = [bits.view(np.float32)]
x.append((rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000)).astype(np.float32))
h = np.arange(0, 0x7c00, 37, dtype=np.uint16).view(np.float16).astype(np.float32)
mid = (h[:-1] + h[1:]) / 2  # exact in f32
x += [mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
b = (np.arange(0, 0x7f80, 29, dtype=np.uint32) << 16).view(np.float32)
bm = ((np.arange(0, 0x7f80, 29, dtype=np.uint32) << 16) | 0x8000).view(np.float32)  # bf16 halfway points
x += [b, bm, np.nextafter(bm, np.float32(np.inf)), np.nextafter(bm, np.float32(-np.inf))]
x.append(np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.996, 65520, 2**-24, 2**-25, 3 * 2**-25,
                   np.finfo(np.float32).max, np.finfo(np.float32).tiny], dtype=np.float32))
x = np.concatenate(x).astype(np.float32)
x = np.concatenate([x, -x])
x = x[~np.isnan(x)]
x.tofile(f"{d}/x.f32")
dd = np.concatenate([x.astype(np.float64) * (1 + 2.0**-40), x.astype(np.float64) * (1 - 2.0**-40),
                     rng.standard_normal(3000) * 1e4])
dd = dd[np.isfinite(dd)]
dd.tofile(f"{d}/d.f64")
PY

"$build/tests/test_safetensors_half" --convert "$out"

"$py" - "$out" <<'PY'
import sys, warnings, numpy as np, torch
warnings.simplefilter("ignore")  # the overflowing casts are meant
d = sys.argv[1]
x = np.fromfile(f"{d}/x.f32", dtype=np.float32)
dd = np.fromfile(f"{d}/d.f64", dtype=np.float64)
passed = failed = 0
def compare(what, got, want, inputs):
    global passed, failed
    bad = np.nonzero(got != want)[0]
    if len(bad):
        failed += 1
        for i in bad[:5]:
            print(f"  {what}: input {inputs[i]!r} gives 0x{int(got[i]):x}, reference 0x{int(want[i]):x}")
        print(f"FAIL {what}: {len(bad)} of {len(got)} differ")
    else:
        passed += 1
        print(f"ok   {what} ({len(got)} values)")
xt = torch.from_numpy(x)
compare("f32 -> f16 (torch)", np.fromfile(f"{d}/x.f16", dtype=np.uint16),
        xt.to(torch.float16).view(torch.int16).numpy().view(np.uint16), x)
compare("f32 -> f16 (numpy)", np.fromfile(f"{d}/x.f16", dtype=np.uint16), x.astype(np.float16).view(np.uint16), x)
compare("f32 -> bf16 (torch)", np.fromfile(f"{d}/x.bf16", dtype=np.uint16),
        xt.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16), x)
compare("f64 -> f16 (numpy, one rounding)", np.fromfile(f"{d}/d.f16", dtype=np.uint16),
        dd.astype(np.float16).view(np.uint16), dd)
# Widening: every pattern but the NaNs (whose payloads frameworks treat alike
# only by convention), bit for bit.
allp = np.arange(65536, dtype=np.uint32).astype(np.uint16)
for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
    got = np.fromfile(f"{d}/all.{name}.f32", dtype=np.uint32)
    want = torch.from_numpy(allp.view(np.int16)).view(dt).float().numpy().view(np.uint32)
    keep = ~np.isnan(want.view(np.float32))
    compare(f"{name} -> f32 (torch)", got[keep], want[keep], allp[keep])
    nan_ok = np.isnan(got.view(np.float32)[~keep]).all()
    compare(f"{name} NaN -> f32 NaN", np.array([nan_ok]), np.array([True]), ["NaN patterns"])
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
