// burst: N host threads each issue a fixed number of cheap calls (cudaGetDevice) as fast
// as they can. The load for loss measurements: seen + reported lost must equal the ledger.
#include <atomic>
#include <thread>
#include <vector>

#include "workloads/workload_main.h"

int main(int argc, char** argv) {
  workload::Flags flags("burst", "Host threads issuing cheap CUDA calls (cudaGetDevice) back to back.",
                        {{"threads", {"host threads", 8}}, {"calls", {"calls per thread", 20000}}});
  flags.parse(argc, argv);
  const int threads = int(flags["threads"]);
  const long long calls = flags["calls"];
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
      for (long long i = 0; i < calls; ++i)
        if (rt::GetDevice(&dev) != cudaSuccess || dev != 0) ++failures;
    });
  const int64_t t0 = ledger::now();
  go = true;
  for (auto& th : pool) th.join();
  const int64_t elapsed = ledger::now() - t0;
  if (failures) std::fprintf(stderr, "burst: %d cudaGetDevice calls failed\n", failures.load());

  ledger::intend("cudaSetDevice", 1);
  ledger::intend("cudaGetDevice", threads * calls);
  ledger::info("burst_ns", elapsed);
  ledger::info("calls_per_second", elapsed > 0 ? int64_t(double(threads * calls) * 1e9 / double(elapsed)) : 0);
  return workload::close_session(failures == 0);
}
