#include "tracers/uprobe/uprobe_tracer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "common/clock.h"
#include "common/elf_file.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "tracers/ebpf/ring_spool.h"
#include "tracers/ebpf/live_store.h"
#include "tracers/pause_channel.h"
#include "tracers/uprobe/load_follower.h"
#include "tracers/uprobe/process_maps.h"
#include "tracers/uprobe/uprobe_session.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct UprobeLiveDecode : LiveStore<uprobe_call, UprobeCallDecoder, DecodeStats> {
  UprobeLiveDecode(const fs::path& run_dir, UprobeCallDecoder::MoreFunctions more, NameFromFile names)
      : LiveStore(run_dir, run_dir / "uprobe.bin.zst", [&](DecodeStats& stats, WholeSink, CallSink calls) {
          return UprobeCallDecoder(std::move(more), stats, std::move(names), std::move(calls));
        }) {}
};

UprobeTracer::UprobeTracer(uprobe_mode mode, uint64_t ring_bytes, uint64_t max_spool_bytes)
    : mode_(mode), ring_bytes_(ring_bytes), max_spool_bytes_(max_spool_bytes) {}
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
  find_loader();
  // Nothing to probe is a result (both layers not observed, with the plan's reasons), not
  // a failed run: the program still runs, untraced.
  if (plan_.functions.size() > 0xFFFF) throw std::runtime_error("more functions than a probe cookie can number");
  pause_ = std::make_unique<PauseChannel>();
  launch.env[kPauseFdEnv] = std::to_string(pause_->program_fd());
}

void UprobeTracer::find_loader() {
  const std::string interp = program_interpreter(exe_);
  if (interp.empty()) {
    loader_why_not_ = "a static executable: no dynamic loader to follow, only what it links is probed";
    return;
  }
  std::error_code ec;
  const fs::path ld_so = fs::canonical(interp, ec);
  std::string error;
  const FunctionSymbol* hook = nullptr;
  const auto symbols = ec ? std::vector<FunctionSymbol>{} : function_symbols(ld_so, true, error);
  for (const auto& f : symbols)
    if (f.name == "_dl_debug_state") hook = &f;
  if (!hook) {
    loader_why_not_ = "no _dl_debug_state in " + interp + ": libraries loaded after start are not followed";
    return;
  }
  loader_ = ld_so;
  loader_hook_offset_ = hook->file_offset;
  const uint64_t r_debug = symbol_value(ld_so, "_r_debug");  // an object: not among the functions
  loader_to_r_debug_ = r_debug ? int64_t(r_debug) - int64_t(hook->vaddr) : 0;
}

void UprobeTracer::attach(pid_t child) {
  if (pause_) pause_->close_program_end();  // the program has its copy now
  if (plan_.functions.empty() && loader_.empty()) {
    pause_.reset();  // nothing to pause: the program's requests fail at once
    return;
  }
  const int64_t t0 = monotonic_ns();
  start_ns_ = t0;
  session_ = std::make_unique<UprobeSession>(mode_, ring_bytes_);
  json failures = json::array();
  int64_t failed = 0;
  for (ProbedFile& f : plan_.files) {
    failed += int64_t(attach_file(f, f.path, failures));
    if (f.count && f.failed == f.count)
      plan_.not_probeable[f.path] = {f.layer, "no probe could be attached (" + f.first_failure + ")"};
  }
  if (failed && failed == int64_t(plan_.functions.size()))
    throw std::runtime_error("no probe could be attached: " + (failures.empty() ? std::string("?") : failures[0].get<std::string>()));
  session_->trace_process(child);
  session_->start(run_dir_ / "uprobe.bin.zst", max_spool_bytes_);
  live_ = std::make_unique<UprobeLiveDecode>(
      run_dir_,
      [this](size_t known, std::vector<ProbedFunction>& into) {
        const std::lock_guard<std::mutex> lock(functions_mutex_);
        into.insert(into.end(), plan_.functions.begin() + std::ptrdiff_t(std::min(known, plan_.functions.size())),
                    plan_.functions.end());
      },
      kernel_names_from_executable(exe_));
  if (!loader_.empty()) {
    if (std::string why = session_->attach_loader(loader_.string(), loader_hook_offset_, loader_to_r_debug_); !why.empty())
      loader_why_not_ = "the probe on " + loader_.string() + " could not be attached (" + why +
                        "): libraries loaded after start are not followed";
    else
      follower_ = std::make_unique<LoadFollower>(session_->loads_fd(),
                                                 [this](const uprobe_load_notice& n) { on_load(n); });
  }
  if (pause_) pause_->start([this](bool paused) { return session_->pause_calls(paused); });
  attach_notes_ = {{"probes_attached", session_->attached()},
                   {"links", session_->multi_links() ? "uprobe_multi, one per file and direction" : "one per probe"},
                   {"functions_failed", failed},
                   {"attach_failures", failures},
                   {"attach_ms", double(monotonic_ns() - t0) / 1e6},
                   {"ring_bytes", ring_bytes_}};
}

