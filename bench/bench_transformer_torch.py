"""The PyTorch side of bench_transformer: the same step (forward, backward,
AdamW update), the same models and inputs, the same timing (median of 7
timings after warm-up). Prints lines in bench_transformer's format.

    block  nn.TransformerEncoderLayer(128, 4, 512, dropout 0, GELU, batch_first,
           norm_first) on [16, 64, 128], loss mean(y^2)
    gpt    char_gpt's default model written in PyTorch: token and position
           embeddings, pre-norm blocks (nn.TransformerEncoderLayer with a
           causal mask), final layer norm, linear head; cross-entropy

    bench_transformer_torch.py [block|gpt] [SCALE] [THREADS]"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_torch import median_ms

B, T, E, H, M = 16, 64, 128, 4, 512
# examples/char_gpt_model.h's gpt_default_config()
GPT = dict(vocab=65, layers=4, embed=128, heads=4, block=64, batch=32)


def layer(e, h, m):
    return nn.TransformerEncoderLayer(e, h, m, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)


class GPTModel(nn.Module):
    def __init__(self, vocab, layers, embed, heads, block, **_):
        super().__init__()
        self.tok = nn.Embedding(vocab, embed)
        self.pos = nn.Parameter(torch.randn(block, embed) * 0.02)
        self.blocks = nn.ModuleList(layer(embed, heads, 4 * embed) for _ in range(layers))
        self.ln = nn.LayerNorm(embed)
        self.head = nn.Linear(embed, vocab)
        self.register_buffer("mask", torch.full((block, block), float("-inf")).triu(1))

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x, src_mask=self.mask)
        return self.head(self.ln(x))


def gpt_batch(c):
    i = torch.arange(c["batch"] * c["block"])
    ids = ((i * 31 + i.div(7, rounding_mode="floor")) % c["vocab"]).view(c["batch"], c["block"])
    n = i + 1
    targets = ((n * 31 + n.div(7, rounding_mode="floor")) % c["vocab"]).view(c["batch"], c["block"])
    return ids, targets


def bench(which, steps, reps=7):
    torch.manual_seed(1)
    if which == "block":
        model = layer(E, H, M)
        x = ((torch.arange(B * T * E) * 7919 % 1000).float() / 500.0 - 1.0).view(B, T, E)
        loss_of = lambda: model(x).pow(2).mean()
    else:
        model = GPTModel(**GPT)
        ids, targets = gpt_batch(GPT)
        loss_of = lambda: F.cross_entropy(model(ids).view(-1, GPT["vocab"]), targets.view(-1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_of().backward()
        opt.step()

    return median_ms(step, 2, steps, reps)


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "block"
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if threads > 0:
        torch.set_num_threads(threads)
    steps = max(1, int(5 * scale))
    print(f"case {which} median_ms {bench(which, steps):.4f} steps {steps}", flush=True)


if __name__ == "__main__":
    main()
