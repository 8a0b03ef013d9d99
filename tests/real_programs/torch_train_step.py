"""A few training steps of a small PyTorch model on the GPU: what a framework does (cudart
dlopen'd from the wheel, cuBLAS with its own static cudart, many kernels). Used as the
command of `harness ... -- python3 tests/real_programs/torch_train_step.py`."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(128, 256, device="cuda")
y = torch.randint(0, 10, (128,), device="cuda")
for step in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"loss after 5 steps: {loss.item():.4f}")
