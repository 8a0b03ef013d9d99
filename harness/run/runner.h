#pragma once
// Runs one child under one tracer: the child is forked (by the run's guardian, guardian.h,
// which kills whatever the run leaves even if the harness is killed) and held at a gate
// until the tracer has attached, then exec's the target with stdout/stderr to files. A
// timeout, a stall (--stall-timeout) or ^C kills the child's whole process group; whatever
// happens, the tracer is finished. While it runs, a stall watch (stall_watch.h) samples its
// processes, so that a run stopped before its end says what each process was waiting in.
#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracers/tracer.h"

namespace cudatrace {

// Set by the harness's SIGINT/SIGTERM handler; the runner stops the child when it is set.
extern std::atomic<bool> g_interrupted;
void install_interrupt_handler();

enum class ChildStatus { Exited, Signaled, TimedOut, Interrupted, ExecFailed, TracerFailed, Stalled };
const char* to_string(ChildStatus s);

struct Credentials {  // who the child runs as (started through sudo: the invoking user)
  uid_t uid;
  gid_t gid;
  std::string user;
};
std::optional<Credentials> invoking_user();

// What the program may leave in stdout.txt and stderr.txt, each: their start is kept, the
// rest freed while it runs (checked every 100 ms) and counted. A program that writes
// gigabytes to stdout cannot fill the results disk through them.
inline constexpr uint64_t kProgramOutputCap = uint64_t(64) << 20;

struct ChildSpec {
  Launch launch;                     // argv[0] absolute; env on top of ours
  std::filesystem::path run_dir;     // stdout.txt and stderr.txt go here
  double timeout_s = 600;
  std::optional<Credentials> run_as;
  uint64_t output_cap = kProgramOutputCap;
  // The program's own executable when launch.argv[0] is a method's tool that starts it
  // (strace, nsys); empty: launch.argv[0] is the program. Says whose a leftover process is.
  std::string program;
  // --stall-timeout: end the run once its processes made no progress (no CPU time, no
  // output, no process started or ended) for this many seconds; 0: never (the default).
  double stall_timeout_s = 0;
};

// One of the program's two output files: what it wrote (at least: the file's end, as the
// program's writes moved it) and what was kept.
struct OutputKept {
  uint64_t written = 0;
  uint64_t kept = 0;
  std::string cut_reason;  // empty: kept whole
};

struct ChildResult {
  ChildStatus status = ChildStatus::ExecFailed;
  int exit_code = -1;
  int signal = 0;
  int64_t wall_ns = 0;  // from the gate opening to the child's exit
  int64_t start_ns = 0;  // CLOCK_MONOTONIC at the gate opening: where a record's time since the start counts from
  std::string detail;   // one line for a person
  // Processes left behind, killed: "pid name (parent ...; the program's: why)", and the same
  // as objects (pid, name, exe, parent, parent_name, state, threads, belongs, why).
  std::vector<std::string> left_running;
  nlohmann::json left_running_detail = nlohmann::json::array();
  // At a timeout or interruption: every process of the run as it stood just before it was
  // stopped (the same objects), so that a hang says what was waiting.
  nlohmann::json running_when_stopped = nlohmann::json::array();
  // At a timeout, a stall or an interruption: the stall watch's account (judge_stall's
  // json: stalled or busy, since when, each process's threads and CPU). Null otherwise.
  nlohmann::json stall;
  OutputKept stdout_kept, stderr_kept;
};

// run.json's "program_output": both files' sizes and cuts, with the bound.
nlohmann::json to_json(const ChildResult& r, uint64_t cap = kProgramOutputCap);

// Out of space: the program's own output is cut to its first `keep` bytes, to make room for
// the run's summary; `kept` says so. Returns the bytes freed.
uint64_t cut_program_output(const std::filesystem::path& file, uint64_t keep, OutputKept& kept);

// `tracer.attach(pid)` runs while the child waits at its gate; its exceptions stop the
// child and come back as TracerFailed.
ChildResult run_child(const ChildSpec& spec, Tracer& tracer);

// "exit 0", "signal 11", "timed out": how a run ended, in a few words.
std::string how_it_ended(const ChildResult& c);

}  // namespace cudatrace
