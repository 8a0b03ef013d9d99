#include "harness/stats/bench.h"

#include "common/event_io.h"
#include "common/clock.h"
#include "common/outside_text.h"
#include "common/untrusted_file.h"
#include "harness/run/safe_files.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <stdexcept>

#include "harness/stats/bench_stats.h"
#include "harness/run/host.h"
#include "harness/out/results_io.h"
#include "harness/run/runner.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "cudaGetDevice/shared/method:preload[/iterations:400/manual_time]" -> call, linkage,
// method (Google Benchmark appends its own run settings after our name).
bool split_name(const std::string& name, std::string& call, std::string& linkage, std::string& method) {
  size_t m = name.rfind("/method:");
  if (m == std::string::npos) return false;
  method = name.substr(m + 8);
  method = method.substr(0, method.find('/'));
  size_t l = name.rfind('/', m - 1);
  if (l == std::string::npos) return false;
  linkage = name.substr(l + 1, m - l - 1);
  call = name.substr(0, l);
  return true;
}

// How far each call moved between the processes of this run with nothing recording
// (bench_stats.h). On a shared VM this is the floor under every per-call cost: the same
// untraced call can take twice as long in one process as in the next
// (docs/measured-history.md), and a tracer's in-process cost moves with it (its live/paused
// ratio holds steadier than its ns). Not the core's clock: probed beside every batch, converting the costs to
// cycles left the rounds as spread as before. Printed where wide, kept in
// bench_summary.json for the report and ci/bench_agreement.py.
json untraced_between_processes(const PerProcess& samples, const PerProcess& paused) {
  json out = json::array();
  double widest = 0;
  std::string widest_text;
  for (const auto& [call_linkage, s] : untraced_spread(samples, paused)) {
    if (s.min <= 0) continue;
    out.push_back({{"call", call_linkage.first}, {"linkage", call_linkage.second}, {"processes", s.processes},
                   {"min_ns", s.min}, {"median_ns", s.median}, {"max_ns", s.max}, {"max_over_min", s.max / s.min}});
    if (s.max / s.min > widest) {
      widest = s.max / s.min;
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s (%s cudart) %.0f-%.0f ns over %zu processes", call_linkage.first.c_str(),
                    call_linkage.second.c_str(), s.min, s.max, s.processes);
      widest_text = buf;
    }
  }
  if (widest >= 1.2)
    std::fprintf(stderr,
                 "harness: untraced, one call moved up to %.1fx between the processes of this run: %s. Per-call "
                 "costs move with it; the intervals say how far, more --reps narrow them\n",
                 widest, widest_text.c_str());
  return out;
}

