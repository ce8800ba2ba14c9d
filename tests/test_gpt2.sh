#!/usr/bin/env bash
# examples/gpt2 end to end on a tiny GPT-2 (2 layers, 2 heads, width 32,
# context 16, vocabulary 256):
#  - byte-level training on a corpus this test writes: train and validation
#    losses printed, finite, below a uniform guess;
#  - round trips: a model saved as llm.c's .bin and as Hugging Face's
#    safetensors loads back and saves again to the same bytes, from either
#    format into the other, static and eager alike;
#  - bad files: a wrong magic, a truncated file, a header whose heads do not
#    divide the width, a missing and a misshapen safetensors tensor, a bad
#    token file, and shape flags that disagree with the file, each a clear
#    error;
#  - with PyTorch (tests/gpt2_torch.py; skipped, saying so, without it):
#    random weights written by PyTorch as safetensors (with the attention
#    buffers Hugging Face's files carry) and as an llm.c .bin give the first
#    three training losses of the PyTorch twin to 1e-4, static and eager,
#    and nabla's .bin of them is PyTorch's byte for byte.
set -euo pipefail
build=$1
src=$2
gpt=$build/examples/gpt2
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source "$src/tests/expect_fail.bash"
tiny=(--layers 2 --heads 2 --embed 32 --block 16 --seq 16 --batch 4)

# Byte-level training.
for i in $(seq 1 60); do echo "the quick brown fox jumps over the lazy dog $i times."; done > "$out/corpus.txt"
for mode in "" --eager; do
    "$gpt" $mode --data "$out/corpus.txt" "${tiny[@]}" --steps 30 --lr 3e-3 --warmup 3 --eval-every 15 \
        --save "$out/trained$mode.safetensors" > "$out/log.txt"
    grep -q '^step 30/30: train loss [0-9.]* ([0-9]* ms)$' "$out/log.txt" || { cat "$out/log.txt"; echo "no step line"; exit 1; }
    grep -q '^step 15: validation loss [0-9.]*$' "$out/log.txt" || { cat "$out/log.txt"; echo "no validation step"; exit 1; }
    first=$(sed -n 's/^step 1\/30: train loss \([0-9.]*\).*/\1/p' "$out/log.txt")
    val=$(sed -n 's/^validation loss: \([0-9.]*\) after 30 steps.*/\1/p' "$out/log.txt")
    # Below a uniform guess over 256 bytes (ln 256 = 5.55) and below the first step's.
    awk -v v="$val" -v f="$first" 'BEGIN { exit !(v > 0 && v < 5.0 && v < f) }' \
        || { cat "$out/log.txt"; echo "${mode:-static}: validation loss $val (first train loss $first)"; exit 1; }
    echo "ok   ${mode:-static} byte-level training: first loss $first, validation loss $val"
done
ls "$out" | grep -q '\.tmp\.' && { echo "a temporary file was left"; exit 1; }

# Round trips through both formats, static and eager.
m=$out/trained.safetensors
"$gpt" --load "$m" --steps 0 --save "$out/a.bin" > /dev/null
"$gpt" --load "$out/a.bin" --steps 0 --save "$out/b.safetensors" > /dev/null
"$gpt" --load "$out/b.safetensors" --steps 0 --save "$out/b.bin" --eager > /dev/null
"$gpt" --load "$out/b.bin" --steps 0 --save "$out/c.safetensors" --eager > /dev/null
cmp "$m" "$out/b.safetensors" && cmp "$m" "$out/c.safetensors" && cmp "$out/a.bin" "$out/b.bin" \
    || { echo "round trips changed the bytes"; exit 1; }
[ "$(stat -c %s "$out/a.bin")" -eq $((1024 + 4 * 34176)) ] || { echo "a.bin has the wrong size"; exit 1; }
echo "ok   round trips: .safetensors -> .bin -> .safetensors -> .bin, static and eager, byte for byte"

