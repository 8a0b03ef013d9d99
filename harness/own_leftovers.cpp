#include "harness/own_leftovers.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace cudatrace {

namespace {

// comm and the state letter, from /proc/PID/stat (the name may hold spaces or parens);
// false when the process is gone.
bool name_and_state(pid_t pid, std::string& name, char& state) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return false;
  const auto open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 >= stat.size()) return false;
  name = stat.substr(open + 1, close - open - 1);
  state = stat[close + 2];
  return true;
}

bool ended(pid_t pid) {
  std::string name;
  char state = 0;
  return !name_and_state(pid, name, state) || state == 'Z' || state == 'X';
}

}  // namespace

std::vector<pid_t> end_own_leftovers(const Tracer& tracer, std::chrono::milliseconds grace) {
  std::vector<pid_t> asked;
  // Anything left is reparented to the harness: without a child, nothing to look at
  // (a hint only; kill_leftovers() walks /proc whatever this finds).
  if (!has_children(getpid())) return asked;
  for (pid_t p : descendants(getpid())) {
    std::string name;
    char state = 0;
    if (!name_and_state(p, name, state) || state == 'Z' || state == 'X') continue;
    if (!tracer.owns_leftover(name, executable_of(p))) continue;
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