// The probes of one file's functions, one batch, each probe's cookie carrying its
// function's index; `path` is what the kernel opens (the file's name, or the descriptor of
// the file a process mapped). Failures are kept on the file (and the first ten in `failures`).
size_t UprobeTracer::attach_file(ProbedFile& f, const std::string& path, json& failures) {
  std::vector<uint64_t> offsets, cookies;
  std::map<uint64_t, const std::string*> symbol_at;
  for (size_t i = f.first; i < f.first + f.count; ++i) {
    offsets.push_back(plan_.functions[i].offset);
    cookies.push_back(probe_cookie(i, plan_.functions[i].symbol));
    symbol_at[plan_.functions[i].offset] = &plan_.functions[i].symbol;
  }
  const auto failed = session_->attach(path, offsets, cookies);
  f.failed = failed.size();
  for (const auto& [offset, why] : failed) {
    const std::string what = *symbol_at[offset] + ": " + why;
    if (f.first_failure.empty()) f.first_failure = what;
    if (failures.size() < 10) failures.push_back(what);
  }
  return failed.size();
}

// A traced process has just mapped libraries (it is held until this returns): probe every
// executable file it maps that no process mapped before, by its descriptor, so that the
// probes land on the very file mapped.
void UprobeTracer::on_load(const uprobe_load_notice& n) {
  std::string maps;
  bool truncated = false;
  if (!read_process_maps(pid_t(n.pid), maps, &truncated)) return;
  maps_truncated_ += truncated;  // mappings past the bound are not examined: counted as loss
  const double at_ms = double(int64_t(n.time_ns) - start_ns_) / 1e6;
  for (const MappedFile& m : executable_files(maps)) {
    if (!plan_.examined.insert({m.dev_major, m.dev_minor, m.inode}).second) continue;
    ++files_examined_;
    std::string why;
    const int fd = open_mapped_file(pid_t(n.pid), m, why);
    if (fd < 0) {
      if (unreadable_files_.size() < 10) unreadable_files_.push_back(m.path + ": " + why);
      // A library of the method's layers that cannot be read is a part of them unseen.
      const std::string base = fs::path(m.path).filename().string();
      if (base.rfind("libcudart.so", 0) == 0) plan_.not_probeable[m.path] = {layer::kRuntime, "cannot be opened: " + why};
      if (base.rfind("libcuda.so", 0) == 0) plan_.not_probeable[m.path] = {layer::kDriver, "cannot be opened: " + why};
      continue;
    }
    const int64_t t_file = monotonic_ns();
    const FileFinding found = examine_file(fd, m.path);
    const char* layer = found.role == FileRole::Driver ? layer::kDriver : layer::kRuntime;
    if (found.role == FileRole::RuntimeStripped) {
      plan_.not_probeable[m.path] = {layer, "cudart is linked into it statically and its symbols were stripped"};
    } else if (found.role != FileRole::None && plan_.functions.size() + found.symbols.size() > 0xFFFF) {
      functions_over_limit_ += found.symbols.size();
      plan_.not_probeable[m.path] = {layer, "more functions in one run than a probe cookie can number (65535)"};
    } else if (found.role != FileRole::None) {
      char how[96];
      std::snprintf(how, sizeof how, "mapped by pid %u, at its loader's notification %.1f ms after start", n.pid, at_ms);
      ProbedFile* f;
      {
        const std::lock_guard<std::mutex> lock(functions_mutex_);
        f = add_file_functions(plan_, found, m.path, how);
      }
      if (f) {
        // The probes go on the descriptor's file: the path may name another file by now.
        json ignored;
        functions_failed_ += int64_t(attach_file(*f, "/proc/self/fd/" + std::to_string(fd), ignored));
        if (f->count && f->failed == f->count)
          plan_.not_probeable[m.path] = {layer, "no probe could be attached (" + f->first_failure + ")"};
      }
    }
    close(fd);
    note_file_time(m.path, monotonic_ns() - t_file);
  }
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
  if (!session_ || !live_) {
    report.error = "the uprobe session never started";
    return report;
  }
  const json following = stop_following();
  const json pausing = stop_pausing();
  const uint64_t malformed_notices = following.is_object() ? following.value("malformed_notices", uint64_t(0)) : 0;
  session_->stop();
  const auto lost = session_->losses();
  report.loss = {{"ring_full", lost[UPROBE_LOST_RING_FULL]},
                 {"nested_too_deep", lost[UPROBE_LOST_TOO_DEEP]},
                 {"exit_without_entry", lost[UPROBE_LOST_NO_ENTRY]},
                 {"threads_full", lost[UPROBE_LOST_THREADS_FULL]},
                 {"load_notices_lost", lost[UPROBE_LOST_LOAD_NOTICE]},
                 {"functions_over_limit", functions_over_limit_},
                 {"maps_truncated", maps_truncated_},
                 {"malformed_notices", malformed_notices},
                 {"malformed_records", session_->short_records()},
                 {"over_bound_records", session_->spool_over_bound()},
                 {"records_the_disk_refused", session_->spool_unwritten()}};
  const uint64_t accepted = session_->spool_accepted();
  const std::string write_error = session_->spool_write_error();
  session_.reset();  // everything detached before anything else can fail

  // The rest of the spool, decoded in the ring's order as the run's first part was: memory
  // holds a slice of records and the calls that wait for their outer call, never the run's events.
  const auto [stats, read, cut] = live_->finish();
  live_.reset();
  // CUDATRACE_KEEP_SPOOL=1 keeps the raw records (struct uprobe_call, a zstd stream) for debugging a decode.
  if (!std::getenv("CUDATRACE_KEEP_SPOOL")) fs::remove(run_dir / "uprobe.bin.zst");
  report.loss["nested_calls_unfolded_past_window"] = stats.settled_over_window;

  if (mode_ != UPROBE_MODE_EMPTY) judge_layers(report);
  report.notes = plan_.notes;
  report.notes["files_probed"] = plan_.files_json();
  report.notes["following"] = following;
  report.notes["pause_requests"] = pausing;
  for (const auto& [k, v] : attach_notes_.items()) report.notes[k] = v;
  report.notes["mode"] = mode_ == UPROBE_MODE_FULL ? "entry+exit" : mode_ == UPROBE_MODE_ENTER ? "entry only" : "empty programs";
  report.notes["records"] = stats.records;
  report.notes["events"] = stats.emitted;
  report.notes["naming_calls"] = stats.plumbing;
  report.notes["folded_nested_calls"] = stats.folded_nested;
  report.notes["folded_nested_by_name"] = stats.folded_by_name;
  report.notes["records_of_unknown_function"] = stats.unknown_function;
  report.notes["kernel_names_read_from_the_executable"] = stats.names_from_file;
  report.notes["nested_calls_whose_outer_call_never_came"] = stats.settled_at_end;
  report.notes["spool_bound_bytes"] = max_spool_bytes_;
  account_spool(report, accepted, read, write_error, cut);
  if (mode_ == UPROBE_MODE_ENTER)
    report.notes["limits"] = "entry only: no return codes, no durations, no out-parameters; calls nested in calls of "
                             "the same layer cannot be told apart";
  return report;
}

