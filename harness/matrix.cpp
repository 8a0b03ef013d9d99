#include "harness/matrix.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_map>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "common/clock.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "common/outside_text.h"
#include "harness/catalog.h"
#include "harness/combo.h"
#include "harness/out/summary.h"
#include "harness/plan.h"
#include "harness/stats/cost.h"
#include "harness/score/event_tally.h"
#include "harness/score/live_scoring.h"
#include "common/elf_file.h"
#include "harness/stats/bench_stats.h"
#include "harness/run/host.h"
#include "harness/score/result_check.h"
#include "harness/out/results_io.h"
#include "harness/score/ledger_check.h"
#include "harness/score/matcher.h"
#include "harness/out/otlp_http.h"
#include "harness/score/per_device.h"
#include "harness/run/runner.h"
#include "harness/run/safe_files.h"
#include "harness/score/verdict.h"
#include "harness/score/workload_score.h"
#include "ledger/ledger.h"
#include "tracers/none/none_tracer.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct RunContext {
  const Options& opts;
  const HostFacts& host;
  fs::path runs_dir;
  std::optional<Credentials> run_as;
  std::string write_error;  // set when results could not be written: the matrix stops
  const json* manifest = nullptr;
  OtlpRunSender* otlp = nullptr;  // --otlp-endpoint: each run is sent once its run.json is written
  // How each program ended untraced (method none), by "workload|linkage|rep": a traced run
  // that ends otherwise changed what the program does, and fails with both named.
  std::map<std::string, ChildResult> untraced;
  // --result: the pattern, and what each untraced run computed (nullopt: printed nothing it matches).
  std::optional<std::regex> result_re;
  std::map<std::string, UntracedResults> untraced_results;  // by "workload|linkage"
  SpaceReserve* reserve = nullptr;  // freed for the summary when the disk is full
};

// Set aside before the runs for run.json and summary.json (a full matrix's summary is a
// few hundred KiB).
constexpr uint64_t kSummaryReserve = uint64_t(4) << 20;

// The untraced run's ending to compare a traced run of `combo` against: the same
// repetition's, else the first's, else the cost mode's warm-up run (rep 0: in a drawn order,
// round 1's traced runs may come before its untraced one). Null when there is none.
const ChildResult* untraced_ending(const RunContext& ctx, const Combo& combo, int rep) {
  for (const int r : {rep, 1, 0})
    if (auto it = ctx.untraced.find(combo.workload + "|" + combo.linkage + "|" + std::to_string(r)); it != ctx.untraced.end())
      return &it->second;
  return nullptr;
}

// A results write that failed for want of space: nothing after it can be kept either.
bool out_of_space(const std::string& what) {
  return what.find(std::strerror(ENOSPC)) != std::string::npos || what.find(std::strerror(EDQUOT)) != std::string::npos;
}

// How much of the program's own output a run keeps when the disk is full.
constexpr uint64_t kOutputKeptWhenFull = uint64_t(64) << 10;

// Out of space: the program's own output goes in its turn (its first bytes kept), and
// run.json says so.
void free_program_output(const fs::path& dir, ChildResult& child, json& run) {
  cut_program_output(dir / "stdout.txt", kOutputKeptWhenFull, child.stdout_kept);
  cut_program_output(dir / "stderr.txt", kOutputKeptWhenFull, child.stderr_kept);
  run["program_output"] = to_json(child);
}

// run.json, whatever the program did to the disk: when it does not fit, the program's
// output is cut and then the reserve freed, each followed by another try.
void write_run_json(const fs::path& dir, json& run, std::vector<std::string>& failures, ChildResult& child,
                    RunContext& ctx) {
  for (int attempt = 0;; ++attempt) {
    try {
      write_json(dir / "run.json", run);
      return;
    } catch (const WriteError& e) {
      if (!out_of_space(e.what()) || attempt == 2) throw;
      if (ctx.write_error.empty()) ctx.write_error = e.what();  // the matrix stops after this run
      failures.push_back(e.what());
      run["ok"] = false;
      run["failures"] = failures;
      if (attempt == 0) free_program_output(dir, child, run);
      else if (!ctx.reserve || !ctx.reserve->release()) throw;
    }
  }
}

