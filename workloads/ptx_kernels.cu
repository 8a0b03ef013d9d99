// Kernels that the driverapi and dlopen workloads load at run time from PTX text, as JIT
// compilers (Triton, NVRTC users) and frameworks do: compiled to PTX at build time and
// embedded in those programs as a string (ptx_kernels.h), never registered with cudart.
extern "C" __global__ void ptx_fill(float* p, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

extern "C" __global__ void ptx_axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