void UprobeTracer::judge_layers(TracerReport& report) const {
  // What was not probed says why in the plan's notes (a string where nothing was found).
  auto why = [&](const char* key, const char* fallback) {
    return plan_.notes.contains(key) && plan_.notes[key].is_string() ? plan_.notes[key].get<std::string>()
                                                                       : std::string(fallback);
  };
  const std::string not_followed = loader_why_not_.empty() ? "" : "; " + loader_why_not_;
  const std::string mapped = "no process of the program mapped one (" + std::to_string(files_examined_) +
                             " files examined as they were loaded)";
  // Per layer: observed when a file of it has probes; what could not be probed is named,
  // making the layer partly observed, or the reason it is not observed at all.
  for (const char* l : {layer::kRuntime, layer::kDriver}) {
    std::string unprobed;
    for (const auto& [file, what] : plan_.not_probeable)
      if (what.first == l)
        unprobed += (unprobed.empty() ? "" : "; ") + (std::string(l) + " calls from " + file + " not observable: " + what.second);
    if (plan_.probed(l)) {
      report.layers.push_back(l);
      if (!unprobed.empty()) report.partly_unobserved[l] = unprobed;
    } else if (!unprobed.empty()) {
      report.unobserved[l] = unprobed;
    } else if (l == std::string(layer::kRuntime)) {
      report.unobserved[l] = loader_.empty() ? why("runtime", "no cudart found to probe before the program ran") + not_followed
                                             : "no cudart to probe: " + mapped;
    } else {
      report.unobserved[l] = loader_.empty() ? why("driver", "no libcuda.so.1 found to probe") + not_followed
                                             : "no libcuda to probe: " + mapped;
    }
  }
}

