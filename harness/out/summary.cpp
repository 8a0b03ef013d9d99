#include "harness/out/summary.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/outside_text.h"
#include "harness/catalog.h"
#include "harness/out/results_io.h"
#include "harness/run/safe_files.h"
#include "harness/score/verdict.h"
#include "harness/stats/bench_stats.h"

namespace cudatrace {

using json = nlohmann::json;

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

json combo_json(const ComboOutcome& o, const std::vector<ComboOutcome>& all) {
  json layers = json::array();
  for (const auto& [name, s] : o.layers) layers.push_back(to_json(s));
  json j = {{"workload", o.combo.workload.empty() ? json(nullptr) : json(o.combo.workload)},
            {"linkage", o.combo.linkage.empty() ? json(nullptr) : json(o.combo.linkage)},
            {"method", o.combo.method},
            {"reps", o.statuses.size()},
            {"ok", o.ok},
            {"failed", o.failed},
            {"statuses", o.statuses},
            {"failures", o.failures},
            {"ledger_consistent", o.ledger_consistent},
            {"wall_ns", {{"median", median(o.wall_ns)},
                         {"min", o.wall_ns.empty() ? 0 : *std::min_element(o.wall_ns.begin(), o.wall_ns.end())},
                         {"max", o.wall_ns.empty() ? 0 : *std::max_element(o.wall_ns.begin(), o.wall_ns.end())},
                         {"values", o.wall_ns}}},
            {"layers", layers},
            {"loss", o.loss},
            {"lost", loss_totals(o.loss, o.combo.method).to_json()},  // by unit: what the report shows
            {"event_counts", o.event_counts}};
  json unobserved = json::array();
  for (const auto& [layer, reason] : o.unobserved) unobserved.push_back({{"layer", layer}, {"reason", reason}});
  j["unobserved"] = unobserved;
  json partly = json::array();
  for (const auto& [layer, reason] : o.partly_unobserved) partly.push_back({{"layer", layer}, {"reason", reason}});
  j["partly_observed"] = partly;
  // Per (process, device): which fell short over the repetitions, and whether the method's
  // records name the device at all (and agree with the ledger where both do).
  json short_of = json::array(), attribution = json::object();
  const Method* method = find_method(o.combo.method);
  for (const auto& [name, sc] : o.layers) {
    if (several(sc.buckets))
      for (const auto& line : shortfalls(sc.buckets)) short_of.push_back(name + ": " + line);
    const auto d = method ? method->devices.find(name) : std::map<std::string, Method::DeviceAttribution>::const_iterator{};
    const bool known = method && d != method->devices.end();
    attribution[name] = {{"named", known && d->second.named},
                         {"how", known ? d->second.how : "the method says nothing of devices"},
                         {"compared", sc.device_compared},
                         {"equal", sc.device_equal},
                         {"unnamed", sc.device_unnamed}};
  }
  j["per_device_short"] = short_of;
  // Tracing changed what the program computed (--result): how often, and what it printed.
  j["results_changed"] = {{"runs", o.results_changed.size()}, {"examples", json::array()}};
  for (size_t i = 0; i < o.results_changed.size() && i < 4; ++i) j["results_changed"]["examples"].push_back(o.results_changed[i]);
  if (!o.results_vary_untraced.empty())
    j["results_vary_untraced"] = {{"runs", o.results_vary_untraced.size()}, {"example", o.results_vary_untraced[0]}};
  j["device_attribution"] = attribution;
  if (!o.processes.empty()) {
    json processes = json::array();
    for (const auto& [key, p] : o.processes)
      processes.push_back({{"process", p.label()}, {"runs", p.runs}, {"pids", p.pids}});
    j["processes"] = processes;
  }
  // Whole-workload slowdown: this method's median wall time over the baseline's. The
  // matrix's repetitions are not paired in time (the cost mode's rounds are: use --cost for
  // a slowdown): a percentile bootstrap of the two sets, approximate, only from 8
  // repetitions of each (3 give 10 distinct resamples: no 95% interval).
  for (const auto& base : all)
    if (base.combo.method == "none" && base.combo.workload == o.combo.workload &&
        base.combo.linkage == o.combo.linkage && median(base.wall_ns) > 0 && base.ok > 0) {
      j["wall_ratio_vs_none"] = double(median(o.wall_ns)) / double(median(base.wall_ns));
      if (base.wall_ns.size() >= 8 && o.wall_ns.size() >= 8) {
        const std::vector<double> a(base.wall_ns.begin(), base.wall_ns.end()), b(o.wall_ns.begin(), o.wall_ns.end());
        const Difference r = median_ratio(a, b);
        j["wall_ratio_ci95"] = {r.lo, r.hi};
        j["wall_ratio_interval"] = "percentile bootstrap of unpaired repetitions (approximate)";
      } else {
        j["wall_ratio_interval"] = "none: fewer than 8 repetitions of each (--cost pairs runs in rounds)";
      }
    }
  return j;
}

void print_progress(size_t index, size_t total, const Combo& c, int rep, int reps, const json& run,
                    const std::string& cost_progress) {
  std::string what = c.workload.empty() ? "command" : c.workload + " " + c.linkage;
  std::string verdict = run["ok"].get<bool>() ? "ok" : "FAILED";
  char line[512];
  std::snprintf(line, sizeof line, "[%3zu/%zu] %-22s %-14s rep %d/%d  %-6s %7.2f s", index, total, what.c_str(),
                c.method.c_str(), rep, reps, verdict.c_str(), run["wall_ns"].get<int64_t>() / 1e9);
  std::string extra;
  const bool ok = run["ok"].get<bool>();
  // A failed run's shares are not shown: its ground truth may not have been read, and a
  // number beside FAILED reads as a result (run.json keeps whatever was scored).
  if (run.contains("ledger") && ok) extra += "  ledger " + std::to_string(run["ledger"]["records"].get<int64_t>()) + " calls";
  if (run.contains("match") && ok)
    for (const auto& s : run["match"])
      extra += "  " + s["layer"].get<std::string>() + " " +
               share_text(s["matched"].get<int64_t>(), s["expected"].get<int64_t>());
  else if (run.contains("event_counts") && ok)
    for (const auto& [layer, n] : run["event_counts"].items()) extra += "  " + layer + " " + std::to_string(n.get<int64_t>());
  for (const auto& u : run["unobserved"])
    extra += "  " + u["layer"].get<std::string>() + " NOT OBSERVED (" + u["reason"].get<std::string>() + ")";
  for (const auto& u : run.value("partly_observed", json::array()))
    extra += "  " + u["layer"].get<std::string>() + " PARTLY OBSERVED (" + u["reason"].get<std::string>() + ")";
  if (!run["left_running"].empty()) {
    // Which, and whose: the program's leftovers are its own doing, the method's are ours.
    std::string who;
    const json detail = run.value("left_running_detail", json::array());
    for (size_t i = 0; i < detail.size() && i < 8; ++i) {  // the rest in run.json: one line stays readable
      const json& l = detail[i];
      who += (who.empty() ? "" : ", ") + std::to_string(l["pid"].get<int>()) + " " + l["name"].get<std::string>() +
             " (" + (l["belongs"] == "program" ? "the program's" : l["belongs"] == "method" ? "the method's" : "origin unknown") +
             ")";
    }
    if (detail.size() > 8) who += ", ... (" + std::to_string(detail.size() - 8) + " more in run.json)";
    extra += "  (" + std::to_string(run["left_running"].size()) + " process(es) left running: killed" +
             (who.empty() ? "" : ": " + who) + ")";
  }
  // A result that tracing changed always shows, failed or not (--strict-result).
  if (run.contains("result_changed") && run["ok"].get<bool>())
    extra += "  RESULT CHANGED (" + run["result_changed"].get<std::string>() + ")";
  if (run.contains("result_unchecked")) extra += "  RESULT " + run["result_unchecked"].get<std::string>();
  if (const json rc = run.value("result_check", json::object()); rc.contains("as_untraced_run"))
    extra += "  RESULT as untraced rep " + std::to_string(rc["as_untraced_run"].get<int>()) +
             "'s: the untraced runs differ among themselves";
  // Lost events always show, whatever the shares read.
  const json loss = run.value("tracer", json::object()).value("loss", json::object());
  if (const LossTotals lost = loss_totals(loss, run.value("method", "")); lost.any())
    extra += "  LOST " + lost.text() + " (" + lost_text(loss) + ")";
  // A total can hide a rank or a GPU that saw nothing: those that fell short are named.
  const json short_of = run.value("per_device_short", json::array());
  for (size_t i = 0; i < short_of.size() && i < 4; ++i) extra += "  SHORT " + short_of[i].get<std::string>();
  if (short_of.size() > 4) extra += "  ... (" + std::to_string(short_of.size()) + " short in all, run.json)";
  if (!run["ok"].get<bool>()) extra += "  (" + run["failures"][0].get<std::string>() + ")";
  if (!cost_progress.empty()) extra += "  [" + cost_progress + "]";
  std::fprintf(stderr, "%s%s\n", line, extra.c_str());
}

void print_skips(const json& skipped) {
  // One line per reason, with how many combinations and which (the full list is in
  // summary.json): a method missing here must not bury the rest of the console.
  std::map<std::string, std::vector<std::string>> skips_by_reason;
  for (const auto& s : skipped)
    skips_by_reason[s["reason"].get<std::string>()].push_back(
        s["workload"].is_null() ? "command." + s["method"].get<std::string>()
                                : s["workload"].get<std::string>() + "." + s["linkage"].get<std::string>() + "." +
                                      s["method"].get<std::string>());
  for (const auto& [reason, which] : skips_by_reason) {
    std::string list;
    for (size_t i = 0; i < which.size() && i < 4; ++i) list += (i ? ", " : "") + which[i];
    if (which.size() > 4) list += ", ... (" + std::to_string(which.size() - 4) + " more)";
    std::fprintf(stderr, "  skip %zu: %s [%s]\n", which.size(), reason.c_str(), list.c_str());
  }
}

json build_summary(const SummaryInputs& in, const std::vector<ComboOutcome>& outcomes) {
  const Options& opts = in.opts;
  int ok = 0, failed = 0;
  json combos_json = json::array();
  for (const auto& o : outcomes) {
    ok += o.ok;
    failed += o.failed;
    combos_json.push_back(combo_json(o, outcomes));
  }
  // schema_version: the shape of this file (schema/summary.v1.schema.json), which the
  // analysis package checks before reading anything.
  json summary = {{"v", 1},
                  {"schema_version", 1},
                  {"run_id", in.run_id},
                  {"started", in.started},
                  {"finished", utc_now("%Y-%m-%dT%H:%M:%SZ")},
                  {"interrupted", in.interrupted},
                  {"incomplete", in.write_error.empty() ? json(nullptr) : json(in.write_error)},
                  {"command_line", in.command_line},
                  {"counts", {{"runs", ok + failed}, {"ok", ok}, {"failed", failed}, {"skipped_combinations", in.skipped.size()}}},
                  {"combos", combos_json},
                  {"skipped", in.skipped}};
  int64_t unobserved_total = 0, results_changed = 0, results_vary = 0;
  for (const auto& o : outcomes) unobserved_total += int64_t(o.unobserved.size());
  for (const auto& o : outcomes) results_changed += int64_t(o.results_changed.size());
  for (const auto& o : outcomes) results_vary += int64_t(o.results_vary_untraced.size());
  summary["counts"]["layers_not_observed"] = unobserved_total;
  summary["counts"]["results_changed"] = results_changed;
  summary["counts"]["results_vary_untraced"] = results_vary;
  if (in.otlp) summary["otlp"] = in.otlp->summary();
  if (in.cost) {
    // A method the command line took out is named on every program's row, not left blank.
    json left_out = json::array();
    for (const auto& m : opts.methods_taken_out)
      left_out.push_back({{"method", m}, {"reason", "taken out by --method " + opts.method_arg}});
    summary["cost"] = in.cost->summary(in.skipped, left_out);
  }
  if (!opts.command.empty()) {
    std::vector<MethodView> views;
    for (const auto& o : outcomes) {
      const Method& m = *find_method(o.combo.method);
      views.push_back({o.combo.method, o.ok > 0, m.layers, o.observed, o.unobserved, o.families,
                       int(o.statuses.size()), o.partly_unobserved, m.limits, o.loss});
      views.back().processes = &o.processes;
    }
    summary["verdict"] = command_verdict(views);
  }
  // The verdict per layer and the cost table are not printed: with every method they fill
  // screens; the console's table (final_status) is read from this field, as the report is.
  summary["methods"] = methods_json(summary);
  return summary;
}

// The last line, and the exit: 130 interrupted, 1 a run failed or results could not be
// written, 3 nothing requested could run here, else 0.
void write_details(const std::filesystem::path& root, const json& summary, const CostRecorder* cost) {
  std::string text;
  if (summary.contains("verdict") && summary["verdict"].is_object() && summary["verdict"].contains("coverage"))
    text += verdict_text(summary["verdict"]);
  if (cost && summary.contains("cost")) text += (text.empty() ? "" : "\n") + cost->table(summary["cost"]);
  // Read in a terminal by whoever ran the harness: the program's strings in it (process and
  // kernel names, reasons) may not clear a screen there.
  if (!text.empty()) write_file_atomic(root / kDetailsFile, escape_for_terminal(text));
}

int final_status(const SummaryInputs& in, const json& summary, const std::vector<ComboOutcome>& outcomes,
                 const std::filesystem::path& root) {
  std::fputs(end_of_run_text(summary, root, kEndOfRunLines).c_str(), stderr);
  const int ok = summary["counts"]["ok"].get<int>(), failed = summary["counts"]["failed"].get<int>();
  if (in.otlp) std::fprintf(stderr, "%s\n", in.otlp->console_line().c_str());  // the collector's state never changes the exit
  if (in.interrupted) return 130;
  if (failed || !in.write_error.empty()) return 1;
  // The baseline the harness added is not what was asked: with every method the user named
  // skipped, nothing requested ran.
  const bool asked_ran = std::any_of(outcomes.begin(), outcomes.end(), [&](const ComboOutcome& o) {
    return o.ok > 0 && !(in.added_baseline && o.combo.method == "none");
  });
  if (ok == 0 || !asked_ran) {
    std::fprintf(stderr, "harness: nothing requested could run here (see the skip reasons above)\n");
    return 3;
  }
  return 0;
}

}  // namespace cudatrace
