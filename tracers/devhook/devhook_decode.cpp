#include "tracers/devhook/devhook_decode.h"

#include "common/device_id.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "common/bounded_lines.h"
#include "common/event_io.h"
#include "common/event_store.h"
#include "common/untrusted_file.h"
#include "tracers/devhook/device_record.h"

namespace cudatrace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace cudatrace::devhook;

namespace {

// One block of one execution: a graph node's replays share its launch number.
struct BlockKey {
  uint64_t launch, execution;
  uint32_t x, yz;
  bool operator<(const BlockKey& o) const {
    return std::tie(launch, execution, x, yz) < std::tie(o.launch, o.execution, o.x, o.yz);
  }
  bool operator==(const BlockKey&) const = default;
};

struct BlockSeen {
  int64_t entry = -1, exit = -1;  // GPU ns; -1 = not seen
  uint32_t sm = 0;
  std::vector<uint8_t> threads;  // thread mode: kinds seen, by the thread's linear index in the block
};

// What one run reads of the agent's files. Records are streamed, so their count bounds
// time, not memory: a per-thread run writes two per thread (a 2^19-thread launch 100 times
// is 105 M), so up to 1 G records (32 GiB) are read. Memory goes to the blocks kept (one
// entry per block, and per thread a byte in thread mode): at most kMaxBlocksKept blocks and
// kMaxThreadBytes of thread marks; a record of a block past them is counted
// (over_bound_records), not kept.
constexpr uint64_t kMaxReportBytes = uint64_t(64) << 20;
constexpr uint64_t kMaxDeviceRecords = uint64_t(1) << 30;
constexpr size_t kMaxBlocksKept = size_t(8) << 20;
constexpr uint64_t kMaxThreadBytes = uint64_t(1) << 30;

struct Totals {
  int64_t processes = 0, records = 0, dropped = 0, unfilled = 0, unknown_launch = 0, contexts_unread = 0;
  int64_t unwritten = 0, bad_thread = 0;
  int64_t counters_unread = 0;
  int64_t over_bound_records = 0, over_bound_reports = 0;
  int64_t launches = 0, launches_instrumented = 0, fatbins = 0, driver_images = 0;
  int64_t graph_nodes = 0, graph_executions = 0, launches_failed = 0;
  std::map<std::string, int64_t> uninstrumented;  // reason -> launches, over every process
  std::set<std::string> private_cudart;           // objects with a cudart of their own
};

// A process's contexts' loss into t (and their errors into notes); returns the records
// its records file holds.
uint64_t tally_contexts(const json& rep, Totals& t, json& notes) {
  uint64_t n = 0;
  for (const auto& c : rep["contexts"]) {
    if (c.contains("error")) {
      ++t.contexts_unread;
      notes["context_errors"].push_back(c["error"]);
      continue;
    }
    const uint64_t kept = c.value("records", uint64_t(0));
    n += kept;
    t.dropped += c.value("dropped", 0);
    // Claimed, not dropped, never written: a kernel that died half-way, say.
    if (c.contains("claimed"))
      t.unfilled += std::max<int64_t>(0, c["claimed"].get<int64_t>() - c.value("dropped", int64_t(0)) - int64_t(kept));
    for (const char* what : {"tickets_error", "control_error"})
      if (c.contains(what)) {
        ++(what[0] == 't' ? t.counters_unread : t.contexts_unread);
        notes["context_errors"].push_back(c[what]);
      }
  }
  t.unwritten += rep.value("records_unwritten", int64_t(0));
  return n;
}

std::map<std::string, int64_t> loss_of(const Totals& t) {
  return {{"ring_full", t.dropped},
          {"unfilled_slots", t.unfilled},
          {"unknown_launch", t.unknown_launch},
          {"thread_outside_block", t.bad_thread},
          {"records_unwritten", t.unwritten},
          {"contexts_unread", t.contexts_unread},
          {"graph_counters_unread", t.counters_unread},
          {"over_bound_records", t.over_bound_records},
          {"over_bound_reports", t.over_bound_reports}};
}

// A process's report (JSON the agent wrote inside the program), or a thrown reason: never
// read past kMaxReportBytes.
json read_report(const fs::path& path, Totals& t) {
  std::string why;
  uint64_t size = 0;
  std::ifstream in = open_untrusted(path, &why, &size);
  if (!in) throw std::runtime_error("cannot open (" + why + ")");
  if (size > kMaxReportBytes) {
    ++t.over_bound_reports;
    throw std::runtime_error(std::to_string(size) + " bytes, over the bound of " + std::to_string(kMaxReportBytes >> 20) +
                             " MiB: not read");
  }
  return parse_outside_json(in);
}

// One process's report and ring -> events.
// What the agent's report says of a process's fatbins, launches and graph replays.
void tally_report(const json& rep, Totals& t) {
  ++t.processes;
  for (const auto& f : rep["fatbins"]) ++(f.value("via", "__cudaRegisterFatBinary") == "__cudaRegisterFatBinary" ? t.fatbins : t.driver_images);
  for (const auto& k : rep["kernels"]) {
    t.launches += k.value("launches", 0);
    t.launches_instrumented += k.value("instrumented", 0);
  }
  t.launches_failed += rep.value("launches_failed", int64_t(0));
  for (const auto& path : rep.value("private_cudart", json::array())) t.private_cudart.insert(path.get<std::string>());
  const json unchanged = rep.value("uninstrumented", json::object());
  for (const auto& [reason, n] : unchanged.items()) t.uninstrumented[reason] += n.get<int64_t>();
  for (const auto& l : rep["launches"])
    if (l.size() > 9 && !l[9].is_null()) {
      ++t.graph_nodes;
      t.graph_executions += l[9].get<int64_t>();
    }
}

// Every context's records, interleaved, in the order the agent drained them: a record names
// its launch, and the launch its context. `n`: how many the report says there are.
std::map<BlockKey, BlockSeen> read_blocks(const json& rep, const fs::path& records_file, uint64_t n, Totals& t) {
  const bool per_thread = rep.value("mode", "block") == "thread";
  const json& launches = rep["launches"];
  // Per launch, its block's shape (thread mode): read from the report once, not per record.
  std::vector<std::array<uint64_t, 3>> block_dims;
  if (per_thread)
    for (const auto& l : launches)  // [kernel, context, gx, gy, gz, bx, by, bz, ...]
      block_dims.push_back({l[5].get<uint64_t>(), l[6].get<uint64_t>(), l[7].get<uint64_t>()});
  std::ifstream in = open_untrusted(records_file);
  std::map<BlockKey, BlockSeen> blocks;
  BlockKey last_key{};
  BlockSeen* last = nullptr;  // records come in runs from one block: look it up once per run
  uint64_t thread_bytes = 0;  // thread mode: the marks kept for every block so far
  DeviceRecord r;
  // The agent in the program wrote this file, and its count: a bound on what is read.
  if (n > kMaxDeviceRecords) {
    t.over_bound_records += int64_t(n - kMaxDeviceRecords);
    n = kMaxDeviceRecords;
  }
  for (uint64_t i = 0; i < n && in.read(reinterpret_cast<char*>(&r), sizeof r); ++i) {
    ++t.records;
    const uint32_t kind = record_kind(r);
    if (kind != kEntry && kind != kExit) {
      ++t.unfilled;
      continue;
    }
    const uint64_t launch = launch_number(r.launch);
    if (launch >= launches.size()) {
      ++t.unknown_launch;
      continue;
    }
    const BlockKey key{launch, execution_number(r.launch), r.block_x, r.block_yz};
    if (!last || key != last_key) {
      auto it = blocks.find(key);
      if (it == blocks.end()) {
        const auto [bx, by, bz] = per_thread ? block_dims[launch] : std::array<uint64_t, 3>{0, 0, 0};
        if (blocks.size() >= kMaxBlocksKept || thread_bytes + bx * by * bz > kMaxThreadBytes) {
          ++t.over_bound_records;
          last = nullptr;
          continue;
        }
        thread_bytes += bx * by * bz;
        it = blocks.emplace(key, BlockSeen{}).first;
      }
      last_key = key;
      last = &it->second;
    }
    BlockSeen& b = *last;
    b.sm = record_sm(r);
    int64_t& slot = kind == kEntry ? b.entry : b.exit;
    if (slot < 0 || int64_t(r.gpu_ns) < slot) slot = int64_t(r.gpu_ns);
    if (per_thread) {
      const auto [bx, by, bz] = block_dims[launch];
      const uint64_t x = thread_x(r), y = thread_y(r), z = thread_z(r);
      if (x >= bx || y >= by || z >= bz) {
        ++t.bad_thread;
        continue;
      }
      if (b.threads.empty()) b.threads.assign(bx * by * bz, 0);
      b.threads[x + bx * (y + by * z)] |= uint8_t(kind);
    }
  }
  return blocks;
}

// One device event per block seen, on its kernel's context's device and clock.
void write_blocks(const json& rep, const std::map<BlockKey, BlockSeen>& blocks, EventStoreWriter& out) {
  const bool per_thread = rep.value("mode", "block") == "thread";
  const json& kernels = rep["kernels"];
  const json& launches = rep["launches"];
  const json& contexts = rep["contexts"];
  const int64_t pid = rep.value("pid", 0);
  for (const auto& [key, b] : blocks) {
    const json& l = launches[key.launch];  // [kernel, context, gx, gy, gz, bx, by, bz, failed, executions]
    const int kernel = l[0].get<int>();
    const int ctx = l[1].get<int>();
    const json& c = contexts[size_t(ctx)];
    const bool timed = !c["clock_uncertainty_ns"].is_null();
    const int64_t offset = c.value("clock_offset_ns", int64_t(0));
    Event e;
    e.layer = layer::kDevice;
    e.name = kernel_display_name(kernels[size_t(kernel)]["name"].get<std::string>());
    const int64_t first = b.entry >= 0 ? b.entry : b.exit;
    e.ts = timed ? first - offset : 0;
    if (b.entry >= 0 && b.exit >= 0) e.dur = b.exit - b.entry;
    e.pid = pid;
    // The context's device, as the agent asked the driver when it set the context up.
    if (const auto d = c.find("device"); d != c.end() && d->is_number_integer() && d->get<int64_t>() >= 0)
      e.device = d->get<int64_t>();
    if (const auto id = c.find("pci_bus_id"); id != c.end() && id->is_string())
      e.device_id = normalize_pci_bus_id(id->get<std::string>());
    e.args = {{"kernel", e.name},
              {"launch", key.launch},
              {"execution", key.execution},
              {"block", {key.x, key.yz & 0xffff, key.yz >> 16}},
              {"sm", b.sm},
              {"seen", b.entry >= 0 && b.exit >= 0 ? "entry+exit" : b.entry >= 0 ? "entry" : "exit"}};
    if (per_thread) e.args["threads"] = std::count_if(b.threads.begin(), b.threads.end(), [](uint8_t k) { return k != 0; });
    out.write(e);
  }
}

void process_notes(const json& rep, json& notes) {
  json per_kernel = json::object();
  for (const auto& k : rep["kernels"]) {
    json row = {{"launches", k["launches"]}, {"instrumented", k["instrumented"]}};
    if (!k.value("why_not", "").empty()) row["why_not"] = k["why_not"];
    per_kernel[kernel_display_name(k["name"].get<std::string>())] = row;
  }
  notes["kernels"] = per_kernel;
  notes["uninstrumented_launches"] = rep.value("uninstrumented", json::object());
  json sources = json::array();
  for (const auto& f : rep["fatbins"])
    if (f.value("prepared", false)) sources.push_back(f["error"].get<std::string>().empty() ? f["source"] : f["error"]);
  notes["fatbin_ptx"] = sources;
  notes["mode"] = rep.value("mode", "block");
  notes["ring_records"] = rep.value("ring_records", 0);
  for (const auto& c : rep["contexts"])
    if (!c["clock_uncertainty_ns"].is_null()) notes["clock_uncertainty_ns"] = c["clock_uncertainty_ns"];
}

void convert_process(const json& rep, const fs::path& records_file, EventStoreWriter& out, Totals& t, json& notes) {
  tally_report(rep, t);
  const uint64_t n = tally_contexts(rep, t, notes);
  write_blocks(rep, read_blocks(rep, records_file, n, t), out);
  process_notes(rep, notes);
}

// "kernel k: a cubin ... (3); ..." — the three commonest reasons, then how many others.
std::string top_reasons(const std::map<std::string, int64_t>& reasons) {
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [reason, n] : reasons) by_count.push_back({-n, reason});
  std::sort(by_count.begin(), by_count.end());
  std::string s;
  for (size_t i = 0; i < by_count.size() && i < 3; ++i)
    s += (i ? "; " : "") + by_count[i].second + " (" + std::to_string(-by_count[i].first) + ")";
  if (by_count.size() > 3) s += "; and " + std::to_string(by_count.size() - 3) + " other reasons";
  return s;
}

}  // namespace