// The files that held a process longest (examined, and probed if they had CUDA in them).
void UprobeTracer::note_file_time(const std::string& path, int64_t ns) {
  constexpr size_t kKept = 5;
  slowest_files_.emplace_back(ns, path);
  std::sort(slowest_files_.begin(), slowest_files_.end(), std::greater<>());
  if (slowest_files_.size() > kKept) slowest_files_.resize(kKept);
}

json UprobeTracer::stop_following() {
  if (!follower_) return loader_why_not_.empty() ? json("off") : json(loader_why_not_);
  follower_->stop();
  const auto st = follower_->stats();
  follower_.reset();
  json j = {{"how", "a uprobe on " + loader_.string() +
                        " _dl_debug_state: each process that has mapped libraries is stopped (SIGSTOP) before any "
                        "of their code runs, and resumed once they are probed: no call is made in between"},
            {"notifications", st.notices},
            {"holds", st.held},
            {"held_ms_total", double(st.held_ns_total) / 1e6},
            {"held_ms_max", double(st.held_ns_max) / 1e6},
            {"resume_failures", st.resume_failures},
            {"malformed_notices", st.malformed},
            {"files_examined", files_examined_},
            {"functions_failed", functions_failed_}};
  if (!unreadable_files_.empty()) j["unreadable_files"] = unreadable_files_;
  json slowest = json::array();
  for (const auto& [ns, path] : slowest_files_) slowest.push_back({{"file", path}, {"ms", double(ns) / 1e6}});
  j["slowest_files"] = slowest;
  return j;
}

// The pause server stops before the session does (it uses the session's links).
json UprobeTracer::stop_pausing() {
  if (!pause_) return json(nullptr);
  pause_->stop();
  json j = {{"requests", pause_->requests()}};
  if (std::string why = pause_->first_refusal(); !why.empty()) j["first_refusal"] = why;
  pause_.reset();
  return j;
}

// The empty programs' reference (uprobe-empty) probes the same functions as uprobe: its
// cost is uprobe's on the same layers, so it is judged here as well.
TracerReport UprobeTracer::layers_without_events() {
  TracerReport report;
  judge_layers(report);
  return report;
}

void UprobeTracer::abandon(const fs::path& run_dir) {
  stop_following();
  stop_pausing();
  if (session_) session_->stop();
  session_.reset();
  live_.reset();  // the partial store goes with the unclosed writer
  fs::remove(run_dir / "uprobe.bin.zst");
}

}  // namespace cudatrace
