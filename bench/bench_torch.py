"""The PyTorch side of bench_train: the same models, the same step (forward,
backward, SGD update), the same timing (median of 7 timings, after warm-up).
Prints lines in bench_train's format."""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 20, 5)
        self.c2 = nn.Conv2d(20, 50, 5)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class MLP1024(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.fc3 = nn.Linear(1024, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class ConvBN(nn.Module):
    """bench_util.h's bench_convbn: 3x32x32 images fed flat."""

    def __init__(self):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.c2, self.n2 = nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.fc = nn.Linear(64 * 16 * 16, 10)

    def forward(self, x):
        x = x.view(-1, 3, 32, 32)
        x = F.relu(self.n1(self.c1(x)))
        x = F.max_pool2d(F.relu(self.n2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


def bench_case(model, batch, steps, reps=7, features=784):
    torch.manual_seed(1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = (torch.arange(batch * features, dtype=torch.float32).mul(7919).remainder(256) / 255).view(batch, features)
    y = torch.arange(batch) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return median_ms(step, 3, steps, reps)


def median_ms(step, warmup, steps, reps):
    """The median milliseconds per call over `reps` timings of `steps` calls
    of step(), after `warmup` calls (bench_util.h's bench_median_ms)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(times)


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if threads > 0:
        torch.set_num_threads(threads)
    cases = [("mlp_b1", MLP, 784, 1, 400), ("mlp_b16", MLP, 784, 16, 200), ("mlp_b64", MLP, 784, 64, 100),
             ("mlp_b256", MLP, 784, 256, 40), ("lenet_b64", LeNet, 784, 64, 10),
             ("mlp1024_b128", MLP1024, 784, 128, 20), ("convbn_b64", ConvBN, 3072, 64, 5)]
    for name, cls, features, batch, steps in cases:
        steps = max(1, int(steps * scale))
        ms = bench_case(cls(), batch, steps, features=features)
        print(f"case {name} median_ms {ms:.4f} steps {steps}", flush=True)


if __name__ == "__main__":
    main()