// One repetition in flight: what each stage of run_one leaves for the next.
struct RunState {
  const Combo& combo;
  int rep;
  fs::path dir;         // the run's folder: root writes here, the program cannot
  fs::path target_dir;  // dir/target: the program's own, for its ledger and in-process tracers
  json run;             // becomes run.json
  std::vector<std::string> failures;
  ChildResult child;
  TracerReport report;
  EventStream events;   // kept only where a later stage needs them (a workload's matcher, OTLP)
  std::unique_ptr<EventTally> tally;  // counted as the tracer wrote its store
  std::unique_ptr<LiveScoring> live;  // a workload's calls, kept for its scoring as they were stored
  FirstLaunch first_launch;           // a workload's, from its ledger
  uint64_t events_read = 0;
  int64_t t_start = 0, t_ran = 0, t_finished = 0;  // monotonic: where the harness's time went
};

// Stage 1: the run's two folders. Root reads from target/ never through a link (safe_files.h).
void make_run_folders(RunState& r, const RunContext& ctx) {
  r.dir = ctx.runs_dir / (r.combo.label() + ".r" + std::to_string(r.rep));
  make_dir_exclusive(r.dir);
  r.target_dir = r.dir / "target";
  make_dir_exclusive(r.target_dir);
  if (ctx.run_as && chown(r.target_dir.c_str(), ctx.run_as->uid, ctx.run_as->gid) != 0)
    throw WriteError("cannot hand " + r.target_dir.string() + " to " + ctx.run_as->user + ": " + std::strerror(errno));
  r.run = {{"workload", r.combo.workload.empty() ? json(nullptr) : json(r.combo.workload)},
           {"linkage", r.combo.linkage.empty() ? json(nullptr) : json(r.combo.linkage)},
           {"method", r.combo.method},
           {"rep", r.rep}};
  // Events carry CLOCK_MONOTONIC: this is what turns them into wall-clock time (OTLP export).
  const ClockOffset clock = realtime_minus_monotonic();
  r.run["clock"] = {{"realtime_minus_monotonic_ns", clock.realtime_minus_monotonic_ns},
                    {"uncertainty_ns", clock.uncertainty_ns}};
}

// Stage 2: what runs, with what in its environment: a workload (its ledger in target/) or
// the user's command.
void describe_target(RunState& r, const RunContext& ctx, Target& target, Launch& launch) {
  if (!r.combo.workload.empty()) {
    fs::path bin = workload_binary(ctx.host.prefix, r.combo.workload, r.combo.linkage);
    target.argv.push_back(bin.string());
    auto extra = ctx.opts.workload_args.find(r.combo.workload);
    if (extra != ctx.opts.workload_args.end())
      target.argv.insert(target.argv.end(), extra->second.begin(), extra->second.end());
    target.cudart = r.combo.linkage;
    launch.env[ledger::kEnvVar] = (r.target_dir / ledger::kFileName).string();
  } else {
    target.argv = ctx.opts.command;
    target.cudart = cudart_linkage(target.argv[0]);
    launch.env[kStartupMarkEnv] = (r.target_dir / kStartupMarkFile).string();
    launch.env[kStepMarkEnv] = (r.target_dir / kStepMarkFile).string();  // steps.h: its steps' ends
  }
  target.writable_dir = r.target_dir;
  launch.argv = target.argv;
  r.run["argv"] = target.argv;
  r.run["cudart"] = target.cudart;
}

