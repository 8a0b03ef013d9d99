// A driver-API program that does CUDA work, then forks a child that starts itself again
// (exec: a child forked after CUDA was initialised cannot use it) and does its own: the
// parent launches 50 kernels of 256 blocks, the child 17. Per-process
// verdicts must pair the parent with the parent and the child with the child, in every
// method's run and in the reference's (the pairing once read "17 of 50" on the parent).
// Exits 77 with the reason where there is no GPU.
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

const char kPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry empty_kernel() { ret; }
)";

// Initialises CUDA in this process and launches `n` kernels of 256 blocks on device 0.
int launch(int n, const char* who) {
  CUresult r = cuInit(0);
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
  if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
  if (r == CUDA_SUCCESS) r = cuModuleLoadData(&mod, kPtx);
  if (r == CUDA_SUCCESS) r = cuModuleGetFunction(&fn, mod, "empty_kernel");
  for (int i = 0; i < n && r == CUDA_SUCCESS; ++i) r = cuLaunchKernel(fn, 256, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "%s: CUDA failed: %s\n", who, name ? name : "?");
    return r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_NOT_INITIALIZED ? 77 : 1;
  }
  std::printf("%s: launched %d kernels of 256 blocks\n", who, n);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return launch(17, "child");
  if (const int rc = launch(50, "parent"); rc != 0) return rc;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    execl("/proc/self/exe", argv[0], "child", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
