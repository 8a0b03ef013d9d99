"""Triton: a kernel compiled at run time and launched by Triton's own C launcher, which
dlopens libcuda and calls cuModuleLoadData, cuModuleGetFunction, cuLaunchKernelEx and the
context queries itself (the JIT-compiler pattern). Tensors come from PyTorch.
Command for `harness ... -- python3 tests/real_programs/triton_kernel.py`."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


n = 1 << 20
x = torch.rand(n, device="cuda")
y = torch.rand(n, device="cuda")
out = torch.empty_like(x)
for _ in range(5):
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
torch.cuda.synchronize()
assert torch.allclose(out, x + y)
print("triton add ok")
