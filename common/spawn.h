#pragma once
// Runs a helper program (the report generator, a tool's version probe, ldconfig) from an
// argument vector, never through a shell: no quoting, no word splitting, no injection from
// a path or a folder name. Standard input is /dev/null.
#include <string>
#include <vector>

namespace cudatrace {

struct SpawnResult {
  int exit_code = -1;  // -1: could not start, or killed by a signal
  std::string output;  // what it wrote (stdout and stderr), when captured: at most max_output bytes
  std::string error;   // why it could not start
};

// argv[0] is a path (absolute, or looked up on PATH when it has no '/'). With `capture`,
// stdout and stderr come back in `output` (the rest past max_output is read and dropped);
// without, both go to the harness's stderr.
SpawnResult spawn_and_wait(const std::vector<std::string>& argv, bool capture, size_t max_output = 1 << 20);

}  // namespace cudatrace
