"""PyTorch's side of bench_eager: the same chain of y = y * c on a
one-element tensor, timed the same way (medians of 7), in this process and,
for the peak memory of the 100k chain, in a child."""
import resource
import statistics
import subprocess
import sys
import time

import torch


def chain(n):
    x = torch.ones(1, requires_grad=True)
    c = torch.full((1,), 1.0001)
    y = x
    t0 = time.perf_counter()
    for _ in range(n):
        y = y * c
    t1 = time.perf_counter()
    y.backward()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main():
    torch.set_num_threads(1)
    if len(sys.argv) > 1 and sys.argv[1] == "peak":
        chain(100000)
        print(f"case chain100k_peak_mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
        return
    chain(1000)
    runs = [chain(10000) for _ in range(7)]
    print(f"case chain10k_forward_us_per_op {statistics.median(r[0] for r in runs) / 10000 * 1e6:.4f}")
    print(f"case chain10k_backward_us_per_node {statistics.median(r[1] for r in runs) / 10000 * 1e6:.4f}")
    runs = [sum(chain(100000)) for _ in range(7)]
    print(f"case chain100k_total_ms {statistics.median(runs) * 1e3:.4f}")
    sys.stdout.flush()
    subprocess.run([sys.executable, __file__, "peak"], check=True)


if __name__ == "__main__":
    main()
