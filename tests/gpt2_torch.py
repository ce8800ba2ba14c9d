"""GPT-2 in PyTorch, the twin of examples/gpt2_model.h, with the files
examples/gpt2_io.h reads: Hugging Face's safetensors layout, llm.c's
checkpoint and llm.c's token files (written by hand: no safetensors package
is needed). tests/test_gpt2.sh and bench/bench_gpt2_torch.py use it.

    gpt2_torch.py make DIR L H C T V B SEQ   random weights (seed 1) as DIR/model.safetensors
                                             and DIR/model.bin, token files DIR/train.bin and
                                             DIR/val.bin
    gpt2_torch.py train DIR STEPS LR MIN_LR WARMUP BETA2 WD CLIP B SEQ
                                             trains the weights of DIR/model.safetensors on
                                             DIR/train.bin as examples/gpt2 does; prints
                                             "step k: train loss X" per step
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

LLMC_MAGIC, LLMC_VERSION = 20240326, 3
TOKENS_MAGIC, TOKENS_VERSION = 20240520, 1

# llm.c's 16 kinds in its order: (Hugging Face suffix, per layer, stored [out, in] by llm.c)
KINDS = [("wte.weight", False, False), ("wpe.weight", False, False),
         ("ln_1.weight", True, False), ("ln_1.bias", True, False),
         ("attn.c_attn.weight", True, True), ("attn.c_attn.bias", True, False),
         ("attn.c_proj.weight", True, True), ("attn.c_proj.bias", True, False),
         ("ln_2.weight", True, False), ("ln_2.bias", True, False),
         ("mlp.c_fc.weight", True, True), ("mlp.c_fc.bias", True, False),
         ("mlp.c_proj.weight", True, True), ("mlp.c_proj.bias", True, False),
         ("ln_f.weight", False, False), ("ln_f.bias", False, False)]


def pad_vocab(v):
    return (v + 127) // 128 * 128


def names(L):
    """Parameter names in llm.c's order."""
    out = []
    for suffix, per_layer, _ in KINDS:
        out += [f"h.{l}.{suffix}" for l in range(L)] if per_layer else [suffix]
    return out


