"""PyTorch with Python multiprocessing (spawn): two child interpreters each run CUDA work,
the parent too. Tracers must follow processes they did not start. Command for
`harness ... -- python3 tests/real_programs/torch_spawn.py`."""
import torch
import torch.multiprocessing as mp


def work(rank, out):
    x = torch.full((1 << 16,), float(rank + 1), device="cuda")
    for _ in range(10):
        x = x * 2 + 1
    out.put((rank, float(x.sum())))


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=work, args=(r, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(q.get() for _ in procs)
    for p in procs:
        p.join()
        assert p.exitcode == 0, f"child exited {p.exitcode}"
    work(2, q)
    results.append(q.get())
    print("spawn ok", results)
