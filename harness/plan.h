#pragma once
// The matrix planned: every combination of the workloads, linkages and methods asked for
// (or the command under each method), the untraced baseline first, each either to run or
// skipped with its reason.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli.h"
#include "harness/combo.h"
#include "tracers/tracer.h"

namespace cudatrace {

struct MatrixPlan {
  std::vector<Combo> todo;
  nlohmann::json skipped = nlohmann::json::array();  // summary.json's "skipped"
  bool added_baseline = false;  // the untraced run is the harness's, not something the user asked for
};

MatrixPlan plan_matrix(const Options& opts, const HostFacts& host);

// summary.json's entry for a combination that does not run, and why.
nlohmann::json skip_entry(const Combo& c, const std::string& reason);

}  // namespace cudatrace
