"""PyTorch DistributedDataParallel, one process per GPU (mp.spawn, NCCL): a few training steps
of a small model on two ranks, gradients all-reduced across the GPUs, then a check that both
ranks hold the same weights. The shape of data-parallel training: a launcher that makes no
CUDA call of its own, ranks started by Python's multiprocessing (spawn), NCCL kernels on two
GPUs waiting on each other. Needs two GPUs: with fewer it says so and exits 0. Command for
`harness ... -- python3 tests/real_programs/torch_ddp_step.py`."""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

WORLD = 2
STEPS = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD)
    torch.manual_seed(0)  # the same initial weights on both ranks, as DDP expects
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda(rank)
    ddp = DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    data = torch.Generator(device=f"cuda:{rank}").manual_seed(1000 + rank)  # each rank its own batch
    for _ in range(STEPS):
        x = torch.randn(64, 256, device=f"cuda:{rank}", generator=data)
        y = torch.randint(0, 10, (64,), device=f"cuda:{rank}", generator=data)
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize(rank)
    # The all-reduced gradients keep the ranks in step: every rank ends with the same weights.
    w = ddp.module[0].weight.detach().clone()
    gathered = [torch.empty_like(w) for _ in range(WORLD)]
    dist.all_gather(gathered, w)
    assert all(torch.equal(g, w) for g in gathered), f"rank {rank}: the ranks' weights differ"
    dist.destroy_process_group()
    print(f"rank {rank} on cuda:{rank}: {STEPS} DDP steps, loss {float(loss):.4f}", flush=True)


if __name__ == "__main__":
    n = torch.cuda.device_count()
    if n < WORLD:
        print(f"skipped: needs {WORLD} GPUs, this host has {n}")
        sys.exit(0)
    mp.spawn(rank_main, args=(free_port(),), nprocs=WORLD, join=True)
    print(f"ddp ok: {WORLD} ranks x {STEPS} steps")