// The agreement, estimator and cost-part tables, on the console: the summary has every figure.
void print_derived(const json& summary) {
  const json& est = summary["estimators"];
  if (!est["calls"].empty()) {
    std::fprintf(stderr, "\neach method against the references its cost bars name (difference to none between "
                         "processes, ns; the ratio to each reference):\n");
    for (const auto& e : est["calls"]) {
      std::string refs;
      for (const auto& [name, r] : e["references"].items()) {
        char b[96];
        if (r["ratio"].is_number())
          std::snprintf(b, sizeof b, "  %s %+.0f (%.2fx)", name.c_str(), r["delta_ns"].get<double>(),
                        r["ratio"].get<double>());
        else
          std::snprintf(b, sizeof b, "  %s %+.0f", name.c_str(), r["delta_ns"].get<double>());
        refs += b;
      }
      std::string target;
      for (const auto& b : e["target"]["bars"])
        target += (target.empty() ? "" : "; ") + b["against"].get<std::string>() + " bar " +
                  (b["met"].is_null() ? "not judged" : b["met"].get<bool>() ? "met" : "MISSED") +
                  (b.value("settled", true) ? "" : " (not settled)");
      if (target.empty()) target = "not judged: " + e["target"].value("why_not_judged", std::string());
      std::fprintf(stderr, "%-7s %-28s %-7s %-7s %+7.0f%s  | %s\n", e["method"].get<std::string>().c_str(),
                   e["call"].get<std::string>().c_str(), e["linkage"].get<std::string>().c_str(),
                   e["call_kind"].is_string() ? e["call_kind"].get<std::string>().c_str() : "?",
                   e["cost"]["delta_ns"].get<double>(), refs.c_str(), target.c_str());
    }
    std::fprintf(stderr, "cost bars: %d met, %d missed, %d not judged; %d of the judged not settled by the run's "
                         "intervals\n",
                 est["met"].get<int>(), est["missed"].get<int>(), est["not_judged"].get<int>(),
                 est.value("unsettled", 0));
  }
  if (summary.contains("cost_parts") && !summary["cost_parts"]["calls"].empty()) {
    std::fprintf(stderr, "\nwhere the cost goes (ns per call, each part with its 95%% interval):\n");
    for (const auto& e : summary["cost_parts"]["calls"]) {
      std::string line;
      for (const auto& p : e["parts"]) {
        char b[160];
        std::snprintf(b, sizeof b, "; %s %+.0f [%+.0f, %+.0f]", p["part"].get<std::string>().c_str(),
                      p["ns"].get<double>(), p["ci95_ns"][0].get<double>(), p["ci95_ns"][1].get<double>());
        line += b;
      }
      char floor[64] = "";
      if (e.contains("floor")) std::snprintf(floor, sizeof floor, ", %+.0f above the floor", e["above_floor_ns"].get<double>());
      if (e.contains("per_record") && e["per_record"].contains("ns")) {
        const json& r = e["per_record"];
        char b[160];
        std::snprintf(b, sizeof b, "; %s %+.0f a record (%g a call)", r["part"].get<std::string>().c_str(),
                      r["ns"].get<double>(), r["records_per_call"].get<double>());
        line += b;
        if (r.contains("bar") && r["bar"]["met"].is_boolean())
          line += r["bar"]["met"].get<bool>() ? " bar met" : " BAR MISSED";
      }
      std::fprintf(stderr, "%-8s %-28s %-7s whole %+.0f%s%s\n", e["method"].get<std::string>().c_str(),
                   e["call"].get<std::string>().c_str(), e["linkage"].get<std::string>().c_str(),
                   e["whole"]["delta_ns"].get<double>(), floor, line.c_str());
    }
    for (const auto& t : summary["cost_parts"].value("per_record_bars", json::array()))
      std::fprintf(stderr, "%s: at most %g ns a record, met on %d of %d calls\n", t["method"].get<std::string>().c_str(),
                   t["at_most_ns"].get<double>(), t["met"].get<int>(),
                   t["met"].get<int>() + t["missed"].get<int>() + t["not_judged"].get<int>());
  }
  if (summary.contains("agreement")) {
    const json& a = summary["agreement"];
    std::fprintf(stderr, "\nagreement with %s: %zu of %zu deltas within its 95%% interval or max(10%%, 100 ns) of it "
                         "(%.1f%%, at least %.0f%% needed): %s\n",
                 a["against"].get<std::string>().c_str(), a["within"].get<size_t>(), a["compared"].get<size_t>(),
                 100 * a["fraction"].get<double>(), 100 * a["required"].get<double>(),
                 a["pass"].get<bool>() ? "PASS" : "FAIL");
    for (const auto& o : a["outside"])
      std::fprintf(stderr, "  outside: %s %s %s %s: %+.1f ns, was %+.1f [%+.1f, %+.1f]\n",
                   o["call"].get<std::string>().c_str(), o["linkage"].get<std::string>().c_str(),
                   o["method"].get<std::string>().c_str(), o["kind"].get<std::string>().c_str(),
                   o["second_ns"].get<double>(), o["first_ns"].get<double>(), o["first_ci95_ns"][0].get<double>(),
                   o["first_ci95_ns"][1].get<double>());
  }
}

}  // namespace

json read_bench_summary(const fs::path& folder_or_file) {
  const fs::path path = fs::is_directory(folder_or_file) ? folder_or_file / "bench_summary.json" : folder_or_file;
  std::string why;
  std::ifstream in = open_untrusted(path, &why);
  if (!in) throw std::runtime_error(shown(path.string()) + ": " + (why.empty() ? "cannot be read" : why));
  json s;
  try {
    s = parse_outside_json(in);
  } catch (const std::exception&) {
    throw std::runtime_error(shown(path.string()) + ": not a JSON object");
  }
  if (!s.is_object()) throw std::runtime_error(shown(path.string()) + ": not a JSON object");
  // Files from before schema_version carry only v: 1, the same shape.
  const json version = s.contains("schema_version") ? s["schema_version"] : s.value("v", json(nullptr));
  if (version != 1 && version != kBenchSummaryVersion)
    throw std::runtime_error(shown(path.string()) + ": schema_version " + version.dump() +
                             " is not one this harness reads (1, " + std::to_string(kBenchSummaryVersion) + ")");
  return s;
}

