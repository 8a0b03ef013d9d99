#pragma once
// A method's tool may leave helpers of its own behind: nsys's agent and launcher outlive
// `nsys profile`, the agent reparented to the run's guardian (a subreaper) before the harness saw
// who started it, so that it read "origin unknown". The tracer knows its tool's helpers
// (Tracer::owns_leftover); these two apply that to what process_tree finds.
#include <sys/types.h>

#include <chrono>
#include <vector>

#include "harness/run/process_tree.h"
#include "tracers/tracer.h"

namespace cudatrace {

// Once the program has ended, before kill_leftovers(): every process below the harness
// that `tracer` owns and that still runs is sent SIGTERM and given up to `grace` to end.
// Those that end stay unreaped for kill_leftovers() to name and reap; one that outlasts
// the grace is killed there like any other. Returns the pids it asked to end.
std::vector<pid_t> end_own_leftovers(const Tracer& tracer, std::chrono::milliseconds grace);

// A leftover the harness could not place ("unknown") or placed as the method's, that
// `tracer` owns: the method's, with the tracer's reason, and whether it had already ended
// (a zombie: reaped, not killed). A leftover of the program's is left as it is.
void attribute_own_leftover(Leftover& leftover, const Tracer& tracer);

}  // namespace cudatrace
