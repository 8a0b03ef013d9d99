#include "tracers/sanitizer/sanitizer_decode.h"

#include "common/device_id.h"
#include "common/machine.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string_view>

#include "common/cuda_names.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "common/packed_args.h"
#include "common/untrusted_file.h"
#include "tracers/sanitizer/sanitizer_format.h"

namespace cudatrace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace cudatrace::sanitizer;

namespace {

struct Totals {
  int64_t processes = 0, launches = 0, graph_node_launches = 0, exact = 0;
  int64_t no_slot = 0, unpatched = 0, module_unseen = 0, unread = 0, short_launches = 0, blocks_missing = 0;
  int64_t over = 0, blocks_over = 0, records_over_bound = 0, records_truncated = 0, bad_index = 0;
  int64_t graph_launches_over_bound = 0;  // kernel-node launches of graph launches not kept
  size_t max_graph_launches = 0;
  int64_t blocks_expected = 0, blocks_counted = 0;
  int64_t modules_patched = 0, modules_failed = 0, modules_without_patches = 0;
  int64_t patch_ns_total = 0, patch_ns_max = 0, patch_lock_waits = 0, patch_lock_timeouts = 0;
  int64_t device_graph_execs = 0, graph_uploads_skipped = 0, launch_data_failed = 0;
  std::set<std::string> setup_errors;  // why a process or context counted nothing
  std::map<std::string, int64_t> short_by_kernel;
};

uint64_t grid_blocks(const LaunchRecord& r) { return uint64_t(r.grid[0]) * r.grid[1] * r.grid[2]; }
uint64_t block_threads(const LaunchRecord& r) { return uint64_t(r.block[0]) * r.block[1] * r.block[2]; }


// A JSON string field of the report, or `fallback` when absent or of another type: the
// report is the program's to write, so no field is trusted to be there.
std::string text_of(const json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}
int64_t number_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// A kernel as its launches' events name it: as a person reads it, and as it was registered.
struct KernelNames {
  std::string display, symbol;
};
const KernelNames unknown_kernel{"?", "?"};

// Where a context's launches ran: the ordinal and bus id as args give them (null where the
// report says nothing), and as the event's device fields do.
struct ContextPlace {
  bool known = false;       // the report describes the context
  int64_t device = 0;       // args.device when known
  std::string pci_bus_id;   // args.pci_bus_id when known
  std::optional<int64_t> ordinal;
  std::string device_id;    // normalised
};
const ContextPlace unknown_place{};

ContextPlace place_of(const json& c) {
  ContextPlace p;
  if (!c.is_object()) return p;
  p.known = true;
  p.device = number_of(c, "device");
  p.pci_bus_id = text_of(c, "pci_bus_id");
  if (p.device >= 0) p.ordinal = p.device;
  p.device_id = normalize_pci_bus_id(p.pci_bus_id);
  return p;
}

// A launch's args, packed as the store writes a JSON object's: its keys in sorted order.
void pack_launch_args(PackedArgs& a, const LaunchRecord& rec, const KernelNames& names, const ContextPlace& place,
                      uint64_t launch, std::string_view counted, bool threads) {
  a.start(12 + (rec.graph_launch ? 1 : 0) + (threads ? 2 : 0));
  a.key("block"), a.dim3(rec.block[0], rec.block[1], rec.block[2]);
  a.key("blocks"), a.unsigned_integer(rec.blocks);
  a.key("counted"), a.text(counted);
  a.key("device");
  if (place.known) a.integer(place.device);
  else a.nil();
  if (rec.graph_launch) a.key("graph_launch"), a.unsigned_integer(rec.graph_launch);
  a.key("graph_node"), a.boolean(rec.flags & kGraphNode);
  a.key("grid"), a.dim3(rec.grid[0], rec.grid[1], rec.grid[2]);
  a.key("kernel"), a.text(names.display);
  a.key("launch"), a.integer(int64_t(launch));
  a.key("module"), a.unsigned_integer(rec.module);
  a.key("pci_bus_id");
  if (place.known) a.text(place.pci_bus_id);
  else a.nil();
  a.key("stream"), a.unsigned_integer(rec.stream);
  a.key("symbol"), a.text(names.symbol);
  if (threads) {
    a.key("threads"), a.unsigned_integer(rec.threads);
    a.key("threads_launched"), a.unsigned_integer(grid_blocks(rec) * block_threads(rec));
  }
}

void convert_process(const json& rep, const fs::path& launches_file, EventStoreWriter& out, Totals& t, json& notes,
                     uint64_t& records_budget) {
  ++t.processes;
  const int64_t pid = number_of(rep, "pid");
  const bool threads = text_of(rep, "mode") == "threads";
  // Each kernel's names and each context's place worked out once, not per launch: five
  // minutes of PyTorch launch millions of kernels of a few hundred names.
  std::vector<KernelNames> kernels;
  for (const auto& k : rep.value("kernels", json::array())) {
    const std::string symbol = k.is_string() ? k.get<std::string>() : "?";
    kernels.push_back({kernel_display_name(symbol), symbol});
  }
  const json contexts = rep.value("contexts", json::array());
  std::vector<ContextPlace> places;  // by a launch's context index: none where the report gives no list
  if (contexts.is_array())
    for (const auto& c : contexts) places.push_back(place_of(c));
  for (const auto& c : contexts) {
    if (!c.is_object()) continue;
    if (!text_of(c, "error").empty()) t.setup_errors.insert(text_of(c, "error"));
    if (!text_of(c, "read_error").empty()) t.setup_errors.insert(text_of(c, "read_error"));
    notes["contexts"].push_back({{"pid", pid},
                                 {"device", number_of(c, "device")},
                                 {"pci_bus_id", text_of(c, "pci_bus_id")},
                                 {"slots_used", number_of(c, "slots_used")},
                                 {"read", text_of(c, "read_at")}});
  }
  const json modules = rep.value("modules", json::object());
  t.modules_patched += number_of(modules, "patched");
  t.modules_failed += number_of(modules, "failed");
  t.modules_without_patches += number_of(modules, "without_patches");
  t.patch_ns_total += number_of(modules, "patch_ns_total");
  t.patch_ns_max = std::max(t.patch_ns_max, number_of(modules, "patch_ns_max"));
  t.patch_lock_waits += number_of(modules, "lock_waits");
  t.patch_lock_timeouts += number_of(modules, "lock_timeouts");
  t.device_graph_execs += number_of(rep, "device_graph_execs");
  t.graph_uploads_skipped += number_of(rep, "graph_uploads_skipped");
  t.launch_data_failed += number_of(rep, "launch_data_failed");
  for (const auto& e : rep.value("errors", json::array()))
    if (e.is_string()) notes["errors"].push_back(e);
  if (!text_of(rep, "write_error").empty()) t.setup_errors.insert(text_of(rep, "write_error"));

  std::string why;
  uint64_t size = 0;
  std::ifstream in = open_untrusted(launches_file, &why, &size);
  if (!in) {
    t.setup_errors.insert("pid " + std::to_string(pid) + ": launches file unreadable: " + why);
    return;
  }
  const int64_t announced = number_of(rep, "launches");
  const bool shared_graph_slots = text_of(rep, "graph_data", "shared") == "shared";
  // Kernel nodes of one graph launch share one counter: their blocks are known together.
  // Where the shared count is their grids' sum, every node ran all its blocks; where not,
  // no node's own count is known, and the whole launch is short.
  struct GraphLaunch {
    uint64_t grids = 0, counted = 0, threads_launched = 0, threads_counted = 0;
    bool uncounted = false;
  };
  std::map<std::pair<uint32_t, uint64_t>, GraphLaunch> graph_launches;  // (context, graph launch)
  // The file is read twice, the graph launches summed first, rather than its records held:
  // five minutes of PyTorch launch 8 million kernels (1.6 GiB held, measured on an H200).
  LaunchRecord r;
  int64_t index = 0;
  uint64_t kept = 0;
  for (; in.read(reinterpret_cast<char*>(&r), sizeof r); ++index) {
    if (records_budget == 0) {
      ++t.records_over_bound;
      continue;
    }
    --records_budget;
    ++kept;
    if (shared_graph_slots && (r.flags & kGraphNode) && r.graph_launch) {
      const std::pair<uint32_t, uint64_t> key{r.context, r.graph_launch};
      auto it = graph_launches.find(key);
      if (it == graph_launches.end()) {
        if (graph_launches.size() >= t.max_graph_launches) continue;  // untracked: named below
        it = graph_launches.emplace(key, GraphLaunch{}).first;
      }
      GraphLaunch& gl = it->second;
      gl.grids += grid_blocks(r);
      gl.counted = r.blocks;
      gl.threads_launched += grid_blocks(r) * block_threads(r);
      gl.threads_counted = r.threads;
      gl.uncounted |= (r.flags & (kNoSlot | kUnpatched | kUnread)) != 0;
    }
  }
  const bool cut = in.gcount() != 0;  // a partial record at the end
  for (const auto& gl : graph_launches)
    if (!gl.second.uncounted && gl.second.counted > gl.second.grids) ++t.over, t.blocks_over += int64_t(gl.second.counted - gl.second.grids);
  in.clear();
  in.seekg(0);
  LaunchRecord rec;
  Event e;
  e.layer = layer::kDevice;
  e.pid = pid;
  PackedArgs args;
  std::vector<int64_t> not_exact(kernels.size() + 1, 0);  // per kernel, then for an index past them
  for (uint64_t i = 0; i < kept; ++i) {
    if (!in.read(reinterpret_cast<char*>(&rec), sizeof rec)) {
      t.setup_errors.insert("pid " + std::to_string(pid) + ": the launches file shrank while it was read");
      break;
    }
    ++t.launches;
    const uint64_t want = grid_blocks(rec);
    std::string_view counted = "exact";
    const GraphLaunch* gl = nullptr;
    bool untracked = false;  // a node of a graph launch past the ones the harness keeps
    if (shared_graph_slots && (rec.flags & kGraphNode) && rec.graph_launch) {
      const auto it = graph_launches.find({rec.context, rec.graph_launch});
      if (it != graph_launches.end()) gl = &it->second;
      else untracked = true;
    }
    if (rec.flags & kNoSlot) {
      ++t.no_slot, counted = "no slot";
    } else if (rec.flags & kUnpatched) {
      ++t.unpatched, counted = "module not patched";
    } else if ((rec.flags & kModuleUnseen) && rec.blocks == 0) {
      ++t.module_unseen, counted = "module never reported loaded";
    } else if (rec.flags & kUnread) {
      ++t.unread, counted = "counters unread";
    } else if (untracked) {
      // Its count is its graph launch's, summed over nodes the harness did not keep.
      ++t.graph_launches_over_bound, rec.blocks = 0, rec.threads = 0, counted = "graph launch past the bound";
    } else if (gl) {
      rec.threads = threads && gl->threads_counted == gl->threads_launched ? want * block_threads(rec) : 0;
      if (gl->counted == gl->grids) {
        rec.blocks = want, counted = "exact, with its graph launch";
        ++t.exact;
      } else {
        rec.blocks = 0;
        counted = gl->counted < gl->grids ? "graph launch short" : "graph launch over";
        if (gl->counted < gl->grids) ++t.short_launches, t.blocks_missing += int64_t(want);
      }
    } else if (rec.blocks < want) {
      ++t.short_launches, t.blocks_missing += int64_t(want - rec.blocks), counted = "short";
    } else if (rec.blocks > want) {
      ++t.over, t.blocks_over += int64_t(rec.blocks - want), counted = "over";
    } else {
      ++t.exact;
    }
    t.blocks_expected += int64_t(want);
    t.blocks_counted += int64_t(rec.blocks);
    if (rec.flags & kGraphNode) ++t.graph_node_launches;
    const KernelNames& names = rec.kernel < kernels.size() ? kernels[rec.kernel] : unknown_kernel;
    if (rec.kernel >= kernels.size()) ++t.bad_index;
    if (counted.substr(0, 5) != "exact") ++not_exact[std::min<size_t>(rec.kernel, kernels.size())];
    const ContextPlace& place = rec.context < places.size() ? places[rec.context] : unknown_place;
    e.name = names.display;
    e.ts = int64_t(rec.host_ns);
    e.device = place.ordinal;
    e.device_id = place.device_id;
    pack_launch_args(args, rec, names, place, i, counted, threads);
    out.write(e, args);
  }
  for (size_t k = 0; k < not_exact.size(); ++k)
    if (not_exact[k]) t.short_by_kernel[k < kernels.size() ? kernels[k].display : unknown_kernel.display] += not_exact[k];
  if (cut) ++t.records_truncated;
  if (announced != index) t.setup_errors.insert("pid " + std::to_string(pid) + ": the report announces " +
                                                std::to_string(announced) + " launches, the launches file holds " +
                                                std::to_string(index));
}

// "kernel_a (3), kernel_b (1)" — the kernels with launches not counted exactly.
std::string kernels_short(const std::map<std::string, int64_t>& by_kernel) {
  std::vector<std::pair<int64_t, std::string>> v;
  for (const auto& [k, n] : by_kernel) v.push_back({-n, k});
  std::sort(v.begin(), v.end());
  std::string s;
  for (size_t i = 0; i < v.size() && i < 3; ++i) s += (i ? ", " : "") + v[i].second + " (" + std::to_string(-v[i].first) + ")";
  if (v.size() > 3) s += " and " + std::to_string(v.size() - 3) + " more kernels";
  return s;
}

// What the run lost, counted, and its notes: the counts, the patching's cost.
void fill_loss_and_notes(TracerReport& report, const Totals& t, json& notes) {
  report.loss = {{"launches_without_slot", t.no_slot},
                 {"launches_in_unpatched_modules", t.unpatched},
                 {"launches_in_modules_never_reported", t.module_unseen},
                 {"launches_unread", t.unread},
                 {"launches_short", t.short_launches},
                 {"blocks_missing", t.blocks_missing},
                 {"launches_over", t.over},
                 {"blocks_over", t.blocks_over},
                 {"launch_records_over_bound", t.records_over_bound},
                 {"graph_node_launches_over_bound", t.graph_launches_over_bound},
                 {"launch_records_truncated", t.records_truncated}};
  notes["processes"] = t.processes;
  notes["launches"] = t.launches;
  notes["launches_counted_exactly"] = t.exact;
  notes["graph_node_launches"] = t.graph_node_launches;
  notes["blocks_launched"] = t.blocks_expected;
  notes["blocks_counted"] = t.blocks_counted;
  notes["modules_patched"] = t.modules_patched;
  notes["modules_not_patched"] = t.modules_failed + t.modules_without_patches;
  // The one-time cost of patching, per module (the run's notes are where users look for it).
  notes["patch_ms_total"] = double(t.patch_ns_total) / 1e6;
  notes["patch_ms_max"] = double(t.patch_ns_max) / 1e6;
  notes["patch_ms_per_module"] = t.modules_patched ? double(t.patch_ns_total) / 1e6 / double(t.modules_patched) : 0.0;
  notes["setup_ms"] = double(t.patch_ns_total) / 1e6;  // the cost mode's column (tracer.h)
  notes["setup_what"] = "patching " + std::to_string(t.modules_patched) + " module(s) at load";
  notes["device_graph_execs"] = t.device_graph_execs;
  // Module loads that met another thread's patching (serialised), and those that waited
  // past the bound and patched beside it.
  notes["patch_lock_waits"] = t.patch_lock_waits;
  notes["patch_lock_timeouts"] = t.patch_lock_timeouts;
  notes["graph_uploads_skipped"] = t.graph_uploads_skipped;
  if (!t.setup_errors.empty()) notes["setup_errors"] = t.setup_errors;
  report.notes = notes;
}

// Why the device layer is seen only in part: each kind of launch that ran uncounted, or
// counted otherwise than its grid, with how many; empty when none.
std::string partly_unobserved(const Totals& t, uint64_t records_bound) {
  std::vector<std::string> partly;
  const auto count = [](int64_t n, const char* what) { return std::to_string(n) + " " + what; };
  if (t.no_slot) partly.push_back(count(t.no_slot, "launches ran uncounted: their context's counter slots were all taken "
                                                    "or the launch could not be given one (--set sanitizer.slots=N)"));
  if (t.unpatched) partly.push_back(count(t.unpatched, "launches of kernels in modules that could not be patched"));
  if (t.module_unseen)
    partly.push_back(count(t.module_unseen, "launches of kernels in modules the driver never reported loaded to the "
                                            "sanitizer, so never patched: they ran uncounted"));
  if (t.unread) partly.push_back(count(t.unread, "launches whose context's counters could not be read back"));
  if (t.short_launches)
    partly.push_back(count(t.short_launches, "launches counted fewer blocks than their grid (") +
                     std::to_string(t.blocks_missing) +
                     " blocks): still running when the counters were read at exit, or their kernel failed");
  if (t.over) partly.push_back(count(t.over, "launches counted more blocks than their grid"));
  if (t.device_graph_execs)
    partly.push_back(count(t.device_graph_execs, "graphs launch work from the device: kernels started there reach no "
                                                  "launch callback and are not counted"));
  if (t.records_over_bound)
    partly.push_back(count(t.records_over_bound, "launch records over the bound of ") +
                     std::to_string(records_bound) + " per run (--max-trace-bytes) were not read");
  if (t.graph_launches_over_bound)
    partly.push_back(count(t.graph_launches_over_bound, "kernel-node launches not judged: their graph launches came "
                                                        "past the ") +
                     std::to_string(t.max_graph_launches) +
                     " whose shared counts a process's conversion sums (an eighth of the memory available)");
  for (const auto& e : t.setup_errors) partly.push_back(e);
  std::string text;
  for (const auto& p : partly) text += (text.empty() ? "" : "; ") + p;
  if (!text.empty() && !t.short_by_kernel.empty()) text += "; kernels: " + kernels_short(t.short_by_kernel);
  return text;
}

}  // namespace