// Stage 3: the program under the tracer, then the method's conversion and its report.
// A tracer that throws fails the run with its reason; it never ends the matrix.
void run_traced(RunState& r, const RunContext& ctx, Tracer& tracer, Launch& launch, const Target& target) {
  r.t_start = monotonic_ns();
  // The run is counted as the tracer stores it, one pass and no second read of the store;
  // a tracer that decodes while the program runs (cupti) opens its store before it starts.
  r.tally = std::make_unique<EventTally>(bool(ctx.otlp), r.combo.workload.empty(), &ctx.host.devices);
  // A workload's calls are also kept per thread as they are stored, so that its scoring
  // after the program reads the ledger alone (harness/score/live_scoring.h).
  if (!r.combo.workload.empty()) r.live = std::make_unique<LiveScoring>(*r.tally, r.dir / "match-sort");
  ScopedEventTap tap(r.dir / kEventsFile, r.live ? static_cast<EventTap&>(*r.live) : *r.tally);
  try {
    tracer.prepare(launch, target, r.dir);
    ChildSpec spec{launch, r.dir, ctx.opts.timeout_s, ctx.run_as};
    if (launch.argv.front() != target.argv.front()) spec.program = target.argv.front();  // a tool starts it
    spec.stall_timeout_s = ctx.opts.stall_timeout_s.value_or(0);
    r.child = run_child(spec, tracer);
  } catch (const std::exception& e) {
    r.child.status = ChildStatus::TracerFailed;
    r.child.detail = std::string("tracer could not prepare the run: ") + e.what();
  }
  r.t_ran = monotonic_ns();
  try {
    // The method's converter runs as the program did: it reads what the program's user wrote.
    if (const std::vector<std::string> convert = tracer.conversion(r.dir);
        !convert.empty() && r.child.status != ChildStatus::TracerFailed) {
      const fs::path convert_dir = r.dir / "conversion";
      make_dir_exclusive(convert_dir);
      NoneTracer no_tracer;
      const ChildResult c = run_child(ChildSpec{Launch{convert, {}}, convert_dir, ctx.opts.timeout_s, ctx.run_as}, no_tracer);
      tracer.converted(c.status == ChildStatus::Exited && c.exit_code == 0,
                       convert.front() + ": " + c.detail + " (see " + (convert_dir / "stderr.txt").string() + ")");
    }
    r.report = tracer.finish(r.dir);
  } catch (const std::exception& e) {
    r.report.error = e.what();
  }
  r.t_finished = monotonic_ns();
  r.run["launch_env"] = launch.env;
}

// Stage 4: how the program ended, and whether tracing changed that: a traced run must end
// as the untraced run of the same program did.
void judge_ending(RunState& r, RunContext& ctx) {
  const ChildResult& child = r.child;
  r.run["status"] = to_string(child.status);
  r.run["exit_code"] = child.exit_code;
  r.run["signal"] = child.signal;
  r.run["wall_ns"] = child.wall_ns;
  r.run["detail"] = child.detail;
  r.run["left_running"] = child.left_running;  // killed when the program ended
  r.run["left_running_detail"] = child.left_running_detail;  // who started each, and whose it is
  if (!child.running_when_stopped.empty()) r.run["running_when_stopped"] = child.running_when_stopped;
  if (!child.stall.is_null()) r.run["stall"] = child.stall;  // stalled or busy, since when, what each process waited in
  r.run["program_output"] = to_json(child);     // stdout.txt and stderr.txt: kept and cut
  if (child.status == ChildStatus::Exited && child.exit_code != 0)
    r.failures.push_back(exit_meaning(r.combo, child.exit_code));
  else if (child.status != ChildStatus::Exited)
    r.failures.push_back(std::string(to_string(child.status)) + ": " + child.detail);
  if (r.combo.method == "none") {
    if (child.status == ChildStatus::Exited || child.status == ChildStatus::Signaled)
      ctx.untraced[r.combo.workload + "|" + r.combo.linkage + "|" + std::to_string(r.rep)] = child;
  } else if (const ChildResult* untraced = untraced_ending(ctx, r.combo, r.rep)) {
    const bool same = how_it_ended(*untraced) == how_it_ended(child);
    r.run["untraced_check"] = {{"untraced", how_it_ended(*untraced)}, {"traced", how_it_ended(child)}, {"same", same}};
    if (!same)
      r.failures.insert(r.failures.begin(), "traced, the program ended otherwise than untraced: " + how_it_ended(child) +
                                                " where the untraced run ended with " + how_it_ended(*untraced));
  } else {
    r.run["untraced_check"] = {{"untraced", nullptr},
                               {"why", r.combo.workload.empty() ? "--no-baseline: the command did not run untraced"
                                                                : "no untraced run (method none) of this workload in the matrix"}};
  }
}

