// bench_agreement A B: whether two benchmark runs agree, by the rule the harness applies
// with --agree-with (harness/stats/bench_stats.h), for runs made without it. A and B are results
// folders (or their bench_summary.json). Prints the agreement as JSON (ci/bench_agreement.py
// shows it); exit 0 when B agrees with A, 1 when not, 2 when a summary cannot be read.
#include <cstdio>
#include <exception>

#include "harness/stats/bench.h"
#include "harness/stats/bench_stats.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_agreement RUN_A RUN_B (results folders or their bench_summary.json)\n");
    return 2;
  }
  nlohmann::json a, b;
  try {
    a = cudatrace::read_bench_summary(argv[1]);
    b = cudatrace::read_bench_summary(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_agreement: %s\n", e.what());
    return 2;
  }
  const nlohmann::json agreement = cudatrace::bench_agreement(a, b);
  std::printf("%s\n", agreement.dump(1).c_str());
  return agreement["pass"].get<bool>() ? 0 : 1;
}
