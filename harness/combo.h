#pragma once
// What the matrix runs (one combination of workload, linkage and method, or the command
// under a method) and what its repetitions added up to: the record the run stages fill and
// the summary and the console read.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/score/event_tally.h"
#include "harness/score/matcher.h"
#include "harness/score/per_device.h"
#include "harness/score/verdict.h"
#include "workloads/exit_codes.h"

namespace cudatrace {

struct Combo {
  std::string workload;  // empty: the command after "--"
  std::string linkage;   // empty: the command after "--"
  std::string method;
  std::string label() const { return workload.empty() ? "cmd." + method : workload + "." + linkage + "." + method; }
};

// What a program's exit code means: a workload's codes are its own (workloads/exit_codes.h).
inline std::string exit_meaning(const Combo& c, int code) {
  if (c.workload.empty()) return "exit " + std::to_string(code);
  switch (code) {
    case workload::kWrongResult: return "exit 1: the workload's result check failed";
    case workload::kUsage: return "exit 2: the workload rejected its arguments";
    case workload::kCudaFailed: return "exit 3: a CUDA call the workload needs failed";
    case 127: return "exit 127: could not start";
  }
  return "exit " + std::to_string(code);
}

// One combination, all its repetitions.
struct ComboOutcome {
  Combo combo;
  int ok = 0, failed = 0;
  std::vector<int64_t> wall_ns;
  std::vector<std::string> statuses, failures;
  bool ledger_consistent = true;
  std::map<std::string, LayerScore> layers;
  nlohmann::json loss = nlohmann::json::object();
  std::map<std::string, std::map<std::string, int64_t>> event_counts;  // layer -> name -> count
  FamilyCounts families;                          // layer -> family -> calls or kernel runs
  std::set<std::string> observed;                 // layers a repetition observed
  std::map<std::string, std::string> unobserved;  // layer -> why a repetition did not
  std::map<std::string, std::string> partly_unobserved;  // layer -> what part it could not see, and why
  ProcessTallies processes;  // a command's events per process and device, over the repetitions
  // Repetitions whose traced program computed otherwise than untraced (--result): what each
  // printed against the untraced run's, as run.json's result_changed says it.
  std::vector<std::string> results_changed;
  // --result: traced runs whose result differed from their own untraced run's but equalled
  // another untraced run's (the program's result varies untraced): each one's why.
  std::vector<std::string> results_vary_untraced;
};


}  // namespace cudatrace
