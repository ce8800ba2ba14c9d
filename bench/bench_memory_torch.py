"""The PyTorch side of bench_memory: the same models and step (forward,
backward, SGD update), measured the same way: how far the resident set rose
above what it was once the model and the batch existed, at the peak of the
second and third steps (VmHWM, reset through /proc/self/clear_refs after the
first step), and the median time of a step. One case per process:

    python3 bench/bench_memory_torch.py CASE
    case mlp1024 rss_kb 12000 torch_kb 0 ms 10.1 act_kb 0
"""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_torch import LeNet  # noqa: E402
from bench_lstm_torch import CharLSTM, VOCAB, SEQ  # noqa: E402


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def mlp(widths):
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "mlp1024"
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if which == "lstm":
        model, batch = CharLSTM(), 32
        i = torch.arange(SEQ * batch).view(SEQ, batch)
        x = (i * 31 + i.div(7, rounding_mode="floor")) % VOCAB
        y = ((i + 1) * 31 + (i + 1).div(7, rounding_mode="floor")) % VOCAB
        loss_of = lambda: F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))  # noqa: E731
    else:
        model, batch = {"mlp1024": (mlp([784, 1024, 1024, 10]), 128),
                        "mlp12": (mlp([784] * 13 + [10]), 256),
                        "lenet": (LeNet(), 64)}[which]
        x = (torch.arange(batch * 784, dtype=torch.float32).mul(7919).remainder(256) / 255).view(batch, 784)
        y = torch.arange(batch) % 10
        loss_of = lambda: F.cross_entropy(model(x), y)  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad(set_to_none=False)
        loss_of().backward()
        opt.step()

    rss0 = status_kb("VmRSS")
    step()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    for _ in range(2):
        step()
    peak = status_kb("VmHWM") - rss0
    steps = 3 if which in ("lenet", "lstm") else 5 if which == "mlp12" else 10
    step()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    print(f"case {which} rss_kb {peak} torch_kb 0 ms {statistics.median(times):.3f} act_kb 0")


if __name__ == "__main__":
    main()
