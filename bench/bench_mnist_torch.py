"""examples/mnist_mlp's training epoch in PyTorch, for bench/run.sh contention:
the same 784-256-10 MLP, Adam at 0.002, batch 64, one shuffled epoch of
MNIST's 60,000 training images (read from the idx files as nabla reads
them). Prints `case mnist_epoch median_ms MS`: the epoch's training loop,
not Python's start or the data's loading.

    python3 bench/bench_mnist_torch.py DATA_DIR [THREADS]   (THREADS 0: PyTorch's default)
"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data, name):
    for suffix in ("", ".gz"):
        p = os.path.join(data, "mnist", name + suffix)
        if os.path.exists(p):
            return p
    sys.exit(f"bench_mnist_torch: {name} not found under {data}/mnist")


def main():
    data = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if threads > 0:
        torch.set_num_threads(threads)
    x = torch.from_numpy(read_idx(find(data, "train-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255)
    y = torch.from_numpy(read_idx(find(data, "train-labels-idx1-ubyte")).astype(np.int64))
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    order = torch.randperm(x.shape[0])
    t0 = time.perf_counter()
    for i in range(0, x.shape[0], 64):
        idx = order[i:i + 64]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    print(f"case mnist_epoch median_ms {(time.perf_counter() - t0) * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    main()
