"""CuPy: its own static cudart in the extension modules, kernels compiled at run time and
loaded with cuModuleLoadData. Command for
`harness ... -- python3 tests/real_programs/cupy_kernels.py [ITERATIONS]` (default 1): each
iteration runs the elementwise kernels, a reduction and a raw kernel. Start-up ends once
the first iteration has run (every kernel compiled and loaded)."""
from cudatrace_program import cannot_run, count_argument, need, startup_done, step_done

iterations = count_argument(1)
cp = need("cupy_kernels", "cupy")
try:
    devices = cp.cuda.runtime.getDeviceCount()
except Exception as e:
    cannot_run("cupy_kernels", f"CuPy sees no CUDA device ({type(e).__name__}: {e})")
if devices == 0:
    cannot_run("cupy_kernels", "CuPy sees no CUDA device")

add = cp.RawKernel(r'''extern "C" __global__ void add1(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1.0f; }''', "add1")
a = cp.arange(1 << 20, dtype=cp.float32)
for i in range(iterations):
    b = cp.sqrt(a) * 2 + 1
    s = float(b.sum())
    add(((1 << 20) // 256,), (256,), (b, cp.int32(1 << 20)))
    if i == 0:
        cp.cuda.runtime.deviceSynchronize()
        startup_done("first iteration done")
    step_done(cp.cuda.runtime.deviceSynchronize)
cp.cuda.runtime.deviceSynchronize()
print(f"{iterations} iteration(s): sum {s:.1f}, first {float(b[0]):.1f}")