def shapes(L, C, T, V):
    s = {"wte.weight": (V, C), "wpe.weight": (T, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    per = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
           "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
           "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (4 * C, C),
           "mlp.c_proj.bias": (C,)}
    for l in range(L):
        for k, v in per.items():
            s[f"h.{l}.{k}"] = v
    return s


def random_weights(L, C, T, V, seed=1):
    """GPT-2's initialisation, with biases and gains drawn too so that a
    test sees every tensor's layout."""
    g = torch.Generator().manual_seed(seed)
    return {n: (torch.randn(shape, generator=g) * (0.02 if len(shape) == 2 else 0.1)
                + (1.0 if n.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0))
            for n, shape in shapes(L, C, T, V).items()}


# ---- files -------------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, d in header.items():
        assert d["dtype"] == "F32", f"{path}: {name} is {d['dtype']}"
        a, b = d["data_offsets"]
        out[name.removeprefix("transformer.") if hasattr(name, "removeprefix") else name] = torch.from_numpy(
            np.frombuffer(data, dtype="<f4", count=(b - a) // 4, offset=8 + n + a).copy()).view(d["shape"])
    return out, meta


def write_llmc(path, w, L, H, C, T, V):
    Vp = pad_vocab(V)
    header = np.zeros(256, dtype="<i4")
    header[:8] = [LLMC_MAGIC, LLMC_VERSION, T, V, L, H, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for suffix, per_layer, transposed in KINDS:
            for name in ([f"h.{l}.{suffix}" for l in range(L)] if per_layer else [suffix]):
                t = w[name].detach()
                if transposed:
                    t = t.t()
                if name == "wte.weight":
                    t = torch.cat([t, torch.zeros(Vp - V, C)])
                f.write(t.contiguous().numpy().astype("<f4").tobytes())


def write_tokens(path, ids):
    header = np.zeros(256, dtype="<i4")
    header[:3] = [TOKENS_MAGIC, TOKENS_VERSION, len(ids)]
    with open(path, "wb") as f:
        f.write(header.tobytes() + np.asarray(ids, dtype="<u2").tobytes())


def read_tokens(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == TOKENS_MAGIC and header[1] == TOKENS_VERSION
        return torch.from_numpy(np.frombuffer(f.read(), dtype="<u2").astype(np.int64))


# ---- the model ---------------------------------------------------------------------------

def config_of(w, meta):
    V, C = w["wte.weight"].shape
    T = w["wpe.weight"].shape[0]
    L = 1 + max(int(n.split(".")[1]) for n in w if n.startswith("h."))
    H = int(meta.get("n_head", C // 64))
    return L, H, C, T, V


def loss(w, cfg, ids, targets):
    L, H, C, _, V = cfg
    B, T = ids.shape
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = lambda s: w[f"h.{l}.{s}"]
        h = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), 1e-5)
        q, k, v = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), 1e-5)
        m = F.gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
        x = x + m @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    return F.cross_entropy((x @ w["wte.weight"].t()).view(-1, V), targets.reshape(-1))


def adamw(w, lr, beta2, weight_decay):
    """AdamW with GPT-2's split: decay on the matrices only."""
    groups = [{"params": [t for t in w.values() if t.dim() >= 2], "weight_decay": weight_decay},
              {"params": [t for t in w.values() if t.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), eps=1e-8)


def lr_at(t, base, min_lr, warmup, total):
    """nb_lr_at's "cosine" with a warm-up (nabla/optimizer.h)."""
    if warmup > 0 and t <= warmup:
        return base * t / warmup
    s = t - 1 - warmup
    if s > total:
        return min_lr
    return min_lr + (base - min_lr) * (1 + math.cos(math.pi * s / total)) / 2


def clip(w, c):
    """Global-norm clipping as nabla's: g * c / max(||g||, c)."""
    norm = torch.sqrt(sum((t.grad.float() ** 2).sum() for t in w.values()))
    factor = c / torch.maximum(norm, torch.tensor(c))
    for t in w.values():
        t.grad.mul_(factor)


# ---- the commands ------------------------------------------------------------------------

def make(d, L, H, C, T, V, B, seq):
    w = random_weights(L, C, T, V)
    meta = {"format": "pt", "n_head": str(H)}
    # Hugging Face's files hold each layer's causal-mask buffer too.
    with_buffers = dict(w, **{f"h.{l}.attn.bias": torch.ones(1, 1, T, T).tril() for l in range(L)})
    write_safetensors(f"{d}/model.safetensors", with_buffers, meta)
    write_llmc(f"{d}/model.bin", w, L, H, C, T, V)
    g = torch.Generator().manual_seed(2)
    n = B * seq * 4 + 1
    write_tokens(f"{d}/train.bin", torch.randint(0, V, (n,), generator=g).tolist())
    write_tokens(f"{d}/val.bin", torch.randint(0, V, (n,), generator=g).tolist())


def train(d, steps, lr, min_lr, warmup, beta2, wd, c, B, seq):
    w, meta = read_safetensors(f"{d}/model.safetensors")
    w = {n: t.requires_grad_() for n, t in w.items() if not n.endswith(".attn.bias")}
    cfg = config_of(w, meta)
    tokens = read_tokens(f"{d}/train.bin")
    opt = adamw(w, lr, beta2, wd)
    total = steps - warmup if steps > warmup else 1
    pos, n = 0, B * seq
    for t in range(1, steps + 1):
        if pos + n + 1 > len(tokens):
            pos = 0
        ids, targets = tokens[pos:pos + n].view(B, seq), tokens[pos + 1:pos + n + 1].view(B, seq)
        pos += n
        for g in opt.param_groups:
            g["lr"] = lr_at(t, lr, min(min_lr, lr), warmup, total)
        opt.zero_grad(set_to_none=True)
        l = loss(w, cfg, ids, targets)
        l.backward()
        if c > 0:
            clip(w, c)
        opt.step()
        print(f"step {t}: train loss {l.item():.6f}")


def main():
    torch.set_num_threads(1)
    cmd, d, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if cmd == "make":
        make(d, *map(int, rest))
    elif cmd == "train":
        steps, lr, min_lr, warmup, beta2, wd, c, B, seq = rest
        train(d, int(steps), float(lr), float(min_lr), int(warmup), float(beta2), float(wd), float(c), int(B),
              int(seq))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
