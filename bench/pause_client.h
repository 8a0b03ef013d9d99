#pragma once
// The program's side of the pause channel (tracers/pause_channel.h): a tracer outside the
// process (uprobe) hands the program a socket as CUDATRACE_PAUSE_FD, and
// pause_through_channel(1) / (0) asks it to pause / resume and waits for the answer.
// Returns, like the in-process tracers' pause functions, whether it was paused before
// (1) or not (0); -1 when refused or when there is no channel.
#include <sys/socket.h>

#include <cstdlib>

namespace cudatrace {

inline int pause_channel_fd() {
  static const int fd = [] {
    const char* s = std::getenv("CUDATRACE_PAUSE_FD");
    if (!s || !*s) return -1;
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    return *end == 0 && v >= 0 && v < 65536 ? int(v) : -1;
  }();
  return fd;
}

inline int pause_through_channel(int paused) {
  const int fd = pause_channel_fd();
  if (fd < 0) return -1;
  const char request = paused ? '1' : '0';
  if (send(fd, &request, 1, MSG_NOSIGNAL) != 1) return -1;
  char answer = 0;
  if (recv(fd, &answer, 1, 0) != 1 || answer != 'k') return -1;
  static int was_paused = 0;
  const int before = was_paused;
  was_paused = paused ? 1 : 0;
  return before;
}

}  // namespace cudatrace
