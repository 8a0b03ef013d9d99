#include "harness/stats/bench_stats.h"

#include "tracers/tracer.h"

#include <cmath>

#include <algorithm>
#include <optional>
#include <random>

namespace cudatrace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

// A statistic of two samples, its value and a percentile-bootstrap 95% interval.
template <class Statistic>
Difference bootstrap(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed,
                     Statistic stat) {
  Difference d;
  d.delta = stat(median_of(a), median_of(b));
  if (a.empty() || b.empty()) return d;
  std::mt19937_64 rng(seed);
  std::vector<double> values;
  values.reserve(size_t(rounds));
  std::vector<double> ra(a.size()), rb(b.size());
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  for (int r = 0; r < rounds; ++r) {
    for (auto& x : ra) x = a[pick_a(rng)];
    for (auto& x : rb) x = b[pick_b(rng)];
    values.push_back(stat(median_of(ra), median_of(rb)));
  }
  std::sort(values.begin(), values.end());
  d.lo = values[size_t(0.025 * (rounds - 1))];
  d.hi = values[size_t(0.975 * (rounds - 1))];
  return d;
}

}  // namespace

Difference median_difference(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed) {
  return bootstrap(a, b, rounds, seed, [](double ma, double mb) { return mb - ma; });
}

Difference median_interval(const std::vector<double>& v, int rounds, uint64_t seed) {
  return bootstrap({0.0}, v, rounds, seed, [](double, double mv) { return mv; });
}

Difference median_ratio(const std::vector<double>& a, const std::vector<double>& b, int rounds, uint64_t seed) {
  return bootstrap(a, b, rounds, seed, [](double ma, double mb) { return ma > 0 ? mb / ma : 0.0; });
}

bool between_processes_no_measurable_cost(const Difference& d) { return d.delta < 0 || d.lo <= 0; }

bool in_process_no_measurable_cost(const Difference& paired, double control_delta) {
  return between_processes_no_measurable_cost(paired) || paired.delta <= std::abs(control_delta);
}

std::map<std::pair<std::string, std::string>, Spread> untraced_spread(const PerProcess& live, const PerProcess& paused) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> pooled;
  for (const auto& [key, v] : live)
    if (std::get<2>(key) == "none") pooled[{std::get<0>(key), std::get<1>(key)}] = v;
  for (const auto& [key, v] : paused) {
    auto& into = pooled[{std::get<0>(key), std::get<1>(key)}];
    into.insert(into.end(), v.begin(), v.end());
  }
  std::map<std::pair<std::string, std::string>, Spread> out;
  for (const auto& [call_linkage, v] : pooled) {
    if (v.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    out[call_linkage] = Spread{v.size(), *lo, median_of(v), *hi};
  }
  return out;
}

}  // namespace cudatrace

