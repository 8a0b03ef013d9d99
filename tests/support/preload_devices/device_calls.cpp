// Runs under the preload shim with fake_libcuda and fake_cudart (no GPU): runs of calls on
// one context, with context changes between them made the ways programs make them. Each
// phase's calls carry their phase in the event argument (PHASE << 16 | i); after each
// phase the program prints "PHASE asked N": how many times cuCtxGetCurrent was asked
// during it. The test (tests/unit/preload_test.cpp) reads the records' devices back.
//   0  a driver call with no context current (it fails): no device
//   1  runtime, a thread's first calls: cudart makes device 0's primary context current
//   2  cudaSetDevice(1), then runtime calls
//   3  cuDevicePrimaryCtxRetain + cuCtxSetCurrent (device 0, then 2), then driver calls
//   4  runtime calls again: cudart uses the context current (device 2)
//   5  another thread, runtime calls: its own first call, device 0 again
//   6  the main thread, on device 2 still
//   7  recording paused (cudatrace_pause), cuCtxSetCurrent(device 3), resumed: driver calls
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern "C" {
int cudaSetDevice(int);
int cudaEventRecord(void*, void*);
int cuEventRecord(void*, void*);
int cuDevicePrimaryCtxRetain(void**, int);
int cuCtxSetCurrent(void*);
long fake_get_current_calls();
}

namespace {

constexpr int kCalls = 50;

void* event(int phase, int i) { return reinterpret_cast<void*>(uintptr_t(phase) << 16 | uintptr_t(i)); }

void runtime_calls(int phase) {
  for (int i = 0; i < kCalls; ++i)
    if (cudaEventRecord(event(phase, i), nullptr) != 0) std::exit(10 + phase);
}

void driver_calls(int phase) {
  for (int i = 0; i < kCalls; ++i)
    if (cuEventRecord(event(phase, i), nullptr) != 0) std::exit(10 + phase);
}

long g_before = 0;
void report(int phase) {
  const long now = fake_get_current_calls();
  std::printf("%d asked %ld\n", phase, now - g_before);
  g_before = now;
}

}  // namespace

int main() {
  if (cuEventRecord(event(0, 0), nullptr) == 0) return 1;
  report(0);
  runtime_calls(1);
  report(1);
  if (cudaSetDevice(1) != 0) return 2;
  runtime_calls(2);
  report(2);
  // Twice: a forwarder's first call resolves it (a path of its own), the second runs as
  // every later one does.
  void* context = nullptr;
  if (cuDevicePrimaryCtxRetain(&context, 0) != 0 || cuCtxSetCurrent(context) != 0) return 3;
  if (cuDevicePrimaryCtxRetain(&context, 2) != 0 || cuCtxSetCurrent(context) != 0) return 3;
  driver_calls(3);
  report(3);
  runtime_calls(4);
  report(4);
  std::thread([] { runtime_calls(5); }).join();
  report(5);
  runtime_calls(6);
  report(6);
  // The shim's own export; absent when the program runs without it.
  auto pause = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "cudatrace_pause"));
  if (pause) pause(1);
  if (cuDevicePrimaryCtxRetain(&context, 3) != 0 || cuCtxSetCurrent(context) != 0) return 4;
  if (pause) pause(0);
  driver_calls(7);
  report(7);
  std::printf("calls %d\n", kCalls);
  return 0;
}
