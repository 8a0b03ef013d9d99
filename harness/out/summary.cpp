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
  // Lost events always show, whatever the shares read.
  if (const json loss = run.value("tracer", json::object()).value("loss", json::object()); lost_events(loss) > 0)
    extra += "  LOST " + std::to_string(lost_events(loss)) + " events (" + lost_text(loss) + ")";
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
  int64_t unobserved_total = 0, results_changed = 0;
  for (const auto& o : outcomes) unobserved_total += int64_t(o.unobserved.size());
  for (const auto& o : outcomes) results_changed += int64_t(o.results_changed.size());
  summary["counts"]["layers_not_observed"] = unobserved_total;
  summary["counts"]["results_changed"] = results_changed;
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
    if (!outcomes.empty()) std::fputs(verdict_text(summary["verdict"]).c_str(), stderr);  // nothing ran: nothing to say
  }
  if (in.cost) std::fputs(in.cost->table(summary["cost"]).c_str(), stderr);
  return summary;
}

namespace {

// A workload combination as its fields read (analysis/cudatrace_results/overview.py
// workload_status says the same): failed, not observed (a layer named unobserved and nothing
// else matched), partial (any layer unobserved or in part, short of the ledger, a process or
// GPU short, events lost, a run failed), else complete. Worst first.
const std::vector<std::string> kOrder = {"failed", "not run", "not observed", "blind", "partial", "complete",
                                         "nothing to see"};
size_t rank(const std::string& status) {
  const auto it = std::find(kOrder.begin(), kOrder.end(), status);
  return it == kOrder.end() ? 4 : size_t(it - kOrder.begin());
}

std::string workload_status(const json& c) {
  if (c.value("ok", 0) == 0) return "failed";
  bool matched_any = false, short_of = false;
  for (const auto& l : c.value("layers", json::array())) {
    const int64_t expected = l.value("expected", int64_t(0)), matched = l.value("matched", int64_t(0));
    if (expected > 0 && matched > 0) matched_any = true;
    if (expected > 0 && matched < expected) short_of = true;
  }
  const bool unobserved = !c.value("unobserved", json::array()).empty();
  if (unobserved && !matched_any) return "not observed";
  if (unobserved || short_of || !c.value("partly_observed", json::array()).empty() ||
      !c.value("per_device_short", json::array()).empty() || lost_events(c.value("loss", json::object())) > 0 ||
      c.value("failed", 0) > 0)
    return "partial";
  return "complete";
}

std::string ratio_text(const json& r) {
  if (!r.is_object()) return "no figure";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2fx", r.value("value", 0.0));
  std::string out = buf;
  if (r.contains("ci95") && r["ci95"].is_array() && r["ci95"].size() == 2) {
    std::snprintf(buf, sizeof buf, " [%.2f-%.2f]", r["ci95"][0].get<double>(), r["ci95"][1].get<double>());
    out += buf;
  } else {
    out += " (no interval)";
  }
  return out;
}

std::string cut(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s;
}

}  // namespace

