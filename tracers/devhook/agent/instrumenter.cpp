#include "tracers/devhook/agent/instrumenter.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "tracers/devhook/agent/driver_api.h"
#include "tracers/devhook/device_record.h"
#include "tracers/devhook/fatbin.h"
#include "tracers/devhook/ptx_rewrite.h"

namespace cudatrace::devhook {

namespace {

using nlohmann::json;

struct FatbinState {
  const void* image = nullptr;
  bool prepared = false;
  std::string error;   // why nothing in it can be instrumented
  std::string source;  // which PTX entry was used, e.g. "compute_90, zstd"
  std::string ptx;     // rewritten
  std::vector<PtxKernel> kernels;
};

struct KernelState {
  std::string name;  // the device function's (mangled) name
  int fatbin = -1;
  int params = -1;
  std::string why_not;  // set once the kernel is known not to be instrumentable
  uint64_t launches = 0, instrumented = 0;
};

struct ContextState {
  CUcontext ctx = nullptr;
  int arch = 0;
  std::string error;  // set up failed: nothing runs instrumented here
  CUdeviceptr control = 0;
  DeviceRecord* records = nullptr;
  std::map<int, CUmodule> modules;         // fatbin -> its instrumented module
  std::map<int, CUfunction> functions;     // kernel -> instrumented function
  bool calibrated = false;
  int64_t clock_offset_ns = 0;             // globaltimer - CLOCK_MONOTONIC
  int64_t clock_uncertainty_ns = -1;
};

struct LaunchRow {
  int kernel;
  unsigned grid[3], block[3];
  int context;
  std::string failed;  // the instrumented launch failed; the original ran instead
};

struct Agent {
  std::mutex mu;
  ProbeMode mode = ProbeMode::kBlock;
  uint64_t capacity = kDefaultRingRecords;
  std::string out_dir;
  std::vector<FatbinState> fatbins;
  std::unordered_map<const void*, int> fatbin_of_handle;
  std::vector<KernelState> kernels;
  std::unordered_map<const void*, int> kernel_of;  // host stub or cudaKernel_t -> kernel
  std::deque<ContextState> contexts;
  std::vector<LaunchRow> launches;
  std::map<std::string, uint64_t> uninstrumented;  // reason -> launches
  bool exit_hook = false, saved = false;
};

Agent& agent() {
  static Agent* a = [] {
    auto* a = new Agent;  // never destroyed: launches may come from threads still running at exit
    const char* mode = std::getenv(kModeEnv);
    a->mode = mode && std::string(mode) == "thread" ? ProbeMode::kThread : ProbeMode::kBlock;
    if (const char* n = std::getenv(kRingRecordsEnv)) a->capacity = std::max<uint64_t>(1, std::strtoull(n, nullptr, 10));
    const char* dir = std::getenv(kOutDirEnv);
    a->out_dir = dir && *dir ? dir : ".";
    return a;
  }();
  return *a;
}

std::string with_error(const char* what, CUresult r) { return std::string(what) + " failed: " + error_name(r); }

void save_at_exit() { save_output(); }

// The ring and the clock for one context. Called under the lock.
void set_up(Agent& a, ContextState& cs) {
  const DriverApi& d = driver();
  CUdevice dev;
  int major = 0, minor = 0;
  CUresult r = d.ctx_get_device(&dev);
  if (r == CUDA_SUCCESS) r = d.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (r == CUDA_SUCCESS) r = d.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  if (r != CUDA_SUCCESS) {
    cs.error = with_error("cuDeviceGetAttribute", r);
    return;
  }
  cs.arch = major * 10 + minor;
  void* host = nullptr;
  const size_t bytes = a.capacity * sizeof(DeviceRecord);
  if ((r = d.mem_host_alloc(&host, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE)) != CUDA_SUCCESS) {
    cs.error = with_error(("cuMemHostAlloc of the " + std::to_string(bytes >> 20) + " MiB ring").c_str(), r);
    return;
  }
  std::memset(host, 0, bytes);
  cs.records = static_cast<DeviceRecord*>(host);
  CUdeviceptr mapped = 0;
  if ((r = d.mem_host_get_device_pointer(&mapped, host, 0)) != CUDA_SUCCESS) {
    cs.error = with_error("cuMemHostGetDevicePointer", r);
    return;
  }
  if ((r = d.mem_alloc(&cs.control, sizeof(RingControl))) != CUDA_SUCCESS) {
    cs.error = with_error("cuMemAlloc of the ring's control block", r);
    return;
  }
  const RingControl c{0, 0, a.capacity, uint64_t(mapped)};
  if ((r = d.memcpy_htod(cs.control, &c, sizeof c)) != CUDA_SUCCESS) {
    cs.error = with_error("cuMemcpyHtoD of the ring's control block", r);
    return;
  }
  // cudart is initialised by now and has registered its own exit handler; ours, registered
  // later, runs first, while the context still exists.
  if (!a.exit_hook) a.exit_hook = std::atexit(save_at_exit) == 0;
}

// Relates %globaltimer to CLOCK_MONOTONIC: the tightest of a few host-timed launches of
// __devhook_clock. Its half-width is the uncertainty of every converted timestamp.
void calibrate(ContextState& cs, CUmodule module) {
  const DriverApi& d = driver();
  CUfunction clock_fn;
  CUstream stream;
  void* slot = nullptr;
  CUdeviceptr slot_dev = 0;
  if (d.module_get_function(&clock_fn, module, kClockKernel) != CUDA_SUCCESS ||
      d.stream_create(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      d.mem_host_alloc(&slot, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS ||
      d.mem_host_get_device_pointer(&slot_dev, slot, 0) != CUDA_SUCCESS)
    return;
  cs.calibrated = true;
  for (int i = 0; i < 7; ++i) {
    void* args[] = {&slot_dev};
    const int64_t t0 = monotonic_ns();
    if (d.launch_kernel(clock_fn, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr) != CUDA_SUCCESS ||
        d.stream_synchronize(stream) != CUDA_SUCCESS) {
      cs.calibrated = false;
      return;
    }
    const int64_t t1 = monotonic_ns();
    const int64_t gpu = int64_t(*static_cast<volatile uint64_t*>(slot));
    if (cs.clock_uncertainty_ns < 0 || (t1 - t0) / 2 < cs.clock_uncertainty_ns) {
      cs.clock_uncertainty_ns = (t1 - t0) / 2;
      cs.clock_offset_ns = gpu - (t0 + t1) / 2;
    }
  }
}

// Parses and rewrites a fatbin's PTX, once. Under the lock.
void prepare(Agent& a, FatbinState& fb, int arch) {
  fb.prepared = true;
  try {
    const Fatbin f = parse_fatbin(fb.image);
    std::string why;
    const FatbinEntry* e = pick_ptx(f, uint32_t(arch), why);
    if (!e) {
      fb.error = why;
      return;
    }
    fb.source = "compute_" + std::to_string(e->arch) + (e->compression == Compression::kZstd ? ", zstd" : ", plain");
    RewrittenPtx r = rewrite_ptx(ptx_text(*e), a.mode);
    fb.ptx = std::move(r.ptx);
    fb.kernels = std::move(r.kernels);
  } catch (const std::exception& ex) {
    fb.error = ex.what();
  }
}

// The instrumented function for a kernel in this context, or nullptr with k.why_not set.
CUfunction instrumented_function(Agent& a, ContextState& cs, int kernel) {
  if (auto it = cs.functions.find(kernel); it != cs.functions.end()) return it->second;
  KernelState& k = a.kernels[kernel];
  FatbinState& fb = a.fatbins[k.fatbin];
  if (!fb.prepared) prepare(a, fb, cs.arch);
  if (!fb.error.empty()) {
    k.why_not = fb.error;
    return nullptr;
  }
  const auto pk = std::find_if(fb.kernels.begin(), fb.kernels.end(), [&](const PtxKernel& p) { return p.name == k.name; });
  if (pk == fb.kernels.end()) {
    k.why_not = "not among the .entry functions of the fatbin's PTX";
    return nullptr;
  }
  if (!pk->instrumented) {
    k.why_not = pk->why_not;
    return nullptr;
  }
  k.params = pk->params;
  auto mod = cs.modules.find(k.fatbin);
  if (mod == cs.modules.end()) {
    char log[4096] = {};
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log - 1))};
    CUmodule m = nullptr;
    const CUresult r = driver().module_load_data_ex(&m, fb.ptx.c_str(), 2, keys, values);
    if (r != CUDA_SUCCESS) {
      std::string first_line(log, strnlen(log, sizeof log));
      first_line = first_line.substr(0, first_line.find('\n'));
      fb.error = with_error("cuModuleLoadDataEx of the instrumented PTX", r) + (first_line.empty() ? "" : ": " + first_line);
      k.why_not = fb.error;
      return nullptr;
    }
    mod = cs.modules.emplace(k.fatbin, m).first;
    if (!cs.calibrated) calibrate(cs, m);
  }
  CUfunction fn = nullptr;
  if (const CUresult r = driver().module_get_function(&fn, mod->second, k.name.c_str()); r != CUDA_SUCCESS) {
    k.why_not = with_error("cuModuleGetFunction", r);
    return nullptr;
  }
  cs.functions[kernel] = fn;
  return fn;
}

ContextState& context_state(Agent& a, CUcontext ctx, int& index) {
  for (size_t i = 0; i < a.contexts.size(); ++i)
    if (a.contexts[i].ctx == ctx) {
      index = int(i);
      return a.contexts[i];
    }
  a.contexts.emplace_back();
  ContextState& cs = a.contexts.back();
  cs.ctx = ctx;
  index = int(a.contexts.size() - 1);
  set_up(a, cs);
  return cs;
}

// The context the launch will run in. cudart makes its primary context current on a
// thread at the thread's first runtime call; a launch can be that first call.
CUcontext current_context() {
  CUcontext ctx = nullptr;
  if (driver().ctx_get_current(&ctx) == CUDA_SUCCESS && ctx) return ctx;
  using FreeFn = int (*)(void*);
  static const auto cuda_free = reinterpret_cast<FreeFn>(dlsym(RTLD_NEXT, "cudaFree"));
  if (cuda_free) cuda_free(nullptr);  // the documented way to make cudart initialise
  ctx = nullptr;
  driver().ctx_get_current(&ctx);
  return ctx;
}

}  // namespace

