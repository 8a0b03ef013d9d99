#include "tracers/uprobe/uprobe_tracer.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>

#include "common/clock.h"
#include "common/elf_file.h"
#include "common/event_io.h"
#include "tracers/uprobe/library_search.h"
#include "tracers/uprobe/uprobe_session.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The runtime functions worth a probe: the API (cuda*), the launch entry CUDA 13's <<<>>>
// uses, and the two calls that name kernels. cudart's other __cuda* plumbing
// (__cudaPushCallConfiguration, ...) is not the program's API and would only add cost.
bool is_runtime_probe(const std::string& name) {
  return name.rfind("cuda", 0) == 0 || name == "__cudaLaunchKernel" || name == "__cudaLaunchKernel_ptsz" ||
         name == "__cudaRegisterFunction" || name == "__cudaGetKernel";
}

bool is_driver_probe(const std::string& name) { return name.rfind("cu", 0) == 0 && name.rfind("cuda", 0) != 0; }

// Adds one probe per code address: two names for one address would report each call twice.
// Of aliases, the name we decode arguments for wins, then the shorter one.
int64_t add_functions(ProbePlan& plan, const fs::path& binary, const std::vector<FunctionSymbol>& symbols,
                      bool (*wanted)(const std::string&), const char* layer) {
  std::map<uint64_t, const FunctionSymbol*> by_offset;
  int64_t aliases = 0;
  for (const auto& s : symbols) {
    if (!wanted(s.name)) continue;
    auto [it, fresh] = by_offset.try_emplace(s.file_offset, &s);
    if (fresh) continue;
    ++aliases;
    const FunctionSymbol* old = it->second;
    const bool new_known = probe_spec(s.name) || find_call(s.name);
    const bool old_known = probe_spec(old->name) || find_call(old->name);
    if ((new_known && !old_known) || (new_known == old_known && s.name.size() < old->name.size())) it->second = &s;
  }
  for (const auto& [offset, s] : by_offset) plan.functions.push_back({s->name, layer, binary.string(), offset});
  return aliases;
}

}  // namespace

ProbePlan plan_probes(const fs::path& exe, const std::string& cudart, const std::string& ld_library_path) {
  ProbePlan plan;
  std::string error;
  fs::path runtime_file;  // what asks for libcuda.so.1 (cudart's own RUNPATH applies to its dlopen)
  if (cudart == "shared") {
    for (const auto& lib : needed_libraries(exe)) {
      if (lib.rfind("libcudart.so", 0) != 0) continue;
      LibraryLookup found = find_library(lib, exe, ld_library_path);
      if (found.path.empty()) {
        plan.notes["runtime"] = found.via;
        break;
      }
      auto symbols = function_symbols(found.path, false, error);
      const size_t before = plan.functions.size();
      const int64_t aliases = add_functions(plan, found.path, symbols, is_runtime_probe, layer::kRuntime);
      plan.notes["runtime"] = {{"file", found.path.string()}, {"found_via", found.via},
                               {"functions", plan.functions.size() - before}, {"aliases_skipped", aliases}};
      plan.runtime = plan.functions.size() > before;
      runtime_file = found.path;
    }
  } else {
    // Static cudart lives in the executable, its API functions as local symbols.
    auto symbols = function_symbols(exe, true, error);
    const int64_t aliases = add_functions(plan, exe, symbols, is_runtime_probe, layer::kRuntime);
    plan.runtime = !plan.functions.empty();
    if (plan.runtime)
      plan.notes["runtime"] = {{"file", exe.string()}, {"found_via", "the executable's symbol table (static cudart)"},
                               {"functions", plan.functions.size()}, {"aliases_skipped", aliases}};
    else
      plan.notes["runtime"] = "no cudart functions in " + exe.string() + " (" +
                              (error.empty() ? "it does not link cudart statically" : error) +
                              "): the runtime layer is not observed";
    runtime_file = exe;
  }
  if (runtime_file.empty()) runtime_file = exe;
  LibraryLookup driver = find_library("libcuda.so.1", runtime_file, ld_library_path);
  if (driver.path.empty()) {
    plan.notes["driver"] = driver.via + ": no driver on this host, the driver layer is not observed";
  } else {
    auto symbols = function_symbols(driver.path, false, error);
    const size_t before = plan.functions.size();
    const int64_t aliases = add_functions(plan, driver.path, symbols, is_driver_probe, layer::kDriver);
    plan.driver = plan.functions.size() > before;
    plan.notes["driver"] = {{"file", driver.path.string()}, {"found_via", driver.via},
                            {"functions", plan.functions.size() - before}, {"aliases_skipped", aliases}};
  }
  return plan;
}

UprobeTracer::UprobeTracer(uprobe_mode mode, uint64_t ring_bytes) : mode_(mode), ring_bytes_(ring_bytes) {}
UprobeTracer::~UprobeTracer() = default;

void UprobeTracer::prepare(Launch& launch, const Target& target, const fs::path& run_dir) {
  run_dir_ = run_dir;
  std::string ldlp;
  if (auto it = launch.env.find("LD_LIBRARY_PATH"); it != launch.env.end())
    ldlp = it->second;
  else if (const char* env = std::getenv("LD_LIBRARY_PATH"))
    ldlp = env;
  exe_ = launch.argv.at(0);
  plan_ = plan_probes(exe_, target.cudart, ldlp);
  // Nothing to probe is a result (both layers not observed, with the plan's reasons), not
  // a failed run: the program still runs, untraced.
  if (plan_.functions.size() > 0xFFFF) throw std::runtime_error("more functions than a probe cookie can number");
}

