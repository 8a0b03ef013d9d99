// twogpu: one process driving two GPUs, as a data-parallel step or a pipeline does inside
// one process: a stream and kernels on each device, peer access where the pair allows it,
// peer copies (cudaMemcpyPeerAsync) both ways, and each device's stream waiting on an event
// recorded on the other. Every ledger record says which device it was on, and each
// device's PCI bus id is asked for (and recorded), so that the harness can score each GPU
// on its own.
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void twogpu_double(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 2.0f + 1.0f;
}

extern "C" __global__ void twogpu_increment(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] + 1.0f;
}

int main(int argc, char** argv) {
  workload::Flags flags("twogpu", "Two GPUs from one process: kernels and a stream on each, peer access, peer copies "
                                  "both ways and cross-device event waits; the result is checked on the host.",
                        {{"n", {"elements per buffer", 1 << 16}},
                         {"iters", {"rounds, at most 16: a kernel on each device and two peer copies", 10}},
                         {"block", {"threads per block", 256}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  if (iters > 16) {
    std::fprintf(stderr, "twogpu: --iters at most 16 (the check needs exact floats)\n");
    return workload::kUsage;
  }
  workload::open_session("twogpu", argc, argv);
  int count = 0;
  MUST(rt::GetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "twogpu: needs two GPUs, this process sees %d\n", count);
    ledger::finish();
    return workload::kCudaFailed;
  }

  constexpr int kDevices = 2;
  for (int d = 0; d < kDevices; ++d) {
    char id[32] = {};
    MUST(rt::DeviceGetPCIBusId(id, sizeof id, d));
    ledger::device_identity(d, id);
  }
  int can[kDevices] = {0, 0};
  MUST(rt::DeviceCanAccessPeer(&can[0], 0, 1));
  MUST(rt::DeviceCanAccessPeer(&can[1], 1, 0));

  const size_t bytes = size_t(n) * sizeof(float);
  cudaStream_t stream[kDevices];
  cudaEvent_t done[kDevices];
  float* buf[kDevices];
  for (int d = 0; d < kDevices; ++d) {
    MUST(rt::SetDevice(d));
    if (can[d]) MUST(rt::DeviceEnablePeerAccess(1 - d));
    MUST(rt::StreamCreate(&stream[d]));
    MUST(rt::EventCreate(&done[d]));
    MUST(rt::Malloc(reinterpret_cast<void**>(&buf[d]), bytes));
  }

  std::vector<float> host(n), expect(n);
  for (int i = 0; i < n; ++i) expect[i] = host[i] = float(i % 16);
  MUST(rt::SetDevice(0));
  MUST(rt::Memcpy(buf[0], host.data(), bytes, cudaMemcpyHostToDevice));
  const int grid = (n + block - 1) / block;
  for (int it = 0; it < iters; ++it) {
    // Device 0 works, device 1 waits for it, takes the buffer over, works, and hands it back.
    MUST(rt::SetDevice(0));
    rt::Launch("twogpu_double", twogpu_double, grid, block, 0, stream[0], buf[0], n);
    MUST(rt::EventRecord(done[0], stream[0]));
    MUST(rt::SetDevice(1));
    MUST(rt::StreamWaitEvent(stream[1], done[0]));
    MUST(rt::MemcpyPeerAsync(buf[1], 1, buf[0], 0, bytes, stream[1]));
    rt::Launch("twogpu_increment", twogpu_increment, grid, block, 0, stream[1], buf[1], n);
    MUST(rt::EventRecord(done[1], stream[1]));
    MUST(rt::SetDevice(0));
    MUST(rt::StreamWaitEvent(stream[0], done[1]));
    MUST(rt::MemcpyPeerAsync(buf[0], 0, buf[1], 1, bytes, stream[0]));
    for (int i = 0; i < n; ++i) expect[i] = expect[i] * 2.0f + 2.0f;
  }
  MUST(rt::StreamSynchronize(stream[0]));
  MUST(rt::Memcpy(host.data(), buf[0], bytes, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = host[i] == expect[i];
  if (!ok) std::fprintf(stderr, "twogpu: wrong result\n");

  for (int d = 0; d < kDevices; ++d) {
    MUST(rt::SetDevice(d));
    MUST(rt::EventDestroy(done[d]));
    MUST(rt::StreamDestroy(stream[d]));
    MUST(rt::Free(buf[d]));
  }

  const int peers = can[0] + can[1];
  ledger::intend("cudaGetDeviceCount", 1);  // the second ask, besides open_session's
  ledger::intend("cudaDeviceGetPCIBusId", kDevices);
  ledger::intend("cudaDeviceCanAccessPeer", kDevices);
  ledger::intend("cudaDeviceEnablePeerAccess", peers);
  ledger::intend("cudaSetDevice", kDevices + 1 + 3 * iters + kDevices);
  ledger::intend("cudaStreamCreate", kDevices);
  ledger::intend("cudaEventCreate", kDevices);
  ledger::intend("cudaMalloc", kDevices);
  ledger::intend("cudaMemcpy", 2);
  ledger::intend("cudaLaunchKernel", 2 * iters);
  ledger::intend("cudaEventRecord", 2 * iters);
  ledger::intend("cudaStreamWaitEvent", 2 * iters);
  ledger::intend("cudaMemcpyPeerAsync", 2 * iters);
  ledger::intend("cudaStreamSynchronize", 1);
  ledger::intend("cudaEventDestroy", kDevices);
  ledger::intend("cudaStreamDestroy", kDevices);
  ledger::intend("cudaFree", kDevices);
  ledger::info("devices", kDevices);
  ledger::info("peer_access", peers);
  ledger::info("grid", grid);
  return workload::close_session(ok);
}
