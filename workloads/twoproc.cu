// twoproc: one process per GPU, as data-parallel training launches its ranks: a launcher
// that makes no CUDA call forks two ranks before CUDA starts; rank r works on device r,
// hands the other rank a CUDA IPC handle of its buffer through a pipe, opens the other's,
// and adds the two on its own GPU (a peer read of memory another process owns). Each rank
// writes its own ledger, named "rank r", with the device of every call.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void twoproc_fill(float* p, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] + value;
}

extern "C" __global__ void twoproc_add(float* out, const float* mine, const float* theirs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = mine[i] + theirs[i];
}

namespace {

// All of `n` bytes through a pipe, or false: the other rank is gone (its end closed).
bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w, n -= size_t(w);
  }
  return true;
}

bool receive_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= size_t(r);
  }
  return true;
}

// Rank `rank` on device `rank`: `out` goes to the other rank, `in` comes from it.
int rank_main(int argc, char** argv, int rank, int out, int in, int n, int iters, int block) {
  workload::open_session("twoproc", argc, argv);
  const std::string name = "rank " + std::to_string(rank);
  ledger::info("process", name);
  const auto fail = [&](const char* what) {
    std::fprintf(stderr, "twoproc: %s: %s\n", name.c_str(), what);
    ledger::finish();
    return workload::kCudaFailed;
  };
  int count = 0;
  MUST(rt::GetDeviceCount(&count));
  if (count < 2) return fail("needs two GPUs");
  MUST(rt::SetDevice(rank));
  char id[32] = {};
  MUST(rt::DeviceGetPCIBusId(id, sizeof id, rank));
  ledger::device_identity(rank, id);
  // Reading the other rank's buffer is a peer access from this GPU to the other's.
  int can = 0;
  MUST(rt::DeviceCanAccessPeer(&can, rank, 1 - rank));
  if (!can) return fail("this GPU cannot reach the other as a peer: CUDA IPC between them needs peer access");

  const size_t bytes = size_t(n) * sizeof(float);
  float *mine, *sum;
  MUST(rt::Malloc(reinterpret_cast<void**>(&mine), bytes));
  MUST(rt::Malloc(reinterpret_cast<void**>(&sum), bytes));
  MUST(rt::Memset(mine, 0, bytes));
  const int grid = (n + block - 1) / block;
  const float value = float(rank + 1);
  for (int i = 0; i < iters; ++i) rt::Launch("twoproc_fill", twoproc_fill, grid, block, 0, nullptr, mine, value, n);
  MUST(rt::DeviceSynchronize());

  cudaIpcMemHandle_t handle, other;
  MUST(rt::IpcGetMemHandle(&handle, mine));
  if (!send_all(out, &handle, sizeof handle) || !receive_all(in, &other, sizeof other))
    return fail("the other rank went away before the handles were exchanged");
  void* theirs = nullptr;
  MUST(rt::IpcOpenMemHandle(&theirs, other));
  rt::Launch("twoproc_add", twoproc_add, grid, block, 0, nullptr, sum, mine, static_cast<const float*>(theirs), n);
  MUST(rt::DeviceSynchronize());
  std::vector<float> host(n);
  MUST(rt::Memcpy(host.data(), sum, bytes, cudaMemcpyDeviceToHost));
  MUST(rt::IpcCloseMemHandle(theirs));
  // The other rank's buffer stays until it has read ours: each says when it is done.
  const char done = 'd';
  char theirs_done = 0;
  if (!send_all(out, &done, 1) || !receive_all(in, &theirs_done, 1))
    return fail("the other rank went away before it had read this rank's buffer");
  MUST(rt::Free(mine));
  MUST(rt::Free(sum));

  const float want = float(iters) * (1.0f + 2.0f);  // rank 0 fills with 1s, rank 1 with 2s
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = host[i] == want;
  if (!ok) std::fprintf(stderr, "twoproc: %s: wrong result\n", name.c_str());
  ledger::intend("cudaGetDeviceCount", 1);  // the second ask, besides open_session's
  ledger::intend("cudaSetDevice", 1);
  ledger::intend("cudaDeviceGetPCIBusId", 1);
  ledger::intend("cudaDeviceCanAccessPeer", 1);
  ledger::intend("cudaMalloc", 2);
  ledger::intend("cudaMemset", 1);
  ledger::intend("cudaLaunchKernel", iters + 1);
  ledger::intend("cudaDeviceSynchronize", 2);
  ledger::intend("cudaIpcGetMemHandle", 1);
  ledger::intend("cudaIpcOpenMemHandle", 1);
  ledger::intend("cudaMemcpy", 1);
  ledger::intend("cudaIpcCloseMemHandle", 1);
  ledger::intend("cudaFree", 2);
  ledger::info("rank", rank);
  return workload::close_session(ok);
}

}  // namespace

int main(int argc, char** argv) {
  workload::Flags flags("twoproc", "One process per GPU: two ranks forked before CUDA starts, each on its own device, "
                                   "exchanging CUDA IPC handles through pipes and adding the other's buffer to its own.",
                        {{"n", {"elements per buffer", 1 << 16}},
                         {"iters", {"fill kernels per rank", 10}},
                         {"block", {"threads per block", 256}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  // to_rank[r]: what rank r reads. Each rank keeps its own read end and the other's write
  // end, so that a rank that dies closes the pipe and the other reads the end of it.
  int to_rank[2][2];
  if (pipe(to_rank[0]) != 0 || pipe(to_rank[1]) != 0) {
    std::perror("twoproc: pipe");
    return workload::kCudaFailed;
  }
  std::fflush(nullptr);
  pid_t ranks[2] = {-1, -1};
  for (int r = 0; r < 2; ++r) {
    ranks[r] = fork();
    if (ranks[r] < 0) {
      std::perror("twoproc: fork");
      break;
    }
    if (ranks[r] == 0) {
      const int in = to_rank[r][0], out = to_rank[1 - r][1];
      close(to_rank[r][1]);
      close(to_rank[1 - r][0]);
      std::exit(rank_main(argc, argv, r, out, in, n, iters, block));
    }
  }
  for (auto& p : to_rank) close(p[0]), close(p[1]);
  int status = workload::kOk;
  for (pid_t r : ranks) {
    if (r < 0) {
      status = workload::kCudaFailed;
      continue;
    }
    int ws = 0;
    if (waitpid(r, &ws, 0) != r || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
      std::fprintf(stderr, "twoproc: rank process %d failed (wait status %d)\n", int(r), ws);
      if (status == workload::kOk) status = WIFEXITED(ws) ? WEXITSTATUS(ws) : workload::kCudaFailed;
    }
  }
  return status;
}
