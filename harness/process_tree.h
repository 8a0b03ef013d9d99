#pragma once
// Containment of a run's processes. The harness is a child subreaper: whatever the target
// leaves behind (a daemon, a double fork, a setsid()) is reparented to the harness instead
// of init, so when the target ends the harness finds it, kills it and names it in the
// results. Its direct child dies with it (PR_SET_PDEATHSIG).
#include <sys/types.h>

#include <string>
#include <vector>

namespace cudatrace {

// Makes this process the subreaper of its descendants (once, at start).
void become_subreaper();

// Starts the janitor: a small process outside our tree (started before become_subreaper)
// that holds a pipe from the harness. Each run's process group is announced to it while
// it runs; if the harness dies, even by SIGKILL, the pipe closes and the janitor kills
// every group still announced. Without it, only the direct child would die with us.
void start_janitor();
void janitor_watch(pid_t process_group);
void janitor_forget(pid_t process_group);

// Every process below `pid` (children, their children, ...), from /proc.
std::vector<pid_t> descendants(pid_t pid);

// "1234 sleep" for a live process, or "" when it is gone.
std::string describe_process(pid_t pid);

// Whether `pid` has a child now (its main thread's /proc children list; cheap enough to
// ask every poll, unlike a walk over /proc).
bool has_children(pid_t pid);

// Kills (SIGKILL) and reaps every process below this harness (it is their parent or
// subreaper) except `spare` (0: none), e.g. a wrapper that must see its tracees go.
// Returns "pid name" of each one killed.
std::vector<std::string> kill_leftovers(pid_t spare = 0);

}  // namespace cudatrace