namespace cudatrace {

namespace {

using json = nlohmann::json;
using RowKey = std::tuple<std::string, std::string, std::string>;  // call, linkage, method

std::map<RowKey, const json*> index_rows(const json& rows) {
  std::map<RowKey, const json*> out;
  if (!rows.is_array()) return out;
  for (const auto& r : rows)
    if (r.is_object() && r.contains("call") && r.contains("linkage") && r.contains("method"))
      out[{r["call"].get<std::string>(), r["linkage"].get<std::string>(), r["method"].get<std::string>()}] = &r;
  return out;
}

const json* row_of(const std::map<RowKey, const json*>& rows, const RowKey& key) {
  auto it = rows.find(key);
  return it == rows.end() ? nullptr : it->second;
}

bool has_number(const json* row, const char* key) { return row && row->contains(key) && (*row)[key].is_number(); }

std::vector<double> numbers(const json* row, const char* key) {
  std::vector<double> out;
  if (!row || !row->contains(key) || !(*row)[key].is_array()) return out;
  for (const auto& v : (*row)[key])
    if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

// [lo, hi] of a row's interval; the value itself, zero wide, where the row has none.
std::pair<double, double> interval_of(const json& row, const char* key, double value) {
  if (row.contains(key) && row[key].is_array() && row[key].size() == 2 && row[key][0].is_number() &&
      row[key][1].is_number())
    return {row[key][0].get<double>(), row[key][1].get<double>()};
  return {value, value};
}

json figure(const Difference& d) { return {{"ns", d.delta}, {"ci95_ns", {d.lo, d.hi}}}; }

// A row's difference to `none` between processes, as the harness wrote it.
json between_of(const json& row) {
  const double v = row["delta_ns"].get<double>();
  const auto [lo, hi] = interval_of(row, "delta_ci95_ns", v);
  json j = {{"delta_ns", v}, {"ci95_ns", {lo, hi}}};
  if (row.value("no_measurable_cost", false)) j["no_measurable_cost"] = true;
  return j;
}

}  // namespace

bool delta_agrees(double first, double first_lo, double first_hi, double second) {
  if (second >= first_lo && second <= first_hi) return true;
  return std::abs(second - first) <= std::max(kAgreementRelative * std::abs(first), kAgreementAbsoluteNs);
}

json bench_agreement(const json& first_summary, const json& second_summary) {
  // Pointers into the summaries themselves, never into a copy.
  static const json kNoRows = json::array();
  const auto rows_of = [](const json& summary) -> const json& {
    return summary.contains("rows") ? summary["rows"] : kNoRows;
  };
  const auto first = index_rows(rows_of(first_summary));
  const auto second = index_rows(rows_of(second_summary));
  struct Kind {
    const char *name, *value, *ci;
  };
  static const Kind kKinds[] = {{"between", "delta_ns", "delta_ci95_ns"},
                                {"in-process", "in_process_delta_ns", "in_process_delta_ci95_ns"}};
  auto untraced = [](const std::map<RowKey, const json*>& rows, const RowKey& key) -> json {
    const json* none = row_of(rows, {std::get<0>(key), std::get<1>(key), "none"});
    return has_number(none, "median_ns") ? (*none)["median_ns"] : json(nullptr);
  };
  size_t compared = 0, within = 0, not_compared = 0;
  json outside = json::array();
  for (const auto& [key, b] : second)
    for (const Kind& k : kKinds) {
      if (!has_number(b, k.value)) continue;
      const json* a = row_of(first, key);
      if (!has_number(a, k.value)) {
        ++not_compared;
        continue;
      }
      const double v1 = (*a)[k.value].get<double>(), v2 = (*b)[k.value].get<double>();
      const auto [lo, hi] = interval_of(*a, k.ci, v1);
      ++compared;
      if (delta_agrees(v1, lo, hi, v2)) {
        ++within;
        continue;
      }
      outside.push_back({{"call", std::get<0>(key)}, {"linkage", std::get<1>(key)}, {"method", std::get<2>(key)},
                         {"kind", k.name}, {"first_ns", v1}, {"first_ci95_ns", {lo, hi}}, {"second_ns", v2},
                         {"difference_ns", v2 - v1},
                         {"untraced_ns", {untraced(first, key), untraced(second, key)}}});
    }
  for (const auto& [key, a] : first)
    for (const Kind& k : kKinds)
      if (has_number(a, k.value) && !has_number(row_of(second, key), k.value)) ++not_compared;
  const double fraction = compared ? double(within) / double(compared) : 0.0;
  json out = {{"against", first_summary.value("run_id", "")},
              {"rule", "a delta of this run agrees when it lies within the other run's 95% interval of the same "
                       "delta, or within max(10%, 100 ns) of its value; the runs agree when at least 95% of the "
                       "deltas they share do (between processes and in process, every call, linkage and method)"},
              {"compared", compared},
              {"within", within},
              {"fraction", fraction},
              {"required", kAgreementShare},
              {"pass", compared > 0 && double(within) >= kAgreementShare * double(compared) - 1e-9},
              {"outside", outside},
              {"not_compared", not_compared}};
  if (!compared) out["why"] = "the two runs share no delta (no call, linkage and method measured in both)";
  return out;
}

namespace {

// A method's bars (Method::cost_bars) on one call, each judged on the medians' differences to
// none, a reference with no measurable cost (a difference at or below zero) counting as zero.
// The call's verdict: missed when a bar is missed, met when every bar is met, else not judged.
// Each bar also says whether the run's intervals settle it: the method's 95% interval lies
// wholly on one side of the limit's, each over at least kMinProcessesToSettle processes (on an
// H200 the same bundle read cupti's bars 10, 2 and 1 of 10 within half an hour: a verdict the
// intervals do not settle is the run's, not the tracer's).
json target_of(const std::map<RowKey, const json*>& by_key, const std::string& call, const std::string& linkage,
               const std::string& kind, const json& row, const std::vector<CostBar>& cost_bars) {
  json target = {{"bars", json::array()}, {"met", nullptr}};
  if (kind.empty()) {  // which bars apply is not known: none is judged
    target["why_not_judged"] = "the call's kind is not in this summary (written before percall labelled its calls)";
    return target;
  }
  const double cost = row["delta_ns"].get<double>();
  const auto [cost_lo, cost_hi] = interval_of(row, "delta_ci95_ns", cost);
  const std::string method = row["method"].get<std::string>();
  json& bars = target["bars"];
  for (const CostBar& cb : cost_bars) {
    if (std::find(cb.not_on_kinds.begin(), cb.not_on_kinds.end(), kind) != cb.not_on_kinds.end()) continue;
    // The first reference the run measured, most like-for-like first.
    const json* ref = nullptr;
    std::string against = cb.against.back();  // none measured: the last resort is named
    for (const std::string& name : cb.against)
      if (const json* r = row_of(by_key, {call, linkage, name}); has_number(r, "delta_ns")) {
        ref = r;
        against = name;
        break;
      }
    char margin[32] = "";
    if (cb.plus_ns != 0) std::snprintf(margin, sizeof margin, " + %g ns", cb.plus_ns);
    json b = {{"against", against}, {"bar", method + " <= " + against + margin + " (" + cb.why + ")"}, {"met", nullptr}};
    if (!ref) {
      b["why_not_judged"] = against + " has no difference to none for this call (it did not run, or failed)";
    } else {
      const double limit = std::max((*ref)["delta_ns"].get<double>(), 0.0) + cb.plus_ns;
      const auto [ref_lo, ref_hi] = interval_of(*ref, "delta_ci95_ns", (*ref)["delta_ns"].get<double>());
      const double limit_lo = std::max(ref_lo, 0.0) + cb.plus_ns, limit_hi = std::max(ref_hi, 0.0) + cb.plus_ns;
      // An interval over fewer processes than that is the bootstrap of a handful of medians.
      const bool enough = row.value("reps", 0) >= kMinProcessesToSettle && ref->value("reps", 0) >= kMinProcessesToSettle;
      b["at_most_ns"] = limit;
      b["met"] = cost <= limit;
      b["settled"] = enough && (cost <= limit ? cost_hi <= limit_lo : cost_lo > limit_hi);
    }
    bars.push_back(std::move(b));
  }
  // Settled: a missed bar the intervals settle decides a miss; a met call needs every bar settled.
  bool all_met = true, any_missed = false, missed_settled = false, met_settled = true;
  for (const json& b : bars) {
    if (b["met"] == false) {
      any_missed = true;
      missed_settled = missed_settled || b["settled"].get<bool>();
    } else if (b["met"].is_null()) {
      all_met = false;
      if (!target.contains("why_not_judged")) target["why_not_judged"] = b["why_not_judged"];
    } else {
      met_settled = met_settled && b["settled"].get<bool>();
    }
  }
  if (any_missed) {
    target["met"] = false;
    target["settled"] = missed_settled;
    target.erase("why_not_judged");
  } else if (all_met) {
    target["met"] = true;
    target["settled"] = met_settled;
  }
  return target;
}

}  // namespace

json estimator_comparison(const json& rows) {
  const auto by_key = index_rows(rows);
  json calls = json::array(), targets = json::array();
  int met = 0, missed = 0, not_judged = 0, unsettled = 0;
  for (const Method& m : methods()) {
    if (m.cost_bars.empty()) continue;
    for (const CostBar& cb : m.cost_bars)
      targets.push_back({{"method", m.name},
                         {"calls", cb.not_on_kinds.empty() ? json("every") : json(cb.not_on_kinds)},
                         {"against", cb.against},
                         {"plus_ns", cb.plus_ns},
                         {"why", cb.why}});
    for (const auto& [key, row] : by_key) {
      const auto& [call, linkage, method] = key;
      if (method != m.name || !has_number(row, "delta_ns")) continue;
      const std::string kind = row->value("call_kind", "");
      const double cost = (*row)["delta_ns"].get<double>();
      json e = {{"method", method}, {"call", call}, {"linkage", linkage},
                {"call_kind", kind.empty() ? json(nullptr) : json(kind)}, {"cost", between_of(*row)},
                {"references", json::object()}};
      if (has_number(row, "in_process_delta_ns")) {
        const double ab = (*row)["in_process_delta_ns"].get<double>();
        const auto [lo, hi] = interval_of(*row, "in_process_delta_ci95_ns", ab);
        e["in_process"] = {{"delta_ns", ab}, {"ci95_ns", {lo, hi}}};
      }
      // Every reference any bar names, measured or not in this call's bars: the figures beside.
      for (const CostBar& cb : m.cost_bars)
        for (const std::string& name : cb.against) {
          const json* ref = row_of(by_key, {call, linkage, name});
          if (!has_number(ref, "delta_ns")) continue;
          json r = between_of(*ref);
          const double d = (*ref)["delta_ns"].get<double>();
          r["ratio"] = d > 0 ? json(cost / d) : json(nullptr);
          e["references"][name] = r;
        }
      json target = target_of(by_key, call, linkage, kind, *row, m.cost_bars);
      if (target["met"].is_null())
        ++not_judged;
      else if (target["met"].get<bool>())
        ++met;
      else
        ++missed;
      if (!target["met"].is_null() && !target["settled"].get<bool>()) ++unsettled;
      e["target"] = target;
      calls.push_back(e);
    }
  }
  json out = {{"estimator", "the difference of medians to none between processes, in the same run, for the method "
                            "and its references alike"},
              {"in_process", "beside it: the method paused and live in one process (for cupti, what its callbacks "
                             "and activity add over a subscribed, idle CUPTI; not the same quantity)"},
              {"targets", targets},
              {"calls", calls},
              {"met", met},
              {"missed", missed},
              {"not_judged", not_judged},
              {"unsettled", unsettled},
              {"settled_rule", "a bar is settled when the method's 95% interval lies wholly on one side of the "
                               "limit's (the reference's interval, plus the bar's margin) and both were measured "
                               "over at least " + std::to_string(kMinProcessesToSettle) + " processes; a call's "
                               "verdict is settled by a settled missed bar, or, when met, by every bar settled"}};
  if (calls.empty()) out["why"] = "no method with cost bars (Method::cost_bars) has a difference to none here";
  return out;
}

namespace {

// A derived figure's caveats: each row it came from that was measured while its method lost
// events ("uprobe measured under loss"), so that a cost read under loss says so.
void add_loss_caveats(json& entry, const std::vector<const json*>& rows) {
  json caveats = json::array();
  for (const json* r : rows)
    if (r && r->contains("loss_during_runs")) caveats.push_back((*r)["method"].get<std::string>() + " measured under loss");
  if (!caveats.empty()) entry["caveats"] = caveats;
}

// A derived table: how it was derived, a row per call, and why there is none where empty.
json per_call_table(const char* how, json calls, const char* why_empty) {
  json out = {{"how", how}, {"calls", std::move(calls)}};
  if (out["calls"].empty()) out["why"] = why_empty;
  return out;
}

// A row's difference to none as a part's figure: {ns, ci95_ns}.
json figure_of(const json& between) { return {{"ns", between["delta_ns"]}, {"ci95_ns", between["ci95_ns"]}}; }

// One part of a cost: what it is, how it was measured, and its estimate.
json part(const std::string& name, const std::string& what, const char* kind, const Difference& d) {
  json p = figure(d);
  p["part"] = name;
  p["what"] = what;
  p["kind"] = kind;
  return p;
}

// The paused halves against `none`'s processes: what the method costs present but idle.
std::optional<Difference> paused_over_none(const json* row, const json* none) {
  const auto base = numbers(none, "values_ns"), paused = numbers(row, "in_process_paused_values_ns");
  if (base.empty() || paused.empty()) return std::nullopt;
  return median_difference(base, paused);
}

// One method's in-process A/B less another's (independent processes): what the first's live
// half adds over the second's.
std::optional<Difference> ab_over(const json* row, const json* under) {
  const auto top = numbers(row, "in_process_values_ns"), bottom = numbers(under, "in_process_values_ns");
  if (top.empty() || bottom.empty()) return std::nullopt;
  return median_difference(bottom, top);
}

std::optional<Difference> ab_of(const json* row) {
  const auto v = numbers(row, "in_process_values_ns");
  if (v.empty()) return std::nullopt;
  return median_interval(v);
}

// The live part per record, where the benchmark counted the records each call made, and the
// method's bar on it: the part's median over the records, its interval scaled alike (the
// count is the same in every batch of a call), and the whole's share beside it.
json per_record(const json& row, const CostSplit& split, const std::string& live_name,
                const std::optional<Difference>& live) {
  const double n = row["records_per_call"].get<double>();
  json r = {{"records_per_call", n}, {"part", live_name}};
  if (n <= 0) {
    r["why"] = "the tracer counted no record for this call";
  } else {
    r["whole_ns"] = row["delta_ns"].get<double>() / n;
    if (live) {
      r["ns"] = live->delta / n;
      r["ci95_ns"] = {live->lo / n, live->hi / n};
    }
  }
  if (split.per_record_bar_ns > 0) {
    json bar = {{"at_most_ns", split.per_record_bar_ns}, {"met", nullptr}};
    if (!r.contains("ns"))
      bar["why_not_judged"] = n <= 0 ? "no record counted" : live_name + " was not measured (no in-process A/B)";
    else {
      const double ns = r["ns"].get<double>(), lo = r["ci95_ns"][0].get<double>(), hi = r["ci95_ns"][1].get<double>();
      bar["met"] = ns <= split.per_record_bar_ns;
      // As cupti's bars: settled where the interval lies wholly on one side, over enough processes.
      bar["settled"] = numbers(&row, "in_process_values_ns").size() >= size_t(kMinProcessesToSettle) &&
                       (ns <= split.per_record_bar_ns ? hi <= split.per_record_bar_ns : lo > split.per_record_bar_ns);
    }
    r["bar"] = bar;
  }
  return r;
}

// Each per-record bar's tally over the table's calls: {method, at_most_ns, met, missed, not_judged}.
json per_record_tallies(const json& calls) {
  std::map<std::string, json> by_method;
  for (const json& e : calls) {
    if (!e.contains("per_record") || !e["per_record"].contains("bar")) continue;
    const json& bar = e["per_record"]["bar"];
    json& t = by_method[e["method"].get<std::string>()];
    if (t.is_null())
      t = {{"method", e["method"]}, {"at_most_ns", bar["at_most_ns"]}, {"met", 0}, {"missed", 0}, {"not_judged", 0},
           {"unsettled", 0}};
    const char* which = bar["met"].is_null() ? "not_judged" : bar["met"].get<bool>() ? "met" : "missed";
    t[which] = t[which].get<int>() + 1;
    if (!bar["met"].is_null() && !bar.value("settled", false)) t["unsettled"] = t["unsettled"].get<int>() + 1;
  }
  json out = json::array();
  for (auto& [method, t] : by_method) out.push_back(std::move(t));
  return out;
}

}  // namespace

json cost_parts(const json& rows) {
  const auto by_key = index_rows(rows);
  json calls = json::array();
  for (const auto& [key, row] : by_key) {
    const auto& [call, linkage, method] = key;
    const Method* m = find_method(method);
    if (!m || !m->cost_split || !has_number(row, "delta_ns")) continue;
    const CostSplit& split = *m->cost_split;
    auto row_named = [&, &call = call, &linkage = linkage](const std::string& name) {
      return row_of(by_key, {call, linkage, name});
    };
    json e = {{"method", method}, {"call", call}, {"linkage", linkage}, {"whole", between_of(*row)}};
    json parts = json::array();
    json missing = json::array();
    const auto idle = paused_over_none(row, row_named("none"));
    if (idle)
      parts.push_back(part(split.paused.name, method + " paused against none: " + split.paused.what, "between", *idle));
    else
      missing.push_back(split.paused.name + " (no paused halves, or no none)");
    // The nested references' A/Bs, innermost first, then the method's own, each less the last
    // one measured. A reference with no A/B in this run cannot be told apart: its part joins
    // the next one's.
    const json* under = nullptr;
    std::string under_name, pending_name, pending_what;
    std::optional<Difference> live;  // the method's own part: its A/B, less the last reference's
    std::string live_name;
    auto nest = [&](const json* r, const std::string& who, const CostSplit::Part& p) {
      const std::string name = pending_name.empty() ? p.name : pending_name + " + " + p.name;
      const std::string what = pending_what.empty() ? p.what : pending_what + "; " + p.what;
      const auto d = under ? ab_over(r, under) : ab_of(r);
      if (r == row) live_name = name;
      if (!d) return false;
      if (r == row) live = d;
      parts.push_back(part(name, who + "'s A/B" + (under ? " less " + under_name + "'s" : "") + ": " + what,
                           "in-process", *d));
      under = r;
      under_name = who;
      pending_name.clear();
      pending_what.clear();
      return true;
    };
    for (const CostSplit::Part& p : split.nested)
      if (!nest(row_named(p.reference), p.reference, p)) {
        pending_name = pending_name.empty() ? p.name : pending_name + " + " + p.name;
        pending_what = pending_what.empty() ? p.what : pending_what + "; " + p.what;
      }
    if (!nest(row, method, split.live))
      missing.push_back((pending_name.empty() ? split.live.name : pending_name + " + " + split.live.name) +
                        " (no in-process A/B of " + method + ")");
    if (split.floor_reference.empty()) {
      if (idle) e["floor"] = figure(*idle);
    } else if (const json* ref = row_named(split.floor_reference); has_number(ref, "delta_ns")) {
      e["floor"] = figure_of(between_of(*ref));
    }
    if (e.contains("floor")) {
      e["floor"]["what"] = split.floor_what;
      e["above_floor_ns"] = (*row)["delta_ns"].get<double>() - e["floor"]["ns"].get<double>();
    }
    e["parts"] = parts;
    if (has_number(row, "records_per_call")) e["per_record"] = per_record(*row, split, live_name, live);
    if (!missing.empty()) e["not_measured"] = missing;
    std::vector<const json*> measured{row};
    for (const CostSplit::Part& p : split.nested) measured.push_back(row_named(p.reference));
    add_loss_caveats(e, measured);
    calls.push_back(e);
  }
  const json tallies = per_record_tallies(calls);
  json out = per_call_table("for each method the registry can take apart (Method::cost_split), each part estimated "
                            "apart, with a bootstrap 95% interval: between processes against none's (the method "
                            "paused), or in process (live against paused, or one A/B less another's); the parts add "
                            "up to the whole only within their intervals. floor: what the mechanism costs with "
                            "nothing recorded. per_record: the method's own (live) part over the records the tracer "
                            "counted per call, with its bar where the registry sets one",
                            std::move(calls), "no method the registry can take apart has a difference to none here");
  if (!tallies.empty()) out["per_record_bars"] = tallies;
  return out;
}

}  // namespace cudatrace
