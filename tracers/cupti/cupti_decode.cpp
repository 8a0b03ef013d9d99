#include "tracers/cupti/cupti_decode.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
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

CuptiRecordDecoder::CuptiRecordDecoder(CuptiDecodeStats& stats, Sink sink, size_t max_launches, size_t max_waiting,
                                       CallSink calls)
    : stats_(stats),
      sink_(std::move(sink)),
      calls_(std::move(calls)),
      max_launches_(std::max<size_t>(1, max_launches)),
      max_waiting_(max_waiting) {}

void CuptiRecordDecoder::add(const cupti_record& r) {
  if (batch_.slots > 0) {
    add_batched(r);
    return;
  }
  if (r.kind == 0) return;  // a zeroed record: none of ours
  ++stats_.records;
  switch (r.kind) {
    case CUPTI_REC_BATCH:
      set_clock(r);
      batch_ = {r.pid, r.tid, CUPTI_BATCH, std::min<uint64_t>(r.v[3], CUPTI_BATCH)};
      if (r.flags & CUPTI_F_HANDED_OVER) stats_.calls_handed_over_at_exit += int64_t(batch_.calls);
      break;
    case CUPTI_REC_API:  // a call the collector recorded on its own (api_exit)
      add_call(r);
      break;
    case CUPTI_REC_KERNEL: {
      ++stats_.kernels;
      Event e;
      e.layer = layer::kGpuActivity;
      e.name = text_of(r);
      if (e.name.empty()) e.name = "kernel";
      e.ts = int64_t(r.t0);
      if (r.t1 >= r.t0) e.dur = int64_t(r.t1 - r.t0);
      e.pid = r.pid;
      e.tid = r.tid;  // CUPTI's thread, until the join names the launching one
      e.corr = r.corr;
      e.args = {{"kernel", e.name}, {"grid", dim3_json(r.v[0])}, {"block", dim3_json(r.v[1])},
                {"stream", r.v[2]}, {"device", r.v[3]}};
      if (r.v[3] <= 0xFFFF) e.device = int64_t(r.v[3]);
      const Key key{r.pid, r.corr};
      // A kernel joins a runtime launch at once; a driver launch may yet be followed by the
      // runtime launch around it (its record comes when that call returns): it waits.
      if (auto it = launches_.find(key); it != launches_.end() && it->second.runtime) {
        emit_kernel(std::move(e), &it->second);
      } else if (max_waiting_ == 0) {
        emit_kernel(std::move(e), it != launches_.end() ? &it->second : nullptr);
      } else {
        waiting_[key].push_back(std::move(e));
        waiting_order_.push_back(key);
        ++waiting_total_;
        drop_oldest_waiting();
      }
      break;
    }
    case CUPTI_REC_DROPPED:
      stats_.activity_dropped += int64_t(r.v[0]);
      break;
    case CUPTI_REC_STATUS:
      if (r.id == CUDATRACE_CUPTI_DEVICE_STATUS) {
        if (std::string id = normalize_pci_bus_id(text_of(r)); !id.empty() && r.v[0] <= 0xFFFF)
          if (bus_id_of_.emplace(std::pair{int64_t(r.pid), int64_t(r.v[0])}, id).second) ++stats_.devices_named;
      } else if (r.id == 0) {
        stats_.loaded = true;
        stats_.loaded_ns = int64_t(r.t0);
        stats_.cupti_version = r.v[0];
        stats_.mode = text_of(r);
      } else {
        stats_.problems.push_back((r.id == 1 ? "CUPTI's one subscriber is taken by " : "CUPTI error: ") + text_of(r));
      }
      break;
    case CUPTI_REC_SUMMARY:
      stats_.summary = true;
      stats_.library_api_exits += r.v[0];
      stats_.library_kernels += r.v[1];
      stats_.library_left_out += r.v[3];
      break;
    default:
      break;
  }
}

// A slot of the batch being read. The library wrote it, the collector only copied it: the
// call's kind, process and thread are the head's, its flags only the library's own, its text
// no longer than the field.
void CuptiRecordDecoder::add_batched(const cupti_record& r) {
  --batch_.slots;
  if (batch_.calls == 0) return;  // past the batch's calls
  --batch_.calls;
  ++stats_.records;
  cupti_record call = r;
  call.kind = CUPTI_REC_API;
  call.pid = batch_.pid;
  call.tid = batch_.tid;
  call.text[CUPTI_TEXT - 1] = 0;
  call.flags = (r.flags & CUPTI_F_LIBRARY) | (call.text[0] ? CUPTI_F_TEXT : 0);
  add_call(call);
  if (batch_.calls == 0) clock_ = {};  // a batch's clock maps its own calls only
}

