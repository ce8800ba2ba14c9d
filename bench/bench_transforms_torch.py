"""PyTorch's side of bench_transforms: torch.autograd.functional ("case"
lines) and functorch ("fcase" lines), the same functions and inputs."""
import statistics
import time

import torch
from torch.autograd.functional import hessian, hvp, jvp


def timed(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    import sys
    if len(sys.argv) > 1:
        torch.set_num_threads(int(sys.argv[1]))
    g = torch.Generator().manual_seed(1)
    u = lambda *s, scale=1.0: (torch.rand(*s, generator=g) * 2 - 1) * scale
    x, y, w2 = u(64, 784), u(64, 10), u(256, 10, scale=0.1)
    w1, t = u(784, 256, scale=0.05), u(784, 256)
    loss = lambda w: ((torch.tanh(x @ w) @ w2 - y) ** 2).mean()
    print(f"case jvp_mlp_ms {timed(lambda: jvp(loss, w1, t), 7):.4f}", flush=True)
    print(f"case hvp_mlp_ms {timed(lambda: hvp(loss, w1, t), 7):.4f}", flush=True)
    try:
        import functorch as ft
    except ImportError:
        ft = None
    if ft:
        print(f"fcase jvp_mlp_ms {timed(lambda: ft.jvp(loss, (w1,), (t,)), 7):.4f}", flush=True)
        print(f"fcase hvp_mlp_ms {timed(lambda: ft.jvp(ft.grad(loss), (w1,), (t,)), 7):.4f}", flush=True)
    xs, ys, theta = u(8, 16), u(8, 10), u(874, scale=0.2)

    def small(th):
        w1_, b1, w2_, b2 = torch.split(th, [512, 32, 320, 10])
        h = torch.tanh(xs @ w1_.view(16, 32) + b1)
        return ((h @ w2_.view(32, 10) + b2 - ys) ** 2).mean()

    print(f"case hessian_mlp_ms {timed(lambda: hessian(small, theta), 3):.4f}", flush=True)
    if ft:
        print(f"fcase hessian_mlp_ms {timed(lambda: ft.hessian(small)(theta), 3):.4f}", flush=True)
    if not ft:
        return

    # Jacobians of a 64-in, 64-out tanh MLP (64-128-64) at one input.
    ja, jb = u(64, 128, scale=0.125), u(128, scale=0.1)
    jc, jd = u(128, 64, scale=0.09), u(64, scale=0.1)
    jx = u(64)
    tanh_mlp = lambda v: torch.tanh(v @ ja + jb) @ jc + jd
    print(f"fcase jacrev_tanh_ms {timed(lambda: ft.jacrev(tanh_mlp)(jx), 7):.4f}", flush=True)
    print(f"fcase jacfwd_tanh_ms {timed(lambda: ft.jacfwd(tanh_mlp)(jx), 7):.4f}", flush=True)

    # Per-example gradients of the 784-256-10 ReLU MLP's cross-entropy at
    # batch 64: vmap of grad over the examples, the parameters shared.
    params = (u(784, 256, scale=0.05), u(256, scale=0.05), u(256, 10, scale=0.1), u(10, scale=0.1))
    px = u(64, 784)
    py = torch.randint(0, 10, (64,), generator=g)

    def example_loss(p, xi, yi):
        h = torch.relu(xi @ p[0] + p[1])
        return torch.nn.functional.cross_entropy((h @ p[2] + p[3]).unsqueeze(0), yi.unsqueeze(0))

    per_example = ft.vmap(ft.grad(example_loss), in_dims=(None, 0, 0))
    print(f"fcase per_example_grads_ms {timed(lambda: per_example(params, px, py), 7):.4f}", flush=True)


if __name__ == "__main__":
    main()
