// memheavy: the memory side of CUDA. At least --mib MiB of device memory at once, pinned
// and pageable copies both ways, device-to-device, async copies, memset, and many small
// allocations and frees.
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void touch_kernel(unsigned char* p, size_t n, unsigned char v) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] ^= v;
}

int main(int argc, char** argv) {
  workload::Flags flags("memheavy", "Large, pinned, pageable, async and many small allocations and copies.",
                        {{"mib", {"device memory held at once, MiB (4 buffers)", 1024}},
                         {"copy_mib", {"bytes per host<->device copy, MiB", 64}},
                         {"small", {"small allocations (4 KiB .. 64 KiB), each freed", 1000}}});
  flags.parse(argc, argv);
  const size_t mib = size_t(1) << 20;
  const size_t big = size_t(flags["mib"]) * mib / 4, copy = size_t(flags["copy_mib"]) * mib;
  const int small = int(flags["small"]);
  if (copy > big || copy == 0) {
    std::fprintf(stderr, "memheavy: --copy_mib must be between 1 and --mib/4 (see --help)\n");
    return workload::kUsage;
  }
  workload::open_session("memheavy", argc, argv);

  unsigned char* dev[4];
  for (auto& d : dev) MUST(rt::Malloc(reinterpret_cast<void**>(&d), big));
  unsigned char *pinned, *pinned_back;
  MUST(rt::MallocHost(reinterpret_cast<void**>(&pinned), copy));
  MUST(rt::MallocHost(reinterpret_cast<void**>(&pinned_back), copy));
  std::vector<unsigned char> pageable(copy), pageable_back(copy);
  for (size_t i = 0; i < copy; ++i) pinned[i] = pageable[i] = static_cast<unsigned char>(i * 131 + 7);

  cudaStream_t s;
  MUST(rt::StreamCreate(&s));
  // pageable and pinned, both directions, plus device-to-device
  MUST(rt::Memcpy(dev[0], pageable.data(), copy, cudaMemcpyHostToDevice));
  MUST(rt::Memcpy(dev[1], pinned, copy, cudaMemcpyHostToDevice));
  MUST(rt::Memcpy(dev[2], dev[0], copy, cudaMemcpyDeviceToDevice));
  MUST(rt::Memset(dev[3], 0xAB, big));
  MUST(rt::MemsetAsync(dev[3], 0x5A, copy, s));
  MUST(rt::MemcpyAsync(dev[3], pinned, copy, cudaMemcpyHostToDevice, s));
  const int block = 256;
  const unsigned grid = unsigned((copy + block - 1) / block);
  rt::Launch("touch_kernel", touch_kernel, grid, block, 0, s, dev[3], copy, static_cast<unsigned char>(0xFF));
  rt::Launch("touch_kernel", touch_kernel, grid, block, 0, s, dev[3], copy, static_cast<unsigned char>(0xFF));
  MUST(rt::GetLastError());
  MUST(rt::MemcpyAsync(pinned_back, dev[3], copy, cudaMemcpyDeviceToHost, s));
  MUST(rt::StreamSynchronize(s));
  MUST(rt::Memcpy(pageable_back.data(), dev[2], copy, cudaMemcpyDeviceToHost));

  bool ok = true;
  for (size_t i = 0; i < copy && ok; ++i) ok = pinned_back[i] == pinned[i] && pageable_back[i] == pageable[i];
  if (!ok) std::fprintf(stderr, "memheavy: wrong result\n");

  // Many small allocations, freed in reverse order (allocator churn).
  std::vector<void*> smalls(small);
  for (int i = 0; i < small; ++i) MUST(rt::Malloc(&smalls[i], size_t(4096) << (i % 5)));
  for (int i = small - 1; i >= 0; --i) MUST(rt::Free(smalls[i]));

  MUST(rt::StreamDestroy(s));
  MUST(rt::FreeHost(pinned));
  MUST(rt::FreeHost(pinned_back));
  for (auto& d : dev) MUST(rt::Free(d));

  ledger::intend("cudaMalloc", 4 + small);
  ledger::intend("cudaFree", 4 + small);
  ledger::intend("cudaMallocHost", 2);
  ledger::intend("cudaFreeHost", 2);
  ledger::intend("cudaStreamCreate", 1);
  ledger::intend("cudaStreamDestroy", 1);
  ledger::intend("cudaMemcpy", 4);
  ledger::intend("cudaMemcpyAsync", 2);
  ledger::intend("cudaMemset", 1);
  ledger::intend("cudaMemsetAsync", 1);
  ledger::intend("cudaLaunchKernel", 2);
  ledger::intend("cudaGetLastError", 1);
  ledger::intend("cudaStreamSynchronize", 1);
  ledger::info("device_bytes_held", int64_t(4 * big));
  return workload::close_session(ok);
}