std::string method_table(const json& summary) {
  std::vector<std::string> methods;
  for (const auto& c : summary.value("combos", json::array())) {
    const std::string m = c.value("method", "");
    if (m != "none" && std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  }
  const json verdict = summary.value("verdict", json::object());
  const json cost_programs = summary.contains("cost") ? summary["cost"].value("programs", json::array()) : json::array();
  for (const auto& p : cost_programs)
    for (const auto& m : p.value("not_run", json::array()))
      if (std::find(methods.begin(), methods.end(), m.value("method", "")) == methods.end())
        methods.push_back(m.value("method", ""));
  if (methods.empty()) return "";
  bool workloads = false;
  for (const auto& c : summary["combos"]) workloads = workloads || c["workload"].is_string();
  const bool command = verdict.is_object() && verdict.contains("coverage");
  // Columns: method, observed (workloads and/or the command), slowdown per program, lost.
  std::vector<std::string> heads = {"method"};
  if (workloads) heads.push_back("workloads");
  if (command) heads.push_back("command");
  for (const auto& p : cost_programs) heads.push_back("slowdown " + shown(p.value("program", "command"), 24));
  heads.push_back("lost events");
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : methods) {
    std::vector<std::string> row = {m};
    std::vector<json> mine;
    for (const auto& c : summary["combos"])
      if (c.value("method", "") == m) mine.push_back(c);
    if (workloads) {
      std::map<std::string, int> counts;
      int n = 0;
      for (const auto& c : mine)
        if (c["workload"].is_string()) ++counts[workload_status(c)], ++n;
      std::string worst = "complete";
      for (const auto& [status, k] : counts)
        if (rank(status) < rank(worst)) worst = status;
      row.push_back(n == 0 ? "-" : worst + " (" + std::to_string(counts["complete"]) + "/" + std::to_string(n) +
                                       " complete)");
    }
    if (command) {
      std::string worst, shown_layer;
      double coverage = 2;
      for (const auto& r : verdict["coverage"]) {
        if (r.value("method", "") != m) continue;
        const std::string status = r.value("status", "partial");
        const double cov = r.contains("coverage") && r["coverage"].is_number() ? r["coverage"].get<double>() : 2;
        if (worst.empty() || rank(status) < rank(worst) || (status == worst && cov < coverage))
          worst = status, shown_layer = r.value("layer", ""), coverage = cov;
      }
      std::string cell = worst.empty() ? "-" : worst;
      if ((worst == "partial" || worst == "blind") && coverage <= 1) {
        const int64_t tenths = int64_t(coverage * 1000);  // rounded down: a shortfall never reads whole
        cell += " " + std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "% " + shown_layer;
      } else if (worst == "not observed") {
        cell += ": " + shown_layer;
      }
      const json short_of = verdict.value("per_device", json::object()).value("short", json::object());
      if (short_of.contains(m)) cell += " SHORT";
      row.push_back(cell);
    }
    for (const auto& p : cost_programs) {
      std::string cell = "-";
      for (const auto& n : p.value("not_run", json::array()))
        if (n.value("method", "") == m) cell = "not run";
      for (const auto& pm : p.value("methods", json::array())) {
        if (pm.value("method", "") != m) continue;
        // Steady state where start-up was told apart, else the whole run.
        const bool steady = p.contains("startup_source") && pm.contains("rest_ratio") && pm["rest_ratio"].is_object();
        cell = ratio_text(steady ? pm["rest_ratio"] : pm.value("ratio", json()));
        if (!pm.value("marks", json::array()).empty()) cell += " *";
      }
      row.push_back(cell);
    }
    int64_t lost = 0;
    int lossy = 0;
    bool blind = false;
    for (const auto& c : mine) {
      const int64_t l = lost_events(c.value("loss", json::object()));
      lost += l, lossy += l > 0;
      blind = blind || !c.value("unobserved", json::array()).empty();
    }
    row.push_back(lossy ? std::to_string(lost) + " in " + std::to_string(lossy) + " of " + std::to_string(mine.size())
                        : mine.empty() ? "-" : blind ? "0, a layer unseen" : "0");
    rows.push_back(row);
  }
  std::vector<size_t> width(heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {
    width[i] = heads[i].size();
    for (const auto& r : rows) width[i] = std::max(width[i], std::min<size_t>(r[i].size(), 34));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = " ";
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string c = cut(cells[i], 34);
      l += " " + c + std::string(width[i] - std::min(width[i], c.size()), ' ') + " ";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(heads);
  for (const auto& r : rows) line(r);
  out += "  observed: the worst program or layer; slowdown vs none [>=95%], * marked; reasons: summary.json, the report\n";
  return out;
}

// The last line, and the exit: 130 interrupted, 1 a run failed or results could not be
// written, 3 nothing requested could run here, else 0.
int final_status(const SummaryInputs& in, const json& summary, const std::vector<ComboOutcome>& outcomes,
                 const std::filesystem::path& root) {
  const json& counts = summary["counts"];
  const int ok = counts["ok"].get<int>(), failed = counts["failed"].get<int>();
  const int64_t unobserved_total = counts["layers_not_observed"].get<int64_t>();
  const int64_t changed = counts["results_changed"].get<int64_t>();
  const std::string not_observed =
      unobserved_total ? ", " + std::to_string(unobserved_total) + " method layer(s) NOT OBSERVED (reasons above)" : "";
  const std::string results =
      changed ? ", " + std::to_string(changed) + " run(s) whose result tracing CHANGED (see their lines)" : "";
  std::fputs(method_table(summary).c_str(), stderr);
  std::fprintf(stderr, "harness: %d run(s) ok, %d failed, %zu combination(s) skipped%s%s%s; summary: %s\n", ok, failed,
               in.skipped.size(), not_observed.c_str(), results.c_str(),
               in.interrupted ? ", INTERRUPTED (partial results kept)" : "", shown((root / "summary.json").string()).c_str());
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