# Bad files.
bin=$out/a.bin
printf 'not a model' > "$out/short.bin"
expect_fail "llm.c checkpoint '$out/short.bin': truncated: 11 bytes, shorter than the 1024-byte header" \
    "$gpt" --load "$out/short.bin" --steps 0
head -c 5000 "$bin" > "$out/trunc.bin"
expect_fail "llm.c checkpoint '$out/trunc.bin': truncated: 5000 bytes, but its header (maxT 16, V 256, L 2, NH 2, C 32, Vp 256) needs 137728" \
    "$gpt" --load "$out/trunc.bin" --steps 0
{ cat "$bin"; printf 'xx'; } > "$out/long.bin"
expect_fail "llm.c checkpoint '$out/long.bin': bytes after the data: 137730 bytes" "$gpt" --load "$out/long.bin" --steps 0
# int32 field k of the header replaced by value v: patch FILE K V OUT.
patch() { "$py" -c 'import sys, struct; d = bytearray(open(sys.argv[1], "rb").read()); d[4 * int(sys.argv[2]):4 * int(sys.argv[2]) + 4] = struct.pack("<i", int(sys.argv[3])); open(sys.argv[4], "wb").write(d)' "$@"; }
patch "$bin" 0 20240520 "$out/magic.bin"
expect_fail "llm.c checkpoint '$out/magic.bin': bad magic 20240520 (that of an llm.c token file); expected 20240326" \
    "$gpt" --load "$out/magic.bin" --steps 0
patch "$bin" 1 1 "$out/v1.bin"
expect_fail "llm.c checkpoint '$out/v1.bin': version 1; only version 3 is read" "$gpt" --load "$out/v1.bin" --steps 0
patch "$bin" 5 3 "$out/heads.bin"
expect_fail "llm.c checkpoint '$out/heads.bin': header: 3 heads do not divide the width 32" "$gpt" --load "$out/heads.bin" --steps 0
patch "$bin" 7 100 "$out/vp.bin"
expect_fail "llm.c checkpoint '$out/vp.bin': header: padded vocabulary 100 is outside [256, 16777216]" \
    "$gpt" --load "$out/vp.bin" --steps 0
expect_fail "gpt2: --layers 3 disagrees with $bin, which holds 2" "$gpt" --load "$bin" --layers 3 --steps 0
expect_fail "gpt2: --load: '$out/model.pt': expected a .bin (llm.c) or .safetensors (Hugging Face) file" \
    "$gpt" --load "$out/model.pt" --steps 0
