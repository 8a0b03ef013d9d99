// N cheap CUDA runtime calls back to back, as fast as the runtime answers them: the volume a
// training job makes in minutes, in seconds. Linked to the shared cudart, so that every
// host-side method can see each call; without a driver every call fails at once (and is
// still a call each method must see), on a GPU it succeeds.
//   call_loop N [THREADS]      prints "calls N" and what the first call returned
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: call_loop CALLS [THREADS]\n");
    return 2;
  }
  const long long calls = std::atoll(argv[1]);
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  if (calls <= 0 || threads <= 0 || threads > 256) {
    std::fprintf(stderr, "call_loop: CALLS and THREADS must be positive (THREADS at most 256)\n");
    return 2;
  }
  int device = -1;
  const cudaError_t first = cudaGetDevice(&device);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const long long mine = calls / threads + (t < calls % threads ? 1 : 0) - (t == 0 ? 1 : 0);
      int d = -1;
      for (long long i = 0; i < mine; ++i) (void)cudaGetDevice(&d);
    });
  for (auto& t : pool) t.join();
  std::printf("calls %lld first %d\n", calls, int(first));
  return 0;
}
