// multiproc: a parent that forks worker processes before touching CUDA (as data-loader
// and multiprocessing pools do), each worker doing CUDA work of its own, and one child
// that execs another workload (vecadd). Every process writes its own ledger
// (ledger.jsonl, ledger.jsonl.<pid>); the harness matches per process.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "workloads/workload_main.h"

extern "C" __global__ void multiproc_fill(float* p, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

namespace {

// One process's CUDA work: fill a buffer `iters` times, read it back, check it.
int work(int argc, char** argv, int n, int iters, int block, float value) {
  workload::open_session("multiproc", argc, argv);
  const size_t bytes = size_t(n) * sizeof(float);
  std::vector<float> host(n);
  float* d;
  MUST(rt::Malloc(reinterpret_cast<void**>(&d), bytes));
  const int grid = (n + block - 1) / block;
  for (int i = 0; i < iters; ++i) rt::Launch("multiproc_fill", multiproc_fill, grid, block, 0, nullptr, d, value, n);
  MUST(rt::DeviceSynchronize());
  MUST(rt::Memcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost));
  MUST(rt::Free(d));
  bool ok = host[0] == value && host[n - 1] == value;
  if (!ok) std::fprintf(stderr, "multiproc: pid %d: wrong result\n", int(getpid()));
  ledger::intend("cudaMalloc", 1);
  ledger::intend("cudaLaunchKernel", iters);
  ledger::intend("cudaDeviceSynchronize", 1);
  ledger::intend("cudaMemcpy", 1);
  ledger::intend("cudaFree", 1);
  ledger::info("role", value == 0.0f ? "parent" : "worker");
  return workload::close_session(ok);
}

}  // namespace

int main(int argc, char** argv) {
  workload::Flags flags("multiproc", "forks workers before CUDA init, each doing CUDA work, and one child that execs "
                                     "vecadd; every process checks its result and writes its own ledger.",
                        {{"workers", {"forked worker processes", 2}},
                         {"n", {"elements per buffer", 1 << 16}},
                         {"iters", {"kernel launches per process", 10}},
                         {"block", {"threads per block", 256}},
                         {"host_path", {workload::kHostPathHelp, 1}}});
  flags.parse(argc, argv);
  const int n = int(flags["n"]), iters = int(flags["iters"]), block = int(flags["block"]);
  std::fflush(nullptr);

  std::vector<pid_t> children;
  for (long long w = 0; w < flags["workers"]; ++w) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("multiproc: fork");
      return workload::kCudaFailed;
    }
    if (pid == 0) std::exit(work(argc, argv, n, iters, block, float(w + 1)));
    children.push_back(pid);
  }
  // The child that runs another workload in its place, with its own ledger.
  const std::string vecadd =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / ("vecadd." CUDATRACE_CUDART)).string();
  const std::string iters_flag = "--iters=" + std::to_string(iters), n_flag = "--n=" + std::to_string(n),
                    host_flag = "--host_path=" + std::to_string(flags["host_path"]);
  pid_t exec_child = fork();
  if (exec_child == 0) {
    execl(vecadd.c_str(), vecadd.c_str(), iters_flag.c_str(), n_flag.c_str(), host_flag.c_str(), (char*)nullptr);
    std::fprintf(stderr, "multiproc: cannot exec %s\n", vecadd.c_str());
    _exit(127);
  }
  if (exec_child > 0) children.push_back(exec_child);

  // The parent waits for its children first: with no usable GPU its own work ends the
  // process early (the host-side path), and a child must never be left behind.
  int status = workload::kOk;
  for (pid_t c : children) {
    int ws = 0;
    if (waitpid(c, &ws, 0) != c || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
      std::fprintf(stderr, "multiproc: child %d failed (wait status %d)\n", int(c), ws);
      if (status == workload::kOk) status = WIFEXITED(ws) ? WEXITSTATUS(ws) : workload::kCudaFailed;
    }
  }
  const int own = work(argc, argv, n, iters, block, 0.0f);
  if (status == workload::kOk) status = own;
  return status;
}
