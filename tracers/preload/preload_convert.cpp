// Method `preload`: the report of a conversion (what was lost and why, what the tables say
// of the program's linkage), and the after-run conversion itself: the live one
// (preload_conversion.h) run with nothing converted before the end.
#include <algorithm>

#include "tracers/preload/preload_conversion.h"
#include "tracers/preload/preload_tracer.h"

namespace cudatrace {

namespace fs = std::filesystem;
using namespace cudatrace::preload;

namespace {

// Every record the shim made is either in the store or counted as dropped; anything else
// is loss we can only detect: a shortfall against the trailers, or a file with no trailer.
void fill_loss_and_notes(TracerReport& report, ShimOutput& shim, const ConversionLoss& c, const ConvertCounts& n,
                         uint64_t max_bytes) {
  const TableReading& tables = shim.tables;
  report.loss = {{"dropped", n.dropped},
                 {"missing", n.missing},
                 {"unterminated_files", n.unterminated},
                 {"corrupt_records", n.bad},
                 {"over_bound_records", c.over_bound},
                 {"unreadable_files", c.unreadable + tables.refused + shim.bad_names},
                 {"changed_files", c.changed_files},
                 {"malformed_table_lines", tables.malformed + tables.cut_lines},
                 {"over_bound_table_bytes", tables.over_bound_bytes},
                 {"over_bound_table_entries", tables.over_bound_entries},
                 {"names_cut", shim.cut_names}};
  std::sort(shim.unhooked_names.begin(), shim.unhooked_names.end());
  report.notes = {{"records", n.records},
                  {"driver_records", n.driver_records},
                  {"thread_files", shim.files.size()},
                  {"driver_entry_points_resolved", shim.decoded + shim.generic + shim.unhooked},
                  {"driver_entry_points_hooked", shim.decoded + shim.generic},
                  {"driver_entry_points_with_arguments", shim.decoded},
                  {"driver_entry_points_not_hooked", shim.unhooked_names},
                  {"runtime_records_without_arguments", n.runtime_generic},
                  {"untimed_records", n.untimed}};
  // Set after the notes above (which replace the object): the bound and the reason, said.
  if (c.over_bound)
    report.notes["over_bound"] = "the shim's files held more than the run's bound of " + std::to_string(max_bytes >> 20) +
                                 " MiB (--max-trace-bytes): the records past that were not read (counted in "
                                 "over_bound_records)";
  if (tables.over_bound_bytes)
    report.notes["over_bound_table_bytes"] = "the shim's tables held more than " + std::to_string(tables.per_file >> 20) +
                                             " MiB in one file or " + std::to_string(tables.budget.total >> 20) +
                                             " MiB in all (a 64th and a 32nd of the run's bound, at least 16 and 32): "
                                             "the bytes past that were not read, and what they named stays unnamed";
  if (tables.over_bound_entries)
    report.notes["over_bound_table_entries"] = "the shim's tables held more than " +
                                               std::to_string(kMaxTableEntries) +
                                               " entries: the lines past that were not read";
  if (shim.cut_names)
    report.notes["names_cut"] = std::to_string(shim.cut_names) +
                                " kernel or function name(s) in the shim's tables were longer than " +
                                std::to_string(kMaxNameBytes) + " bytes: cut there, with the cut said in the name";
  if (c.changed_files)
    report.notes["changed_files"] = "record files that shrank, or were replaced or removed, while the harness read "
                                    "them: what was read of them is kept, nothing after";
  // Names read while the program ran that a later line (or the end's bounds) changed: the
  // events converted before then carry the earlier word (the shim itself only adds lines).
  if (c.changed_entries) report.notes["table_entries_changed_while_converting"] = c.changed_entries;
  if (!tables.examples.empty()) report.notes["table_problems"] = tables.examples;
}

// What the tables say of cudarts inside other objects and of calls that bind past the shim.
void fill_linkage_notes(TracerReport& report, const ShimOutput& shim) {
  // An object other than libcudart.so that asks cuGetProcAddress for driver entry points
  // carries a cudart of its own (static, or hidden inside a library as cuBLAS does): its
  // runtime calls never pass through an export the shim can replace. Its driver calls do.
  nlohmann::json own_runtime = nlohmann::json::array();
  for (const auto& [object, n] : shim.own_lookups) {
    const std::string file = fs::path(object).filename().string();
    if (file.rfind("libcudart.so", 0) == 0) continue;
    own_runtime.push_back({{"object", object}, {"driver_entry_points_resolved", n}});
  }
  if (!own_runtime.empty()) report.notes["runtime_linked_into"] = own_runtime;
  if (!shim.uncovered.empty()) {
    nlohmann::json u = nlohmann::json::object();
    for (const auto& [library, names] : shim.uncovered) u[library] = names;
    report.notes["exports_not_covered"] = u;  // a newer cudart or driver than the shim was built against
  }
  if (!shim.uncovered_imports.empty()) {
    nlohmann::json u = nlohmann::json::object();
    for (const auto& [object, names] : shim.uncovered_imports) u[object] = names;
    report.notes["uncovered_calls_linked_by"] = u;  // calls that bind past the shim, unrecorded
  }
}

}  // namespace

namespace preload {

TracerReport preload_report(ShimOutput& shim, const ConvertCounts& n, const ConversionLoss& c, uint64_t max_bytes) {
  TracerReport report;
  fill_loss_and_notes(report, shim, c, n, max_bytes);
  fill_linkage_notes(report, shim);
  return report;
}

}  // namespace preload

TracerReport convert_preload_output(const fs::path& dir, const fs::path& events_file, uint64_t max_bytes) {
  return PreloadConversion(dir, events_file, max_bytes).finish();
}

}  // namespace cudatrace
