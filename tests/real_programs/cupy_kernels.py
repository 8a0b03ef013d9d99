"""CuPy: its own static cudart in the extension modules, kernels compiled at run time and
loaded with cuModuleLoadData. Command for `harness ... -- python3 tests/real_programs/cupy_kernels.py`."""
import cupy as cp

a = cp.arange(1 << 20, dtype=cp.float32)
b = cp.sqrt(a) * 2 + 1
s = float(b.sum())
add = cp.RawKernel(r'''extern "C" __global__ void add1(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1.0f; }''', "add1")
add(((1 << 20) // 256,), (256,), (b, cp.int32(1 << 20)))
cp.cuda.runtime.deviceSynchronize()
print(f"sum {s:.1f}, first {float(b[0]):.1f}")