namespace {

using CallKey = std::tuple<std::string, std::string, std::string>;  // (call, linkage, method)
using Series = std::map<CallKey, std::vector<double>>;

// What the bench's processes measured and said, over every round.
struct BenchSamples {
  json merged = {{"context", json::object()}, {"benchmarks", json::array()}};  // bench.json, for compare.py
  json failures = json::array();
  Series samples;      // each process's median per call
  Series ab_samples;   // in-process A/B: live - paused, paired batch by batch
  Series ab_ratios;    // live / paused, per round
  Series ab_controls;  // paused - paused: the pairing's own reading when nothing differs
  // The call with the tracer paused, process by process: what the machine did to the call itself.
  Series paused_samples;
  // Records the tracer made per call, process by process, where it counts them (percall's
  // records_per_call: tracers/pause_hook.h).
  Series records_per_call;
  std::map<std::pair<std::string, std::string>, std::map<std::string, int64_t>> run_loss;  // (linkage, method), all rounds
  // (linkage, method) -> what its processes ran without, any round: layer -> why, whole
  // (a shim that static cudart never reaches) or in part (a stripped cudart in a library).
  struct LayerGaps {
    std::map<std::string, std::string> missing, partly;
  };
  std::map<std::pair<std::string, std::string>, LayerGaps> run_gaps;
  json process_seconds = json::array();  // where a bench's wall time goes, process by process
  std::map<std::string, std::string> call_kinds;  // percall's label: launch, copy, other
  // (call, why) -> the processes that could not make the call (percall's "skipped:<call>").
  std::map<std::pair<std::string, std::string>, json> calls_skipped;
};

// One benchmark process's JSON, into the samples.
void take_bench_output(const fs::path& bench_json, const std::string& linkage, const std::string& method, int rep,
                       BenchSamples& b) {
  std::ifstream in = open_untrusted(bench_json);
  json out = parse_outside_json(in);
  if (b.merged["context"].empty()) b.merged["context"] = out["context"];
  if (out["context"].is_object())
    for (const auto& [key, why] : out["context"].items())
      if (key.rfind("skipped:", 0) == 0 && why.is_string())
        b.calls_skipped[{key.substr(8), why.get<std::string>()}].push_back(linkage + "/" + method);
  for (auto row : out["benchmarks"]) {
    row["repetition_index"] = rep - 1;
    b.merged["benchmarks"].push_back(row);
    std::string call, l, m;
    if (row.value("run_type", "") != "iteration" || !split_name(row.value("name", ""), call, l, m)) continue;
    if (row.contains("label") && row["label"].is_string() && !row["label"].get<std::string>().empty())
      b.call_kinds[call] = row["label"].get<std::string>();
    b.samples[{call, l, m}].push_back(row.contains("median_ns") ? row["median_ns"].get<double>()
                                                                : row.value("real_time", 0.0));
    if (row.contains("ab_delta_ns")) b.ab_samples[{call, l, m}].push_back(row["ab_delta_ns"].get<double>());
    if (row.contains("control_delta_ns")) b.ab_controls[{call, l, m}].push_back(row["control_delta_ns"].get<double>());
    if (row.contains("records_per_call") && row["records_per_call"].is_number())
      b.records_per_call[{call, l, m}].push_back(row["records_per_call"].get<double>());
    // Live over paused in one process: what a device-side tracer does to a kernel's run is
    // a factor, not a constant.
    if (row.contains("paused_median_ns") && row["paused_median_ns"].get<double>() > 0) {
      b.ab_ratios[{call, l, m}].push_back(row["median_ns"].get<double>() / row["paused_median_ns"].get<double>());
      b.paused_samples[{call, l, m}].push_back(row["paused_median_ns"].get<double>());
    }
  }
}

// One round's process for (linkage, method): percall under the method, its loss and the
// layers it ran without, then its measurements.
void run_bench_process(const Options& opts, const HostFacts& host, const fs::path& root, const std::string& linkage,
                       const std::string& method, int rep, int reps, BenchSamples& b) {
  const fs::path bin = host.prefix / CUDATRACE_LIBEXEC_SUBDIR / ("percall." + linkage);
  const fs::path dir = root / "runs" / ("percall." + linkage + "." + method + ".r" + std::to_string(rep));
  // The benchmark writes its JSON as the program's user: into its own folder.
  make_dir_exclusive(dir);
  const fs::path target_dir = dir / "target";
  make_dir_exclusive(target_dir);
  if (auto who = invoking_user()) (void)!chown(target_dir.c_str(), who->uid, who->gid);
  const fs::path bench_json = target_dir / "bench.json";
  Target target{{bin.string(), "--benchmark_out=" + bench_json.string(), "--benchmark_out_format=json"}, linkage};
  target.writable_dir = target_dir;
  Launch launch{target.argv, {{"CUDATRACE_METHOD", method}}};
  auto options = opts.method_options.find(method);
  auto tracer = find_method(method)->make(host, options == opts.method_options.end() ? MethodOptions{} : options->second);
  ChildResult child;
  const int64_t started_ns = monotonic_ns();
  try {
    tracer->prepare(launch, target, dir);
    ChildSpec spec{launch, dir, opts.timeout_s, invoking_user()};
    spec.stall_timeout_s = opts.stall_timeout_s.value_or(0);
    child = run_child(spec, *tracer);
  } catch (const std::exception& e) {
    child.status = ChildStatus::TracerFailed;
    child.detail = e.what();
  }
  // A cost measured while the tracer dropped records is not the cost of tracing: what it
  // can tell of its loss without converting its events goes with its rows.
  if (auto loss = tracer->loss_without_events(dir))
    for (const auto& [counter, n] : *loss)
      if (n > 0) b.run_loss[{linkage, method}][counter] += n;
  // Nor is a cost measured without one of the method's layers: the probes of a layer that
  // was not there cost nothing, and the figure would read low without saying so.
  const TracerReport layers = tracer->layers_without_events();
  for (const auto& [l, why] : layers.unobserved) b.run_gaps[{linkage, method}].missing[l] = why;
  for (const auto& [l, why] : layers.partly_unobserved) b.run_gaps[{linkage, method}].partly[l] = why;
  tracer->abandon(dir);  // millions of calls: the overhead is the point, not the events
  const double seconds = double(monotonic_ns() - started_ns) / 1e9;
  b.process_seconds.push_back({{"linkage", linkage}, {"method", method}, {"rep", rep}, {"seconds", seconds}});
  std::fprintf(stderr, "harness: bench round %d/%d %s %s: %.1f s\n", rep, reps, linkage.c_str(), method.c_str(), seconds);
  if (child.status != ChildStatus::Exited || child.exit_code != 0 || !fs::exists(bench_json)) {
    b.failures.push_back({{"linkage", linkage}, {"method", method}, {"rep", rep}, {"detail", child.detail}});
    std::fprintf(stderr, "harness: bench %s/%s round %d FAILED: %s (see %s)\n", linkage.c_str(), method.c_str(), rep,
                 child.detail.c_str(), (dir / "stderr.txt").c_str());
    return;
  }
  take_bench_output(bench_json, linkage, method, rep, b);
}

// Between processes: the method's median against the untraced one's, with its interval.
// Noise between two processes is shown as such, not as a speed-up or a cost (bench_stats.h
// says what counts; the numbers stay in the JSON). Sets the printed delta, interval, ratio.
void between_processes(json& row, const std::vector<double>& base, const std::vector<double>& values,
                       std::string& delta, std::string& interval, std::string& ratio) {
  const Difference d = median_difference(base, values);
  row["delta_ns"] = d.delta;
  row["delta_ci95_ns"] = {d.lo, d.hi};
  row["ratio"] = median_of(values) / median_of(base);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f", d.delta);
  delta = buf;
  std::snprintf(buf, sizeof buf, "[%+.1f, %+.1f]", d.lo, d.hi);
  interval = buf;
  std::snprintf(buf, sizeof buf, "%.2fx", row["ratio"].get<double>());
  ratio = buf;
  if (between_processes_no_measurable_cost(d)) {
    row["no_measurable_cost"] = true;
    delta = "none";
    ratio = "";
    interval += " no measurable cost";
  }
}

// The in-process A/B (a tracer that can pause): recording's cost, paired batch by batch,
// beside its pairing control. Returns the words for the console.
std::string in_process_ab(json& row, const CallKey& key, const BenchSamples& b) {
  const auto ab = b.ab_samples.find(key);
  if (ab == b.ab_samples.end()) return "";
  const Difference d = median_interval(ab->second);
  row["in_process_delta_ns"] = d.delta;
  row["in_process_delta_ci95_ns"] = {d.lo, d.hi};
  row["in_process_values_ns"] = ab->second;
  char buf[128];
  std::snprintf(buf, sizeof buf, "  in-process A/B %+.1f [%+.1f, %+.1f]", d.delta, d.lo, d.hi);
  std::string text = buf;
  double control_ns = 0;
  std::string control_text;
  if (auto c = b.ab_controls.find(key); c != b.ab_controls.end()) {
    const Difference control = median_interval(c->second);
    control_ns = control.delta;
    row["in_process_control_ns"] = control.delta;
    row["in_process_control_ci95_ns"] = {control.lo, control.hi};
    std::snprintf(buf, sizeof buf, " (control %+.1f)", control.delta);
    control_text = buf;
  }
  if (in_process_no_measurable_cost(d, control_ns)) {
    row["in_process_no_measurable_cost"] = true;
    text += " no measurable cost";
  }
  text += control_text;
  if (auto p = b.paused_samples.find(key); p != b.paused_samples.end()) row["in_process_paused_values_ns"] = p->second;
  if (auto r = b.ab_ratios.find(key); r != b.ab_ratios.end()) {
    row["in_process_ratio"] = median_of(r->second);
    std::snprintf(buf, sizeof buf, " %.2fx", row["in_process_ratio"].get<double>());
    text += buf;
  }
  return text;
}

// What the row's figures were measured without: a layer, part of one, or events lost.
std::string measured_without(json& row, const std::string& linkage, const std::string& method, const BenchSamples& b) {
  std::string text;
  if (auto gaps = b.run_gaps.find({linkage, method}); gaps != b.run_gaps.end()) {
    if (!gaps->second.missing.empty()) {
      row["layers_not_covered"] = gaps->second.missing;
      text += "  WITHOUT LAYER:";
      for (const auto& [l, why] : gaps->second.missing) text += " " + l;
    }
    if (!gaps->second.partly.empty()) {
      row["layers_partly_covered"] = gaps->second.partly;
      text += "  WITHOUT PART OF LAYER:";
      for (const auto& [l, why] : gaps->second.partly) text += " " + l;
    }
  }
  if (auto lost = b.run_loss.find({linkage, method}); lost != b.run_loss.end()) {
    row["loss_during_runs"] = lost->second;
    text += "  MEASURED UNDER LOSS:";
    for (const auto& [counter, n] : lost->second) text += " " + counter + "=" + std::to_string(n);
  }
  return text;
}

// bench_summary.json's rows, one per (call, linkage, method), each printed as it is made.
json bench_rows(const BenchSamples& b) {
  json rows = json::array();
  std::fprintf(stderr, "\n%-28s %-7s %-8s %10s %10s %22s %7s\n", "call", "cudart", "method", "median ns", "delta ns",
               "95% interval", "ratio");
  for (const auto& [key, values] : b.samples) {
    const auto& [call, linkage, method] = key;
    json row = {{"call", call}, {"linkage", linkage}, {"method", method}, {"reps", values.size()},
                {"median_ns", median_of(values)}, {"values_ns", values}};
    if (auto kind = b.call_kinds.find(call); kind != b.call_kinds.end()) row["call_kind"] = kind->second;
    if (auto r = b.records_per_call.find(key); r != b.records_per_call.end()) {
      row["records_per_call"] = median_of(r->second);
      row["records_per_call_values"] = r->second;
    }
    std::string delta, interval, ratio;
    if (auto base = b.samples.find({call, linkage, "none"}); base != b.samples.end() && method != "none")
      between_processes(row, base->second, values, delta, interval, ratio);
    const std::string more = in_process_ab(row, key, b) + measured_without(row, linkage, method, b);
    std::fprintf(stderr, "%-28s %-7s %-8s %10.1f %10s %22s %7s%s\n", call.c_str(), linkage.c_str(), method.c_str(),
                 median_of(values), delta.c_str(), interval.c_str(), ratio.c_str(), more.c_str());
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

int run_bench(const Options& opts, const HostFacts& host, const std::vector<std::string>& command_line) {
  if (!host.gpu) {
    std::fprintf(stderr, "harness: --bench needs a GPU: %s\n", host.gpu_reason.c_str());
    return 3;
  }
  const int reps = opts.reps_given ? opts.reps : 5;
  // The run to agree with is read before minutes are spent measuring.
  json agree_with;
  if (!opts.agree_with.empty()) {
    try {
      agree_with = read_bench_summary(opts.agree_with);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "harness: --agree-with: %s\n", e.what());
      return 2;
    }
  }
  fs::path root;
  std::vector<fs::path> made_for_user;  // a fresh --out: the user's, like the run folder
  const std::string run_id = create_out_folder(opts.out, "-bench", root, &made_for_user);
  make_dir_exclusive(root / "runs");
  // The caller learns which folder is this run's without guessing from the newest one.
  if (!opts.run_id_file.empty()) write_file_atomic(opts.run_id_file, fs::absolute(root).string() + "\n");
  write_json(root / "manifest.json", {{"v", 1}, {"run_id", run_id}, {"started", utc_now("%Y-%m-%dT%H:%M:%SZ")},
                                      {"command_line", command_line}, {"environment", environment_manifest(host, opts.methods)}});
  json skipped = json::array();
  std::vector<std::pair<std::string, std::string>> plan;  // (linkage, method) that can run
  for (const auto& linkage : opts.linkages)
    for (const auto& method : opts.methods) {
      const auto options = opts.method_options.find(method);
      const Availability a = availability(*find_method(method), host,
                                          options == opts.method_options.end() ? MethodOptions{} : options->second);
      if (a.ok)
        plan.push_back({linkage, method});
      else
        skipped.push_back({{"linkage", linkage}, {"method", method}, {"reason", a.reason}});
    }
  // Repetitions are rounds over every (linkage, method), one process each: whatever drifts
  // on the machine during the run (clocks, neighbours) lands on every method alike, where
  // running one method's repetitions back to back would bill it to that method alone.
  BenchSamples b;
  for (int rep = 1; rep <= reps && !g_interrupted; ++rep) {
    std::fprintf(stderr, "harness: bench round %d/%d\n", rep, reps);
    for (const auto& [linkage, method] : plan) {
      if (g_interrupted) break;
      run_bench_process(opts, host, root, linkage, method, rep, reps, b);
    }
  }
  write_json(root / "bench.json", b.merged);
  for (const auto& [linkage_method, gaps] : b.run_gaps)
    for (const auto& [which, layers] : {std::pair{"", &gaps.missing}, std::pair{"part of ", &gaps.partly}})
      for (const auto& [l, why] : *layers)
        std::fprintf(stderr, "harness: bench %s on %s cudart ran without %sits %s layer (%s): its costs leave that out\n",
                     linkage_method.second.c_str(), linkage_method.first.c_str(), which, l.c_str(), why.c_str());
  const json untraced = untraced_between_processes(b.samples, b.paused_samples);
  const json rows = bench_rows(b);
  json skipped_calls = json::array();
  for (const auto& [call_why, where] : b.calls_skipped) {
    skipped_calls.push_back({{"call", call_why.first}, {"reason", call_why.second}, {"processes", where}});
    std::fprintf(stderr, "harness: bench call %s not measured: %s\n", call_why.first.c_str(), call_why.second.c_str());
  }
  // schema_version: schema/bench_summary.v2.schema.json, checked by the analysis package.
  json summary = {{"v", 1}, {"schema_version", kBenchSummaryVersion}, {"run_id", run_id}, {"repetitions", reps}, {"rows", rows},
                  {"skipped", skipped}, {"failures", b.failures}, {"calls_skipped", skipped_calls},
                  {"process_seconds", b.process_seconds},
                  {"untraced_between_processes", untraced},
                  {"estimators", estimator_comparison(rows)},
                  {"cost_parts", cost_parts(rows)}};
  if (!agree_with.is_null()) summary["agreement"] = bench_agreement(agree_with, summary);
  summary["finished"] = utc_now("%Y-%m-%dT%H:%M:%SZ");
  print_derived(summary);
  write_json(root / "bench_summary.json", summary);
  if (!opts.no_report) write_report(host.prefix, root);
  if (auto who = invoking_user()) {
    chown_tree(root, who->uid, who->gid);
    hand_over_created_folders(made_for_user, who->uid, who->gid);
  }
  std::fprintf(stderr, "harness: bench results in %s (bench.json for compare.py, bench_summary.json)\n", shown(root.string()).c_str());
  if (g_interrupted) return 130;
  if (!b.failures.empty()) return 1;
  return b.samples.empty() ? 3 : 0;
}

}  // namespace cudatrace
