// libprivatert: a library that carries its own CUDA runtime, linked statically inside it,
// as cuBLAS and cuDNN do. Its cudart symbols are hidden (--exclude-libs) and its calls bind
// inside the library, so they never reach the program's libcudart.so: a tracer that hooks
// libcudart.so exports cannot see them. Its calls are recorded in the program's ledger
// (ledger::record resolves to the executable's) with args.by = "libprivatert".
#include <vector>

#include "ledger/recorded_cuda.h"

extern "C" __global__ void privatert_lib_scale(float* p, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= factor;
}

// Doubles `n` ones `iters` times on the GPU with the library's own runtime; returns
// whether the result is right, or -1 if a call failed.
extern "C" __attribute__((visibility("default"))) int privatert_scale(int n, int iters, int block) {
  const size_t bytes = size_t(n) * sizeof(float);
  std::vector<float> host(n, 1.0f);
  float* d = nullptr;
  if (rt::Malloc(reinterpret_cast<void**>(&d), bytes) != cudaSuccess) return -1;
  if (rt::Memcpy(d, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) return -1;
  const int grid = (n + block - 1) / block;
  for (int i = 0; i < iters; ++i) rt::Launch("privatert_lib_scale", privatert_lib_scale, grid, block, 0, nullptr, d, 2.0f, n);
  if (rt::DeviceSynchronize() != cudaSuccess) return -1;
  if (rt::Memcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  if (rt::Free(d) != cudaSuccess) return -1;
  const float want = float(1u << iters);
  for (int i = 0; i < n; ++i)
    if (host[i] != want) return 0;
  return 1;
}
