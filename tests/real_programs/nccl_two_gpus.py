"""NCCL all-reduce across every GPU of the host from one process (PyTorch's torch.cuda.nccl):
NCCL's kernels on the GPUs wait on each other, so a tracer that makes one launch wait for
another hangs it. Needs two GPUs: with fewer it says so and exits 0. Command for
`harness ... -- python3 tests/real_programs/nccl_two_gpus.py`."""
import sys

import torch
import torch.cuda.nccl as nccl

n = torch.cuda.device_count()
if n < 2:
    print(f"skipped: needs two GPUs, this host has {n}")
    sys.exit(0)
rounds = 20
tensors = [torch.full((1 << 20,), float(i + 1), device=f"cuda:{i}") for i in range(n)]
for _ in range(rounds):
    nccl.all_reduce(tensors)
for i in range(n):
    torch.cuda.synchronize(i)
expected = n * (n + 1) / 2 * n ** (rounds - 1)
got = [float(t[0]) for t in tensors]
assert all(g == expected for g in got), (got, expected)
print(f"nccl all-reduce over {n} GPUs x {rounds}: {expected:.0f} on every GPU")
