// Per-process verdicts after a fork: a parent that launches 50 kernels before it forks a
// child that starts CUDA anew and launches 17 (tests/support/fork_after_cuda). Each method's
// processes must be paired with the reference's parent and child as they are, never the
// child with the parent (it read "17 of 50" on the parent). GPU only: skips without one.
#include "harness_run.h"

using namespace correctness;

namespace {

// The console line of `method`'s per-process verdict for `layer`, or "".
std::string per_process_line(const std::string& output, const std::string& method, const std::string& layer) {
  const size_t section = output.find("per process and device");
  if (section == std::string::npos) return "";
  const std::string head = "  " + method;
  for (size_t at = output.find(head, section); at != std::string::npos; at = output.find(head, at + 1)) {
    const std::string line = output.substr(at, output.find('\n', at) - at);
    if (line.find(" " + layer + " ") != std::string::npos) return line;
  }
  return "";
}

}  // namespace

TEST(ForkPairing, AParentThatUsedCudaBeforeItsChildIsPairedWithItself) {
  if (!host().gpu) GTEST_SKIP() << "no GPU: " << host().gpu_reason;
  HarnessRun r = run_harness("--method preload,cupti,devhook,sanitizer -- " + std::string(FORK_AFTER_CUDA));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("against cupti's 2 process(es)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("SHORT"), std::string::npos) << r.output;
  for (const auto& [method, layer] : {std::pair{"preload", "driver"}, {"cupti", "driver"}, {"cupti", "gpu-activity"},
                                      {"devhook", "device"}, {"sanitizer", "device"}}) {
    const std::string line = per_process_line(r.output, method, layer);
    EXPECT_NE(line.find("every process and device complete"), std::string::npos) << method << " " << layer << ": "
                                                                                   << r.output;
  }
  // 67 launches of 256 blocks, the parent's and the child's, each counted once.
  EXPECT_NE(r.output.find("blocks 17152 of 17152"), std::string::npos) << r.output;
}
