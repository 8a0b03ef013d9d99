// summary.json's "methods" and the end-of-run text read from it (harness/out/summary.h): one
// row per method, each cell the worst of its programs or layers as the scoring wrote them.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "common/outside_text.h"
#include "harness/catalog.h"
#include "harness/out/summary.h"
#include "harness/score/verdict.h"

namespace cudatrace {

using json = nlohmann::json;

namespace {

// Worst first (analysis/cudatrace_results/overview.py ORDER): a cell shows the worst of its
// programs or layers, never a pooled share of its own.
const std::vector<std::string> kOrder = {"failed", "not run", "not observed", "blind", "partial", "complete",
                                         "nothing to see"};
size_t rank(const std::string& status) {
  const auto it = std::find(kOrder.begin(), kOrder.end(), status);
  return it == kOrder.end() ? 4 : size_t(it - kOrder.begin());
}

std::string text_of(const json& j, const char* key, const std::string& otherwise = "") {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : otherwise;
}

bool is_workload(const json& c) { return c.contains("workload") && c["workload"].is_string(); }

std::string program_name(const json& c) {
  return c["workload"].get<std::string>() + (c.contains("linkage") && c["linkage"].is_string() ? "." + c["linkage"].get<std::string>() : "");
}

// One workload combination as its fields read, with a clause per reason: failed (no run
// succeeded), not observed (a layer named unobserved and nothing else matched), partial (any
// layer unobserved or in part, short of the ledger, a process or GPU short, events lost, a
// run failed), complete, or nothing to see for a method that observes no layer.
json workload_program(const json& c) {
  const std::string program = program_name(c);
  if (c.value("ok", 0) == 0) {
    const json f = c.value("failures", json::array());
    const std::string why = !f.empty() && f[0].is_string() ? f[0].get<std::string>() : "no reason written";
    return {{"program", program}, {"status", "failed"}, {"reasons", json::array({"failed: " + why})}};
  }
  json reasons = json::array();
  for (const auto& u : c.value("unobserved", json::array()))
    reasons.push_back(text_of(u, "layer") + " not observed: " + text_of(u, "reason"));
  for (const auto& u : c.value("partly_observed", json::array()))
    reasons.push_back(text_of(u, "layer") + " partly observed: " + text_of(u, "reason"));
  bool matched_any = false;
  for (const auto& l : c.value("layers", json::array())) {
    const int64_t expected = l.value("expected", int64_t(0)), matched = l.value("matched", int64_t(0));
    matched_any = matched_any || (expected > 0 && matched > 0);
    if (expected > 0 && matched < expected)
      reasons.push_back(text_of(l, "layer") + " " + share_text(matched, expected) + " of the ledger");
  }
  if (const json s = c.value("per_device_short", json::array()); !s.empty() && s[0].is_string())
    reasons.push_back("short: " + s[0].get<std::string>());
  const json loss = c.value("loss", json::object());
  if (const LossTotals lost = loss_totals(loss, c.value("method", "")); lost.any())
    reasons.push_back("lost " + lost.text() + " (" + lost_text(loss) + ")");
  if (const int failed = c.value("failed", 0); failed > 0)
    reasons.push_back(std::to_string(failed) + " of " + std::to_string(c.value("reps", 0)) + " run(s) failed");
  std::string status = "complete";
  if (!c.value("unobserved", json::array()).empty() && !matched_any) status = "not observed";
  else if (!reasons.empty()) status = "partial";
  else if (const Method* m = find_method(c.value("method", "")); m && m->layers.empty()) status = "nothing to see";
  return {{"program", program}, {"status", status}, {"reasons", reasons}};
}

std::string joined_reasons(const json& reasons) {
  std::string out;
  for (const auto& r : reasons) out += (out.empty() ? "" : "; ") + r.get<std::string>();
  return out;
}

// The workloads' cell: every program's status, the worst, and the reason most of the worst
// programs share, with which.
json workloads_of(const std::string& method, const json& summary) {
  json programs = json::array();
  std::map<std::string, int> counts;
  for (const auto& c : summary.value("combos", json::array()))
    if (c.value("method", "") == method && is_workload(c)) {
      programs.push_back(workload_program(c));
      ++counts[programs.back()["status"].get<std::string>()];
    }
  int not_run = 0;
  std::string skip_reason;
  for (const auto& s : summary.value("skipped", json::array()))
    if (s.value("method", "") == method && is_workload(s) && !not_run++) skip_reason = text_of(s, "reason");
  if (programs.empty() && not_run == 0) return nullptr;
  json out = {{"counts", counts}, {"programs", programs}, {"not_run", not_run}};
  if (programs.empty()) {
    out["status"] = "not run";
    out["reason"] = skip_reason;
    return out;
  }
  std::string worst = "nothing to see";
  for (const auto& [status, n] : counts)
    if (rank(status) < rank(worst)) worst = status;
  out["status"] = worst;
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const auto& p : programs)
    if (p["status"] == worst && !p["reasons"].empty()) by_reason[joined_reasons(p["reasons"])].push_back(p["program"]);
  const auto most = std::max_element(by_reason.begin(), by_reason.end(),
                                     [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  if (most != by_reason.end()) {
    out["reason"] = most->first;
    out["reason_programs"] = most->second;
  }
  return out;
}

// Whether a process of `method`, or one of its GPUs, fell shorter than its layer's total
// share: what the total hides. Where each is as short as the total (one process, or all
// alike: DDP's two ranks under preload, 56.7% each of a 56.7% layer), the layer's share
// says it already. Short lines with no per-process rows to weigh them stay short.
bool short_of_its_total(const std::string& method, const json& verdict) {
  std::map<std::string, double> total;
  for (const auto& r : verdict.value("coverage", json::array()))
    if (r.value("method", "") == method && r.contains("coverage") && r["coverage"].is_number())
      total[r.value("layer", "")] = r["coverage"].get<double>();
  int weighed = 0;
  for (const auto& row : verdict.value("per_device", json::object()).value("rows", json::array())) {
    if (row.value("method", "") != method || row.value("device", "") == kNoDevice) continue;
    if (!row.contains("coverage") || !row["coverage"].is_number()) continue;
    ++weighed;
    const auto t = total.find(row.value("layer", ""));
    if (t == total.end() || row["coverage"].get<double>() < t->second - 0.0005) return true;
  }
  return weighed == 0;
}

// The command's cell: the worst of its layers as the verdict judged them (lowest share first
// among equals), a process or GPU short making a complete total partial; a failed method
// and one not run say so with their reason.
json command_of(const std::string& method, const json& summary) {
  for (const auto& c : summary.value("combos", json::array()))
    if (c.value("method", "") == method && !is_workload(c) && c.value("ok", 0) == 0) {
      const json f = c.value("failures", json::array());
      return {{"status", "failed"}, {"reason", !f.empty() && f[0].is_string() ? f[0].get<std::string>() : "no reason written"}};
    }
  const json verdict = summary.value("verdict", json::object());
  const json rows = verdict.value("coverage", json::array());  // held: `worst` points into it
  const json* worst = nullptr;
  double coverage = 2;
  for (const auto& r : rows) {
    if (r.value("method", "") != method) continue;
    const double cov = r.contains("coverage") && r["coverage"].is_number() ? r["coverage"].get<double>() : 2;
    const std::string status = r.value("status", "partial");
    if (!worst || rank(status) < rank((*worst).value("status", "partial")) ||
        (status == (*worst).value("status", "partial") && cov < coverage))
      worst = &r, coverage = cov;
  }
  if (!worst) {
    for (const auto& c : summary.value("combos", json::array()))
      if (c.value("method", "") == method && !is_workload(c)) return {{"status", "nothing to see"}, {"reason", ""}};
    for (const auto& s : summary.value("skipped", json::array()))
      if (s.value("method", "") == method && !is_workload(s)) return {{"status", "not run"}, {"reason", text_of(s, "reason")}};
    const json programs = summary.contains("cost") ? summary["cost"].value("programs", json::array()) : json::array();
    for (const auto& p : programs)
      for (const auto& n : p.value("not_run", json::array()))
        if (!is_workload(p) && n.value("method", "") == method) return {{"status", "not run"}, {"reason", text_of(n, "reason")}};
    return nullptr;
  }
  const json short_of = verdict.value("per_device", json::object()).value("short", json::object());
  const bool is_short =
      short_of.contains(method) && !short_of[method].empty() && short_of_its_total(method, verdict);
  std::string status = worst->value("status", "partial");
  std::string reason = text_of(*worst, "reason", text_of(*worst, "why"));
  if (is_short) {
    if (status == "complete") status = "partial";
    for (const auto& [layer, lines] : short_of[method].items())
      if (lines.is_array() && !lines.empty() && reason.empty()) reason = layer + " SHORT: " + lines[0].get<std::string>();
  }
  return {{"status", status},
          {"layer", worst->value("layer", "")},
          {"coverage", coverage <= 1 ? json(coverage) : json(nullptr)},
          {"short", is_short},
          {"reason", reason}};
}

// What the method lost over its combinations, by unit, each counted as a run's is (loss_totals); the
// layers it did not observe somewhere, where nothing could be counted as lost.
json lost_of(const std::string& method, const json& summary) {
  int64_t lossy = 0, all = 0;
  LossTotals lost;
  json where = json::array();
  std::set<std::string> unseen;
  for (const auto& c : summary.value("combos", json::array())) {
    if (c.value("method", "") != method) continue;
    ++all;
    const json loss = c.value("loss", json::object());
    if (const LossTotals t = loss_totals(loss, method); t.any()) {
      lost.add(t), ++lossy;
      where.push_back({{"program", is_workload(c) ? program_name(c) : "command"},
                       {"events", t.events},
                       {"other", t.other},
                       {"counters", lost_text(loss)}});
    }
    for (const auto& u : c.value("unobserved", json::array())) unseen.insert(text_of(u, "layer"));
  }
  if (all == 0) return nullptr;
  return {{"events", lost.events}, {"other", lost.other}, {"combinations", lossy}, {"of", all}, {"where", where},
          {"layers_unobserved", unseen}};
}

// The cost mode's ratio per program: steady state where start-up was told apart, else the
// whole run; marked where its figures carry marks or an anomaly.
json slowdown_of(const std::string& method, const json& summary) {
  json out = json::array();
  const json programs = summary.contains("cost") ? summary["cost"].value("programs", json::array()) : json::array();
  for (const auto& p : programs) {
    const std::string program = text_of(p, "program", "command");
    for (const auto& n : p.value("not_run", json::array()))
      if (n.value("method", "") == method) out.push_back({{"program", program}, {"not_run", text_of(n, "reason")}});
    for (const auto& m : p.value("methods", json::array())) {
      if (m.value("method", "") != method) continue;
      const bool steady = p.contains("startup_source") && m.contains("rest_ratio") && m["rest_ratio"].is_object();
      const json ratio = steady ? m["rest_ratio"] : m.value("ratio", json());
      out.push_back({{"program", program},
                     {"ratio", ratio.is_object() ? ratio : json(nullptr)},
                     {"steady_state", steady},
                     {"marked", !m.value("marks", json::array()).empty() || (ratio.is_object() && ratio.contains("anomaly"))}});
    }
  }
  return out;
}

}  // namespace

json methods_json(const json& summary) {
  std::vector<std::string> methods;
  const auto add = [&](const std::string& m) {
    if (!m.empty() && m != "none" && std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  };
  for (const auto& c : summary.value("combos", json::array())) add(c.value("method", ""));
  for (const auto& r : summary.value("verdict", json::object()).value("coverage", json::array())) add(r.value("method", ""));
  if (summary.contains("cost"))
    for (const auto& p : summary["cost"].value("programs", json::array()))
      for (const auto& n : p.value("not_run", json::array())) add(n.value("method", ""));
  for (const auto& s : summary.value("skipped", json::array())) add(s.value("method", ""));
  json out = json::array();
  for (const auto& m : methods)
    out.push_back({{"method", m},
                   {"workloads", workloads_of(m, summary)},
                   {"command", command_of(m, summary)},
                   {"lost", lost_of(m, summary)},
                   {"slowdown", slowdown_of(m, summary)}});
  return out;
}

namespace {

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

std::string workloads_cell(const json& w) {
  if (!w.is_object()) return "-";
  const std::string status = w.value("status", "");
  const int n = int(w.value("programs", json::array()).size()), not_run = w.value("not_run", 0);
  if (n == 0) return status;
  const std::string skipped = not_run ? ", " + std::to_string(not_run) + " not run" : "";
  if (status == "nothing to see" || status == "complete") return status + " (" + std::to_string(n) + skipped + ")";
  const int complete = w.value("counts", json::object()).value("complete", 0);
  return status + " (" + std::to_string(complete) + "/" + std::to_string(n) + " complete" + skipped + ")";
}

std::string command_cell(const json& c) {
  if (!c.is_object()) return "-";
  const std::string status = c.value("status", "");
  std::string cell = status;
  const json cov = c.value("coverage", json());
  if ((status == "partial" || status == "blind") && cov.is_number()) {
    const int64_t tenths = int64_t(cov.get<double>() * 1000);  // rounded down: a shortfall never reads whole
    cell += " " + std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "% " + c.value("layer", "");
  } else if (status == "not observed") {
    cell += ": " + c.value("layer", "");
  }
  if (c.value("short", false))
    cell = cov.is_number() && cov.get<double>() >= 1 ? "complete in total, SHORT" : cell + " SHORT";
  return cell;
}

std::string slowdown_cell(const json& s) {
  if (s.contains("not_run")) return "not run";
  return ratio_text(s.value("ratio", json())) + (s.value("marked", false) ? " *" : "");
}

std::string lost_cell(const json& l) {
  if (!l.is_object()) return "-";
  if (const int64_t lossy = l.value("combinations", int64_t(0)); lossy > 0) {
    std::string besides;  // what its counters of anything but events counted, in their units
    const json other = l.value("other", json::object());  // held: items() of a temporary would dangle
    for (const auto& [unit, n] : other.items())
      if (n.is_number_integer() && n.get<int64_t>() > 0) besides += ", " + n.dump() + " " + unit;
    return std::to_string(l.value("events", int64_t(0))) + besides + " in " + std::to_string(lossy) + " of " +
           std::to_string(l.value("of", int64_t(0)));
  }
  return l.value("layers_unobserved", json::array()).empty() ? "0" : "0, a layer unseen";
}

// A cell past this is cut with "...": the row stays one line on a terminal.
constexpr size_t kCellWidth = 40;

// Past this many programs the cost mode's slowdown is one column, the highest ratio of each
// method: a column per program would not fit a terminal's width.
constexpr size_t kSlowdownColumns = 2;

std::vector<std::string> method_row(const json& m, bool workloads, bool command, const json& programs) {
  std::vector<std::string> row = {m.value("method", "")};
  if (workloads) row.push_back(workloads_cell(m.value("workloads", json())));
  if (command) row.push_back(command_cell(m.value("command", json())));
  const json slow = m.value("slowdown", json::array());
  if (programs.size() <= kSlowdownColumns) {
    for (const auto& p : programs) {
      std::string cell = "-";
      for (const auto& s : slow)
        if (s.value("program", "") == p.value("program", "command")) cell = slowdown_cell(s);
      row.push_back(cell);
    }
  } else if (!programs.empty()) {
    const json* highest = nullptr;
    for (const auto& s : slow)
      if (s.contains("ratio") && s["ratio"].is_object() &&
          (!highest || s["ratio"].value("value", 0.0) > (*highest)["ratio"].value("value", 0.0)))
        highest = &s;
    const bool not_run = !slow.empty() && std::all_of(slow.begin(), slow.end(), [](const json& s) { return s.contains("not_run"); });
    row.push_back(highest ? slowdown_cell(*highest) + " " + highest->value("program", "")
                  : slow.empty() ? "-" : not_run ? "not run" : "no figure");
  }
  row.push_back(lost_cell(m.value("lost", json())));
  return row;
}

// Absolute paths cut to their last part ("/opt/venv/.../libtorch_cuda.so" -> "libtorch_cuda.so"),
// as the report words them (reasons.py): on one line the library's name is what a reader needs.
std::string short_paths(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const bool starts = s[i] == '/' && i + 1 < s.size() && s[i + 1] != '/' &&  // not a URL's "//"
                        (i == 0 || std::string_view(" (,;:'\"=").find(s[i - 1]) != std::string_view::npos);
    size_t end = i;
    while (starts && end < s.size() && std::string_view(" ,;:()'\"").find(s[end]) == std::string_view::npos) ++end;
    const size_t last = starts ? s.rfind('/', end - 1) : std::string::npos;
    if (!starts || last == i || last + 1 == end) {
      out += s[i++];
      continue;
    }
    out += s.substr(last + 1, end - last - 1);
    i = end;
  }
  return out;
}

// Why a method that ran nowhere was skipped, without the skip's "method NAME: " (the line
// names every method that shares the reason); "" where it ran somewhere.
std::string skip_reason(const json& m) {
  const json w = m.value("workloads", json()), c = m.value("command", json());
  const auto nowhere = [](const json& cell) { return cell.is_null() || cell.value("status", "") == "not run"; };
  if (!nowhere(w) || !nowhere(c) || (w.is_null() && c.is_null())) return "";
  std::string why = text_of(w.is_object() ? w : c, "reason", "no reason written");
  if (const std::string prefix = "method " + m.value("method", "") + ": "; why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
  return why;
}

// The one-line reason of a method that is not complete somewhere: its workloads' (the
// reason most of its worst programs share) and its command's.
std::string reason_line(const json& m) {
  std::string why;
  const json w = m.value("workloads", json()), c = m.value("command", json());
  if (w.is_object() && rank(w.value("status", "")) < rank("complete") && w.contains("reason")) {
    std::string programs;
    const json which = w.value("reason_programs", json::array());
    for (size_t i = 0; i < which.size() && which.size() <= 2; ++i) programs += (i ? ", " : "") + which[i].get<std::string>();
    if (which.size() > 2) programs = std::to_string(which.size()) + " programs";
    why += (programs.empty() ? "" : programs + ": ") + w.value("reason", "");
  }
  if (c.is_object() && rank(c.value("status", "")) < rank("complete") && !c.value("reason", "").empty())
    why += (why.empty() ? "command: " : " | command: ") + c.value("reason", "");
  const std::string method = m.value("method", "");
  return why.empty() ? "" : "  " + method + ": " + shown(short_paths(why), 120 - std::min<size_t>(method.size(), 60)) + "\n";
}

}  // namespace

std::string method_table(const json& summary) {
  const json methods = summary.contains("methods") ? summary["methods"] : methods_json(summary);
  if (!methods.is_array() || methods.empty()) return "";
  bool workloads = false, command = false;
  for (const auto& m : methods) {
    workloads = workloads || m.value("workloads", json()).is_object();
    command = command || m.value("command", json()).is_object();
  }
  const json programs = summary.contains("cost") ? summary["cost"].value("programs", json::array()) : json::array();
  // Columns: method, observed (workloads and/or the command), slowdown, lost.
  std::vector<std::string> heads = {"method"};
  if (workloads) heads.push_back("workloads");
  if (command) heads.push_back("command");
  if (programs.size() <= kSlowdownColumns)
    for (const auto& p : programs) heads.push_back("slowdown " + shown(text_of(p, "program", "command"), 24));
  else
    heads.push_back("slowdown, highest of " + std::to_string(programs.size()) + " programs");
  heads.push_back("lost events");
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : methods) rows.push_back(method_row(m, workloads, command, programs));
  std::vector<size_t> width(heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {
    width[i] = heads[i].size();
    for (const auto& r : rows) width[i] = std::max(width[i], std::min<size_t>(r[i].size(), kCellWidth));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = " ";
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string c = cut(cells[i], kCellWidth);
      l += " " + c + std::string(width[i] - std::min(width[i], c.size()), ' ') + " ";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(heads);
  for (const auto& r : rows) line(r);
  out += "  observed: the worst program or layer; slowdown vs none [>=95%], * marked\n";
  return out;
}

std::string end_of_run_text(const json& summary, const std::filesystem::path& root, size_t max_lines) {
  std::string out = method_table(summary);
  const json counts = summary.value("counts", json::object());
  const int64_t unobserved_total = counts.value("layers_not_observed", int64_t(0));
  const int64_t changed = counts.value("results_changed", int64_t(0));
  const int64_t vary = counts.value("results_vary_untraced", int64_t(0));
  char line[640];
  std::snprintf(line, sizeof line, "harness: %d run(s) ok, %d failed, %lld combination(s) skipped%s%s%s%s\n",
                counts.value("ok", 0), counts.value("failed", 0), static_cast<long long>(counts.value("skipped_combinations", int64_t(0))),
                unobserved_total ? (", " + std::to_string(unobserved_total) + " method layer(s) NOT OBSERVED").c_str() : "",
                changed ? (", " + std::to_string(changed) + " run(s) whose result tracing CHANGED (see their lines)").c_str() : "",
                vary ? (", " + std::to_string(vary) + " traced run(s) whose result differs from its untraced run's but equals another's: the result varies untraced, not by tracing").c_str() : "",
                summary.value("interrupted", false) ? ", INTERRUPTED (partial results kept)" : "");
  std::error_code ec;
  const bool report = std::filesystem::exists(root / "overhead.html", ec);
  const bool text = std::filesystem::exists(root / kDetailsFile, ec);
  const std::string details = "harness: every program, layer and reason: " + shown((root / "summary.json").string()) +
                              (text ? ", as text " + shown((root / kDetailsFile).string()) : "") +
                              (report ? ", report " + shown((root / "overhead.html").string()) : "") + "\n";
  // The reasons fill what the table and the last two lines leave, a method each; the rest
  // are one line away in summary.json's "methods".
  const auto lines_in = [](const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); };
  const json methods = summary.contains("methods") ? summary["methods"] : methods_json(summary);
  std::vector<std::string> reasons;
  std::map<std::string, std::vector<std::string>> skipped;  // reason -> the methods that ran nowhere for it
  for (const auto& m : methods)
    if (const std::string why = skip_reason(m); !why.empty()) skipped[why].push_back(m.value("method", ""));
    else if (std::string r = reason_line(m); !r.empty()) reasons.push_back(r);
  for (const auto& [why, which] : skipped) {
    std::string names;
    for (const auto& n : which) names += (names.empty() ? "" : ", ") + n;
    reasons.push_back("  not run: " + shown(names + ": " + short_paths(why), 130) + "\n");
  }
  const size_t room = max_lines > lines_in(out) + 2 ? max_lines - lines_in(out) - 2 : 0;
  for (size_t i = 0; i < reasons.size() && room > 0; ++i) {
    if (i + 1 == room && reasons.size() > room) {
      out += "  ... and " + std::to_string(reasons.size() - i) + " more method(s) with a reason (summary.json methods[])\n";
      break;
    }
    out += reasons[i];
  }
  return out + line + details;
}

}  // namespace cudatrace
