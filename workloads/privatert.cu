// privatert: a program on the shared (or static) CUDA runtime that calls into a library
// with a private, statically linked cudart of its own (libprivatert.so, like cuBLAS). The
// ledger records both, each call with who made it (args.by for the library's).
#include <vector>

#include "workloads/workload_main.h"

extern "C" int privatert_scale(int n, int iters, int block);

extern "C" __global__ void privatert_main_fill(float* p, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

int main(int argc, char** argv) {
  workload::Flags flags("privatert", "the program's own CUDA calls, then a library with its own static cudart doing "
                                     "its calls (as cuBLAS does); both results checked.",
                        {{"n", {"elements", 1 << 16}},
                         {"iters", {"kernel launches by the program and by the library, each", 10}},
                         {"block", {"threads per block", 256}},
                         {"host_path", {workload::kHostPathHelp, 1}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  workload::open_session("privatert", argc, argv);

  const size_t bytes = size_t(n) * sizeof(float);
  std::vector<float> host(n);
  float* d;
  MUST(rt::Malloc(reinterpret_cast<void**>(&d), bytes));
  const int grid = (n + block - 1) / block;
  for (int i = 0; i < iters; ++i) rt::Launch("privatert_main_fill", privatert_main_fill, grid, block, 0, nullptr, d, float(i), n);
  MUST(rt::DeviceSynchronize());
  MUST(rt::Memcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost));
  MUST(rt::Free(d));
  bool ok = host[0] == float(iters - 1) && host[n - 1] == float(iters - 1);

  const int lib = privatert_scale(n, iters, block);
  if (lib < 0) {
    std::fprintf(stderr, "privatert: a call in libprivatert failed\n");
    ledger::finish();
    return workload::kCudaFailed;
  }
  ok = ok && lib == 1;
  if (!ok) std::fprintf(stderr, "privatert: wrong result (program %g, library %s)\n", host[0], lib == 1 ? "ok" : "wrong");

  // The program's calls and the library's, together.
  ledger::intend("cudaMalloc", 1 + 1);
  ledger::intend("cudaLaunchKernel", iters + iters);
  ledger::intend("cudaDeviceSynchronize", 1 + 1);
  ledger::intend("cudaMemcpy", 1 + 2);
  ledger::intend("cudaFree", 1 + 1);
  ledger::info("library_calls_by", "libprivatert");
  return workload::close_session(ok);
}