// Stage 4b (--result): what the program computed, traced against untraced (the same
// repetition's untraced run, else the first's). A difference is named; --strict-result fails it.
void check_result(RunState& r, RunContext& ctx) {
  ProgramResult got = program_result(r.dir / "stdout.txt", *ctx.result_re, kProgramOutputCap);
  // Output past the runner's cap is gone: its last lines may have held the result.
  if (got.cut.empty() && !r.child.stdout_kept.cut_reason.empty())
    got.cut = "stdout was cut (" + r.child.stdout_kept.cut_reason + "): its last lines are not kept";
  UntracedResults& untraced = ctx.untraced_results[r.combo.workload + "|" + r.combo.linkage];
  if (r.combo.method == "none") {
    untraced[r.rep] = got;
    r.run["result"] = got.value ? json(*got.value) : json(nullptr);
    if (!got.cut.empty()) r.run["result_cut"] = got.cut;
    return;
  }
  ResultVerdict v = compare_result(got, untraced, r.rep);
  r.run["result_check"] = std::move(v.check);
  if (!v.unchecked.empty()) r.run["result_unchecked"] = v.unchecked;
  if (v.changed.empty()) return;
  r.run["result_changed"] = v.changed;
  if (ctx.opts.strict_result) r.failures.insert(r.failures.begin(), v.changed);
}

// Stage 6, a workload: its ledgers and the method's store, scored as streams; each layer
// short of its ledger says why.
void score_against_ledger(RunState& r, RunContext& ctx, const Method& method, EventTally& tally, bool feed_tally,
                          ComboOutcome& outcome) {
  const TracerReport& report = r.report;
  // The ground truth: one ledger per process (ledger.msgpack.zst, ledger.msgpack.zst.<pid>), each
  // checked on its own, their calls matched together with the store's, both streamed.
  LiveScoring::Taken live = r.live ? r.live->take(report) : LiveScoring::Taken{};
  WorkloadScoreInput in{r.target_dir, events_file_of(r.dir), r.dir / "match-sort", ctx.host.max_trace_bytes,
                        report.layers, report.match_slack_ns, report.device_mode, feed_tally ? &tally : nullptr};
  in.live = live.matcher.get();
  in.not_streamable = live.not_streamable;
  const WorkloadScore scored = score_workload(in, tally.names);
  live.matcher.reset();
  r.live.reset();  // its scratch files go
  // How the calls were paired (stream_matcher.h), and why not as the program ran where not.
  r.run["scored_by"] = scored.scored_by;
  if (!live.unused.empty() && !report.layers.empty()) r.run["scored_after_the_run_because"] = live.unused;
  r.run["ledger"] = to_json(scored.ledger);
  if (!scored.ledger.consistent) {
    outcome.ledger_consistent = false;
    r.failures.push_back("ledger: " + (scored.ledger.problems.empty() ? std::string("inconsistent")
                                                                       : scored.ledger.problems.front()));
  }
  if (!scored.store_error.empty()) r.failures.push_back("tracer output: " + scored.store_error);
  // The harness's own sort could not be done (a full disk under --out): no score, said so;
  // out of space, the matrix stops after this run as for any write.
  if (!scored.scoring_error.empty()) {
    r.failures.push_back("scoring: " + scored.scoring_error);
    if (out_of_space(scored.scoring_error) && ctx.write_error.empty()) ctx.write_error = scored.scoring_error;
  }
  r.first_launch = scored.first_launch;
  json scores = json::array();  // empty when the tracer observed no layer of this target
  json shown = json::object();
  for (const auto& [pid, label] : scored.labels) shown[std::to_string(pid)] = label;
  r.run["processes"] = shown;
  for (const auto& s : scored.layers) {
    scores.push_back(to_json(s));
    outcome.layers[s.layer].add(s);
    if (outcome.partly_unobserved.count(s.layer)) continue;
    if (const std::string reason = shortfall_reason(s, report, method); !reason.empty()) {
      r.run["partly_observed"].push_back({{"layer", s.layer}, {"reason", reason}});
      outcome.partly_unobserved[s.layer] = reason;
    }
  }
  r.run["match"] = scores;
  r.run["per_device_short"] = per_device_short(scores, method);
}