expect_fail "llm.c checkpoint '$out/none.bin': cannot open: No such file or directory" "$gpt" --load "$out/none.bin" --steps 0
expect_fail "gpt2: --save: save '$out/no/m.bin'" "$gpt" --load "$bin" --steps 0 --save "$out/no/m.bin"
# Safetensors: a tensor dropped, one misshapen, one that is no parameter.
"$py" - "$m" "$out" <<'PY'
import json, struct, sys
src, out = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header, body = json.loads(data[8:8 + n]), data[8 + n:]
def write(name, edit):
    h = json.loads(json.dumps(header))
    edit(h)
    tensors = sorted((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][0])
    blob, off = b"", 0
    for k in tensors:
        a, b = h[k]["data_offsets"]
        piece = body[a:b]
        h[k]["data_offsets"] = [off, off + len(piece)]
        blob += piece
        off += len(piece)
    j = json.dumps(h, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    open(f"{out}/{name}.safetensors", "wb").write(struct.pack("<Q", len(j)) + j + blob)
write("missing", lambda h: h.pop("h.1.mlp.c_fc.bias"))
def misshape(h): h["h.0.attn.c_attn.weight"]["shape"] = [96, 32]
write("misshapen", misshape)
def stranger(h): h["h.0.attn.rotary"] = h.pop("h.1.ln_2.bias")
write("stranger", stranger)
PY
expect_fail "GPT-2 safetensors '$out/missing.safetensors': no tensor 'h.1.mlp.c_fc.bias'" \
    "$gpt" --load "$out/missing.safetensors" --steps 0
expect_fail "GPT-2 safetensors '$out/misshapen.safetensors': 'h.0.attn.c_attn.weight' is [96, 32]; a model of width 32 needs [32, 96]" \
    "$gpt" --load "$out/misshapen.safetensors" --steps 0
expect_fail "GPT-2 safetensors '$out/stranger.safetensors': unexpected tensor 'h.0.attn.rotary' (no parameter of a 2-layer GPT-2)" \
    "$gpt" --load "$out/stranger.safetensors" --steps 0
# Token files.
expect_fail "llm.c token file '$bin': bad magic 20240326 (that of an llm.c checkpoint); expected 20240520" \
    "$gpt" --load "$bin" --train "$bin" --steps 1
"$py" -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<3i", 20240520, 1, 100) + bytes(1012) + bytes(20))' "$out/few.bin"
expect_fail "llm.c token file '$out/few.bin': truncated: 1044 bytes, but its header (100 tokens) needs 1224" \
    "$gpt" --load "$bin" --train "$out/few.bin" --steps 1
"$py" -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<3i", 20240520, 1, 200) + bytes(1012) + struct.pack("<200H", *([7] * 150 + [300] * 50)))' "$out/big.bin"
expect_fail "gpt2: $out/big.bin: token 300 at position 150 is outside the model's vocabulary of 256" \
    "$gpt" --load "$bin" --train "$out/big.bin" --steps 1 --seq 8 --batch 2

# Beside PyTorch.
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "skipped: the PyTorch twin (Debian's python3-torch and python3-numpy; make test installs them)"
    echo "1 passed, 0 failed"
    exit 0
fi
mkdir "$out/twin"
"$py" "$src/tests/gpt2_torch.py" make "$out/twin" 2 2 32 16 256 4 16
# Rates, decay and clipping large enough that the weight-decay split and
# the clipping each move the third loss by more than the tolerance.
hyper=(3 3e-2 1e-3 1 0.95 1.0 0.3 4 16)
"$py" "$src/tests/gpt2_torch.py" train "$out/twin" "${hyper[@]}" > "$out/torch.txt"
for file in model.safetensors model.bin; do
    for mode in "" --eager; do
        "$gpt" $mode --load "$out/twin/$file" --train "$out/twin/train.bin" --val "$out/twin/val.bin" --steps 3 \
            --lr 3e-2 --min-lr 1e-3 --warmup 1 --beta2 0.95 --weight-decay 1.0 --clip 0.3 --batch 4 --seq 16 \
            --quiet > "$out/nabla.txt"
        for k in 1 2 3; do
            a=$(sed -n "s/^step $k\/3: train loss \([0-9.]*\).*/\1/p" "$out/nabla.txt")
            b=$(sed -n "s/^step $k: train loss \([0-9.]*\)$/\1/p" "$out/torch.txt")
            awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-4 && d > -1e-4) }' \
                || { cat "$out/nabla.txt" "$out/torch.txt"; echo "$file ${mode:-static}: step $k loss $a, PyTorch $b"; exit 1; }
        done
        echo "ok   $file ${mode:-static}: losses $(sed -n 's/^step [0-9]\/3: train loss \([0-9.]*\).*/\1/p' "$out/nabla.txt" | tr '\n' ' ')= PyTorch's"
    done
done
"$gpt" --load "$out/twin/model.safetensors" --steps 0 --save "$out/twin/nabla.bin" > /dev/null
"$gpt" --load "$out/twin/model.bin" --steps 0 --save "$out/twin/again.bin" > /dev/null
cmp "$out/twin/model.bin" "$out/twin/nabla.bin" && cmp "$out/twin/model.bin" "$out/twin/again.bin" \
    || { echo "nabla's .bin differs from PyTorch's"; exit 1; }
echo "ok   PyTorch's safetensors and .bin give nabla's .bin byte for byte"
echo "1 passed, 0 failed"
