#pragma once
// The one interface every tracing method implements. The harness knows nothing else of a
// method: it asks the registry whether the method can run here, lets the tracer shape the
// child's command, tells it when the child exists and when it is gone, and reads back
// its events (the store, common/event_store.h) plus the loss counters the tracer reports.
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/device_id.h"

namespace cudatrace {

// What this machine offers, probed once per harness run.
struct HostFacts {
  bool root = false;  // euid 0, or CAP_BPF + CAP_PERFMON
  bool gpu = false;
  std::string gpu_reason;  // why not, when !gpu
  bool libcuda = false;    // the loader finds a libcuda.so.1 (a driver, or the toolkit's stub)
  int gpu_count = 0;       // CUDA devices the harness's own environment shows
  // Those devices by ordinal, with their PCI bus id and UUID: what turns a method's
  // ordinal or UUID into the identity every process shares (common/device_id.h).
  std::map<int, HostDevice> devices;
  std::filesystem::path prefix;  // install root: bin/ lib/ libexec/ below it
  // How much of what a method's in-process half writes (preload's record files) one run
  // reads: --max-trace-bytes, else half the free space under --out when the runs start.
  // Read in slices, never held: it bounds disk and time, not memory.
  uint64_t max_trace_bytes = uint64_t(128) << 20;
};

// The program being traced.
struct Target {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::string cudart;  // "static", "shared", "none" or "unknown" (how it links the CUDA runtime; cudart_linkage)
  // The one folder the program, and what a tracer puts inside it (a preloaded library, a
  // wrapper), may write: the ledger, spool and ring files. It belongs to the user the
  // program runs as; root's own files go to the run folder, which the program cannot write.
  std::filesystem::path writable_dir;
};

// How the child will be started; prepare() may change any of it.
struct Launch {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set on top of the harness's own environment
  bool wrapper = false;  // argv[0] is a wrapper (strace) whose first child is the program
};

struct TracerReport {
  std::vector<std::string> layers;  // the layers this method observed for this target
  // Layers it is meant to observe (Method::layers) but could not for this target: why.
  std::map<std::string, std::string> unobserved;
  // Layers it observed, but not all of: what part it cannot see, and why (calls made by a
  // cudart linked into a library, a process the method does not follow).
  std::map<std::string, std::string> partly_unobserved;
  nlohmann::json loss = nlohmann::json::object();   // e.g. {"dropped": 0, "ring_full": 0}
  nlohmann::json notes = nlohmann::json::object();  // what was attached where, warnings
  // Where a method times work of its own inside the program (patching, injection), it says
  // so in two notes the cost mode reads without knowing the method: "setup_ms" (a number)
  // and "setup_what" (one line). The cost mode shows it beside the start-up it measures.
  std::string error;  // non-empty: the collector failed; the run is recorded as failed
  // How far (ns) this tracer's timestamps may stray from the ledger's clock (a converted
  // clock); the matcher widens each call's window by this much.
  int64_t match_slack_ns = 0;
  // Device layer: "block" (an event per block), "thread" (an event per block carrying
  // args.threads, the threads seen in it), "launch" (an event per launch carrying
  // args.blocks, the blocks counted) or "launch-thread" (args.threads too).
  std::string device_mode = "block";
};

class Tracer {
 public:
  virtual ~Tracer() = default;
  // Shape the child's command (LD_PRELOAD, environment, a wrapper program).
  virtual void prepare(Launch& launch, const Target& target, const std::filesystem::path& run_dir) = 0;
  // The child exists but has not exec'd the target yet: attach collectors to it now.
  virtual void attach(pid_t child) { (void)child; }
  // The child is gone (exited, crashed, killed): stop collecting, write
  // run_dir/kEventsFile (absent = no events), and report layers and loss.
  virtual TracerReport finish(const std::filesystem::path& run_dir) = 0;
  // A program to run, as the program's user, once the program has ended and before
  // finish(): a converter of what the method's own tool wrote (nsys export). Empty: none.
  // Its outcome comes back through converted(), a one-line detail when it failed.
  virtual std::vector<std::string> conversion(const std::filesystem::path& run_dir) {
    (void)run_dir;
    return {};
  }
  virtual void converted(bool ok, const std::string& detail) {
    (void)ok;
    (void)detail;
  }
  // Like finish(), for runs whose events nobody will read (the per-call benchmark makes
  // millions of calls): stop collecting and delete the raw output instead of converting it.
  virtual void abandon(const std::filesystem::path& run_dir) { (void)run_dir; }
  // Before abandon(): the loss counters of such a run, where the tracer can read them
  // without converting its events (nullopt: it cannot), so that a cost measured while the
  // tracer dropped records says so.
  virtual std::optional<std::map<std::string, int64_t>> loss_without_events(const std::filesystem::path& run_dir) {
    (void)run_dir;
    return std::nullopt;
  }
  // Before abandon(): the layer judgement of finish() (layers, unobserved,
  // partly_unobserved, nothing else filled in), as far as the tracer can make it without
  // its events (what it probed, how the program links cudart). A per-call cost measured
  // without a layer is not the method's whole cost and must say so. Default: nothing known
  // to be missing.
  virtual TracerReport layers_without_events() { return {}; }
  // A process still there once the program has ended that is this method's own tool's
  // helper (nsys starts an agent and a launcher that can outlive `nsys profile`, and the
  // agent is reparented to the harness before the harness sees who started it), by its
  // name (comm) and executable (empty when unreadable, as for one that has already
  // exited): why it is the method's, or nullopt. The harness then lets it end (SIGTERM, a
  // moment) before killing what is left, and names it the method's; a leftover it places
  // in the program's process tree stays the program's whatever this says.
  virtual std::optional<std::string> owns_leftover(const std::string& name, const std::string& exe) const {
    (void)name;
    (void)exe;
    return std::nullopt;
  }
};

// Per-method settings from the command line (`--set uprobe.ring_mb=16`): key -> value.
using MethodOptions = std::map<std::string, std::string>;

// What a method is there for, which decides where it is run and compared.
enum class MethodKind {
  kMethod,         // a way to trace a CUDA program, scored against the ledger and costed
  kCostReference,  // a method's probes at another price (fewer, empty, no collector): costed only
  kReference,      // what the methods are measured against: the untraced run, Nsight Systems
  kPlaceholder,    // listed so that a user who looks for it learns why it cannot run
};
// "method", "cost reference", "reference", "placeholder": what --list and --list --json print.
const char* kind_name(MethodKind kind);

// Each method's folder describes it (tracers/<m>/<m>_method.h, one function returning its
// Method entries); registry.cpp only lists those functions.
// How the per-call benchmark takes a method's cost apart in one run (cost_parts in
// harness/stats/bench_stats.h), for a method that pauses itself in process:
//   the paused part: its paused halves against `none`'s processes, between processes;
//   one part per cost reference in `nested`, innermost first: that reference's in-process
//     A/B, less the one before's (the first: its A/B whole);
//   the live part: the method's own A/B, less the last nested reference's (none: whole).
// A nested reference the run did not benchmark is left out and its part joins the next.
struct CostSplit {
  struct Part {
    std::string reference;  // a cost reference in the registry (nested parts only)
    std::string name, what;
  };
  Part paused, live;
  std::vector<Part> nested;
  // What the mechanism costs with nothing recorded: this reference's whole difference to
  // `none`; empty: the paused part.
  std::string floor_reference;
  std::string floor_what;
  // The most the live part may cost a record (#52 sets 50 ns for preload), judged where the
  // benchmark counted the records each call made (tracers/pause_hook.h); 0: no bar.
  double per_record_bar_ns = 0;
};

// A bar a method's per-call cost is held to in the benchmark (#52; estimator_comparison in
// harness/stats/bench_stats.h): its difference to `none` between processes at most a
// reference's, plus plus_ns. `against` lists references most like-for-like first; the first
// the run measured is the one used. A bar applies to every call but those of the kinds in
// not_on_kinds (percall's labels: launch, copy, other).
struct CostBar {
  std::vector<std::string> against;
  double plus_ns = 0;
  std::vector<std::string> not_on_kinds;
  std::string why;  // what the bar stands for, in its text
};

struct Method {
  std::string name;
  std::string summary;
  MethodKind kind = MethodKind::kMethod;
  bool built = false;   // false: listed, reported as not built yet, never faked
  int issue = 0;        // the tracking issue while !built
  bool needs_root = false;
  bool needs_gpu = false;  // the method itself cannot work without a GPU
  // Non-empty: why the method has nothing to trace in the workloads (a profiler of one
  // Python framework, and the workloads are C++ programs): their combinations are skipped
  // with this reason rather than run to observe nothing.
  std::string not_for_workloads;
  std::vector<std::string> tools;  // programs it needs on PATH (with the Debian package)
  std::map<std::string, std::string> tool_packages;
  std::map<std::string, std::string> options;  // what --set METHOD.KEY=VALUE accepts: key -> help
  // The layers it exists to observe. A run that observed fewer says which and why: a
  // layer not observed is a result, never a clean zero. Cost references have none.
  std::vector<std::string> layers;
  // Per layer it observes, what part of it the method cannot see whatever the program (a
  // cudart without symbols, calls before CUPTI starts): the reason a run gives where it saw
  // less than all of a layer and the tracer named nothing more specific. Every layer in
  // `layers` has one (tests/unit/registry_test.cpp), so a partial layer never goes unexplained.
  std::map<std::string, std::string> limits;
  // Per layer it observes, whether its records name the GPU they belong to, and how; or why
  // they cannot (the verdict then says "device not attributable by this method" and this
  // reason, never a silent lump). schema/README.md has the table. Every layer in `layers`
  // has one (tests/unit/registry_test.cpp).
  struct DeviceAttribution {
    bool named = false;
    std::string how;  // named: where the device comes from; else why there is none
  };
  std::map<std::string, DeviceAttribution> devices;
  // Where the per-call benchmark can take its cost apart; nullopt: it cannot.
  std::optional<CostSplit> cost_split;
  // The bars the benchmark holds its per-call cost to; their references join the `priced`
  // group, so that one benchmark run has them all.
  std::vector<CostBar> cost_bars;
  std::string not_built_reason;  // when !built although it has an issue (e.g. built without libbpf)
  // A check of its own, after the common ones: empty = can run, else the one-line reason.
  std::function<std::string()> unavailable_because;
  // The same, for a check that depends on the method's options (a library path the user
  // may give with --set).
  std::function<std::string(const MethodOptions&)> unavailable_with;
  // Throws std::invalid_argument for options it cannot take.
  std::function<std::unique_ptr<Tracer>(const HostFacts&, const MethodOptions&)> make;
};

struct Availability {
  bool ok = false;
  std::string reason;  // one line, says what to do
};

const std::vector<Method>& methods();
const Method* find_method(const std::string& name);
// The names `--method` takes for groups of methods, each with what it means:
//   all       every method the registry lists;
//   compared  the methods a user compares: every kind but the cost references (which the
//             benchmark prices; their sightings are their method's);
//   priced    compared, and the cost references a method's cost split nests (CostSplit)
//             or its cost bars name (Method::cost_bars): what the benchmark needs to
//             take each method's cost apart and judge it.
// Scripts name a group instead of listing methods, so that a new method joins them.
const std::map<std::string, std::vector<std::string>>& method_groups();
Availability availability(const Method& m, const HostFacts& host, const MethodOptions& options = {});

// PATH lookup as execvp does it; empty when absent.
std::filesystem::path find_on_path(const std::string& program);

// Puts `library` first in the child's LD_PRELOAD, keeping whatever the harness's own
// environment preloads after it. Throws when the library is missing (`what` names it).
void preload_first(Launch& launch, const std::filesystem::path& library, const std::string& what);

}  // namespace cudatrace
