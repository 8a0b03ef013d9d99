#include "tracers/cupti/cupti_decode.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <unordered_map>
#include <utility>

#include "common/cuda_names.h"
#include "common/device_id.h"
#include "tracers/call_args.h"

namespace cudatrace {

namespace {

#include "cupti_callback_names.inc"

// The status code of a device's bus id (tracers/cupti/injection/usdt_probes.h): that header
// needs sys/sdt.h, which the decoder does not.
constexpr uint64_t CUDATRACE_CUPTI_DEVICE_STATUS = 3;

nlohmann::json dim3_json(uint64_t packed) {
  return nlohmann::json::array({packed & 0xFFFFFFFF, (packed >> 32) & 0xFFFF, packed >> 48});
}

std::string text_of(const cupti_record& r) {
  if (!(r.flags & CUPTI_F_TEXT)) return {};
  return std::string(r.text, strnlen(r.text, sizeof r.text));
}

bool is_launch(const std::string& name) {
  const std::string c = canonical_name(name);
  return is_runtime_launch(c) || is_driver_launch(c);
}

Event api_event(const cupti_record& r, CuptiDecodeStats& stats) {
  const uint32_t domain = uint32_t(r.id >> 32), cbid = uint32_t(r.id);
  Event e;
  e.layer = domain == kCuptiRuntimeDomain ? layer::kRuntime : layer::kDriver;
  e.name = cupti_callback_name(domain, cbid);
  if (e.name.rfind("cbid:", 0) == 0) ++stats.unknown_callbacks;
  e.ts = int64_t(r.t0);
  if (r.t0 != 0 && r.t1 >= r.t0) e.dur = int64_t(r.t1 - r.t0);
  e.pid = r.pid;
  e.tid = r.tid;
  e.ret = r.ret;
  e.corr = r.corr;
  if (r.flags & CUPTI_F_DEVICE) e.device = int64_t(r.flags >> CUPTI_DEVICE_SHIFT);
  const std::string kernel = text_of(r);
  if (const CallInfo* call = find_call(e.name)) {
    KernelNames names;  // the launch's kernel slot names the kernel CUPTI gave us
    for (size_t i = 0; i < call->slots.size() && i < CUPTI_SLOTS; ++i)
      if (call->slots[i].second == 'n' && !kernel.empty()) names[r.v[i]] = kernel;
    e.args = decode_args(*call, reinterpret_cast<const uint64_t*>(r.v), names);
  } else if (!kernel.empty()) {
    e.args["kernel"] = kernel;  // a launch entry point hooks.def does not lay out
  }
  return e;
}

}  // namespace

std::string cupti_callback_name(uint32_t domain, uint32_t cbid) {
  using Table = std::unordered_map<uint32_t, std::string>;
  static const std::pair<Table, Table> tables = [] {
    std::pair<Table, Table> t;
    for (const auto& [id, name] : kRuntimeNames) t.first.emplace(id, without_runtime_version(name));
    for (const auto& [id, name] : kDriverNames) t.second.emplace(id, name);
    return t;
  }();
  const Table* table = domain == kCuptiRuntimeDomain ? &tables.first : domain == kCuptiDriverDomain ? &tables.second : nullptr;
  if (table)
    if (auto it = table->find(cbid); it != table->end()) return it->second;
  return "cbid:" + std::to_string(domain) + ":" + std::to_string(cbid);
}

std::vector<Event> decode_cupti_records(const std::vector<cupti_record>& records, CuptiDecodeStats& stats) {
  std::vector<Event> events;
  std::vector<const cupti_record*> kernels;
  std::map<std::pair<int64_t, int64_t>, std::string> bus_id_of;  // (pid, ordinal) -> bus id, as the library sent it
  for (const auto& r : records) {
    if (r.kind == 0) continue;  // an unused slot of a batch
    ++stats.records;
    switch (r.kind) {
      case CUPTI_REC_API:
        ++stats.api_calls;
        events.push_back(api_event(r, stats));
        break;
      case CUPTI_REC_KERNEL:
        kernels.push_back(&r);
        break;
      case CUPTI_REC_DROPPED:
        stats.activity_dropped += int64_t(r.v[0]);
        break;
      case CUPTI_REC_STATUS:
        if (r.id == CUDATRACE_CUPTI_DEVICE_STATUS) {
          if (std::string id = normalize_pci_bus_id(text_of(r)); !id.empty() && r.v[0] <= 0xFFFF)
            if (bus_id_of.emplace(std::pair{int64_t(r.pid), int64_t(r.v[0])}, id).second) ++stats.devices_named;
        } else if (r.id == 0) {
          stats.loaded = true;
          stats.loaded_ns = int64_t(r.t0);
          stats.cupti_version = r.v[0];
          stats.mode = text_of(r);
        } else {
          stats.problems.push_back((r.id == 1 ? "CUPTI's one subscriber is taken by " : "CUPTI error: ") + text_of(r));
        }
        break;
      case CUPTI_REC_SUMMARY:
        stats.summary = true;
        stats.library_api_exits += r.v[0];
        stats.library_kernels += r.v[1];
        break;
      default:
        break;
    }
  }

  // Each kernel joins the call that launched it: same process, same correlation id. The
  // runtime launch is preferred to the driver launch inside it, when both carry the id.
  std::map<std::pair<int64_t, uint64_t>, size_t> launch_of;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (!e.corr || !is_launch(e.name)) continue;
    auto [it, fresh] = launch_of.try_emplace({e.pid, *e.corr}, i);
    if (!fresh && e.layer == layer::kRuntime && events[it->second].layer != layer::kRuntime) it->second = i;
  }
  const size_t api_events = events.size();
  for (const cupti_record* k : kernels) {
    ++stats.kernels;
    Event e;
    e.layer = layer::kGpuActivity;
    e.name = text_of(*k);
    if (e.name.empty()) e.name = "kernel";
    e.ts = int64_t(k->t0);
    if (k->t1 >= k->t0) e.dur = int64_t(k->t1 - k->t0);
    e.pid = k->pid;
    e.tid = k->tid;  // CUPTI's thread, until the join names the launching one
    e.corr = k->corr;
    e.args = {{"kernel", e.name}, {"grid", dim3_json(k->v[0])}, {"block", dim3_json(k->v[1])},
              {"stream", k->v[2]}, {"device", k->v[3]}};
    if (k->v[3] <= 0xFFFF) e.device = int64_t(k->v[3]);
    if (auto it = launch_of.find({e.pid, k->corr}); it != launch_of.end() && it->second < api_events) {
      ++stats.kernels_joined;
      e.tid = events[it->second].tid;
      e.args["launched_by"] = events[it->second].name;
    }
    events.push_back(std::move(e));
  }
  for (Event& e : events)
    if (e.device)
      if (auto it = bus_id_of.find({e.pid, *e.device}); it != bus_id_of.end()) e.device_id = it->second;
  // Records arrive in the order calls returned; the event stream is in the order they began.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
  return events;
}

}  // namespace cudatrace
