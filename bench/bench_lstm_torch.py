"""The PyTorch side of bench_lstm: the same character-level LSTM (embedding
65 -> 64, nn.LSTM with hidden 128, linear to 65), the same step (forward,
softmax cross-entropy, backward, clipping by global norm, Adam update) on the
same fixed batch of 64 steps x 32 sequences, the same timing (median of 7
timings, after warm-up). Prints lines in bench_lstm's format.

    bench_lstm_torch.py [SCALE] [THREADS]"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_torch import median_ms

VOCAB, EMBED, HIDDEN, SEQ, BATCH = 65, 64, 128, 64, 32


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.lstm = nn.LSTM(EMBED, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids):
        ys, _ = self.lstm(self.embed(ids))
        return self.out(ys)


def batch():
    """bench_lstm.c's make_batch: a little pseudo-text, time-major."""
    pos = torch.arange(BATCH).mul(997).view(1, BATCH) + torch.arange(SEQ).view(SEQ, 1)
    ids = (pos * 31 + pos.div(7, rounding_mode="floor")) % VOCAB
    nxt = pos + 1
    targets = (nxt * 31 + nxt.div(7, rounding_mode="floor")) % VOCAB
    return ids, targets


def bench(steps, reps=7):
    torch.manual_seed(1)
    model = CharLSTM()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    ids, targets = batch()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(ids).view(-1, VOCAB), targets.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    return median_ms(step, 2, steps, reps)


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if threads > 0:
        torch.set_num_threads(threads)
    steps = max(1, int(5 * scale))
    print(f"case lstm median_ms {bench(steps):.4f} steps {steps}", flush=True)


if __name__ == "__main__":
    main()
