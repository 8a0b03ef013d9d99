// The strace method, end to end through the harness, on the errors workload (no GPU
// needed): every ledger call is scored for syscall visibility, nothing is unreadable.
#include "ledger/ledger.h"
#include "common/event_store.h"
#include "harness_run.h"

using namespace correctness;

class StraceErrors : public ::testing::TestWithParam<std::string> {};

TEST_P(StraceErrors, ScoredAgainstTheLedgerWithNothingLost) {
  auto a = cudatrace::availability(*cudatrace::find_method("strace"), host());
  if (!a.ok) GTEST_SKIP() << "strace unavailable: " << a.reason;
  const std::string linkage = GetParam();
  HarnessRun r = run_harness("--workload errors --method strace --linkage " + linkage);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json run = r.run_json("errors." + linkage + ".strace");
  ASSERT_TRUE(run["ok"].get<bool>()) << run["failures"].dump();
  EXPECT_TRUE(run["ledger"]["consistent"].get<bool>()) << "strace must not change the program's behaviour";
  EXPECT_EQ(run["tracer"]["layers"], nlohmann::json({"syscall"}));
  EXPECT_EQ(run["tracer"]["loss"]["unparsed_lines"], 0);
  EXPECT_EQ(run["tracer"]["loss"]["orphan_resumed"], 0);
  EXPECT_GT(run["tracer"]["notes"]["syscalls"].get<int>(), 50);

  ASSERT_EQ(run["match"].size(), 1u);
  const auto& score = run["match"][0];
  EXPECT_EQ(score["layer"], "syscall");
  EXPECT_EQ(score["expected"], 12);
  // The first call that reaches the driver (cudaGetDeviceCount without a GPU, where cudart
  // looks for libcuda; cudaMalloc's context creation with one) must be visible.
  const std::string first_driver_call = host().gpu ? "cudaMalloc" : "cudaGetDeviceCount";
  EXPECT_GE(score["by_name"][first_driver_call]["matched"].get<int>(), 1) << score.dump(2);
  // cudaRuntimeGetVersion answers from inside cudart: no syscall can happen during it.
  EXPECT_EQ(score["by_name"]["cudaRuntimeGetVersion"]["matched"], 0) << score.dump(2);

  // Every syscall event lies on one of the workload's own threads.
  cudatrace::EventStream ev = cudatrace::read_events(r.root / "runs" / ("errors." + linkage + ".strace.r1") / cudatrace::kEventsFile);
  cudatrace::EventStream ledger = cudatrace::read_events(r.root / "runs" / ("errors." + linkage + ".strace.r1") / "target" / ::ledger::kFileName);
  ASSERT_FALSE(ev.events.empty());
  EXPECT_EQ(ev.events.front().name, "execve");
  EXPECT_EQ(ev.events.front().pid, ledger.meta.at(0).pid);
}

INSTANTIATE_TEST_SUITE_P(Linkage, StraceErrors, ::testing::Values("static", "shared"));
