#include "tracers/torchprof/torchprof_events.h"

#include <limits>
#include <string_view>

#include "common/cuda_names.h"
#include "common/device_id.h"
#include "tracers/torchprof/runtime_cbid_names.h"

namespace cudatrace {

namespace {

// An arg on its way to the store, packed (or, for dims past uint32_t, which only a hostile
// file writes, as JSON: PackedArgs packs a grid as three uint32_t).
struct ArgOut {
  const char* key;
  char kind;  // 'i' integer, 't' text, 'd' dims
  int64_t integer = 0;
  std::string_view text;
  Dims dims{};
};

bool fits_dim3(const Dims& d) {
  for (const int64_t v : d)
    if (v < 0 || v > int64_t(UINT32_MAX)) return false;
  return true;
}

// "Memcpy HtoD (Pageable -> Device)" -> "HtoD": the direction the ledger's copies name.
std::string_view copy_kind(std::string_view name) {
  constexpr std::string_view prefix = "Memcpy ";
  if (name.substr(0, prefix.size()) != prefix) return {};
  name.remove_prefix(prefix.size());
  return name.substr(0, name.find(' '));
}

// Calls that put work on the GPU, so that a GPU record will name their device.
bool makes_gpu_work(std::string_view name) {
  return name.find("Launch") != std::string_view::npos || name.find("Memcpy") != std::string_view::npos ||
         name.find("Memset") != std::string_view::npos;
}

// Writes `e` with args `a` (in the order a JSON object keeps its keys: sorted).
void emit(const TraceSink& sink, PackedArgs& packed, const Event& e, const ArgOut* a, size_t n) {
  bool packable = true;
  for (size_t i = 0; i < n; ++i) packable = packable && (a[i].kind != 'd' || fits_dim3(a[i].dims));
  if (!packable) {
    Event copy = e;
    copy.args = nlohmann::json::object();
    for (size_t i = 0; i < n; ++i) {
      auto& v = copy.args[a[i].key];
      if (a[i].kind == 'i') v = a[i].integer;
      else if (a[i].kind == 't') v = std::string(a[i].text);
      else v = {a[i].dims[0], a[i].dims[1], a[i].dims[2]};
    }
    return sink(copy, nullptr);
  }
  packed.start(n);
  for (size_t i = 0; i < n; ++i) {
    packed.key(a[i].key);
    if (a[i].kind == 'i') packed.integer(a[i].integer);
    else if (a[i].kind == 't') packed.text(a[i].text);
    else packed.dim3(uint32_t(a[i].dims[0]), uint32_t(a[i].dims[1]), uint32_t(a[i].dims[2]));
  }
  sink(e, &packed);
}

ArgOut integer_arg(const char* key, int64_t v) { return ArgOut{key, 'i', v, {}, {}}; }
ArgOut text_arg(const char* key, std::string_view v) { return ArgOut{key, 't', 0, v, {}}; }
ArgOut dims_arg(const char* key, const Dims& d) { return ArgOut{key, 'd', 0, {}, d}; }

}  // namespace

void KinetoEvents::add(const KinetoEvent& ev, int64_t ts, std::optional<int64_t> dur) {
  if (!ev.cat_text) return other("");
  const std::string& c = ev.cat;
  if (c == "cuda_runtime" || c == "cuda_driver") return api_call(ev, c == "cuda_runtime", ts, dur);
  if (c == "kernel") return gpu_record(ev, 'k', ts, dur);
  if (c == "gpu_memcpy") return gpu_record(ev, 'c', ts, dur);
  if (c == "gpu_memset") return gpu_record(ev, 's', ts, dur);
  other(c);
}

void KinetoEvents::other(const std::string& cat) {
  ++reading_.other_events;
  if (cat.empty()) return;
  // Most of a trace is a few categories (cpu_op, python_function, ac2g) one after another.
  if (last_other_count_ && cat == last_other_) {
    ++*last_other_count_;
    return;
  }
  const bool known = reading_.other_categories.count(cat) > 0;
  const std::string& key = known || reading_.other_categories.size() < 32 ? cat : "(other)";
  int64_t& count = reading_.other_categories[key];
  ++count;
  last_other_ = cat;
  last_other_count_ = &count;
}

void KinetoEvents::place(Event& e, std::optional<int64_t> device) const {
  e.device = device;
  e.device_id.clear();
  if (!device) return;
  if (auto it = bus_ids_.find(*device); it != bus_ids_.end()) e.device_id = normalize_pci_bus_id(it->second);
}

void KinetoEvents::api_call(const KinetoEvent& ev, bool runtime, int64_t ts, std::optional<int64_t> dur) {
  if (!ev.name_text || ev.name.empty() || ts == 0) {
    ++reading_.events_malformed;
    return;
  }
  const auto& cbid = ev.args.cbid;
  Call& call = call_;
  Event& e = call.e;
  e.layer = runtime ? layer::kRuntime : layer::kDriver;
  e.name = ev.name;
  // Kineto's own table of runtime names ends before CUDA's does: torch 2.11 writes "INVALID"
  // for cudaStreamGetCaptureInfo (461) and cudaGetDriverEntryPointByVersion (468), their
  // cbids intact. Named from CUPTI's table; left "INVALID" only past it.
  if (runtime && e.name == "INVALID" && cbid) {
    if (const char* known = runtime_cbid_name(*cbid)) {
      e.name = known;
      ++reading_.runtime_named_from_cbid;
    }
  }
  if (runtime) e.name = without_runtime_version(std::move(e.name));
  e.ts = ts;
  e.dur = dur;
  // The file is one process's: its "pid" on an API call should say so, and is counted where not.
  e.pid = pid_;
  if (ev.pid && *ev.pid != pid_) ++reading_.calls_of_other_pid;
  e.tid = ev.tid.value_or(0);
  place(e, std::nullopt);
  call.args = CallArgs{cbid, ev.args.external_id, std::nullopt, std::nullopt, std::nullopt, {}};
  const auto& corr = ev.args.correlation;
  ++(runtime ? reading_.runtime_calls : reading_.driver_calls);
  e.corr.reset();
  if (!corr || *corr < 0) return write_call(call);
  e.corr = uint64_t(*corr);
  if (auto gpu = recent_gpu_.find(*e.corr); gpu != recent_gpu_.end()) {
    give(call, gpu->second);
    return write_call(call);
  }
  if (!makes_gpu_work(e.name) || waiting_calls_.count(*e.corr)) return write_call(call);
  if (waiting_order_.size() >= window_) {  // the oldest waits no longer: written as it is
    const uint64_t oldest = waiting_order_.front();
    waiting_order_.pop_front();
    if (auto it = waiting_calls_.find(oldest); it != waiting_calls_.end()) {
      write_call(it->second);
      waiting_calls_.erase(it);
    }
  }
  waiting_order_.push_back(*e.corr);
  waiting_calls_.emplace(*e.corr, call);
}

void KinetoEvents::write_call(const Call& call) {
  const CallArgs& c = call.args;
  ArgOut a[6];
  size_t n = 0;
  if (c.block) a[n++] = dims_arg("block", *c.block);
  if (c.bytes) a[n++] = integer_arg("bytes", *c.bytes);
  if (c.cbid) a[n++] = integer_arg("cbid", *c.cbid);
  if (c.external_id) a[n++] = integer_arg("external_id", *c.external_id);
  if (c.grid) a[n++] = dims_arg("grid", *c.grid);
  if (!c.kind.empty()) a[n++] = text_arg("kind", c.kind);
  emit(sink_, packed_, call.e, a, n);
}

void KinetoEvents::gpu_record(const KinetoEvent& ev, char what, int64_t ts, std::optional<int64_t> dur) {
  if (!ev.name_text || ts == 0) {
    ++reading_.events_malformed;
    return;
  }
  const auto& args = ev.args;
  GpuSide gpu;
  gpu.what = what;
  // A peer-to-peer copy names the device it ran in as inDevice; a kernel's "pid" is its device.
  gpu.device = args.device ? args.device : args.in_device;
  if (!gpu.device && what == 'k') gpu.device = ev.pid;
  Event& e = record_;
  e.layer = what == 'k' ? layer::kGpuActivity : kGpuMemoryLayer;
  e.name = ev.name;
  e.ts = ts;
  e.dur = dur;
  e.pid = pid_;
  ArgOut a[6];
  size_t n = 0;
  if (what == 'k') {
    gpu.grid = args.grid;
    gpu.block = args.block;
    if (gpu.block) a[n++] = dims_arg("block", *gpu.block);
    if (gpu.device) a[n++] = integer_arg("device", *gpu.device);
    if (gpu.grid) a[n++] = dims_arg("grid", *gpu.grid);
    a[n++] = text_arg("kernel", e.name);
    ++reading_.kernels;
  } else {
    gpu.bytes = args.bytes;
    if (what == 'c') gpu.kind = copy_kind(e.name);
    if (gpu.bytes) a[n++] = integer_arg("bytes", *gpu.bytes);
    if (gpu.device) a[n++] = integer_arg("device", *gpu.device);
    if (!gpu.kind.empty()) a[n++] = text_arg("kind", gpu.kind);
    ++(what == 'c' ? reading_.memcpys : reading_.memsets);
  }
  if (args.stream) a[n++] = integer_arg("stream", *args.stream);
  place(e, gpu.device);
  e.corr.reset();
  if (args.correlation && *args.correlation >= 0) e.corr = uint64_t(*args.correlation);
  emit(sink_, packed_, e, a, n);
  if (!e.corr) return;
  if (auto call = waiting_calls_.find(*e.corr); call != waiting_calls_.end()) {
    give(call->second, gpu);
    write_call(call->second);
    waiting_calls_.erase(call);  // its place in waiting_order_ is skipped when it comes up
    return;
  }
  // A graph's kernels share their launch's id: the first one is the one kept.
  if (recent_gpu_.count(*e.corr)) return;
  if (recent_order_.size() >= window_) {
    recent_gpu_.erase(recent_order_.front());
    recent_order_.pop_front();
  }
  recent_order_.push_back(*e.corr);
  recent_gpu_.emplace(*e.corr, std::move(gpu));
}

// What the call's GPU record says of it: its device, and where the record is the call's
// alone (not one of a graph's kernels), the launch's grid and block or the copy's size and
// direction, which the ledger records as the call's arguments.
void KinetoEvents::give(Call& call, const GpuSide& gpu) {
  place(call.e, gpu.device);
  if (gpu.device) ++reading_.calls_given_device;
  if (call.e.name.find("Graph") != std::string::npos) return;
  if (gpu.what == 'k') {
    call.args.grid = gpu.grid;
    call.args.block = gpu.block;
    return;
  }
  call.args.bytes = gpu.bytes;
  call.args.kind = gpu.kind;
}

void KinetoEvents::finish() {
  for (const uint64_t corr : waiting_order_)
    if (auto it = waiting_calls_.find(corr); it != waiting_calls_.end()) {
      write_call(it->second);
      waiting_calls_.erase(it);
    }
  waiting_order_.clear();
  recent_gpu_.clear();
  recent_order_.clear();
}

}  // namespace cudatrace
