#include "harness/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace cudatrace {

namespace {

// The parent pid of a process, from /proc/PID/stat (its name may hold spaces or parens).
pid_t parent_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return -1;
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close_paren + 2));
  char state;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
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

std::vector<std::string> kill_leftovers(pid_t spare) {
  std::vector<std::string> killed;
  std::set<pid_t> done;
  // Killing one may orphan its children onto us: repeat until nothing is left (bounded).
  // Everything below a child of ours (a wrapper's tracees too) is below us.
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> fresh;
    for (pid_t p : descendants(getpid()))
      if (p != spare && !done.count(p)) fresh.push_back(p);
    if (fresh.empty()) break;
    for (pid_t p : fresh) {
      const std::string who = describe_process(p);
      if (kill(p, SIGKILL) == 0 && !who.empty()) killed.push_back(who);
      done.insert(p);
    }
    usleep(2000);  // let the killed die, so that their orphans show under us next round
  }
  // Reap those that are our children (pid by pid: never a child we did not kill).
  for (pid_t p : done) {
    int status;
    while (waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return killed;
}

}  // namespace cudatrace
