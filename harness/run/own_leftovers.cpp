#include "harness/run/own_leftovers.h"

#include <signal.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <thread>

#include "harness/run/stall_watch.h"

namespace cudatrace {

namespace {

bool ended(pid_t pid) {
  const auto stat = read_stat(pid);
  return !stat || stat->state == 'Z' || stat->state == 'X';
}

}  // namespace

std::vector<pid_t> end_own_leftovers(const Tracer& tracer, std::chrono::milliseconds grace) {
  std::vector<pid_t> asked;
  // Anything left is reparented to the run's guardian, the harness's child: without a
  // child, nothing to look at (a hint only; kill_leftovers() walks /proc whatever this finds).
  if (!has_children(getpid())) return asked;
  for (pid_t p : descendants(getpid())) {
    const auto stat = read_stat(p);
    if (!stat || stat->state == 'Z' || stat->state == 'X' || !tracer.owns_leftover(stat->name, executable_of(p))) continue;
    if (kill(p, SIGTERM) == 0) asked.push_back(p);
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (size_t i = 0; i < asked.size();) {
    if (ended(asked[i])) {
      ++i;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return asked;
}

void attribute_own_leftover(Leftover& l, const Tracer& tracer) {
  if (l.belongs != "unknown" && l.belongs != "method") return;
  const auto why = tracer.owns_leftover(l.name, l.exe);
  if (!why) return;
  l.belongs = "method";
  l.why = *why + (l.state == "Z" ? "; it had ended: reaped, not killed" : "; still running: killed");
}

}  // namespace cudatrace
