"""The PyTorch side of bench_ddp: DistributedDataParallel (gloo, on
loopback) over P processes of one thread each, the same models and step
(forward, backward with its bucketed all-reduce, Adam update) at bench_ddp's
global batches (256 for the 784-512-512-10 MLP, 128 for LeNet; split over
the P processes), timed as bench_ddp times (median of 7,
every rank starting each timing together). Rank 0 prints lines in
bench_ddp's format (comm_ms, overlap_ms, hidden_pct and wait_ms are not
measured here: 0).

    python3 bench/bench_ddp_torch.py P [SCALE]
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch import LeNet  # noqa: E402

REPS = 7


class MLP512(torch.nn.Module):
    """784-512-512-10 with ReLUs, as bench_ddp's mlp512."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def run(rank, size, scale, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    for name, cls, global_batch, steps in (("mlp_eager", MLP512, 256, int(30 * scale) + 1),
                                           ("lenet_eager", LeNet, 128, int(6 * scale) + 1)):
        batch = global_batch // size
        x = (torch.arange(batch * 784, dtype=torch.float32).mul(7919).add(rank * 31).remainder(256) / 255).view(batch, 784)
        y = (torch.arange(batch) + rank) % 10
        torch.manual_seed(1)
        model = DDP(cls())
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        for _ in range(3):
            step()
        times = []
        for _ in range(REPS):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            times.append((time.perf_counter() - t0) * 1e3 / steps)
        ms = sorted(times)[REPS // 2]
        if rank == 0:
            print(f"case {name} np {size} ms {ms:.4f} samples_per_s {global_batch / (ms * 1e-3):.0f} comm_ms 0 "
                  "overlap_ms 0 hidden_pct 0 wait_ms 0", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = int(sys.argv[1])
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    port = 29500 + os.getpid() % 1000
    mp.spawn(run, args=(size, scale, port), nprocs=size, join=True)
