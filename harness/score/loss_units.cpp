#include "harness/score/loss_units.h"

#include <array>

namespace cudatrace {

namespace {

struct CounterUnit {
  std::string_view method;  // "" for every method; else a method or the family it heads (cupti, cupti-bare)
  std::string_view counter, unit;
};

// Counters of anything but events, by their tracers' own words (tracers/*/README.md, "Loss
// counters"). A counter not named here counts events.
constexpr std::array kUnits = {
    CounterUnit{"", "over_bound_bytes", "bytes"},
    CounterUnit{"", "kineto_log_unread_bytes", "bytes"},
    CounterUnit{"", "over_bound_table_bytes", "bytes"},
    CounterUnit{"", "unterminated_files", "files"},
    CounterUnit{"", "unreadable_files", "files"},
    CounterUnit{"", "changed_files", "files"},
    CounterUnit{"", "traces_missing", "traces"},
    CounterUnit{"", "traces_cut", "traces"},
    CounterUnit{"", "traces_refused", "traces"},
    CounterUnit{"", "spool_names_unread", "files"},
    CounterUnit{"", "statuses_unread", "files"},
    CounterUnit{"", "unparsed_lines", "lines"},
    CounterUnit{"", "malformed_table_lines", "lines"},
    CounterUnit{"", "kineto_log_lines_unread_in_traces", "lines"},
    CounterUnit{"", "over_bound_table_entries", "kernel names"},
    CounterUnit{"", "names_cut", "kernel names"},
    CounterUnit{"", "blocks_missing", "blocks"},
    CounterUnit{"", "blocks_over", "blocks"},
    CounterUnit{"", "kineto_stopped_tracing", "warnings"},
    CounterUnit{"", "nsys_warnings_of_loss", "warnings"},
    CounterUnit{"", "contexts_unread", "contexts"},
    CounterUnit{"", "graph_counters_unread", "graph counters"},
    CounterUnit{"", "functions_over_limit", "functions"},
    CounterUnit{"", "maps_truncated", "maps"},
    CounterUnit{"", "load_notices_lost", "notices"},
    CounterUnit{"", "malformed_notices", "notices"},
    CounterUnit{"", "threads_of_unknown_process", "threads"},
    // A record of cupti's spool is a batch of up to 256 calls, or a kernel's or a status
    // record: its calls are counted again in api_calls_not_received.
    CounterUnit{"cupti", "over_bound_records", "spool records"},
    CounterUnit{"cupti", "records_the_disk_refused", "spool records"},
    CounterUnit{"cupti", "malformed_records", "spool records"},
    CounterUnit{"cupti", "ring_full_status_records", "status records"},  // the library's status, summary, drops
    CounterUnit{"devhook", "over_bound_reports", "reports"},
};

bool of_method(std::string_view family, std::string_view method) {
  return family.empty() || method == family ||
         (method.size() > family.size() && method.substr(0, family.size()) == family && method[family.size()] == '-');
}

}  // namespace

std::string_view loss_unit(std::string_view counter, std::string_view method) {
  for (const CounterUnit& u : kUnits)
    if (u.counter == counter && of_method(u.method, method)) return u.unit;
  return "events";
}

std::string LossTotals::text() const {
  std::string s = events > 0 ? std::to_string(events) + " events" : "";
  for (const auto& [unit, n] : other) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + unit;
  return s;
}

nlohmann::json LossTotals::to_json() const { return {{"events", events}, {"other", other}}; }

void LossTotals::add(const LossTotals& more) {
  events += more.events;
  for (const auto& [unit, n] : more.other) other[unit] += n;
}

LossTotals loss_totals(const nlohmann::json& loss, std::string_view method) {
  LossTotals t;
  if (!loss.is_object()) return t;
  for (const auto& [counter, n] : loss.items()) {
    if (!n.is_number_integer() || n.get<int64_t>() <= 0) continue;
    const std::string_view unit = loss_unit(counter, method);
    if (unit == "events") t.events += n.get<int64_t>();
    else t.other[std::string(unit)] += n.get<int64_t>();
  }
  return t;
}

}  // namespace cudatrace
