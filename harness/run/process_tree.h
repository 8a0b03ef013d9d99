#pragma once
// Containment of a run's processes. The run's guardian (guardian.h), a child of the harness,
// is a child subreaper, and so is the harness: whatever the target leaves behind (a daemon,
// a double fork, a setsid()) is reparented to one of them instead of init, so when the
// target ends the harness finds it, kills it and names it in the results; if the harness
// itself is killed, the guardian kills it.
#include <sys/types.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cudatrace {

// Makes this process the subreaper of its descendants (once, at start).
void become_subreaper();

// Starts the janitor: a small process outside our tree (started before become_subreaper)
// that holds a pipe from the harness. Each run's process group is announced to it while
// it runs; if the harness dies, even by SIGKILL, the pipe closes and the janitor kills
// every group still announced. The run's guardian kills the whole tree (guardian.h); the
// janitor is the second line, for a guardian killed with the harness.
void start_janitor();
void janitor_watch(pid_t process_group);
void janitor_forget(pid_t process_group);

// Every process below `pid` (children, their children, ...), from /proc.
std::vector<pid_t> descendants(pid_t pid);

// Every process below `pid` now, walking each thread's children list (cheap enough to ask
// twice a second; a walk over all of /proc only on a kernel without children lists).
std::vector<pid_t> tree_below(pid_t pid);

// "1234 sleep" for a live process, or "" when it is gone.
std::string describe_process(pid_t pid);

// Whether `pid` has a child now (its main thread's /proc children list; cheap enough to
// ask every poll, unlike a walk over /proc).
bool has_children(pid_t pid);

// Kills (SIGKILL) and reaps every process below this harness (it is their parent or
// subreaper, or the run's guardian is: guardian.h) except those in `spare`, e.g. a wrapper
// that must see its tracees go, or the guardian itself. Returns `describe(pid)` of each one
// killed, asked while it still runs ("pid name" by default). One whose parent is the
// guardian is reaped by the guardian when the run ends.
std::vector<std::string> kill_leftovers(const std::vector<pid_t>& spare = {},
                                        const std::function<std::string(pid_t)>& describe = {});

// What a run's processes were while they ran: a process left behind is reparented to the
// harness, which loses who started it; the runner snapshots the tree below its child every
// few hundred ms, so that a leftover can be named with its first parent and said to be the
// program's or the method's.
struct SeenProcess {
  pid_t pid = 0, parent = 0;
  std::string name;  // comm
  std::string exe;   // /proc/PID/exe, resolved (root reads any); empty when unreadable
};

class ProcessWatch {
 public:
  // Every process below `root` now, each with the parent it had when first seen.
  void snapshot(pid_t root);
  const SeenProcess* find(pid_t pid) const;
  size_t size() const { return seen_.size(); }
  void remember(const SeenProcess& p) { seen_.emplace(p.pid, p); }
  // The process that adopts the run's orphans besides the harness (the run's guardian): a
  // parent seen as this one is not who started the process.
  void set_adopter(pid_t pid) { adopter_ = pid; }
  bool adopted(pid_t parent) const { return parent == getpid() || (adopter_ > 0 && parent == adopter_); }

 private:
  std::map<pid_t, SeenProcess> seen_;
  pid_t adopter_ = 0;
};

// A process found running after the program ended (or at its timeout), before it is
// killed: who it is, who started it, and whose it is.
struct Leftover {
  pid_t pid = 0;
  std::string name, exe;
  pid_t parent = 0;          // its first parent as seen, 0 when never seen before
  std::string parent_name;
  std::string state;         // R, S, D, Z... from /proc/PID/stat
  int threads = 0;
  std::string belongs;       // "program", "method" or "unknown"
  std::string why;           // how that was decided
  std::string line() const;  // "1234 python3 (parent 1200 python3; the program's: ...)"
};

// `child`: the harness's child; `program_exe`: the program's executable (resolved);
// `tool_exe`: what the child runs when a method's tool starts the program (strace, nsys),
// else empty. The first parent comes from `watch`; the rest from /proc now.
Leftover describe_leftover(pid_t pid, const ProcessWatch& watch, pid_t child, const std::string& program_exe,
                           const std::string& tool_exe);

// /proc/PID/exe resolved, or "" (gone, a kernel thread, not permitted).
std::string executable_of(pid_t pid);

}  // namespace cudatrace
