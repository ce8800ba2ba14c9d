"""The PyTorch side of bench_gpt2: the same step (forward, loss, backward,
AdamW update with lr 1e-4, betas (0.9, 0.999), eps 1e-8, no weight decay,
no clipping) of the same GPT-2 (tests/gpt2_torch.py) from the same weights
(the safetensors file bench_gpt2 init wrote) on the same fixed batch; three
steps whose losses it prints, then STEPS timed ones. Prints bench_gpt2's
line, with torch's name:

    case gpt2_torch losses ... median_ms ... min_ms ... max_ms ... steps N gflop G rss_mb R

    bench_gpt2_torch.py FILE [STEPS] [B] [T] [THREADS]"""
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import gpt2_torch  # noqa: E402


def main():
    path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    B = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    T = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    if threads > 0:
        torch.set_num_threads(threads)
    w, meta = gpt2_torch.read_safetensors(path)
    w = {n: t.requires_grad_() for n, t in w.items() if not n.endswith(".attn.bias")}
    cfg = gpt2_torch.config_of(w, meta)
    L, H, C, maxT, V = cfg
    # bench_gpt2's batch: B * T + 1 tokens spread over the vocabulary.
    i = torch.arange(B * T + 1)
    tok = (i * 7919 + i.div(3, rounding_mode="floor")) % V
    ids, targets = tok[:-1].view(B, T), tok[1:].view(B, T)
    opt = torch.optim.AdamW(list(w.values()), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = gpt2_torch.loss(w, cfg, ids, targets)
        loss.backward()
        opt.step()
        return loss.item()

    losses = [step() for _ in range(3)]
    ms = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    n = sum(t.numel() for t in w.values()) - maxT * C
    gflop = (6 * n * B * T + 12 * L * B * T * T * C) / 1e9
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"case gpt2_torch losses {losses[0]:.6f} {losses[1]:.6f} {losses[2]:.6f} median_ms {ms[len(ms) // 2]:.1f} "
          f"min_ms {ms[0]:.1f} max_ms {ms[-1]:.1f} steps {steps} gflop {gflop:.2f} rss_mb {rss:.1f}", flush=True)


if __name__ == "__main__":
    main()