const CuptiRecordDecoder::CallKind& CuptiRecordDecoder::kind_of(uint64_t id) {
  auto [it, fresh] = kinds_.try_emplace(id);
  if (fresh) {
    CallKind& k = it->second;
    const uint32_t domain = uint32_t(id >> 32);
    k.name = cupti_callback_name(domain, uint32_t(id));
    k.call = find_call(k.name);
    k.runtime = domain == kCuptiRuntimeDomain;
    k.launch = is_launch(k.name);
    k.unknown = k.name.rfind("cbid:", 0) == 0;
  }
  return it->second;
}

// The launch's kernel slot names the kernel CUPTI gave us; a launch entry point hooks.def
// does not lay out still carries it, as its only argument.
void CuptiRecordDecoder::pack_call_args(const cupti_record& r, const CallKind& kind) {
  const std::string_view kernel =
      (r.flags & CUPTI_F_TEXT) ? std::string_view(r.text, strnlen(r.text, sizeof r.text)) : std::string_view();
  if (kind.call) {
    kernel_names_.clear();
    if (!kernel.empty())
      for (size_t i = 0; i < kind.call->slots.size() && i < CUPTI_SLOTS; ++i)
        if (kind.call->slots[i].second == 'n') kernel_names_[r.v[i]] = std::string(kernel);
    pack_args(*kind.call, reinterpret_cast<const uint64_t*>(r.v), kernel_names_, packed_);
  } else if (!kernel.empty()) {
    packed_.start(1);
    packed_.key("kernel");
    packed_.text(kernel);
  } else {
    packed_.start(0);
  }
}

void CuptiRecordDecoder::add_call(cupti_record call) {
  ++stats_.api_calls;
  if (call.flags & CUPTI_F_TICKS) to_ns(call);
  const CallKind& kind = kind_of(call.id);
  if (kind.unknown) ++stats_.unknown_callbacks;
  Event& e = call_;
  e.layer = kind.runtime ? layer::kRuntime : layer::kDriver;
  e.name = kind.name;
  e.ts = int64_t(call.t0);
  e.dur = call.t0 != 0 && call.t1 >= call.t0 ? std::optional<int64_t>(int64_t(call.t1 - call.t0)) : std::nullopt;
  e.pid = call.pid;
  e.tid = call.tid;
  e.ret = call.ret;
  e.corr = call.corr;
  e.device = call.flags & CUPTI_F_DEVICE ? std::optional<int64_t>(int64_t(call.flags >> CUPTI_DEVICE_SHIFT)) : std::nullopt;
  set_device_id(e);
  pack_call_args(call, kind);
  // Before the kernels that may join it.
  if (calls_) {
    calls_(e, packed_);
  } else {
    Event whole = e;
    whole.args = unpack_args(packed_.bytes());
    sink_(std::move(whole));
  }
  if (kind.launch) remember_launch(call.pid, call.tid, call.corr, call.id, kind.runtime);
}

// The line through the batch's two (ticks, ns) points. Its calls began after the first point
// and returned before the second, so mapping them is interpolating, whose error is at most
// the points' own (half their brackets), however close together the points are.
void CuptiRecordDecoder::set_clock(const cupti_record& r) {
  clock_ = {};
  if (r.t1 <= r.t0 || r.v[1] < r.v[0] || r.v[0] > uint64_t(INT64_MAX)) return;  // no ticks in the batch, or garbage
  clock_ = {r.pid, r.tid, r.t0, r.t1, int64_t(r.v[0]), double(r.v[1] - r.v[0]) / double(r.t1 - r.t0), true};
  stats_.clock_spread_ns_max = std::max(stats_.clock_spread_ns_max, double(r.v[2]) * clock_.ns_per_tick / 2);
}

void CuptiRecordDecoder::to_ns(cupti_record& call) {
  if (!clock_.usable || clock_.pid != call.pid || clock_.tid != call.tid) {
    ++stats_.calls_untimed;
    call.t0 = call.t1 = 0;
    return;
  }
  ++stats_.calls_in_ticks;
  if ((call.t0 != 0 && call.t0 < clock_.ticks) || call.t1 > clock_.last_ticks) ++stats_.calls_extrapolated;
  const auto ns = [this](uint64_t ticks) {
    return uint64_t(std::max<int64_t>(
        1, clock_.ns + std::llround(double(int64_t(ticks - clock_.ticks)) * clock_.ns_per_tick)));
  };
  if (call.t0 != 0) call.t0 = ns(call.t0);  // 0: the entry was not stamped
  call.t1 = ns(call.t1);
}

