#pragma once
// The stall watch: whether a run's processes are still getting anywhere (#44). While a run
// is alive the runner samples every process below the harness (CPU time, state, from
// /proc) and the bytes the program wrote to its stdout and stderr. No progress means: no
// process used more than a small share of one CPU, none started or ended, and no output
// was written. At a timeout the run's reason says whether it had stalled and since when, or
// was busy to the end, and in what each process waited (its threads' states and the kernel
// functions they slept in); with --stall-timeout S the runner ends a run that made no
// progress for S seconds, as a failed run that says so.
//
// One job here: parsing /proc text, judging a series of samples, and saying it in words,
// as functions of their inputs (tests drive them with fake snapshots, no sleeping). What
// reads the real /proc is read_process_sample(), which takes the folder to read.
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cudatrace {

// What one /proc/PID/stat (or /proc/PID/task/TID/stat) line says that the watch uses.
struct StatFields {
  std::string name;        // comm: bytes, not always UTF-8, may hold spaces and parentheses
  char state = '?';        // R, S, D, T, t, Z, X, I...
  pid_t ppid = -1;
  uint64_t cpu_ticks = 0;  // utime + stime, in clock ticks (for a process: all its threads')
  int threads = 0;
};
// nullopt when the line is not a stat line (cut short, no parentheses, fields missing).
std::optional<StatFields> parse_stat(std::string_view line);
// /proc/PID/stat read (bounded) and parsed; nullopt when the process is gone.
std::optional<StatFields> read_stat(pid_t pid);

// /proc/.../wchan: the kernel function the thread sleeps in; "" for "0" (running, or not
// permitted to know) or anything that is not a symbol's name.
std::string parse_wchan(std::string_view text);

// The word for a state letter: "running", "sleeping", "in uninterruptible wait", ...
std::string state_word(char state);

struct ThreadState {
  pid_t tid = 0;
  char state = '?';
  std::string wchan;  // "" when not known
};

struct ProcessSample {
  pid_t pid = 0;
  std::string name;
  char state = '?';
  uint64_t cpu_ticks = 0;
  int threads = 0;
  std::vector<ThreadState> thread_states;  // read only when asked (at the end of a run)
  int threads_not_read = 0;                // past the bound on threads read per process
};

struct TreeSample {
  int64_t t_ns = 0;           // since the run started
  std::vector<ProcessSample> processes;
  uint64_t output_bytes = 0;  // what the program wrote to stdout and stderr so far
};

// Bounds on what the watch reads (a program with a million threads costs it nothing more).
inline constexpr size_t kStatBytes = 4096;        // one stat line
inline constexpr size_t kWchanBytes = 512;        // one wait channel (KSYM_NAME_LEN)
inline constexpr int kThreadsReadPerProcess = 1024;
inline constexpr size_t kProcessesSampled = 4096;

// One process as `proc_root` (/proc, or a folder of the same shape) shows it now; with
// `with_threads`, every thread's state and wait channel too (up to the bound). nullopt: gone.
std::optional<ProcessSample> read_process_sample(pid_t pid, bool with_threads, const std::string& proc_root = "/proc");

// The processes `pids` as they are now (those gone are left out; at most kProcessesSampled).
TreeSample read_tree_sample(const std::vector<pid_t>& pids, int64_t t_ns, uint64_t output_bytes, bool with_threads,
                            const std::string& proc_root = "/proc");

struct StallSettings {
  double ticks_per_s = 100;         // sysconf(_SC_CLK_TCK)
  // A process makes progress when, over some window of up to activity_window_s seconds, it
  // uses more than idle_cpu_slack_s + idle_cpu_share x the window of CPU time: a watchdog
  // thread that wakes for a few ms every few seconds is not progress, a steady 5% of a
  // CPU is. The progress is then dated at the last sample where its CPU time grew.
  double idle_cpu_share = 0.01;
  double idle_cpu_slack_s = 0.035;  // clock ticks are 10 ms
  double activity_window_s = 10;
  double report_window_s = 30;      // "N s CPU in the last W s"
  double stall_timeout_s = 0;       // --stall-timeout; 0: off
};

// Below this many seconds without progress, the end of a run is not called a stall.
inline constexpr double kStalledAtLeast_s = 2.0;

// A series of samples, judged: since when the run has made no progress.
class StallWatch {
 public:
  explicit StallWatch(StallSettings settings = {});
  // Samples in time order. Each is judged against those kept before it.
  void add(const TreeSample& sample);
  bool empty() const { return samples_ == 0; }
  int64_t now_ns() const { return last_.t_ns; }
  // When the run last made progress (ns since its start) as of the latest sample, and how
  // long before that sample.
  int64_t progress_ns() const { return progress_ns_; }
  double idle_s() const { return double(last_.t_ns - progress_ns_) / 1e9; }
  // Whether --stall-timeout (settings) has been reached.
  bool stall_timeout_reached() const {
    return settings_.stall_timeout_s > 0 && samples_ > 1 && idle_s() >= settings_.stall_timeout_s;
  }
  // CPU seconds `pid` used over the last `window_s` before the latest sample, and the window
  // that covers (shorter for a younger process or a shorter history). nullopt: not seen.
  struct CpuOver {
    double cpu_s = 0, window_s = 0;
  };
  std::optional<CpuOver> cpu_over(pid_t pid, double window_s) const;
  const StallSettings& settings() const { return settings_; }
  size_t kept() const { return history_.size(); }

 private:
  struct Kept {
    int64_t t_ns;
    std::map<pid_t, uint64_t> ticks;
  };
  void keep(const TreeSample& s);

  StallSettings settings_;
  std::deque<Kept> recent_;   // every sample of the last activity_window_s: what is judged
  std::deque<Kept> history_;  // spaced out over the report window and older, thinned: cpu_over
  TreeSample last_;
  size_t samples_ = 0;
  int64_t progress_ns_ = 0;
  std::map<pid_t, int64_t> cpu_grew_ns_;  // per process: the last sample where its CPU time grew
};

// What the end of a run looked like to the watch: `final` is the last sample, read with
// threads, after it was added. `stalled` when the run ends for --stall-timeout.
struct StallVerdict {
  bool stalled = false;  // no progress for kStalledAtLeast_s or more at the end
  bool busy = false;     // some process used at least half a CPU over the last window
  double idle_s = 0, since_s = 0, window_s = 0;
  std::string summary;                 // "stalled since 1.5 s into the run (...)" / "busy to the end (...)"
  std::vector<std::string> processes;  // "pid 123 python3: 4 threads sleeping in futex_wait_queue, 0 s CPU in the last 30 s"
  nlohmann::json json;                 // run.json's "stall"
};
StallVerdict judge_stall(const StallWatch& watch, const TreeSample& final, double window_s);

// "pid 123 python3: 4 threads sleeping in futex_wait_queue, 1 thread running, 0 s CPU in
// the last 30 s" (names escaped: \xHH for bytes that are not UTF-8 and for control bytes).
std::string describe_process_line(const ProcessSample& p, const std::optional<StallWatch::CpuOver>& cpu);

// At most `max` lines joined with "; ", the rest counted.
std::string join_process_lines(const std::vector<std::string>& lines, size_t max = 16);

}  // namespace cudatrace
