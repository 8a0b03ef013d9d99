#include "harness/stats/cost.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "common/cuda_names.h"
#include "common/outside_text.h"
#include "common/untrusted_file.h"
#include "harness/stats/bench_stats.h"

namespace cudatrace {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The program wrote the mark file: read its first line, with a bound (the program owns it).
std::optional<std::pair<int64_t, std::string>> first_mark(const fs::path& file) {
  std::ifstream in = open_untrusted(file);
  if (!in) return std::nullopt;
  char buf[4096] = {};
  in.read(buf, sizeof buf - 1);
  const std::string text(buf, size_t(in.gcount()));
  const std::string line = text.substr(0, text.find('\n'));
  size_t used = 0;
  int64_t ns = 0;
  try {
    ns = std::stoll(line, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string what = used < line.size() ? line.substr(used) : "";
  what.erase(0, what.find_first_not_of(' '));
  return std::make_pair(ns, shown(what.empty() ? "the program's mark" : what, 120));
}

// The last line the program wrote to stderr, as the reason it gave for not running.
std::string last_stderr_line(const fs::path& run_dir) {
  std::ifstream in(run_dir / "stderr.txt", std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  in.seekg(from);
  std::string tail(size_t(size - from), '\0');
  in.read(tail.data(), std::streamsize(tail.size()));
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' ')) tail.pop_back();
  const size_t nl = tail.rfind('\n');
  return shown(nl == std::string::npos ? tail : tail.substr(nl + 1), 300);
}

std::string joined(const json& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a.get<std::string>();
  return s;
}

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string seconds_text(double s) {
  char buf[48];
  if (s >= 90)
    std::snprintf(buf, sizeof buf, "%d min %02d s", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  return buf;
}

// "1.05 [0.98, 1.12]", "1.05 (2 rounds)" or "—".
std::string ratio_text(const json& r, bool with_interval = true, bool narrow = false) {
  if (r.is_null()) return "-";
  char buf[64];
  if (!with_interval) {
    std::snprintf(buf, sizeof buf, "%.2f", r["value"].get<double>());
  } else if (r["ci95"].is_array()) {
    std::snprintf(buf, sizeof buf, narrow ? "%.2f[%.2f,%.2f]" : "%.2f [%.2f, %.2f]", r["value"].get<double>(),
                  r["ci95"][0].get<double>(), r["ci95"][1].get<double>());
  } else {
    const int pairs = r["pairs"].get<int>();
    if (narrow)
      std::snprintf(buf, sizeof buf, "%.2f(%d<%zu rnd)", r["value"].get<double>(), pairs, kMinPairsForInterval);
    else
      std::snprintf(buf, sizeof buf, "%.2f (%d round%s: too few for an interval)", r["value"].get<double>(), pairs,
                    pairs == 1 ? "" : "s");
  }
  std::string text = buf;
  if (with_interval && r.contains("anomaly")) text += narrow ? "!" : " ANOMALY";
  return text;
}

// Letters for what marked a method's runs: F failed, L lost events, U a layer not
// observed, P a layer partly observed; * the figures come from marked runs.
std::string mark_letters(const json& m) {
  const json& c = m["counts"];
  std::string s;
  if (c["failed"].get<int>()) s += "F";
  if (c["lost_events"].get<int>()) s += "L";
  if (c["layer_not_observed"].get<int>()) s += "U";
  if (c["layer_partly_observed"].get<int>()) s += "P";
  if (m["basis"] == basis_name(Basis::kMarked)) s += "*";
  return s;
}

// A per-step ratio: "1.05 [1.02, 1.08]", "1.05 (12 steps: too few for an interval)".
std::string step_text(const json& r, bool narrow = false) {
  if (r.is_null()) return "-";
  char buf[96];
  if (r["ci95"].is_array())
    std::snprintf(buf, sizeof buf, narrow ? "%.2f[%.2f,%.2f]" : "%.2f [%.2f, %.2f]", r["value"].get<double>(),
                  r["ci95"][0].get<double>(), r["ci95"][1].get<double>());
  else
    std::snprintf(buf, sizeof buf, narrow ? "%.2f(few steps)" : "%.2f (too few steps for an interval)", r["value"].get<double>());
  std::string text = buf;
  if (!narrow && r["ci95"].is_array() && r.contains("interval") && r["interval"].contains("scope"))
    text += " (within " + std::to_string(r.value("rounds", 0)) + " run(s) only)";
  return text + (r.contains("anomaly") ? (narrow ? "!" : " ANOMALY") : "");
}

// The per-step lines of one program (steps.h), below its table: where a method's runs marked steps.
std::string step_lines(const json& p) {
  std::string out;
  char line[512];
  for (const auto& m : p["methods"]) {
    const json& st = m["steps"];
    if (st.is_null()) continue;
    if (out.empty()) out = "  per step (steady state: " + std::string(kStepWarmupRule) + "):\n";
    const std::string vs = m["method"] == "none" ? "1 (baseline)"
                           : st["ratio"].is_null() ? "- (" + st.value("why_no_ratio", std::string()) + ")"
                                                   : step_text(st["ratio"]);
    std::snprintf(line, sizeof line, "  %-14s median step %8.3f ms  vs none %-28s start-up to the first step %.2f s%s  (%d steady steps)\n",
                  m["method"].get<std::string>().c_str(),
                  st["median_step_ns"].is_number() ? st["median_step_ns"].get<double>() / 1e6 : 0.0, vs.c_str(),
                  st["median_startup_ns"].get<double>() / 1e9,
                  st.contains("startup_ratio") && !st["startup_ratio"].is_null()
                      ? (" (" + ratio_text(st["startup_ratio"], false) + ")").c_str() : "",
                  st["steady_steps"].get<int>());
    out += line;
  }
  if (out.empty() && p.contains("steps_why")) out = "  per step: " + p["steps_why"].get<std::string>() + "\n";
  return out;
}

}  // namespace

json ratio_json(const std::optional<Ratio>& r) {
  if (!r) return nullptr;
  json j = {{"value", r->value}, {"pairs", r->pairs}, {"ci95", nullptr}};
  if (r->ci95) {
    j["ci95"] = {r->ci95->first, r->ci95->second};
    j["interval"] = {{"method", kIntervalMethod}, {"coverage", r->coverage}, {"rank", r->rank}};
    // Faster traced than untraced beyond the interval: not tracing's doing (schema/README.md).
    if (r->anomaly())
      j["anomaly"] = kAnomalyCause;
  } else {
    j["why_no_interval"] = "too few rounds for an interval: " + std::to_string(r->pairs) + " paired round(s), " +
                           std::to_string(kMinPairsForInterval) + " needed for 95%";
  }
  return j;
}

void FirstLaunch::add(const Event& e) {
  if (e.is_meta()) return;
  any_record = true;
  const std::string c = canonical_name(e.name);
  const bool is_launch = (e.layer == layer::kRuntime && is_runtime_launch(c)) ||
                         (e.layer == layer::kDriver && is_driver_launch(c));
  if (is_launch && e.ts > 0 && (!launch || e.ts < launch->ts)) launch = e;
}

json startup_of(const std::vector<Event>& ledger, const fs::path& target_dir, const ChildResult& child) {
  FirstLaunch first;
  for (const auto& e : ledger) first.add(e);
  return startup_of(first, target_dir, child);
}

json startup_of(const FirstLaunch& ledger, const fs::path& target_dir, const ChildResult& child) {
  if (child.start_ns == 0 || child.status != ChildStatus::Exited)
    return {{"ns", nullptr}, {"why", "the program did not run to its end"}};
  const auto within = [&](int64_t at) { return at >= child.start_ns && at <= child.start_ns + child.wall_ns; };
  if (ledger.any_record) {
    if (!ledger.launch) return {{"ns", nullptr}, {"why", "the workload launched no kernel"}};
    const Event& first = *ledger.launch;
    const int64_t end = first.ts + first.dur.value_or(0);
    if (!within(end))
      return {{"ns", nullptr}, {"why", "the ledger's first kernel launch lies outside the run's time"}};
    return {{"ns", end - child.start_ns},
            {"source", "the return of the first kernel launch in the ledger (" + first.name + ")"}};
  }
  if (auto mark = first_mark(target_dir / kStartupMarkFile)) {
    if (!within(mark->first))
      return {{"ns", nullptr}, {"why", "the program's start-up mark lies outside the run's time (not CLOCK_MONOTONIC?)"}};
    return {{"ns", mark->first - child.start_ns}, {"source", "the program's start-up mark: " + mark->second}};
  }
  return {{"ns", nullptr},
          {"why", std::string("no ledger, and the program wrote no start-up mark (") + kStartupMarkEnv +
                      "): untraced, nothing sees its first kernel launch"}};
}

RunMarks marks_of(const json& run) {
  RunMarks m;
  m.failed = !run.value("ok", false);
  if (m.failed && run.contains("failures") && !run["failures"].empty()) m.failure = run["failures"][0].get<std::string>();
  if (run.contains("tracer") && run["tracer"].contains("loss"))
    for (const auto& [k, v] : run["tracer"]["loss"].items())
      if (v.is_number_integer() && v.get<int64_t>() > 0) m.lost[k] = v.get<int64_t>();
  for (const auto& u : run.value("unobserved", json::array())) m.unobserved[u["layer"]] = u["reason"];
  for (const auto& u : run.value("partly_observed", json::array())) m.partly_observed[u["layer"]] = u["reason"];
  return m;
}

RunPlan cost_plan(const std::vector<CostSubject>& subjects, int rounds, uint64_t seed) {
  std::vector<std::string> program_of;
  std::vector<size_t> warm_up;
  for (size_t i = 0; i < subjects.size(); ++i) {
    program_of.push_back(subjects[i].program);
    if (subjects[i].method == "none") warm_up.push_back(i);
  }
  return randomised_plan(program_of, warm_up, rounds, seed);
}

CostRecorder::CostRecorder(std::vector<CostSubject> subjects, RunPlan plan, int rounds, std::optional<double> budget_s,
                           std::vector<std::string> command, std::optional<uint64_t> seed)
    : subjects_(std::move(subjects)), plan_(std::move(plan)), rounds_(rounds), budget_s_(budget_s),
      command_(std::move(command)), seed_(seed) {
  std::map<std::pair<std::string, int>, size_t> seen;
  for (const auto& step : plan_) position_.push_back(seen[{subjects_[step.combo].program, step.rep}]++);
}

double CostRecorder::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int CostRecorder::rounds_done() const { return int(round_end_s_.size()); }

bool CostRecorder::should_run(size_t index) {
  if (!stopped_.empty()) return false;
  const bool round_starts = index > 0 && plan_[index].rep != plan_[index - 1].rep;
  // The warm-up round is no round: the pace of the timed rounds is judged without it.
  if (round_starts && plan_[index - 1].rep == 0) {
    warmup_s_ = elapsed_s();
  } else if (round_starts) {
    round_end_s_.push_back(elapsed_s() - warmup_s_);
    if (budget_s_ && !next_round_fits(elapsed_s() - warmup_s_, rounds_done(), *budget_s_ - warmup_s_)) {
      stopped_ = "the time budget (" + seconds_text(*budget_s_) + ") ended it after round " +
                 std::to_string(rounds_done()) + " of " + std::to_string(rounds_) + ": a round takes about " +
                 seconds_text(round_end_s_.back() / rounds_done());
      return false;
    }
  }
  // A first round longer than the whole budget is cut where the budget runs out: the
  // methods it did not reach say so, and the job around it keeps its time.
  if (index > 0 && budget_s_ && elapsed_s() >= *budget_s_) {
    stopped_ = "the time budget (" + seconds_text(*budget_s_) + ") ran out during round " +
               std::to_string(plan_[index].rep) + " of " + std::to_string(rounds_) +
               ": the methods it had not reached have no run in that round";
    return false;
  }
  return !skipped_.count(subjects_[plan_[index].combo].program);
}

void CostRecorder::add(size_t index, const json& run, const fs::path& run_dir) {
  const size_t combo = plan_[index].combo;
  const CostSubject& who = subjects_[combo];
  // The program's own word that it cannot run here, said untraced before anything of it
  // was measured: the program is skipped, not failed.
  if (who.method == "none" && run.value("status", "") == to_string(ChildStatus::Exited) &&
      run.value("exit_code", 0) == kCannotRunHere && samples_[combo].empty()) {
    const std::string said = last_stderr_line(run_dir);
    skipped_[who.program] = "the program says it cannot run here (exit " + std::to_string(kCannotRunHere) + ")" +
                            (said.empty() ? "" : ": " + said);
    return;
  }
  if (plan_[index].rep == 0) {  // the untimed warm-up: kept apart, never in the figures
    warmups_.push_back({who.program, run_dir.filename().string(), run.value("ok", false) ? "ok" : "failed",
                        run.value("wall_ns", int64_t(0))});
    return;
  }
  Sample s;
  s.sample.round = plan_[index].rep;
  s.sample.wall_ns = run.value("wall_ns", int64_t(0));
  s.sample.marks = marks_of(run);
  s.position = position_[index];
  s.run_name = run_dir.filename().string();
  s.startup = run.value("startup", json(nullptr));
  if (s.startup.is_object() && s.startup["ns"].is_number_integer()) s.sample.startup_ns = s.startup["ns"].get<int64_t>();
  if (run.contains("tracer") && run["tracer"]["notes"].is_object()) {
    const json& notes = run["tracer"]["notes"];
    if (notes.contains("setup_ms") && notes["setup_ms"].is_number()) s.setup_ms = notes["setup_ms"].get<double>();
    if (notes.contains("setup_what") && notes["setup_what"].is_string()) s.setup_what = notes["setup_what"];
  }
  const json steps = run.value("steps", json(nullptr));
  s.steps = step_run_of(s.sample.round, steps);
  if (steps.is_object() && steps.contains("why")) s.steps_why = steps["why"];
  samples_[combo].push_back(std::move(s));
}

std::string CostRecorder::progress(size_t index) const {
  const int round = plan_[index].rep;
  if (round == 0) return "warm-up run (untimed, in no figure)";
  const size_t done = index + 1, left_steps = plan_.size() - done;
  const double elapsed = elapsed_s();
  const double per_step = rounds_done() > 0 ? round_end_s_.back() / double(rounds_done()) /
                                                  (double(plan_.size()) / double(std::max(1, rounds_)))
                                            : elapsed / double(done);
  double left = per_step * double(left_steps);
  if (budget_s_) left = std::min(left, std::max(0.0, *budget_s_ - elapsed));
  std::string s = "round " + std::to_string(round) + "/" + std::to_string(rounds_);
  if (left_steps == 0) return s + ", done";
  return s + ", about " + seconds_text(left) + " left" + (budget_s_ ? " (budget " + seconds_text(*budget_s_) + ")" : "");
}

// summary.json's "cost" before its programs: the rounds, where they stopped, the order and
// its seed, the warm-up runs and the rules of the per-step figures.
json CostRecorder::summary_head(int started) const {
  json out = {{"rounds", {{"planned", rounds_}, {"done", started}}},
              {"stopped", stopped_.empty() ? json(nullptr) : json(stopped_)},
              {"time_budget_s", optional_number(budget_s_)},
              {"elapsed_s", elapsed_s()},
              {"order", seed_ ? "rounds: each runs every program under every method in an order drawn anew for each "
                                "program and round from the seed (randomised_plan); none runs in every round"
                              : "rounds: each runs every program under every method, round k (from 0) starting a program "
                                "at its method k mod M; none runs in every round"},
              {"seed", seed_ ? json(*seed_) : json(nullptr)},
              {"warm_up", json::array()},
              {"steps", {{"env", kStepMarkEnv}, {"warm_up", kStepWarmupRule}, {"interval", kStepIntervalMethod},
                         {"min_steps_for_interval", kMinStepsForInterval}}},
              {"min_rounds_for_interval", kMinPairsForInterval},
              {"programs", json::array()}};
  for (const auto& w : warmups_)
    out["warm_up"].push_back({{"program", w.program}, {"method", "none"}, {"run", w.run_name}, {"wall_ns", w.wall_ns},
                              {"ended", w.ended}});
  return out;
}

json CostRecorder::summary(const json& skipped, const json& left_out) const {
  std::vector<std::string> programs;
  std::map<std::string, std::vector<size_t>> combos_of;
  for (size_t i = 0; i < subjects_.size(); ++i) {
    auto& c = combos_of[subjects_[i].program];
    if (c.empty()) programs.push_back(subjects_[i].program);
    c.push_back(i);
  }
  const auto steps_of_combo = [&](size_t combo) {
    std::vector<StepRun> v;
    if (auto it = samples_.find(combo); it != samples_.end())
      for (const auto& s : it->second) v.push_back(s.steps);
    return v;
  };
  const auto samples_of = [&](size_t combo) {
    std::vector<CostSample> v;
    if (auto it = samples_.find(combo); it != samples_.end())
      for (const auto& s : it->second) v.push_back(s.sample);
    return v;
  };
  int started = 0;  // the last round that ran anything (an interrupted one counts: summary.json says so)
  for (const auto& [combo, runs] : samples_)
    for (const auto& s : runs) started = std::max(started, s.sample.round);
  json out = summary_head(started);
  for (const auto& program : programs) {
    const auto& combos = combos_of[program];
    const CostSubject& first = subjects_[combos.front()];
    json p = {{"program", program},
              {"workload", first.workload.empty() ? json(nullptr) : json(first.workload)},
              {"linkage", first.linkage.empty() ? json(nullptr) : json(first.linkage)},
              {"command", first.workload.empty() ? json(command_) : json(nullptr)},
              {"methods", json::array()},
              {"not_run", json::array()}};
    if (auto s = skipped_.find(program); s != skipped_.end()) p["skipped"] = s->second;
    std::vector<CostSample> none;
    std::vector<StepRun> none_steps;
    std::vector<int> none_used;
    for (size_t c : combos)
      if (subjects_[c].method == "none") {
        none = samples_of(c);
        none_steps = steps_of_combo(c);
        none_used = method_cost(none, {}, true).rounds_used;
      }
    for (size_t c : combos) {
      const std::string& method = subjects_[c].method;
      const std::vector<CostSample> runs = samples_of(c);
      const MethodCost mc = method_cost(runs, none, method == "none");
      json m = {{"method", method},
                {"counts", {{"runs", mc.runs}, {"clean", mc.clean}, {"failed", mc.failed}, {"lost_events", mc.lost},
                            {"layer_not_observed", mc.unobserved}, {"layer_partly_observed", mc.partly_observed}}},
                {"basis", basis_name(mc.basis)},
                {"rounds_used", mc.rounds_used},
                {"rounds_left_out", mc.rounds_left_out},
                {"median_wall_ns", mc.median_wall_ns},
                {"median_startup_ns", optional_number(mc.median_startup_ns)},
                {"median_rest_ns", optional_number(mc.median_rest_ns)},
                {"ratio", ratio_json(mc.wall)},
                {"startup_ratio", ratio_json(mc.startup)},
                {"rest_ratio", ratio_json(mc.rest)}};
      if (method != "none" && !mc.wall) m["why_no_ratio"] = mc.why_no_ratio;
      m["steps"] = step_figures(steps_of_combo(c), none_steps, mc.rounds_used, none_used, method == "none");
      // Each kind of mark once, with the rounds it marked and its first reason.
      std::map<std::string, json> marks;
      json per_run = json::array();
      std::vector<double> setup;
      std::string setup_what;
      if (auto it = samples_.find(c); it != samples_.end())
        for (const auto& s : it->second) {
          const RunMarks& rm = s.sample.marks;
          const auto note = [&](const std::string& kind, const std::string& detail) {
            json& k = marks[kind];
            if (k.is_null()) k = {{"mark", kind}, {"rounds", json::array()}, {"detail", detail}};
            k["rounds"].push_back(s.sample.round);
          };
          if (rm.failed) note("failed", rm.failure);
          if (!rm.lost.empty()) {
            std::string d;
            for (const auto& [counter, n] : rm.lost) d += (d.empty() ? "" : ", ") + counter + " " + std::to_string(n);
            note("lost events", d);
          }
          // One mark per run, however many layers: each layer with its reason in the detail.
          const auto layers = [](const std::map<std::string, std::string>& by_layer) {
            std::string d;
            for (const auto& [l, why] : by_layer) d += (d.empty() ? "" : "; ") + l + ": " + why;
            return d;
          };
          if (!rm.unobserved.empty()) note("layer not observed", layers(rm.unobserved));
          if (!rm.partly_observed.empty()) note("layer partly observed", layers(rm.partly_observed));
          if (s.setup_ms) setup.push_back(*s.setup_ms);
          if (!s.setup_what.empty()) setup_what = s.setup_what;
          if (p.value("startup_source", json(nullptr)).is_null() && s.startup.contains("source"))
            p["startup_source"] = s.startup["source"];
          if (!p.contains("startup_why") && s.startup.contains("why")) p["startup_why"] = s.startup["why"];
          if (!p.contains("steps_why") && !s.steps_why.is_null()) p["steps_why"] = s.steps_why;
          per_run.push_back({{"round", s.sample.round},
                             {"position", s.position},
                             {"run", s.run_name},
                             {"wall_ns", s.sample.wall_ns},
                             {"startup_ns", s.sample.startup_ns ? json(*s.sample.startup_ns) : json(nullptr)},
                             {"mark", rm.worst()}});
        }
      m["marks"] = json::array();
      for (auto& [kind, k] : marks) m["marks"].push_back(k);
      if (!setup.empty()) m["setup_reported"] = {{"median_ms", median_of(setup)}, {"what", setup_what}};
      m["runs"] = per_run;
      p["methods"].push_back(m);
    }
    if (p.contains("startup_source")) p.erase("startup_why");
    for (const auto& m : p["methods"])
      if (!m["steps"].is_null()) p.erase("steps_why");  // some run marked steps: the figures say the rest
    for (const auto& s : skipped) {
      const std::string where = s["workload"].is_null() ? "command"
                                                        : s["workload"].get<std::string>() + "." + s["linkage"].get<std::string>();
      if (where == program) p["not_run"].push_back({{"method", s["method"]}, {"reason", s["reason"]}});
    }
    for (const auto& l : left_out) p["not_run"].push_back(l);
    out["programs"].push_back(p);
  }
  return out;
}

std::string CostRecorder::table(const json& summary) const {
  std::string out;
  char line[1024];
  const json& programs = summary["programs"];
  std::snprintf(line, sizeof line, "\ncost: %d of %d round(s), %s%s\n", summary["rounds"]["done"].get<int>(),
                summary["rounds"]["planned"].get<int>(), seconds_text(summary["elapsed_s"].get<double>()).c_str(),
                summary["stopped"].is_null() ? "" : ("; " + summary["stopped"].get<std::string>()).c_str());
  out += line;
  out += "slowdown = the median over rounds of wall time / none's in the same round, from the rounds in which both "
         "ran usably; [interval] the order statistics of those rounds' ratios, holding their median at least 95% "
         "whatever their distribution (6 rounds or more; below, none); ANOMALY: faster traced, interval under 1\n";
  if (programs.size() <= 2) {
    for (const auto& p : programs) {
      out += "\n" + p["program"].get<std::string>() +
             (p["command"].is_array() && !p["command"].empty() ? "  (" + shown(joined(p["command"]), 160) + ")" : "") + "\n";
      if (p.contains("skipped")) {
        out += "  skipped: " + p["skipped"].get<std::string>() + "\n";
        continue;
      }
      std::snprintf(line, sizeof line, "  %-14s %9s  %-22s %-20s %-20s %-16s %s\n", "method", "median s", "vs none [95%]",
                    "start-up s (vs none)", "rest s (vs none)", "own set-up ms", "runs used / marks");
      out += line;
      for (const auto& m : p["methods"]) {
        const auto part = [&](const char* median, const char* ratio) {
          if (m[median].is_null()) return std::string("-");
          char b[64];
          std::snprintf(b, sizeof b, "%.2f (%s)", m[median].get<double>() / 1e9,
                        m["method"] == "none" ? "-" : ratio_text(m[ratio], false).c_str());
          return std::string(b);
        };
        char setup[32] = "-";
        if (m.contains("setup_reported")) std::snprintf(setup, sizeof setup, "%.2f", m["setup_reported"]["median_ms"].get<double>());
        std::string marks = std::to_string(m["rounds_used"].size()) + "/" + std::to_string(m["counts"]["runs"].get<int>());
        for (const auto& k : m["marks"])
          marks += "  " + k["mark"].get<std::string>() + " x" + std::to_string(k["rounds"].size()) + " (" +
                   shown(k["detail"].get<std::string>(), 70) + ")";
        if (m["basis"] == basis_name(Basis::kMarked)) marks += "  [figures from marked runs]";
        std::string vs = m["method"] == "none" ? "1 (baseline)"
                         : m["ratio"].is_null() ? "- (" + m.value("why_no_ratio", std::string()) + ")"
                                                : ratio_text(m["ratio"]);
        std::snprintf(line, sizeof line, "  %-14s %9.2f  %-22s %-20s %-20s %-16s %s\n", m["method"].get<std::string>().c_str(),
                      m["median_wall_ns"].get<double>() / 1e9, vs.c_str(), part("median_startup_ns", "startup_ratio").c_str(),
                      part("median_rest_ns", "rest_ratio").c_str(), setup, marks.c_str());
        out += line;
      }
      for (const auto& n : p["not_run"]) out += "  " + n["method"].get<std::string>() + ": not run: " + n["reason"].get<std::string>() + "\n";
      out += "  start-up: " + p.value("startup_source", p.value("startup_why", std::string("-"))) + "\n";
      out += step_lines(p);
    }
    return out;
  }
  // Many programs: one row each, a column per method.
  // A column per method that ran somewhere; every method that did not run on a program is
  // named below the table with why.
  std::vector<std::string> methods;
  std::map<std::string, std::string> why_not_run;
  for (const auto& p : programs) {
    for (const auto& m : p["methods"])
      if (m["method"] != "none" && std::find(methods.begin(), methods.end(), m["method"].get<std::string>()) == methods.end())
        methods.push_back(m["method"]);
    for (const auto& n : p["not_run"]) why_not_run.try_emplace(n["method"], n["reason"]);
  }
  std::snprintf(line, sizeof line, "\n%-18s %8s", "program", "none s");
  out += line;
  for (const auto& m : methods) {
    std::snprintf(line, sizeof line, " %-19s", m.c_str());
    out += line;
  }
  out += "\n";
  for (const auto& p : programs) {
    std::snprintf(line, sizeof line, "%-18s", p["program"].get<std::string>().c_str());
    out += line;
    if (p.contains("skipped")) {
      out += " skipped: " + p["skipped"].get<std::string>() + "\n";
      continue;
    }
    double none_s = 0;
    for (const auto& m : p["methods"])
      if (m["method"] == "none") none_s = m["median_wall_ns"].get<double>() / 1e9;
    std::snprintf(line, sizeof line, " %8.2f", none_s);
    out += line;
    for (const auto& name : methods) {
      std::string cell = "not run";
      for (const auto& m : p["methods"])
        if (m["method"] == name) {
          // The per-step figure where the program marked steps (S): its whole run is mostly start-up.
          const bool per_step = m["steps"].is_object() && m["steps"]["ratio"].is_object();
          cell = per_step ? step_text(m["steps"]["ratio"], true) + "S"
                          : (m["ratio"].is_null() ? "- " : ratio_text(m["ratio"], true, true));
          cell += mark_letters(m);
        }
      std::snprintf(line, sizeof line, " %-19s", cell.c_str());
      out += line;
    }
    out += "\n";
  }
  for (const auto& [m, why] : why_not_run) out += "not run: " + m + ": " + shown(why, 150) + "\n";
  out += "S: per step in steady state (the program marked its steps; whole run: summary.json). marks: F runs failed, L lost events, U a layer not observed (each left out while a clean run exists), P a "
         "layer seen in part (counted); * no clean run: the figures come from marked runs. Start-up, the rest and every "
         "reason: summary.json (\"cost\") and the report\n";
  return out;
}

}  // namespace cudatrace