// Stage 6: what the tracer saw, which layers it could not see (each with its reason), and
// for a workload, its events scored against the ledger.
void score_events(RunState& r, RunContext& ctx, const Method& method, ComboOutcome& outcome) {
  const TracerReport& report = r.report;
  r.run["tracer"] = {{"layers", report.layers}, {"loss", report.loss}, {"notes", report.notes}, {"error", report.error}};
  if (!report.error.empty()) r.failures.push_back("tracer: " + report.error);
  // One pass over the method's events, in file order: the one made as the tracer wrote
  // them, or, where that did not end with the store whole, a read of the store now. No
  // run's events are held (a real job makes 10^7 to 10^8 calls), but for OTLP's export.
  // A workload's store is read with its scoring, once.
  const bool keep = bool(ctx.otlp), workload = !r.combo.workload.empty();
  std::unique_ptr<EventTally> tally = std::move(r.tally);
  const bool reread = !tally || !tally->whole();
  if (reread) {
    tally = std::make_unique<EventTally>(keep, !workload, &ctx.host.devices);
    if (const fs::path file = events_file_of(r.dir); !workload && fs::exists(file)) {
      try {
        EventReader in(file);
        // Counting a call needs its layer, name, process, device and time, never its arguments.
        if (!keep)
          in.skip_args([](const std::string& l) { return l == layer::kRuntime || l == layer::kDriver || l == layer::kSyscall; });
        Event e;
        while (in.next(e)) tally->add(std::move(e));
      } catch (const std::exception& e) {
        r.failures.push_back(std::string("tracer output: ") + e.what());
      }
    }
  }
  DeviceNames& names = tally->names;
  const json unobserved = unobserved_layers(method, report);
  r.run["unobserved"] = unobserved;
  for (const auto& u : unobserved) outcome.unobserved[u["layer"].get<std::string>()] = u["reason"].get<std::string>();
  json partly = json::array();
  for (const auto& [layer, reason] : report.partly_unobserved) {
    partly.push_back({{"layer", layer}, {"reason", reason}});
    outcome.partly_unobserved[layer] = reason;
  }
  r.run["partly_observed"] = partly;
  for (const auto& l : report.layers) outcome.observed.insert(l);
  if (workload) score_against_ledger(r, ctx, method, *tally, reread, outcome);
  r.events_read = tally->records();
  r.events = std::move(tally->events);
  add_counts(outcome.event_counts, tally->by_name);
  add_counts(outcome.families, tally->families);
  // Which GPU each record is on, in the one identity every process shares (per_device.h):
  // the method's own word, the ledger's, and the host's table for a bare ordinal.
  if (!workload) {
    r.run["event_counts"] = tally->per_layer;
    const std::vector<ProcessCounts> counted = tally->processes.finish(names);
    json shown = json::array();
    for (const auto& p : counted) {
      json devices = json::array();
      for (const auto& d : p.devices) devices.push_back(d);
      shown.push_back({{"pid", p.pid}, {"devices", devices}, {"first_cuda_ns", p.first_ts}});
    }
    r.run["processes"] = shown;
    add_run(outcome.processes, counted);
  }
  json inferred = json::array();
  for (const auto& [pid, ordinal] : names.inferred_from_host()) inferred.push_back({{"pid", pid}, {"device", ordinal}});
  if (!inferred.empty())
    r.run["device_ids_from_host"] = {{"why", "records named an ordinal and no bus id: the bus id is the host's device "
                                             "of that ordinal, as the program inherited the harness's "
                                             "CUDA_VISIBLE_DEVICES"},
                                     {"which", inferred}};
  add_loss(outcome.loss, report.loss);
}

