#pragma once
// Runs the real harness binary into a fresh folder and loads what it wrote.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "ledger/ledger.h"
#include "common/event_io.h"
#include "harness/run/host.h"
#include "test_support.h"

namespace correctness {

struct HarnessRun {
  int exit_code = -1;
  std::string output;
  std::filesystem::path root;  // results/<run-id>
  nlohmann::json summary;

  nlohmann::json run_json(const std::string& combo_label, int rep = 1) const {
    std::ifstream f(root / "runs" / (combo_label + ".r" + std::to_string(rep)) / "run.json");
    return f ? nlohmann::json::parse(f) : nlohmann::json();
  }
  // details.txt: the verdict per layer and the cost table, which the console leaves out.
  std::string details() const {
    std::ifstream f(root / "details.txt");
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // The workload's ledger of that run (runtime calls, without the meta record).
  std::vector<cudatrace::Event> ledger(const std::string& combo_label, int rep = 1) const {
    return cudatrace::read_events(root / "runs" / (combo_label + ".r" + std::to_string(rep)) / "target" / ::ledger::kFileName).events;
  }
};

// `env`: assignments put before the command, e.g. "PATH=/nonexistent".
inline HarnessRun run_harness(const std::string& args, const std::string& env = "") {
  HarnessRun r;
  auto out = testsupport::temp_dir("harness");
  auto res = testsupport::run_command(env + (env.empty() ? "" : " ") + HARNESS_PATH + " --out " + out.string() + " " + args);
  r.exit_code = res.exit_code;
  r.output = res.output;
  for (const auto& entry : std::filesystem::directory_iterator(out)) r.root = entry.path();
  std::ifstream f(r.root / "summary.json");
  if (f) r.summary = nlohmann::json::parse(f);
  return r;
}

// The matcher's score for one layer of a run.json, or nullptr when the layer was not scored.
inline const nlohmann::json* layer_of(const nlohmann::json& run, const std::string& layer) {
  for (const auto& s : run["match"])
    if (s["layer"] == layer) return &s;
  return nullptr;
}

inline const cudatrace::HostFacts& host() {
  static cudatrace::HostFacts h = cudatrace::probe_host(std::filesystem::path(HARNESS_PATH).parent_path().parent_path());
  return h;
}

}  // namespace correctness
