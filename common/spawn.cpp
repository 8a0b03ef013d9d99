#include "common/spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace cudatrace {

SpawnResult spawn_and_wait(const std::vector<std::string>& argv, bool capture, size_t max_output) {
  SpawnResult r;
  if (argv.empty()) {
    r.error = "no program";
    return r;
  }
  int pipefd[2] = {-1, -1};
  if (capture && pipe2(pipefd, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (capture) {
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  } else {
    posix_spawn_file_actions_adddup2(&actions, 2, 1);  // the harness's stdout is its results' summary
  }
  std::vector<char*> args;
  std::vector<std::string> copy = argv;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int err = argv[0].find('/') == std::string::npos
                      ? posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ)
                      : posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (capture) close(pipefd[1]);
  if (err != 0) {
    if (capture) close(pipefd[0]);
    r.error = "cannot run " + argv[0] + ": " + std::strerror(err);
    return r;
  }
  if (capture) {
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0 && r.output.size() < max_output) r.output.append(buf, std::min(size_t(n), max_output - r.output.size()));
    close(pipefd[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace cudatrace
