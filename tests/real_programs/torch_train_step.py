"""Training steps of a small PyTorch model on the GPU: what a framework does (cudart
dlopen'd from the wheel, cuBLAS with its own static cudart, many kernels). Command for
`harness ... -- python3 tests/real_programs/torch_train_step.py [STEPS]` (default 5).
Start-up ends once the first step has run (cuBLAS and the kernels loaded)."""
from cudatrace_program import cannot_run, count_argument, need, startup_done, step_done

steps = count_argument(5)
torch = need("torch_train_step", "torch")
if not torch.cuda.is_available():
    cannot_run("torch_train_step", "PyTorch sees no CUDA device")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(128, 256, device="cuda")
y = torch.randint(0, 10, (128,), device="cuda")
for step in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if step == 0:
        torch.cuda.synchronize()
        startup_done("first training step done")
    step_done(torch.cuda.synchronize)
torch.cuda.synchronize()
print(f"loss after {steps} steps: {loss.item():.4f}")