// Stage 7: on a full disk, this run's raw and partial files go, so that its run.json and
// the summary of what finished still fit. The run is failed with the reason either way.
void give_up_space_if_full(RunState& r, RunContext& ctx) {
  if (out_of_space(r.report.error)) ctx.write_error = r.report.error;
  if (ctx.write_error.empty()) return;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(r.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != "stdout.txt" && name != "stderr.txt") fs::remove_all(entry.path(), ec);
  }
  free_program_output(r.dir, r.child, r.run);
  r.run["results_removed"] = "out of space: this run's trace files were removed and its output cut to keep the summary";
}

// Stage 8: run.json written (or the reason it could not be), sent on, and counted.
void record_run(RunState& r, RunContext& ctx, ComboOutcome& outcome) {
  const auto ms = [](int64_t ns) { return double(ns) / 1e6; };
  // Where a run's time goes besides the program (the main job has a time budget).
  r.run["harness_ms"] = {{"program", ms(r.child.wall_ns)},
                         {"tracer_around_program", ms(r.t_ran - r.t_start - r.child.wall_ns)},
                         {"conversion_and_finish", ms(r.t_finished - r.t_ran)},
                         {"reading_and_scoring", ms(monotonic_ns() - r.t_finished)}};
  // The store as written: how many events, in how many bytes (schema/README.md).
  std::error_code ec;
  const fs::path events_file = events_file_of(r.dir);
  if (const auto bytes = fs::file_size(events_file, ec); !ec)
    r.run["events"] = {{"file", events_file.filename().string()},
                       {"records", r.events_read},
                       {"bytes", bytes},
                       {"bytes_per_event", r.events_read ? double(bytes) / double(r.events_read) : 0.0}};
  r.run["ok"] = r.failures.empty();
  r.run["failures"] = r.failures;
  try {
    write_run_json(r.dir, r.run, r.failures, r.child, ctx);
  } catch (const WriteError& e) {
    ctx.write_error = e.what();
    r.failures.push_back(e.what());
    r.run["ok"] = false;
    r.run["failures"] = r.failures;
  }
  if (ctx.otlp) ctx.otlp->send_run(r.dir.filename().string(), r.run, *ctx.manifest, r.events.events);
  if (r.run.contains("result_changed")) outcome.results_changed.push_back(r.run["result_changed"].get<std::string>());
  if (r.run.value("result_check", json::object()).contains("as_untraced_run"))
    outcome.results_vary_untraced.push_back(r.run["result_check"]["why"].get<std::string>());
  outcome.statuses.push_back(r.failures.empty() ? "ok" : to_string(r.child.status));
  outcome.wall_ns.push_back(r.child.wall_ns);
  if (r.failures.empty()) {
    ++outcome.ok;
  } else {
    ++outcome.failed;
    outcome.failures.push_back(r.failures.front());
  }
}

