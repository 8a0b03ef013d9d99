#include "tracers/pause_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cudatrace {

PauseChannel::PauseChannel() {
  int fds[2];
  // SOCK_SEQPACKET: a request is one message, read whole or not at all. Both ends are
  // close-on-exec at first; only the program's end is made inheritable, and only for as
  // long as it takes to start the program.
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("pause channel: socketpair: ") + std::strerror(errno));
  harness_fd_ = fds[0];
  program_fd_ = fds[1];
  if (fcntl(program_fd_, F_SETFD, 0) != 0) {
    close(harness_fd_);
    close(program_fd_);
    throw std::runtime_error(std::string("pause channel: fcntl: ") + std::strerror(errno));
  }
}

PauseChannel::~PauseChannel() {
  stop();
  close_program_end();
  if (harness_fd_ >= 0) close(harness_fd_);
}

void PauseChannel::close_program_end() {
  if (program_fd_ >= 0) close(program_fd_);
  program_fd_ = -1;
}

void PauseChannel::start(Handler handler) {
  handler_ = std::move(handler);
  thread_ = std::thread([this] { serve(); });
}

void PauseChannel::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::string PauseChannel::first_refusal() const {
  std::lock_guard lock(refusal_mutex_);
  return first_refusal_;
}

void PauseChannel::serve() {
  while (!stopping_) {
    pollfd p{harness_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, 100);  // wakes to see stop()
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      if (ready < 0) return;
      continue;
    }
    char request[2];
    const ssize_t n = recv(harness_fd_, request, sizeof request, MSG_DONTWAIT);
    if (n == 0) return;  // the program and everything that inherited its end are gone
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    ++requests_;
    std::string why;
    if (n != 1 || (request[0] != '0' && request[0] != '1'))
      why = "a request that is not '0' or '1'";
    else
      why = handler_(request[0] == '1');
    if (!why.empty()) {
      std::lock_guard lock(refusal_mutex_);
      if (first_refusal_.empty()) first_refusal_ = why;
    }
    const char answer = why.empty() ? 'k' : 'e';
    (void)!send(harness_fd_, &answer, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

}  // namespace cudatrace
