"""The PyTorch side of bench_ddp: DistributedDataParallel (gloo, on
loopback) over P processes of one thread each, the same models and step
(forward, backward with its bucketed all-reduce, SGD update) at a global
batch of 64 (64/P per process), timed as bench_ddp times (median of 7,
every rank starting each timing together). Rank 0 prints lines in
bench_ddp's format (comm_ms and overlap_ms are not measured here: 0).

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
from bench_torch import MLP, LeNet  # noqa: E402

BATCH = 64
REPS = 7


def run(rank, size, scale, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    batch = BATCH // size
    x = (torch.arange(batch * 784, dtype=torch.float32).mul(7919).add(rank * 31).remainder(256) / 255).view(batch, 784)
    y = (torch.arange(batch) + rank) % 10
    for name, cls, steps in (("mlp_eager", MLP, int(60 * scale) + 1), ("lenet_eager", LeNet, int(8 * scale) + 1)):
        torch.manual_seed(1)
        model = DDP(cls())
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

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
            print(f"case {name} np {size} ms {ms:.4f} samples_per_s {BATCH / (ms * 1e-3):.0f} comm_ms 0 overlap_ms 0",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = int(sys.argv[1])
    scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    port = 29500 + os.getpid() % 1000
    mp.spawn(run, args=(size, scale, port), nprocs=size, join=True)
