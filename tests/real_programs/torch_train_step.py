"""Training steps of a small PyTorch model on the GPU: what a framework does (cudart
dlopen'd from the wheel, cuBLAS with its own static cudart, many kernels). Command for
`harness ... -- python3 tests/real_programs/torch_train_step.py [STEPS | SECONDSs]` (default 5
steps; "300s": steps for 300 seconds after start-up, a run at volume).
Start-up ends once the first step has run (cuBLAS and the kernels loaded)."""
import itertools
import time

from cudatrace_program import cannot_run, need, startup_done, step_done, steps_or_seconds_argument

steps, seconds = steps_or_seconds_argument(5)
torch = need("torch_train_step", "torch")
if not torch.cuda.is_available():
    cannot_run("torch_train_step", "PyTorch sees no CUDA device")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(128, 256, device="cuda")
y = torch.randint(0, 10, (128,), device="cuda")
deadline = None
for step in itertools.count():
    if step == steps or (deadline is not None and step % 100 == 0 and time.monotonic() >= deadline):
        break
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if step == 0:
        torch.cuda.synchronize()
        startup_done("first training step done")
        deadline = time.monotonic() + seconds if seconds else None
    step_done(torch.cuda.synchronize)
torch.cuda.synchronize()
print(f"loss after {step} steps: {loss.item():.4f}")