SanitizerBounds SanitizerBounds::for_run(uint64_t run_bytes) {
  SanitizerBounds b;
  b.launch_records = run_bytes / sizeof(LaunchRecord);
  b.graph_launches = size_t(std::max<uint64_t>(uint64_t(1) << 20, available_memory_bytes() / 8 / kSanitizerBytesPerGraphLaunch));
  return b;
}

TracerReport convert_sanitizer_output(const fs::path& dir, const fs::path& events_file, int64_t main_pid,
                                      const SanitizerBounds& bounds) {
  TracerReport report;
  static const std::regex report_name(R"(sanitizer\.(\d{1,10})\.json)");
  EventStoreWriter out(events_file);
  Totals t;
  t.max_graph_launches = bounds.graph_launches;
  json notes = json::object();
  notes["contexts"] = json::array();
  notes["errors"] = json::array();
  bool main_reported = false, any_loaded = false, threads = false;
  std::set<std::string> not_loaded;  // why a process's library could not start
  const uint64_t records_bound = bounds.launch_records;
  uint64_t budget = records_bound;
  uint64_t report_budget = kSanitizerMaxReportBytesPerRun;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, report_name)) continue;
    const int64_t pid = std::stoll(m[1]);  // at most 10 digits: cannot overflow
    main_reported |= pid == main_pid;
    try {
      std::string why;
      uint64_t size = 0;
      std::ifstream in = open_untrusted(entry.path(), &why, &size);
      if (!in) throw std::runtime_error(why);
      if (size > kSanitizerMaxReportBytes)
        throw std::runtime_error(std::to_string(size) + " bytes, over the bound of " +
                                 std::to_string(kSanitizerMaxReportBytes));
      // Reports are few and small; a folder of many large ones is the program's doing.
      if (size > report_budget)
        throw std::runtime_error("over the bound of " + std::to_string(kSanitizerMaxReportBytesPerRun) +
                                 " bytes of reports per run");
      report_budget -= size;
      const json rep = parse_outside_json(in);
      if (!rep.is_object()) throw std::runtime_error("not a JSON object");
      if (!text_of(rep, "library_error").empty()) not_loaded.insert(text_of(rep, "library_error"));
      else any_loaded = true;
      threads |= text_of(rep, "mode") == "threads";
      convert_process(rep, dir / ("sanitizer." + m[1].str() + ".launches"), out, t, notes, budget);
    } catch (const std::exception& e) {
      report.error = "sanitizer report " + name + " unreadable: " + e.what();
    }
  }
  out.close();

  fill_loss_and_notes(report, t, notes);

  if (t.processes == 0) {
    int64_t started = 0;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      started += entry.path().extension() == ".started" && entry.path().filename().string().rfind("sanitizer.", 0) == 0;
    report.unobserved[layer::kDevice] =
        started ? "the sanitizer library wrote no report: " + std::to_string(started) +
                      " process(es) initialised the CUDA driver and ended without running their exit handlers (a "
                      "crash, _exit or a signal)"
                : std::string("the sanitizer library wrote no report: the program never initialised the CUDA driver");
    return report;
  }
  if (!any_loaded && !not_loaded.empty()) {
    report.unobserved[layer::kDevice] = "the sanitizer library could not start: " + *not_loaded.begin();
    return report;
  }
  report.layers = {layer::kDevice};
  if (const std::string text = partly_unobserved(t, records_bound); !text.empty()) report.partly_unobserved[layer::kDevice] = text;
  // A process owes a report only if it initialised CUDA (the library's marker, written at
  // cuInit): the program's own process may be a launcher whose ranks alone use the GPU.
  std::error_code marker_ec;
  const bool main_started = fs::exists(dir / ("sanitizer." + std::to_string(main_pid) + ".started"), marker_ec);
  if (main_pid > 0 && !main_reported && report.error.empty()) {
    if (main_started)
      report.partly_unobserved[layer::kDevice] +=
          std::string(report.partly_unobserved[layer::kDevice].empty() ? "" : "; ") +
          "no report from the program's own process (pid " + std::to_string(main_pid) +
          "): it initialised the CUDA driver and ended without its exit handlers (a crash, _exit or a signal)";
    else
      report.notes["program_process"] = "pid " + std::to_string(main_pid) +
                                        " never initialised the CUDA driver: it owes no report (its children did the "
                                        "CUDA work)";
  }
  report.device_mode = threads ? "launch-thread" : "launch";
  return report;
}

}  // namespace cudatrace