void on_fatbin(void** handle, const void* fatbin) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  a.fatbin_of_handle[handle] = int(a.fatbins.size());
  a.fatbins.push_back({.image = fatbin});
}

void on_function(void** handle, const void* host_stub, const char* device_function) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  const auto fb = a.fatbin_of_handle.find(handle);
  if (fb == a.fatbin_of_handle.end() || !device_function) return;
  a.kernel_of[host_stub] = int(a.kernels.size());
  a.kernels.push_back({.name = device_function, .fatbin = fb->second});
}

void on_kernel_handle(const void* kernel, const void* host_stub) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  if (auto it = a.kernel_of.find(host_stub); it != a.kernel_of.end()) a.kernel_of[kernel] = it->second;
}

void count_uninstrumented(const char* reason) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  ++a.uninstrumented[reason];
}

bool launch_instrumented(const LaunchRequest& r) {
  Agent& a = agent();
  const DriverApi& d = driver();
  const CUcontext ctx = d.loaded ? current_context() : nullptr;
  CUfunction fn;
  int params;
  uint64_t seq;
  int context_index;
  CUdeviceptr control;
  {
    std::lock_guard lock(a.mu);
    const auto it = a.kernel_of.find(r.kernel);
    if (it == a.kernel_of.end()) {
      ++a.uninstrumented["a kernel not registered through libcudart.so's __cudaRegisterFunction"];
      return false;
    }
    KernelState& k = a.kernels[it->second];
    ++k.launches;
    if (!d.loaded) {
      ++a.uninstrumented[d.error];
      return false;
    }
    if (!ctx) {
      ++a.uninstrumented["no CUDA context current on the launching thread"];
      return false;
    }
    ContextState& cs = context_state(a, ctx, context_index);
    if (!cs.error.empty()) {
      ++a.uninstrumented["the ring could not be set up: " + cs.error];
      return false;
    }
    fn = k.why_not.empty() ? instrumented_function(a, cs, it->second) : nullptr;
    if (!fn) {
      ++a.uninstrumented["kernel " + k.name + ": " + k.why_not];
      return false;
    }
    ++k.instrumented;
    params = k.params;
    control = cs.control;
    seq = a.launches.size();
    a.launches.push_back({it->second, {r.grid[0], r.grid[1], r.grid[2]}, {r.block[0], r.block[1], r.block[2]},
                          context_index, {}});
  }
  // The program's arguments, then the two the probes read.
  void* small[32];
  std::vector<void*> large;
  void** args = small;
  if (params + 2 > 32) {
    large.resize(size_t(params) + 2);
    args = large.data();
  }
  for (int i = 0; i < params; ++i) args[i] = r.args[i];
  args[params] = &control;
  args[params + 1] = &seq;
  CUstream stream = r.stream;
  if (!stream && r.per_thread_default_stream) stream = CU_STREAM_PER_THREAD;
  const CUresult res = d.launch_kernel(fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2],
                                       unsigned(r.shared_mem), stream, args, nullptr);
  if (res == CUDA_SUCCESS) return true;
  // The original launch gives the program cudart's own error (and its sticky state) when
  // the configuration is bad; when only the instrumented copy fails, the original runs.
  std::lock_guard lock(a.mu);
  a.launches[seq].failed = error_name(res);
  --a.kernels[a.launches[seq].kernel].instrumented;
  ++a.uninstrumented[std::string("the instrumented launch failed (") + error_name(res) + "): the original ran"];
  return false;
}

