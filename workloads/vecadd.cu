// vecadd: allocate, copy in, launch repeatedly, copy out, free. The simplest complete
// CUDA program, and the one every method should see in full.
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void vecadd_kernel(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char** argv) {
  workload::Flags flags("vecadd", "c = a + b on the GPU, launched --iters times, then checked on the host.",
                        {{"n", {"elements per vector", 1 << 20}},
                         {"iters", {"kernel launches", 100}},
                         {"block", {"threads per block", 256}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  workload::open_session("vecadd", argc, argv);

  const size_t bytes = size_t(n) * sizeof(float);
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i % 1000);
    b[i] = float(2 * (i % 777));
  }
  float *da, *db, *dc;
  MUST(rt::Malloc(reinterpret_cast<void**>(&da), bytes));
  MUST(rt::Malloc(reinterpret_cast<void**>(&db), bytes));
  MUST(rt::Malloc(reinterpret_cast<void**>(&dc), bytes));
  MUST(rt::Memcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  MUST(rt::Memcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  const int grid = (n + block - 1) / block;
  for (int it = 0; it < iters; ++it) rt::Launch("vecadd_kernel", vecadd_kernel, grid, block, 0, nullptr, da, db, dc, n);
  MUST(rt::GetLastError());
  MUST(rt::DeviceSynchronize());
  MUST(rt::Memcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
  MUST(rt::Free(da));
  MUST(rt::Free(db));
  MUST(rt::Free(dc));

  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = c[i] == a[i] + b[i];
  if (!ok) std::fprintf(stderr, "vecadd: wrong result\n");

  ledger::intend("cudaMalloc", 3);
  ledger::intend("cudaMemcpy", 3);
  ledger::intend("cudaLaunchKernel", iters);
  ledger::intend("cudaGetLastError", 1);
  ledger::intend("cudaDeviceSynchronize", 1);
  ledger::intend("cudaFree", 3);
  ledger::info("grid", grid);
  ledger::info("block", block);
  return workload::close_session(ok);
}
