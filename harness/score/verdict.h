#pragma once
// What a method saw of a program, said truthfully where there is no ledger (`harness --
// CMD`), and which of its layers it did not observe at all, with the reason, in any run.
// A layer not observed is a result of its own: never shown as a clean zero loss.
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/score/kernel_families.h"
#include "harness/score/loss_units.h"
#include "common/event.h"
#include "harness/score/per_device.h"
#include "tracers/tracer.h"

namespace cudatrace {

// The layers `m` exists to observe that this run's report lacks: [{layer, reason}].
nlohmann::json unobserved_layers(const Method& m, const TracerReport& report);

// Per layer, what a method's events add up to, in units every method shares: calls per
// family (runtime, driver: cuMemAlloc_v2 and cuMemAlloc are one family, __cudaLaunchKernel
// is cudaLaunchKernel), kernel runs per kernel (gpu-activity: one record each; device:
// distinct launches with at least one block seen), syscalls per name.
// Besides the layers, two block tallies per kernel family: the blocks a device-layer method
// counted, and the grids of kernel activity records (CUPTI's), so that a device method's
// blocks can be checked against the reference, not only its kernel runs.
using FamilyCounts = std::map<std::string, std::map<std::string, int64_t>>;
inline constexpr const char* kDeviceBlocks = "device.blocks";
inline constexpr const char* kActivityBlocks = "gpu-activity.blocks";
// The blocks the device layer's launches asked for (their grids), where its records carry
// them: what the method should have counted in its own run.
inline constexpr const char* kDeviceGridBlocks = "device.grid-blocks";
void count_families(const std::vector<Event>& events, FamilyCounts& into);
// The same, one event at a time (a run's events are streamed, never held). A device-layer
// launch is counted once however many events it has (devhook writes one per block): a
// method writes a launch's events together (devhook in (launch, execution) order, the
// sanitizer one event per launch), so the counter keeps only each process's last launch,
// not one entry per launch (that was 1.6 GB at 5.7 M launches, a five-minute PyTorch run
// under the sanitizer on the H200). Kernel names are folded once per name, not per event.
class FamilyCounter {
 public:
  explicit FamilyCounter(FamilyCounts& into) : into_(into) {}
  void add(const Event& e);
  // The same, a kernel's args read where the store packs them (e.args not read): building
  // them as JSON for each of millions of launches was most of a sanitizer run's count.
  void add(const Event& e, std::string_view packed_args);
  // Whether add() reads the event's args: a kernel's (its symbol, grid, blocks, launch),
  // never a call's. A writer that stores args packed unpacks them only for these.
  static bool reads_args(const Event& e);

 private:
  struct KernelArgs;  // what the counter reads of a kernel's args, whichever way they came
  void count_kernel(const Event& e, const KernelArgs& k);
  const std::string& family_of_kernel(std::string_view symbol);
  FamilyCounts& into_;
  struct Run {
    int64_t launch = 0, execution = 0;
    std::string family;
  };
  // Per process, its last device launch: an entry per process, as ProcessCounter keeps (never
  // dropped: a launch split by a dropped entry would count twice).
  std::unordered_map<int64_t, Run> last_run_;
  // A kernel's symbol -> its family (kernel_family demangles): a cache, emptied past 65,536
  // names (folded anew after, the counts alike).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::string, Hash, std::equal_to<>> kernel_families_;
  // Per call layer, a call's name -> its family's counter (null: cudart's plumbing), so
  // that a name is folded once, not once per call. Bounded: past it, names are folded anew.
  std::unordered_map<std::string, int64_t*> runtime_slots_, driver_slots_;
};


struct MethodView {
  std::string method;
  bool ran_ok = false;                 // at least one repetition without failure
  std::vector<std::string> intended;   // Method::layers
  std::set<std::string> observed;      // layers its reports said it observed
  std::map<std::string, std::string> unobserved;  // layer -> reason
  FamilyCounts counts;                 // summed over repetitions
  int reps = 0;
  std::map<std::string, std::string> partly_unobserved;  // layer -> what part it could not see, and why
  std::map<std::string, std::string> limits;             // Method::limits
  nlohmann::json loss = nlohmann::json::object();         // its loss counters, summed over repetitions
  const ProcessTallies* processes = nullptr;  // its events per process and device (per_device.h)
};

// The device layer's blocks per kernel against CUPTI's kernel records (verdict's "blocks"):
// {reference, seen, launched (the grids of the method's own launches, where its records carry
// them), kernels_differing: [...], why (only where the totals differ)}.
nlohmann::json compare_blocks(const MethodView& cupti, const MethodView& m);

// Why a method saw less than all of `layer`: the tracer's own account of this run, else the
// events it lost (its loss counters), else what the method cannot see whatever the program
// (Method::limits). Empty only for a method that breaks the rule that names every limit.
// What a method lost, by its own counters (its ring's drops, the harness's bounds, files cut
// short), is summed by unit (loss_units.h, loss_totals), and said in words by lost_text
// ("over_bound_records=7904074, dropped=2"; "" when it lost none). A method that lost
// anything is never complete, whatever the reference (a union reference cannot see what
// every method missed).
// Adds one run's integer loss counters into a total (a combination's, over repetitions).
void add_loss(nlohmann::json& total, const nlohmann::json& more);
std::string lost_text(const nlohmann::json& loss);

// A share for a person: "100.0%" only when nothing is missing; a shortfall is rounded down
// and, where that still reads as 99.9% or more, says how many are missing ("99.9%, 1 of
// 14821 missing"), so that a short layer never reads as whole.
std::string share_text(int64_t matched, int64_t total);

std::string partial_reason(const std::map<std::string, std::string>& partly_unobserved, const nlohmann::json& loss,
                           const std::map<std::string, std::string>& limits, const std::string& layer);

// The verdict of a command run: per layer a reference (CUPTI's callbacks, and its kernel
// activity for kernel runs, where cupti ran; otherwise the most any method saw of each
// family), then per method and layer its coverage of that reference, what only it saw, the
// families it missed entirely and, where it saw less than all, why (the method's own
// reason, or that it gave none), and the families side by side. Then per process and device
// ("per_device"): each method's processes matched to CUPTI's, and its coverage of each
// (process, device) of the reference, so that a rank or a GPU that saw nothing is named;
// a method whose records name no device is compared per process, its rows saying so.
nlohmann::json command_verdict(const std::vector<MethodView>& methods);
// That verdict as the console shows it: the reference per layer (and what it leaves out),
// then per method and layer its coverage, what it missed entirely and why.
std::string verdict_text(const nlohmann::json& verdict);

}  // namespace cudatrace