// One repetition of one combination, stage by stage: folders, target, traced run, its
// ending, the ground truth, the scoring, the disk, the record.
json run_one(const Combo& combo, int rep, RunContext& ctx, ComboOutcome& outcome) {
  RunState r{combo, rep};
  make_run_folders(r, ctx);
  Target target;
  Launch launch;
  describe_target(r, ctx, target, launch);
  const Method& method = *find_method(combo.method);
  auto options = ctx.opts.method_options.find(method.name);
  std::unique_ptr<Tracer> tracer =
      method.make(ctx.host, options == ctx.opts.method_options.end() ? MethodOptions{} : options->second);
  run_traced(r, ctx, *tracer, launch, target);
  judge_ending(r, ctx);
  if (ctx.result_re) check_result(r, ctx);
  score_events(r, ctx, method, outcome);
  r.run["startup"] = startup_of(r.first_launch, r.target_dir, r.child);
  if (combo.workload.empty()) r.run["steps"] = steps_of(r.target_dir, r.child);
  give_up_space_if_full(r, ctx);
  record_run(r, ctx, outcome);
  return r.run;
}

// The results folder of this invocation: made, its manifest written.
struct ResultsFolder {
  fs::path root, runs_dir;
  std::string run_id;
  std::vector<fs::path> made_for_user;  // a fresh --out: the user's, like the run folder
  json manifest;
};

ResultsFolder open_results(const Options& opts, const HostFacts& host, const std::vector<std::string>& command_line,
                           HostFacts& run_host) {
  ResultsFolder out;
  out.run_id = create_out_folder(opts.out, "", out.root, &out.made_for_user);
  out.runs_dir = out.root / "runs";
  make_dir_exclusive(out.runs_dir);
  // The caller learns which folder is this run's without guessing from the newest one.
  if (!opts.run_id_file.empty()) write_file_atomic(opts.run_id_file, fs::absolute(out.root).string() + "\n");
  // What one run reads of the files a method's in-process half writes: as much as the disk
  // under --out can take (half its free space now), or what the user said.
  run_host = host;
  run_host.max_trace_bytes = opts.max_trace_bytes.value_or(half_free_space(out.root));
  out.manifest = {{"v", 1},
                  {"run_id", out.run_id},
                  {"max_trace_bytes", run_host.max_trace_bytes},
                  {"started", utc_now("%Y-%m-%dT%H:%M:%SZ")},
                  {"command_line", command_line},
                  {"environment", environment_manifest(host, opts.methods)},
                  {"workloads_run_as", invoking_user() ? json(invoking_user()->user) : json("the harness's own user")}};
  write_json(out.root / "manifest.json", out.manifest);
  return out;
}

// Runs the plan in its order (the matrix's, or the cost mode's interleaved rounds, which
// CostRecorder follows and may cut short) until done, interrupted or out of space.
void run_plan(MatrixPlan& plan, RunContext& ctx, CostRecorder* cost, const RunPlan& order,
              const std::vector<CostSubject>& subjects, std::vector<ComboOutcome>& outcomes) {
  const std::vector<Combo>& todo = plan.todo;
  for (size_t i = 0; i < todo.size(); ++i) outcomes[i].combo = todo[i];
  ComboOutcome warm_up;  // the cost mode's untimed warm-up runs (rep 0) count in no combination
  for (size_t index = 0; index < order.size() && !g_interrupted && ctx.write_error.empty(); ++index) {
    const Combo& c = todo[order[index].combo];
    const int rep = order[index].rep;
    if (cost && !cost->should_run(index)) {
      if (!cost->stopped().empty()) break;
      continue;
    }
    json run;
    try {
      run = run_one(c, rep, ctx, rep == 0 ? warm_up : outcomes[order[index].combo]);
    } catch (const WriteError& e) {  // the run's own folder or files could not be made
      ctx.write_error = e.what();
      break;
    }
    if (cost) cost->add(index, run, ctx.runs_dir / (c.label() + ".r" + std::to_string(rep)));
    print_progress(index + 1, order.size(), c, rep, ctx.opts.reps, run, cost ? cost->progress(index) : "");
  }
  if (!ctx.write_error.empty())
    std::fprintf(stderr, "harness: %s: stopping; the summary keeps what finished\n", ctx.write_error.c_str());
  if (cost && !cost->stopped().empty()) std::fprintf(stderr, "harness: cost: %s\n", cost->stopped().c_str());
  // A program that said untraced that it cannot run here is skipped, not failed.
  if (cost)
    for (const auto& [program, reason] : cost->skipped_programs()) {
      std::fprintf(stderr, "harness: cost: %s skipped: %s\n", program.c_str(), reason.c_str());
      for (size_t i = 0; i < todo.size(); ++i)
        if (subjects[i].program == program) {
          outcomes[i].statuses.clear();
          plan.skipped.push_back(skip_entry(todo[i], reason));
        }
    }
  std::erase_if(outcomes, [](const ComboOutcome& o) { return o.statuses.empty(); });  // never started
}

}  // namespace

