#include "tracers/torchprof/torchprof_events.h"

#include <limits>

#include "common/cuda_names.h"
#include "common/device_id.h"
#include "tracers/torchprof/runtime_cbid_names.h"

namespace cudatrace {

namespace {

using json = nlohmann::json;

std::optional<int64_t> integer_at(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (it->is_number_integer() && !it->is_number_unsigned()) return it->get<int64_t>();
  if (it->is_number_unsigned() && it->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
    return int64_t(it->get<uint64_t>());
  return std::nullopt;
}

// [x, y, z] of integers, as the trace writes a grid or a block; null otherwise.
json dims_at(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_array() || it->size() != 3) return nullptr;
  for (const auto& d : *it)
    if (!d.is_number_integer()) return nullptr;
  return *it;
}

const json& args_of(const json& ev) {
  static const json kNone = json::object();
  const auto it = ev.find("args");
  return it != ev.end() && it->is_object() ? *it : kNone;
}

// "Memcpy HtoD (Pageable -> Device)" -> "HtoD": the direction the ledger's copies name.
std::string copy_kind(const std::string& name) {
  const std::string prefix = "Memcpy ";
  if (name.rfind(prefix, 0) != 0) return {};
  const size_t end = name.find(' ', prefix.size());
  return name.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
}

// Calls that put work on the GPU, so that a GPU record will name their device.
bool makes_gpu_work(const std::string& name) {
  return name.find("Launch") != std::string::npos || name.find("Memcpy") != std::string::npos ||
         name.find("Memset") != std::string::npos;
}

}  // namespace

void KinetoEvents::add(const json& ev, int64_t ts, std::optional<int64_t> dur) {
  const auto cat = ev.find("cat");
  if (cat == ev.end() || !cat->is_string()) return other("");
  const std::string& c = cat->get_ref<const std::string&>();
  if (c == "cuda_runtime" || c == "cuda_driver") return api_call(ev, c, ts, dur);
  if (c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset") return gpu_record(ev, c, ts, dur);
  other(c);
}

void KinetoEvents::other(const std::string& cat) {
  ++reading_.other_events;
  if (cat.empty()) return;
  if (reading_.other_categories.size() < 32 || reading_.other_categories.count(cat))
    ++reading_.other_categories[cat];
  else
    ++reading_.other_categories["(other)"];
}

void KinetoEvents::place(Event& e, std::optional<int64_t> device) const {
  e.device = device;
  if (!device) return;
  if (auto it = bus_ids_.find(*device); it != bus_ids_.end()) e.device_id = normalize_pci_bus_id(it->second);
}

void KinetoEvents::api_call(const json& ev, const std::string& cat, int64_t ts, std::optional<int64_t> dur) {
  const auto name = ev.find("name");
  if (name == ev.end() || !name->is_string() || name->get_ref<const std::string&>().empty() || ts == 0) {
    ++reading_.events_malformed;
    return;
  }
  const bool runtime = cat == "cuda_runtime";
  const json& args = args_of(ev);
  const auto cbid = integer_at(args, "cbid");
  Event e;
  e.layer = runtime ? layer::kRuntime : layer::kDriver;
  e.name = name->get<std::string>();
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
  if (auto p = integer_at(ev, "pid"); p && *p != pid_) ++reading_.calls_of_other_pid;
  e.tid = integer_at(ev, "tid").value_or(0);
  if (cbid) e.args["cbid"] = *cbid;
  if (auto ext = integer_at(args, "External id")) e.args["external_id"] = *ext;
  const auto corr = integer_at(args, "correlation");
  ++(runtime ? reading_.runtime_calls : reading_.driver_calls);
  if (!corr || *corr < 0) return sink_(e);
  e.corr = uint64_t(*corr);
  if (auto gpu = recent_gpu_.find(*e.corr); gpu != recent_gpu_.end()) {
    give(e, gpu->second);
    return sink_(e);
  }
  if (!makes_gpu_work(e.name) || waiting_calls_.count(*e.corr)) return sink_(e);
  if (waiting_order_.size() >= window_) {  // the oldest waits no longer: written as it is
    const uint64_t oldest = waiting_order_.front();
    waiting_order_.pop_front();
    if (auto it = waiting_calls_.find(oldest); it != waiting_calls_.end()) {
      sink_(it->second);
      waiting_calls_.erase(it);
    }
  }
  waiting_order_.push_back(*e.corr);
  waiting_calls_.emplace(*e.corr, std::move(e));
}

void KinetoEvents::gpu_record(const json& ev, const std::string& cat, int64_t ts, std::optional<int64_t> dur) {
  const auto name = ev.find("name");
  if (name == ev.end() || !name->is_string() || ts == 0) {
    ++reading_.events_malformed;
    return;
  }
  const json& args = args_of(ev);
  GpuSide gpu;
  gpu.what = cat == "kernel" ? 'k' : cat == "gpu_memcpy" ? 'c' : 's';
  // A peer-to-peer copy names the device it ran in as inDevice; a kernel's "pid" is its device.
  gpu.device = integer_at(args, "device");
  if (!gpu.device) gpu.device = integer_at(args, "inDevice");
  if (!gpu.device && gpu.what == 'k') gpu.device = integer_at(ev, "pid");
  Event e;
  e.layer = gpu.what == 'k' ? layer::kGpuActivity : kGpuMemoryLayer;
  e.name = name->get<std::string>();
  e.ts = ts;
  e.dur = dur;
  e.pid = pid_;
  const auto stream = integer_at(args, "stream");
  if (gpu.what == 'k') {
    e.args["kernel"] = e.name;
    gpu.grid = dims_at(args, "grid");
    gpu.block = dims_at(args, "block");
    if (!gpu.grid.is_null()) e.args["grid"] = gpu.grid;
    if (!gpu.block.is_null()) e.args["block"] = gpu.block;
    ++reading_.kernels;
  } else {
    gpu.bytes = integer_at(args, "bytes");
    if (gpu.bytes) e.args["bytes"] = *gpu.bytes;
    if (gpu.what == 'c') {
      gpu.kind = copy_kind(e.name);
      if (!gpu.kind.empty()) e.args["kind"] = gpu.kind;
    }
    ++(gpu.what == 'c' ? reading_.memcpys : reading_.memsets);
  }
  if (stream) e.args["stream"] = *stream;
  if (gpu.device) e.args["device"] = *gpu.device;
  place(e, gpu.device);
  const auto corr = integer_at(args, "correlation");
  if (corr && *corr >= 0) e.corr = uint64_t(*corr);
  sink_(e);
  if (!e.corr) return;
  if (auto call = waiting_calls_.find(*e.corr); call != waiting_calls_.end()) {
    give(call->second, gpu);
    sink_(call->second);
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
void KinetoEvents::give(Event& call, const GpuSide& gpu) {
  place(call, gpu.device);
  if (gpu.device) ++reading_.calls_given_device;
  if (call.name.find("Graph") != std::string::npos) return;
  if (gpu.what == 'k') {
    if (!gpu.grid.is_null()) call.args["grid"] = gpu.grid;
    if (!gpu.block.is_null()) call.args["block"] = gpu.block;
    return;
  }
  if (gpu.bytes) call.args["bytes"] = *gpu.bytes;
  if (!gpu.kind.empty()) call.args["kind"] = gpu.kind;
}

void KinetoEvents::finish() {
  for (const uint64_t corr : waiting_order_)
    if (auto it = waiting_calls_.find(corr); it != waiting_calls_.end()) {
      sink_(it->second);
      waiting_calls_.erase(it);
    }
  waiting_order_.clear();
  recent_gpu_.clear();
  recent_order_.clear();
}

}  // namespace cudatrace