TracerReport convert_devhook_output(const fs::path& dir, const fs::path& events_file, const std::string& cudart,
                                    int64_t main_pid) {
  TracerReport report;
  static const std::regex report_name(R"(devhook\.(\d+)\.json)");
  EventStoreWriter out(events_file);
  Totals t;
  json notes = json::object();
  bool main_reported = false;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, report_name)) continue;
    main_reported |= parse_int64(m[1].str()) == main_pid;
    json rep;
    try {
      rep = read_report(entry.path(), t);
      convert_process(rep, dir / ("devhook." + m[1].str() + ".records"), out, t, notes);
    } catch (const std::exception& e) {
      report.error = "devhook report " + name + " unreadable: " + e.what();
    }
  }
  out.close();

  for (const auto& [counter, n] : loss_of(t)) report.loss[counter] = n;
  notes["records"] = t.records;
  notes["launches"] = t.launches;
  notes["launches_instrumented"] = t.launches_instrumented;
  notes["fatbins_registered"] = t.fatbins;
  notes["driver_api_images"] = t.driver_images;
  notes["graph_nodes"] = t.graph_nodes;
  notes["graph_executions"] = t.graph_executions;
  // Coverage is a result: every launch that reached the agent ran instrumented or is
  // counted under the reason it could not.
  int64_t unchanged = 0;
  for (const auto& [reason, n] : t.uninstrumented) unchanged += n;
  const int64_t seen = t.launches_instrumented + unchanged;
  notes["coverage"] = {{"launches_seen", seen},
                       {"launches_instrumented", t.launches_instrumented},
                       {"launches_failed", t.launches_failed}};  // bad configurations: nothing ran
  // Launches that never reach the agent: those of a cudart linked into a library.
  std::string unseen;
  if (!t.private_cudart.empty()) {
    notes["private_cudart"] = t.private_cudart;
    size_t shown = 0;
    for (const auto& path : t.private_cudart) {
      if (shown++ == 3) break;
      unseen += (unseen.empty() ? "" : ", ") + fs::path(path).filename().string();
    }
    if (t.private_cudart.size() > 3) unseen += " and " + std::to_string(t.private_cudart.size() - 3) + " more";
    unseen = "kernels of the cudart linked into " + unseen + " never reach the agent (not counted)";
  }
  notes["coverage"]["unseen"] = unseen;
  // The agent counts the launches that reach it, not the program's: a launcher that calls
  // the driver through a pointer it got from cuGetProcAddress or dlsym (Triton's, XLA's)
  // launches past it. The reason says so rather than pass the count for the program's.
  const std::string past_the_agent =
      "launches made through function pointers (cuGetProcAddress, dlsym: Triton's and XLA's launchers) never reach "
      "the agent and are not counted; the sanitizer method counts every launch";
  if (seen > 0 && t.launches_instrumented == 0) {
    report.unobserved[layer::kDevice] = "none of the " + std::to_string(seen) +
                                        " launches that reached the agent could be instrumented: " +
                                        top_reasons(t.uninstrumented) + (unseen.empty() ? "" : "; " + unseen) + "; " +
                                        past_the_agent;
  } else if (t.launches_instrumented > 0) {
    report.layers = {layer::kDevice};
    std::string partly;
    if (unchanged > 0)
      partly = std::to_string(t.launches_instrumented) + " of " + std::to_string(seen) +
               " launches instrumented (of those that reached the agent); ran unchanged: " +
               top_reasons(t.uninstrumented);
    if (!unseen.empty()) partly += (partly.empty() ? "" : "; ") + unseen;
    if (!partly.empty()) report.partly_unobserved[layer::kDevice] = partly;
  } else if (t.fatbins > 0 || t.driver_images > 0) {
    report.layers = {layer::kDevice};  // code was loaded, nothing launched: an empty layer is the truth
    if (!unseen.empty()) report.partly_unobserved[layer::kDevice] = unseen;
  } else {
    notes["why_nothing"] = report.unobserved[layer::kDevice] =
        cudart == "static" ? "cudart is linked statically: kernels register and launch inside the executable, where "
                             "the preloaded agent cannot reach (devhook needs -cudart shared), and no module was "
                             "loaded through the driver API by name"
                           : "no fatbin was registered through libcudart.so and no module loaded through a driver "
                             "call the agent exports (the program made no kernels, or reached cudart or the driver "
                             "through dlsym or cuGetProcAddress)";
    if (!unseen.empty()) report.unobserved[layer::kDevice] += "; " + unseen;
  }
  if (main_pid > 0 && !main_reported && report.error.empty())
    report.error = "the devhook agent wrote no report for pid " + std::to_string(main_pid) +
                   ": the program ended without running its exit handlers (crash, _exit or a signal)";
  report.notes = notes;
  report.device_mode = notes.value("mode", "block");
  return report;
}

std::optional<std::map<std::string, int64_t>> devhook_loss_counters(const fs::path& dir) {
  static const std::regex report_name(R"(devhook\.(\d+)\.json)");
  Totals t;
  json notes = json::object();
  bool any = false;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!std::regex_match(entry.path().filename().string(), report_name)) continue;
    try {
      tally_contexts(read_report(entry.path(), t), t, notes);
      any = true;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (!any) return std::nullopt;
  return loss_of(t);
}

}  // namespace cudatrace
