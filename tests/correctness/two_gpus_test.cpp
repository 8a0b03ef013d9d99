// The two-GPU workloads (twogpu: one process, two devices; twoproc: a process per device,
// CUDA IPC) under the real harness: the ledger says which device each call was on, every
// method's run ends as the untraced one did, and every scored layer is counted per process
// and device. Skips with the reason on a host with fewer than two GPUs (CI has none).
#include <set>

#include "ledger/ledger.h"
#include "common/device_id.h"
#include "harness/catalog.h"
#include "harness/score/per_device.h"
#include "harness_run.h"

using namespace correctness;

namespace {

struct Case {
  std::string workload, linkage;
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) { return info.param.workload + "_" + info.param.linkage; }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* wl : {"twogpu", "twoproc"})
    for (const char* linkage : {"static", "shared"}) out.push_back({wl, linkage});
  return out;
}

// The reason this host cannot run the case, or "".
std::string cannot_run(const Case& c) {
  if (!host().gpu) return "no GPU: " + host().gpu_reason;
  return cudatrace::workload_unavailable(*cudatrace::find_workload(c.workload), host());
}

// Every ledger file of a run (one per process), all records.
std::vector<cudatrace::Event> all_ledgers(const HarnessRun& r, const std::string& label) {
  std::vector<cudatrace::Event> out;
  for (const auto& entry : std::filesystem::directory_iterator(r.root / "runs" / (label + ".r1") / "target"))
    if (entry.path().filename().string().rfind(::ledger::kFileName, 0) == 0) {
      auto s = cudatrace::read_events(entry.path());
      out.insert(out.end(), s.events.begin(), s.events.end());
    }
  return out;
}

}  // namespace

class TwoGpus : public ::testing::TestWithParam<Case> {};

// Untraced: the program's own check passes, and its ledger puts calls on both GPUs, each
// with the bus id the workload asked the runtime for (two different ones).
TEST_P(TwoGpus, LedgerSaysWhichGpuEachCallWasOn) {
  const Case c = GetParam();
  if (const std::string why = cannot_run(c); !why.empty()) GTEST_SKIP() << why;
  HarnessRun r = run_harness("--workload " + c.workload + " --method none --linkage " + c.linkage);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string label = c.workload + "." + c.linkage + ".none";
  nlohmann::json run = r.run_json(label);
  EXPECT_TRUE(run["ledger"]["consistent"].get<bool>()) << run["ledger"]["problems"].dump();
  std::map<int64_t, std::set<std::string>> ids;  // ordinal -> bus ids, over every process
  std::set<int64_t> pids;
  int64_t launches_on[2] = {0, 0};
  for (const auto& e : all_ledgers(r, label)) {
    pids.insert(e.pid);
    if (!e.device) continue;
    if (!e.device_id.empty()) ids[*e.device].insert(e.device_id);
    if (e.name == "cudaLaunchKernel" && *e.device >= 0 && *e.device < 2) ++launches_on[*e.device];
  }
  EXPECT_GT(launches_on[0], 0);
  EXPECT_GT(launches_on[1], 0);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].size(), 1u);
  EXPECT_NE(*ids[0].begin(), *ids[1].begin()) << "two GPUs, two bus ids";
  EXPECT_EQ(cudatrace::normalize_pci_bus_id(*ids[1].begin()), *ids[1].begin());
  EXPECT_EQ(pids.size(), c.workload == "twoproc" ? 2u : 1u) << "twoproc: one ledger per rank";
  if (c.workload == "twoproc") {
    std::set<std::string> labels;
    for (const auto& [pid, name] : run["processes"].items()) labels.insert(name.get<std::string>());
    EXPECT_EQ(labels, (std::set<std::string>{"rank 0", "rank 1"}));
  }
}

// Every method that can run here: the program ends as untraced, and each layer it scored
// has its counts per (process, device), both GPUs among them; a (process, device) that fell
// short is named in run.json, and where it did the layer says why (partly observed).
TEST_P(TwoGpus, EveryMethodPerProcessAndDevice) {
  const Case c = GetParam();
  if (const std::string why = cannot_run(c); !why.empty()) GTEST_SKIP() << why;
  HarnessRun r = run_harness("--workload " + c.workload + " --method compared --timeout 300 --linkage " + c.linkage);
  ASSERT_FALSE(r.summary.is_null()) << r.output;
  std::set<std::string> ran;
  for (const auto& combo : r.summary["combos"]) {
    const std::string method = combo["method"];
    ran.insert(method);
    nlohmann::json run = r.run_json(c.workload + "." + c.linkage + "." + method);
    ASSERT_FALSE(run.is_null()) << method;
    EXPECT_TRUE(run["ok"].get<bool>()) << method << ": " << run["failures"].dump();
    EXPECT_NE(run["status"], "timeout") << method << " did not end: " << run["detail"];
    std::set<std::string> partly;
    for (const auto& p : run["partly_observed"]) partly.insert(p["layer"].get<std::string>());
    for (const auto& s : run["match"]) {
      const std::string l = s["layer"];
      std::set<std::string> devices, processes;
      bool short_somewhere = false;
      for (const auto& b : s["per_device"]) {
        if (b["expected"].get<int64_t>() == 0) continue;
        devices.insert(b["device"].get<std::string>());
        processes.insert(b["process"].get<std::string>());
        short_somewhere |= b["matched"].get<int64_t>() < b["expected"].get<int64_t>();
      }
      devices.erase(cudatrace::kNoDevice);
      // Calls are placed by the ledger's device: always both GPUs. Kernel runs by the
      // method's own: both, or the one bucket of a method whose records name none.
      if (!devices.count(cudatrace::kUnattributed)) EXPECT_EQ(devices.size(), 2u) << method << " " << l << ": both GPUs";
      if (c.workload == "twoproc") EXPECT_EQ(processes.size(), 2u) << method << " " << l << ": both ranks";
      if (short_somewhere) {
        EXPECT_TRUE(partly.count(l)) << method << " " << l << " fell short with no reason";
        EXPECT_FALSE(run["per_device_short"].empty()) << method << " " << l;
      }
      if (s["device_compared"].get<int64_t>() > 0)
        EXPECT_EQ(s["device_equal"], s["device_compared"]) << method << " " << l << " puts calls on the wrong GPU: "
                                                           << s["examples"].dump();
    }
    std::printf("%s %s.%s: %s\n", method.c_str(), c.workload.c_str(), c.linkage.c_str(),
                run["per_device_short"].empty() ? "every process and GPU complete"
                                                : run["per_device_short"].dump().c_str());
  }
  EXPECT_TRUE(ran.count("none"));
  EXPECT_TRUE(ran.count("preload"));
}

INSTANTIATE_TEST_SUITE_P(Workloads, TwoGpus, ::testing::ValuesIn(cases()), name_of);
