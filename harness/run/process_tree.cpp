#include "harness/run/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "harness/run/stall_watch.h"

namespace cudatrace {

namespace {

pid_t parent_of(pid_t pid) {
  const auto stat = read_stat(pid);
  return stat ? stat->ppid : -1;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long v = std::strtol(e->d_name, &end, 10);
      if (end && !*end && v > 0) out.push_back(pid_t(v));
    }
    closedir(d);
  }
  return out;
}

}  // namespace

void become_subreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

namespace {
int g_janitor_fd = -1;

void tell_janitor(char op, pid_t group) {
  if (g_janitor_fd < 0) return;
  char msg[24];
  int n = std::snprintf(msg, sizeof msg, "%c%d\n", op, int(group));
  (void)!write(g_janitor_fd, msg, size_t(n));
}

[[noreturn]] void janitor_main(int in) {
  // Signals meant for the harness (^C, a closed terminal) must not stop the cleanup.
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  std::set<pid_t> groups;
  std::string pending;
  char buf[512];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pending.append(buf, size_t(n));
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (line.size() < 2) continue;
      const pid_t g = pid_t(std::strtol(line.c_str() + 1, nullptr, 10));
      if (g <= 1) continue;
      if (line[0] == '+') groups.insert(g);
      else groups.erase(g);
    }
  }
  for (pid_t g : groups) kill(-g, SIGKILL);  // the harness is gone: so is its run
  _exit(0);
}
}  // namespace

void start_janitor() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  pid_t first = fork();
  if (first < 0) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (first == 0) {
    // Double fork: the janitor is reparented to init, outside the tree we kill leftovers in.
    if (fork() == 0) {
      close(fds[1]);
      for (int fd = 3; fd < 1024; ++fd)
        if (fd != fds[0]) close(fd);
      janitor_main(fds[0]);
    }
    _exit(0);
  }
  waitpid(first, nullptr, 0);
  close(fds[0]);
  g_janitor_fd = fds[1];
}

void janitor_watch(pid_t group) { tell_janitor('+', group); }
void janitor_forget(pid_t group) { tell_janitor('-', group); }

std::vector<pid_t> descendants(pid_t root) {
  // One pass over /proc building parent links, then a walk down from root.
  std::multimap<pid_t, pid_t> children;
  for (pid_t p : all_pids()) children.insert({parent_of(p), p});
  std::vector<pid_t> out, todo{root};
  std::set<pid_t> seen{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it)
      if (seen.insert(it->second).second) {
        out.push_back(it->second);
        todo.push_back(it->second);
      }
  }
  return out;
}

std::string describe_process(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  if (!std::getline(f, name)) return "";
  return std::to_string(pid) + " " + name;
}

bool has_children(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  if (!f) return !descendants(pid).empty();  // a kernel without CONFIG_PROC_CHILDREN
  std::string first;
  return bool(f >> first);
}

std::vector<std::string> kill_leftovers(const std::vector<pid_t>& spare,
                                        const std::function<std::string(pid_t)>& describe) {
  std::vector<std::string> killed;
  std::set<pid_t> done;
  // Killing one may orphan its children onto us or the guardian: repeat until nothing is
  // left (bounded).
  // Everything below a child of ours (a wrapper's tracees too) is below us.
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> fresh;
    for (pid_t p : descendants(getpid()))
      if (std::find(spare.begin(), spare.end(), p) == spare.end() && !done.count(p)) fresh.push_back(p);
    if (fresh.empty()) break;
    for (pid_t p : fresh) {
      const std::string who = describe_process(p).empty() ? "" : describe ? describe(p) : describe_process(p);
      if (kill(p, SIGKILL) == 0 && !who.empty()) killed.push_back(who);
      done.insert(p);
    }
    usleep(2000);  // let the killed die, so that their orphans show under us next round
  }
  // Reap those that are our children (pid by pid: never a child we did not kill). The
  // guardian's children are its own to reap (ECHILD here).
  for (pid_t p : done) {
    int status;
    while (waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return killed;
}

}  // namespace cudatrace

