#pragma once
// The channel through which a traced program asks a tracer that runs outside it (uprobe:
// the harness holds the probes) to pause and resume, for the per-call benchmark's
// in-process A/B (bench/percall). A socket pair: the program inherits one end, named by
// CUDATRACE_PAUSE_FD, and sends one byte, '1' pause or '0' resume; the harness answers one
// byte, 'k' done or 'e' refused (bench/pause_client.h is the program's side). The program
// is not trusted: a request is one byte, anything else is refused, and a program that
// never asks costs a thread asleep in poll().
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace cudatrace {

inline constexpr const char* kPauseFdEnv = "CUDATRACE_PAUSE_FD";

class PauseChannel {
 public:
  // Does the pausing: empty when done, else why not (kept, and answered 'e').
  using Handler = std::function<std::string(bool paused)>;
  PauseChannel();   // throws std::runtime_error when the socket pair cannot be made
  ~PauseChannel();  // stop()
  PauseChannel(const PauseChannel&) = delete;
  PauseChannel& operator=(const PauseChannel&) = delete;

  // The program's end: inherited across exec (no close-on-exec) until close_program_end().
  int program_fd() const { return program_fd_; }
  // Once the program exists: the harness keeps no copy of its end.
  void close_program_end();
  // Answers requests on a thread of its own until stop().
  void start(Handler handler);
  void stop();
  uint64_t requests() const { return requests_.load(); }
  std::string first_refusal() const;

 private:
  void serve();
  int harness_fd_ = -1, program_fd_ = -1;
  Handler handler_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> requests_{0};
  mutable std::mutex refusal_mutex_;
  std::string first_refusal_;
};

}  // namespace cudatrace