// Past the window, the oldest waiting kernel goes out with the launch known by now (a
// driver launch), or unjoined: its launch is too late to wait for. Keys of kernels that joined since are skipped (and swept now and then).
void CuptiRecordDecoder::drop_oldest_waiting() {
  while (waiting_total_ > max_waiting_ && !waiting_order_.empty()) {
    const Key old = waiting_order_.front();
    waiting_order_.pop_front();
    auto w = waiting_.find(old);
    if (w == waiting_.end()) continue;
    Event k = std::move(w->second.front());
    w->second.erase(w->second.begin());
    if (w->second.empty()) waiting_.erase(w);
    --waiting_total_;
    emit_kernel(std::move(k), known_launch(old));
  }
  if (waiting_order_.size() > 2 * waiting_total_ + 4096) {
    std::deque<Key> live;
    for (const Key& k : waiting_order_)
      if (waiting_.count(k)) live.push_back(k);
    waiting_order_.swap(live);
  }
}

void CuptiRecordDecoder::remember_launch(uint32_t pid, uint32_t tid, uint64_t corr, uint64_t id, bool runtime) {
  const Key key{pid, corr};
  auto [it, fresh] = launches_.try_emplace(key, Launch{tid, id, runtime});
  if (fresh) {
    launch_order_.push_back(key);
    if (launch_order_.size() > max_launches_) {
      launches_.erase(launch_order_.front());
      launch_order_.pop_front();
    }
  } else if (runtime) {
    it->second = {tid, id, true};
  }
  // Kernels that came before their runtime launch's record join it now.
  if (!runtime) return;
  if (auto w = waiting_.find(key); w != waiting_.end()) {
    std::vector<Event> kernels = std::move(w->second);
    waiting_.erase(w);
    waiting_total_ -= kernels.size();  // their keys stay in waiting_order_ and are skipped there
    for (Event& k : kernels) emit_kernel(std::move(k), &it->second);
  }
}

const CuptiRecordDecoder::Launch* CuptiRecordDecoder::known_launch(const Key& key) const {
  auto it = launches_.find(key);
  return it == launches_.end() ? nullptr : &it->second;
}

void CuptiRecordDecoder::emit_kernel(Event&& e, const Launch* by) {
  if (!by) ++stats_.kernels_unjoined_past_window;
  if (by) {
    ++stats_.kernels_joined;
    e.tid = by->tid;
    e.args["launched_by"] = cupti_callback_name(uint32_t(by->id >> 32), uint32_t(by->id));
  }
  emit(std::move(e));
}

void CuptiRecordDecoder::set_device_id(Event& e) const {
  e.device_id.clear();
  if (e.device)
    if (auto it = bus_id_of_.find({e.pid, *e.device}); it != bus_id_of_.end()) e.device_id = it->second;
}

void CuptiRecordDecoder::emit(Event&& e) {
  set_device_id(e);
  sink_(std::move(e));
}

void CuptiRecordDecoder::finish() {
  for (auto& [key, kernels] : waiting_)
    for (Event& k : kernels) emit_kernel(std::move(k), known_launch(key));
  waiting_.clear();
  waiting_order_.clear();
  waiting_total_ = 0;
}

std::vector<Event> decode_cupti_records(const std::vector<cupti_record>& records, CuptiDecodeStats& stats) {
  std::vector<Event> events;
  CuptiRecordDecoder decoder(stats, [&](Event&& e) { events.push_back(std::move(e)); });
  for (const auto& r : records) decoder.add(r);
  decoder.finish();
  // Records arrive in the order calls returned; here, the order they began.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
  return events;
}

nlohmann::json cupti_loss_counters(const CuptiCollectorLoss& c, const CuptiDecodeStats& stats) {
  const auto at = [&](enum cupti_loss k) { return size_t(k) < c.lost.size() ? c.lost[k] : uint64_t(0); };
  const uint64_t calls_counted = at(CUPTI_LOST_RING_FULL) + at(CUPTI_LOST_UNREADABLE);
  nlohmann::json loss = {{"ring_full", at(CUPTI_LOST_RING_FULL)},
                         {"ring_full_kernels", at(CUPTI_LOST_RING_FULL_KERNELS)},
                         {"ring_full_status_records", at(CUPTI_LOST_RING_FULL_OTHER)},
                         {"unreadable_batched_calls", at(CUPTI_LOST_UNREADABLE)},
                         {"activity_dropped_by_cupti", stats.activity_dropped},
                         {"malformed_records", c.malformed},
                         {"over_bound_records", c.over_bound},
                         {"records_the_disk_refused", c.unwritten}};
  // The library counts what it emitted: any shortfall at the collector is loss too.
  if (stats.summary) {
    const auto rest = [](uint64_t emitted, uint64_t received, uint64_t counted) {
      return int64_t(emitted) > int64_t(received + counted) ? int64_t(emitted - received - counted) : int64_t(0);
    };
    loss["api_calls_not_received"] = rest(stats.library_api_exits, uint64_t(stats.api_calls), calls_counted);
    loss["kernels_not_received"] =
        rest(stats.library_kernels, uint64_t(stats.kernels), at(CUPTI_LOST_RING_FULL_KERNELS));
  }
  return loss;
}

}  // namespace cudatrace