namespace cudatrace {

namespace {

// A process's children: every thread's children list (a child belongs to the thread that
// forked it), or, without CONFIG_PROC_CHILDREN, a walk over /proc.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  bool any_file = false;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = opendir(task_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(task_dir + "/" + e->d_name + "/children");
      if (!f) continue;
      any_file = true;
      long c;
      while (f >> c)
        if (c > 0) out.push_back(pid_t(c));
    }
    closedir(d);
  }
  if (!any_file) {
    for (pid_t p : all_pids())
      if (parent_of(p) == pid) out.push_back(p);
  }
  return out;
}

std::string comm_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// State letter and thread count, from /proc/PID/stat.
void state_of(pid_t pid, std::string& state, int& threads) {
  if (const auto stat = read_stat(pid)) {
    state = std::string(1, stat->state);
    threads = stat->threads;
  }
}

}  // namespace

std::vector<pid_t> tree_below(pid_t root) {
  std::vector<pid_t> out, todo{root};
  std::set<pid_t> visited{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children_of(p))
      if (visited.insert(c).second) {
        out.push_back(c);
        todo.push_back(c);
      }
  }
  return out;
}

std::string executable_of(pid_t pid) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string exe(buf, size_t(n));
  const std::string deleted = " (deleted)";
  if (exe.size() > deleted.size() && exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0)
    exe.resize(exe.size() - deleted.size());
  return exe;
}

void ProcessWatch::snapshot(pid_t root) {
  // The root as it is now: before its exec it was still the harness.
  if (root != getpid()) {
    if (std::string name = comm_of(root); !name.empty()) seen_[root] = SeenProcess{root, getpid(), name, executable_of(root)};
  }
  std::vector<pid_t> todo{root};
  std::set<pid_t> visited{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children_of(p)) {
      if (!visited.insert(c).second) continue;
      todo.push_back(c);
      if (seen_.count(c)) continue;
      seen_.emplace(c, SeenProcess{c, p, comm_of(c), executable_of(c)});
    }
  }
}

const SeenProcess* ProcessWatch::find(pid_t pid) const {
  auto it = seen_.find(pid);
  return it == seen_.end() ? nullptr : &it->second;
}

std::string Leftover::line() const {
  std::string s = std::to_string(pid) + " " + name + " (";
  s += parent ? "parent " + std::to_string(parent) + (parent_name.empty() ? "" : " " + parent_name)
              : "its parent was not seen";
  s += "; " + (belongs == "program" ? std::string("the program's") : belongs == "method" ? "the method's" : "origin unknown");
  if (!why.empty()) s += ": " + why;
  return s + ")";
}

Leftover describe_leftover(pid_t pid, const ProcessWatch& watch, pid_t child, const std::string& program_exe,
                           const std::string& tool_exe) {
  Leftover l;
  l.pid = pid;
  l.name = comm_of(pid);
  l.exe = executable_of(pid);
  state_of(pid, l.state, l.threads);
  const SeenProcess* self = watch.find(pid);
  if (self && l.exe.empty()) l.exe = self->exe;
  if (self && !watch.adopted(self->parent)) {
    l.parent = self->parent;
    if (const SeenProcess* parent = watch.find(self->parent)) l.parent_name = parent->name;
  }
  // Up the first-parent chain: which process of the run started it.
  std::vector<const SeenProcess*> chain;
  for (const SeenProcess* p = self; p && chain.size() < 64; p = watch.find(p->parent)) {
    chain.push_back(p);
    if (p->parent == child) break;
  }
  const bool below_child = !chain.empty() && chain.back()->parent == child;
  if (below_child && tool_exe.empty()) {
    l.belongs = "program";
    l.why = "started within the program's process tree";
  } else if (below_child) {
    // The child is a method's tool that starts the program: the program is the first
    // process below it running the program's executable.
    bool program = false;
    for (const SeenProcess* p : chain)
      if (!program_exe.empty() && p->exe == program_exe) program = true;
    l.belongs = program ? "program" : "method";
    l.why = program ? "started within the program's process tree" : "started by the method's tool, not by the program";
  } else if (!program_exe.empty() && l.exe == program_exe) {
    l.belongs = "program";
    l.why = "runs the program's executable (its first parent was not seen)";
  } else if (!tool_exe.empty() && l.exe == tool_exe) {
    l.belongs = "method";
    l.why = "runs the method's tool (its first parent was not seen)";
  } else {
    l.belongs = "unknown";
    l.why = "reparented to the harness before the harness saw who started it";
  }
  return l;
}

}  // namespace cudatrace