int run_matrix(const Options& opts, const HostFacts& host, const std::vector<std::string>& command_line) {
  MatrixPlan plan = plan_matrix(opts, host);
  HostFacts run_host;
  ResultsFolder folder = open_results(opts, host, command_line, run_host);
  RunContext ctx{opts, run_host, folder.runs_dir, invoking_user()};
  if (opts.result) ctx.result_re = result_pattern(*opts.result);
  ctx.manifest = &folder.manifest;
  SpaceReserve reserve(folder.root, kSummaryReserve);
  ctx.reserve = &reserve;
  std::fprintf(stderr, "harness: run %s: %zu combination(s) x %d %s to run, %zu skipped; results in %s\n",
               folder.run_id.c_str(), plan.todo.size(), opts.reps, opts.cost ? "interleaved round(s)" : "rep(s)",
               plan.skipped.size(), shown(folder.root.string()).c_str());
  print_skips(plan.skipped);

  std::unique_ptr<OtlpRunSender> otlp;
  if (!opts.otlp_endpoint.empty()) otlp = std::make_unique<OtlpRunSender>(opts.otlp_endpoint);
  ctx.otlp = otlp.get();
  std::vector<CostSubject> subjects;
  for (const auto& c : plan.todo)
    subjects.push_back({c.workload.empty() ? "command" : c.workload + "." + c.linkage, c.method, c.workload, c.linkage});
  const uint64_t seed = opts.seed ? *opts.seed : drawn_seed();  // the cost mode's order, in summary.json
  const RunPlan order = opts.cost ? cost_plan(subjects, opts.reps, seed) : sequential_plan(plan.todo.size(), opts.reps);
  std::unique_ptr<CostRecorder> cost;
  if (opts.cost) cost = std::make_unique<CostRecorder>(subjects, order, opts.reps, opts.time_budget_s, opts.command, seed);
  std::vector<ComboOutcome> outcomes(plan.todo.size());
  run_plan(plan, ctx, cost.get(), order, subjects, outcomes);

  // Whether the runs were cut short, read once: a Ctrl-C while the summary and the report
  // are written comes after every run finished, and changes neither what they say nor the exit.
  const bool interrupted = g_interrupted.load();
  const SummaryInputs in{opts,        folder.run_id, folder.manifest["started"], ctx.write_error, ctx.otlp,
                         plan.skipped, cost.get(),    interrupted,                command_line,    plan.added_baseline};
  const json summary = build_summary(in, outcomes);
  reserve.release();  // the summary is written into the space kept for it
  const auto hand_over = [&] {
    if (!ctx.run_as) return;
    chown_tree(folder.root, ctx.run_as->uid, ctx.run_as->gid);
    hand_over_created_folders(folder.made_for_user, ctx.run_as->uid, ctx.run_as->gid);
  };
  try {
    write_json(folder.root / "summary.json", summary);
    write_details(folder.root, summary, cost.get());
  } catch (const WriteError& e) {
    std::fprintf(stderr, "harness: %s: no summary was kept\n", e.what());
    hand_over();
    return 1;
  }
  if (!opts.no_report) write_report(host.prefix, folder.root);
  hand_over();
  return final_status(in, summary, outcomes, folder.root);
}

}  // namespace cudatrace
