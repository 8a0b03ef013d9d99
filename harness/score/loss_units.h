#pragma once
// What each loss counter counts. Most count events: a call, a kernel run, a record of one.
// Some count what holds an unknown number of events, or something else again: bytes a bound
// left unread, files or traces cut or refused, log lines, kernel names, blocks, a batch of up
// to 256 calls. Adding those to events made a number that was no count of anything ("lost
// 1,048,642 events" for 66 calls and a megabyte of log). They are summed by unit, beside the
// events, and a run that lost anything of any unit is never complete.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cudatrace {

// The unit of `counter` as `method` reports it ("events" for every counter not named in the
// table in loss_units.cpp). `method` matters for the few names that two methods use for two
// things: cupti's spool records hold a batch of calls, uprobe's one call.
std::string_view loss_unit(std::string_view counter, std::string_view method);

struct LossTotals {
  int64_t events = 0;                   // the counters of events, summed
  std::map<std::string, int64_t> other;  // unit -> the counters of that unit, summed
  bool any() const { return events > 0 || !other.empty(); }
  // "66 events", "66 events, 2 files", "1024 bytes": what was lost, each figure in its unit.
  std::string text() const;
  nlohmann::json to_json() const;  // {"events": n, "other": {unit: n}}
  void add(const LossTotals& more);
};

// Every positive integer counter of a run's loss, by its unit.
LossTotals loss_totals(const nlohmann::json& loss, std::string_view method);

}  // namespace cudatrace
