#pragma once
// Runs the requested matrix (workload x linkage x method x repetition, or a command x
// method), writes results/<run-id>/ as it goes, and returns the harness's exit status.
#include "harness/cli.h"
#include "tracers/tracer.h"

namespace cudatrace {

int run_matrix(const Options& opts, const HostFacts& host, const std::vector<std::string>& command_line);

}  // namespace cudatrace