void UprobeTracer::attach(pid_t child) {
  if (plan_.functions.empty()) return;
  const int64_t t0 = monotonic_ns();
  session_ = std::make_unique<UprobeSession>(mode_, ring_bytes_);
  // One batch per file, each probe's cookie carrying its function's index.
  std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<uint64_t>>> by_binary;
  std::map<std::pair<std::string, uint64_t>, std::string> symbol_at;
  for (size_t i = 0; i < plan_.functions.size(); ++i) {
    const ProbedFunction& f = plan_.functions[i];
    by_binary[f.binary].first.push_back(f.offset);
    by_binary[f.binary].second.push_back(probe_cookie(i, f.symbol));
    symbol_at[{f.binary, f.offset}] = f.symbol;
  }
  json failures = json::array();
  int64_t failed = 0;
  for (const auto& [binary, batch] : by_binary) {
    for (const auto& [offset, why] : session_->attach(binary, batch.first, batch.second)) {
      ++failed;
      if (failures.size() < 10) failures.push_back(symbol_at[{binary, offset}] + ": " + why);
    }
  }
  if (failed == int64_t(plan_.functions.size()))
    throw std::runtime_error("no probe could be attached: " + (failures.empty() ? std::string("?") : failures[0].get<std::string>()));
  session_->trace_process(child);
  session_->start(run_dir_ / "uprobe.bin");
  attach_notes_ = {{"probes_attached", session_->attached()},
                   {"links", session_->multi_links() ? "uprobe_multi, one per file and direction" : "one per probe"},
                   {"functions_failed", failed},
                   {"attach_failures", failures},
                   {"attach_ms", double(monotonic_ns() - t0) / 1e6},
                   {"ring_bytes", ring_bytes_}};
}

TracerReport UprobeTracer::finish(const fs::path& run_dir) {
  TracerReport report;
  if (plan_.functions.empty() && !session_) {
    report.notes = plan_.notes;
    report.notes["probes"] = "none attached: nothing to probe before the program ran";
    for (const char* l : {layer::kRuntime, layer::kDriver})
      report.unobserved[l] = plan_.notes.contains(l) && plan_.notes[l].is_string() ? plan_.notes[l].get<std::string>()
                                                                                     : "nothing to probe";
    return report;
  }
  if (!session_) {
    report.error = "the uprobe session never started";
    return report;
  }
  session_->stop();
  const auto lost = session_->losses();
  report.loss = {{"ring_full", lost[UPROBE_LOST_RING_FULL]},
                 {"nested_too_deep", lost[UPROBE_LOST_TOO_DEEP]},
                 {"exit_without_entry", lost[UPROBE_LOST_NO_ENTRY]},
                 {"threads_full", lost[UPROBE_LOST_THREADS_FULL]},
                 {"malformed_records", session_->short_records()}};
  const uint64_t records = session_->records();
  session_.reset();  // everything detached before anything else can fail

  std::vector<uprobe_call> calls;
  calls.reserve(records);
  {
    std::ifstream in(run_dir / "uprobe.bin", std::ios::binary);
    uprobe_call c;
    while (in.read(reinterpret_cast<char*>(&c), sizeof c)) calls.push_back(c);
  }
  // CUDATRACE_KEEP_SPOOL=1 keeps the raw records (struct uprobe_call) for debugging a decode.
  if (!std::getenv("CUDATRACE_KEEP_SPOOL")) fs::remove(run_dir / "uprobe.bin");
  DecodeStats stats;
  std::vector<Event> events =
      decode_uprobe_calls(std::move(calls), plan_.functions, stats, kernel_names_from_executable(exe_));
  EventWriter out(run_dir / "events.jsonl");
  for (const auto& e : events) out.write(e);
  out.close();

  if (mode_ != UPROBE_MODE_EMPTY) {
    // What was not probed says why in the plan's notes (a string where nothing was found).
    auto why = [&](const char* key, const char* fallback) {
      return plan_.notes.contains(key) && plan_.notes[key].is_string() ? plan_.notes[key].get<std::string>()
                                                                         : std::string(fallback);
    };
    if (plan_.runtime)
      report.layers.push_back(layer::kRuntime);
    else
      report.unobserved[layer::kRuntime] = why("runtime", "no cudart found to probe before the program ran");
    if (plan_.driver)
      report.layers.push_back(layer::kDriver);
    else
      report.unobserved[layer::kDriver] = why("driver", "no libcuda.so.1 found to probe");
  }
  report.notes = plan_.notes;
  for (const auto& [k, v] : attach_notes_.items()) report.notes[k] = v;
  report.notes["mode"] = mode_ == UPROBE_MODE_FULL ? "entry+exit" : mode_ == UPROBE_MODE_ENTER ? "entry only" : "empty programs";
  report.notes["records"] = stats.records;
  report.notes["events"] = stats.emitted;
  report.notes["naming_calls"] = stats.plumbing;
  report.notes["folded_nested_calls"] = stats.folded_nested;
  report.notes["folded_nested_by_name"] = stats.folded_by_name;
  report.notes["records_of_unknown_function"] = stats.unknown_function;
  report.notes["kernel_names_read_from_the_executable"] = stats.names_from_file;
  if (mode_ == UPROBE_MODE_ENTER)
    report.notes["limits"] = "entry only: no return codes, no durations, no out-parameters; calls nested in calls of "
                             "the same layer cannot be told apart";
  return report;
}

void UprobeTracer::abandon(const fs::path& run_dir) {
  if (session_) session_->stop();
  session_.reset();
  fs::remove(run_dir / "uprobe.bin");
}

}  // namespace cudatrace
