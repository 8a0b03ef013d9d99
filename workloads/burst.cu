// burst: N host threads each issue a fixed number of cheap calls as fast as they can. The
// load for loss measurements: seen + reported lost must equal the ledger.
//   --call=0  cudaGetDevice: serialised inside cudart (its rate over 8 threads is cudart's
//             limit, not the tracer's), so it measures contention as much as the tracer.
//   --call=1  cudaPeekAtLastError: thread-local, so the tracer's own rate is what limits.
#include <atomic>
#include <thread>
#include <vector>

#include "workloads/workload_main.h"

int main(int argc, char** argv) {
  workload::Flags flags("burst", "Host threads issuing cheap CUDA calls back to back.",
                        {{"threads", {"host threads", 8}},
                         {"calls", {"calls per thread", 20000}},
                         {"call", {"0 = cudaGetDevice, 1 = cudaPeekAtLastError", 0}}});
  flags.parse(argc, argv);
  const int threads = int(flags["threads"]);
  const long long calls = flags["calls"];
  const bool peek = flags["call"] == 1;
  if (flags["call"] > 1) {
    std::fprintf(stderr, "burst: --call is 0 or 1 (see --help)\n");
    return workload::kUsage;
  }
  workload::open_session("burst", argc, argv);
  MUST(rt::SetDevice(0));  // create the context before the clock starts

  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      int dev = -1;
      for (long long i = 0; i < calls; ++i) {
        if (peek) {
          if (rt::PeekAtLastError() != cudaSuccess) ++failures;
        } else if (rt::GetDevice(&dev) != cudaSuccess || dev != 0) {
          ++failures;
        }
      }
    });
  const int64_t t0 = ledger::now();
  go = true;
  for (auto& th : pool) th.join();
  const int64_t elapsed = ledger::now() - t0;
  const char* call = peek ? "cudaPeekAtLastError" : "cudaGetDevice";
  if (failures) std::fprintf(stderr, "burst: %d %s calls failed\n", failures.load(), call);

  ledger::intend("cudaSetDevice", 1);
  ledger::intend(call, threads * calls);
  ledger::info("burst_ns", elapsed);
  ledger::info("calls_per_second", elapsed > 0 ? int64_t(double(threads * calls) * 1e9 / double(elapsed)) : 0);
  return workload::close_session(failures == 0);
}
