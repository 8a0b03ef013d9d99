#pragma once
// Runs one child under one tracer: the child is forked and held at a gate until the
// tracer has attached, then exec's the target with stdout/stderr to files. A timeout or
// ^C kills the child's whole process group; whatever happens, the tracer is finished.
#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tracers/tracer.h"

namespace cudatrace {

// Set by the harness's SIGINT/SIGTERM handler; the runner stops the child when it is set.
extern std::atomic<bool> g_interrupted;
void install_interrupt_handler();

enum class ChildStatus { Exited, Signaled, TimedOut, Interrupted, ExecFailed, TracerFailed };
const char* to_string(ChildStatus s);

struct Credentials {  // who the child runs as (started through sudo: the invoking user)
  uid_t uid;
  gid_t gid;
  std::string user;
};
std::optional<Credentials> invoking_user();

struct ChildSpec {
  Launch launch;                     // argv[0] absolute; env on top of ours
  std::filesystem::path run_dir;     // stdout.txt and stderr.txt go here
  double timeout_s = 600;
  std::optional<Credentials> run_as;
};

struct ChildResult {
  ChildStatus status = ChildStatus::ExecFailed;
  int exit_code = -1;
  int signal = 0;
  int64_t wall_ns = 0;  // from the gate opening to the child's exit
  std::string detail;   // one line for a person
  std::vector<std::string> left_running;  // "pid name" of processes it left behind, killed
};

// `tracer.attach(pid)` runs while the child waits at its gate; its exceptions stop the
// child and come back as TracerFailed.
ChildResult run_child(const ChildSpec& spec, Tracer& tracer);

}  // namespace cudatrace