void save_output() {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  if (a.saved) return;
  a.saved = true;
  const std::string base = a.out_dir + "/devhook." + std::to_string(getpid());
  json report = {{"pid", getpid()},
                 {"mode", a.mode == ProbeMode::kThread ? "thread" : "block"},
                 {"ring_records", a.capacity},
                 {"record_bytes", sizeof(DeviceRecord)}};
  std::ofstream records(base + ".records", std::ios::binary);
  json contexts = json::array();
  uint64_t offset = 0;
  for (ContextState& cs : a.contexts) {
    json c = {{"arch", cs.arch}, {"first_record", offset}};
    if (!cs.error.empty()) {
      c["error"] = cs.error;
    } else {
      const DriverApi& d = driver();
      RingControl ctl{};
      CUresult r = d.ctx_set_current(cs.ctx);
      if (r == CUDA_SUCCESS) r = d.ctx_synchronize();
      if (r == CUDA_SUCCESS) r = d.memcpy_dtoh(&ctl, cs.control, sizeof ctl);
      if (r != CUDA_SUCCESS) {
        c["error"] = with_error("reading the ring at exit (was the context destroyed, e.g. by cudaDeviceReset?)", r);
      } else {
        const uint64_t n = std::min(ctl.claimed, ctl.capacity);
        records.write(reinterpret_cast<const char*>(cs.records), std::streamsize(n * sizeof(DeviceRecord)));
        offset += n;
        c.update({{"records", n}, {"claimed", ctl.claimed}, {"dropped", ctl.dropped}});
      }
    }
    c["clock_offset_ns"] = cs.clock_offset_ns;
    c["clock_uncertainty_ns"] = cs.calibrated ? json(cs.clock_uncertainty_ns) : json(nullptr);
    contexts.push_back(c);
  }
  records.close();
  json fatbins = json::array();
  for (const FatbinState& fb : a.fatbins)
    fatbins.push_back({{"prepared", fb.prepared}, {"source", fb.source}, {"error", fb.error}});
  json kernels = json::array();
  for (const KernelState& k : a.kernels)
    kernels.push_back({{"name", k.name},
                       {"fatbin", k.fatbin},
                       {"launches", k.launches},
                       {"instrumented", k.instrumented},
                       {"why_not", k.why_not}});
  json launches = json::array();
  for (const LaunchRow& l : a.launches)
    launches.push_back({l.kernel, l.context, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                        l.failed});
  report.update({{"contexts", contexts},
                 {"fatbins", fatbins},
                 {"kernels", kernels},
                 {"launches", launches},
                 {"uninstrumented", a.uninstrumented}});
  // Written under a temporary name and renamed, so a reader never sees half a report.
  {
    std::ofstream out(base + ".json.tmp");
    out << report.dump() << "\n";
  }
  std::rename((base + ".json.tmp").c_str(), (base + ".json").c_str());
}

}  // namespace cudatrace::devhook
