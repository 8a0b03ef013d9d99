#include "tracers/devhook/agent/instrumenter.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "tracers/devhook/agent/agent_state.h"
#include "tracers/devhook/agent/driver_api.h"
#include "tracers/devhook/agent/ring_drain.h"
#include "tracers/devhook/device_record.h"
#include "tracers/devhook/ptx_rewrite.h"

namespace cudatrace::devhook {

Agent& agent() {
  static Agent* a = [] {
    auto* a = new Agent;  // never destroyed: launches may come from threads still running at exit
    const char* mode = std::getenv(kModeEnv);
    a->mode = mode && std::string(mode) == "thread" ? ProbeMode::kThread : ProbeMode::kBlock;
    if (const char* n = std::getenv(kRingRecordsEnv))
      a->capacity = std::bit_ceil(std::clamp<uint64_t>(std::strtoull(n, nullptr, 10), 1, uint64_t(1) << 30));
    if (const char* k = std::getenv(kSubringsEnv))
      a->subrings = std::bit_ceil(std::clamp<uint32_t>(uint32_t(std::strtoul(k, nullptr, 10)), 1, kMaxSubrings));
    a->subrings = uint32_t(std::min<uint64_t>(a->subrings, a->capacity));
    const char* drain = std::getenv(kDrainEnv);
    a->drain = !(drain && std::string(drain) == "off");
    const char* dir = std::getenv(kOutDirEnv);
    a->out_dir = dir && *dir ? dir : ".";
    return a;
  }();
  return *a;
}

std::string with_error(const char* what, CUresult r) { return std::string(what) + " failed: " + error_name(r); }

void collect(Agent& a, ContextState& cs) {
  if (cs.collected || !cs.error.empty()) return;
  cs.collected = true;
  const DriverApi& d = driver();
  CUcontext previous = nullptr;
  d.ctx_get_current(&previous);
  CUresult r = d.ctx_set_current(cs.ctx);
  if (r == CUDA_SUCCESS) r = d.ctx_synchronize();
  // The ring is the drain's, not the context's: what it holds is read even when the
  // context is gone or broken.
  cs.drained = drain_finish(cs.ring);
  if (r != CUDA_SUCCESS) {
    // Its records are read; the graph nodes' counters, in its memory, are not.
    cs.counters_error = with_error(
        "synchronising the context to read its graph nodes' counters (was it destroyed where the agent could not see it?)",
        r);
  } else {
    // A graph node's counter holds a ticket per block (or thread) of every execution.
    std::vector<uint64_t> tickets(cs.tickets_used);
    if (!tickets.empty() &&
        (r = d.memcpy_dtoh(tickets.data(), cs.tickets, tickets.size() * sizeof(uint64_t))) != CUDA_SUCCESS)
      cs.counters_error = with_error("reading the graph nodes' counters", r);
    else
      for (LaunchRow& l : a.launches) {
        if (l.ticket < 0 || &a.contexts[size_t(l.context)] != &cs) continue;
        uint64_t per = uint64_t(l.grid[0]) * l.grid[1] * l.grid[2];
        if (a.mode == ProbeMode::kThread) per *= uint64_t(l.block[0]) * l.block[1] * l.block[2];
        l.executions = per ? tickets[size_t(l.ticket)] / per : 0;
      }
  }
  if (previous != cs.ctx) d.ctx_set_current(previous);
}

namespace {

std::atomic<bool> g_paused{false};  // set_paused()

void save_at_exit() { save_output(); }

// `bytes` (rounded up to the allocation granularity) of memory on `dev`, mapped with
// read-write access for the device: reachable from every context of the process on it.
CUresult device_memory(CUdevice dev, size_t bytes, CUdeviceptr* out) {
  const DriverApi& d = driver();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t granularity = 0;
  CUresult r = d.mem_get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return r;
  bytes = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  if ((r = d.mem_create(&handle, bytes, &prop, 0)) != CUDA_SUCCESS ||
      (r = d.mem_address_reserve(out, bytes, 0, 0, 0)) != CUDA_SUCCESS ||
      (r = d.mem_map(*out, bytes, 0, handle, 0)) != CUDA_SUCCESS)
    return r;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d.mem_set_access(*out, bytes, &access, 1);
}

// The ring and the clock for one context. Called under the lock.
void set_up(Agent& a, ContextState& cs) {
  const DriverApi& d = driver();
  RelaxedCapture relaxed;
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
  cs.device = dev;
  char bus_id[32] = {};
  if (d.device_get_pci_bus_id && d.device_get_pci_bus_id(bus_id, sizeof bus_id - 1, dev) == CUDA_SUCCESS)
    cs.pci_bus_id = bus_id;
  CUcontext primary = nullptr;  // learnt by a retain and a release, which leave its count as it was
  if (d.primary_retain(&primary, dev) == CUDA_SUCCESS) {
    cs.primary = primary == cs.ctx;
    d.primary_release(dev);
  }
  std::string why;
  if (!drain_open(a.out_dir + "/devhook." + std::to_string(getpid()) + ".records", a.drain, &why)) {
    cs.error = why;
    return;
  }
  // The sub-rings' records and control blocks in device memory (device_record.h). On the
  // host, in one mapping of our own that the driver pins: the drain's copy of the records
  // and of the control blocks, and the limits it raises. Never unmapped: the drain thread
  // may still be using it when a context goes.
  const uint64_t sub_capacity = a.capacity / a.subrings;
  const size_t ring_bytes = a.capacity * sizeof(DeviceRecord), tail = 4096 + kMaxSubrings * sizeof(RingControl);
  const size_t bytes = ring_bytes + tail;
  void* host = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (host == MAP_FAILED) {
    cs.error = "mmap of the " + std::to_string(bytes >> 20) + " MiB drain buffer failed: " + std::strerror(errno);
    return;
  }
  if ((r = d.mem_host_register(host, bytes, CU_MEMHOSTREGISTER_PORTABLE)) != CUDA_SUCCESS) {
    munmap(host, bytes);
    cs.error = with_error(("cuMemHostRegister of the " + std::to_string(bytes >> 20) + " MiB drain buffer").c_str(), r);
    return;
  }
  char* const tail_at = static_cast<char*>(host) + ring_bytes;
  CUdeviceptr records = 0;
  // The drain works in a context of its own. CUDA multiplexes a context's streams onto a
  // few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), so a copy on a stream of the
  // program's context can wait behind the program's work queued after a kernel, while that
  // kernel's probes wait for the copy (in thread mode the streams and driverapi workloads
  // kept one ring's worth and dropped the rest). The ring is memory mapped for
  // the device (cuMemCreate), which every context of the process on it reaches, and it
  // outlives the program's context.
  CUcontext drain_ctx = nullptr, popped = nullptr;
  if ((r = d.ctx_create(&drain_ctx, nullptr, 0, dev)) != CUDA_SUCCESS) {
    cs.error = with_error("cuCtxCreate of the drain's context", r);
    return;
  }
  d.ctx_pop_current(&popped);  // the program's context is current again
  if ((r = device_memory(dev, ring_bytes, &records)) != CUDA_SUCCESS) {
    cs.error = with_error(("mapping the " + std::to_string(ring_bytes >> 20) + " MiB ring").c_str(), r);
    return;
  }
  if ((r = device_memory(dev, a.subrings * sizeof(RingControl), &cs.control)) != CUDA_SUCCESS) {
    cs.error = with_error("mapping the ring's control blocks", r);
    return;
  }
  if ((r = d.mem_alloc(&cs.tickets, kTicketSlots * sizeof(uint64_t))) != CUDA_SUCCESS) {
    cs.error = with_error("cuMemAlloc of the graph nodes' counters", r);
    return;
  }
  std::vector<RingControl> controls(a.subrings);
  for (uint32_t i = 0; i < a.subrings; ++i)
    controls[i] = RingControl{.claimed = 0,
                              .dropped = 0,
                              .capacity = sub_capacity,
                              .records = records + i * sub_capacity * sizeof(DeviceRecord),
                              .tickets = uint64_t(cs.tickets),
                              .ticket_slots = kTicketSlots,
                              .limit = sub_capacity,
                              .capacity_log2 = uint64_t(std::countr_zero(sub_capacity))};
  // Written on a stream of the agent's own that does not synchronise with the legacy one:
  // a plain cuMemcpyHtoD or cuMemsetD8 would, and so join (and break) a capture that the
  // program has in progress on a blocking stream. The drain has a stream of its own.
  if ((r = d.stream_create(&cs.stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
      (r = d.memset_d8_async(records, 0, ring_bytes, cs.stream)) != CUDA_SUCCESS ||
      (r = d.memset_d8_async(cs.tickets, 0, kTicketSlots * sizeof(uint64_t), cs.stream)) != CUDA_SUCCESS ||
      (r = d.memcpy_htod_async(cs.control, controls.data(), controls.size() * sizeof(RingControl), cs.stream)) !=
          CUDA_SUCCESS ||
      (r = d.stream_synchronize(cs.stream)) != CUDA_SUCCESS) {
    cs.error = with_error("initialising the ring, its control blocks and counters", r);
    return;
  }
  CUstream drain_stream = nullptr;
  r = d.ctx_set_current(drain_ctx);
  if (r == CUDA_SUCCESS) r = d.stream_create(&drain_stream, CU_STREAM_NON_BLOCKING);
  d.ctx_set_current(cs.ctx);
  if (r != CUDA_SUCCESS) {
    cs.error = with_error("cuStreamCreate in the drain's context", r);
    return;
  }
  cs.ring = drain_add(RingMemory{.ctx = drain_ctx,
                                 .stream = drain_stream,
                                 .subrings = a.subrings,
                                 .sub_capacity = sub_capacity,
                                 .control = cs.control,
                                 .records = records,
                                 .staging = static_cast<DeviceRecord*>(host),
                                 .controls = reinterpret_cast<RingControl*>(tail_at + 4096),
                                 .limits = reinterpret_cast<uint64_t*>(tail_at)});
  // cudart is initialised by now and has registered its own exit handler; ours, registered
  // later, runs first, while the context still exists.
  if (!a.exit_hook) a.exit_hook = std::atexit(save_at_exit) == 0;
}

// Relates %globaltimer to CLOCK_MONOTONIC: the tightest of a few host-timed launches of
// __devhook_clock. Its half-width is the uncertainty of every converted timestamp.
void calibrate(ContextState& cs, CUmodule module) {
  const DriverApi& d = driver();
  CUfunction clock_fn;
  void* slot = nullptr;
  CUdeviceptr slot_dev = 0;
  if (d.module_get_function(&clock_fn, module, kClockKernel) != CUDA_SUCCESS ||
      d.mem_host_alloc(&slot, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS ||
      d.mem_host_get_device_pointer(&slot_dev, slot, 0) != CUDA_SUCCESS)
    return;
  cs.calibrated = true;
  for (int i = 0; i < 7; ++i) {
    void* args[] = {&slot_dev};
    const int64_t t0 = monotonic_ns();
    if (d.launch_kernel(clock_fn, 1, 1, 1, 1, 1, 1, 0, cs.stream, args, nullptr) != CUDA_SUCCESS ||
        d.stream_synchronize(cs.stream) != CUDA_SUCCESS) {
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


// The instrumented function for a kernel in this context, or nullptr with k.why_not set.
CUfunction instrumented_function(Agent& a, ContextState& cs, int kernel) {
  if (auto it = cs.functions.find(kernel); it != cs.functions.end()) return it->second;
  KernelState& k = a.kernels[kernel];
  FatbinState& fb = a.fatbins[k.fatbin];
  if (!fb.prepared) prepare_fatbin(fb, fb.image, cs.arch, a.mode);
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
    RelaxedCapture relaxed;
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


// The context is about to go: read it now, and let a context made later (even at this
// address) get a ring of its own. Under the lock.
void retire(Agent& a, ContextState& cs) {
  collect(a, cs);
  cs.ctx = nullptr;
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

void on_module_loaded(const void* module, const void* image, const char* via) {
  Agent& a = agent();
  FatbinState fb = prepare_image(image, via, a.mode);
  std::lock_guard lock(a.mu);
  a.fatbin_of_module[module] = int(a.fatbins.size());
  a.fatbins.push_back(std::move(fb));
}

void on_module_function(const void* function, const void* module, const char* name) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  const auto fb = a.fatbin_of_module.find(module);
  if (fb == a.fatbin_of_module.end() || !name) return;
  for (size_t k = 0; k < a.kernels.size(); ++k)
    if (a.kernels[k].fatbin == fb->second && a.kernels[k].name == name) {
      a.kernel_of[function] = int(k);
      return;
    }
  a.kernel_of[function] = int(a.kernels.size());
  a.kernels.push_back({.name = name, .fatbin = fb->second});
}

void on_kernel_alias(const void* alias, const void* kernel) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  if (auto it = a.kernel_of.find(kernel); it != a.kernel_of.end()) a.kernel_of[alias] = it->second;
}

void on_module_unloaded(const void* module) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  const auto fb = a.fatbin_of_module.find(module);
  if (fb == a.fatbin_of_module.end()) return;
  const int image = fb->second;
  a.fatbin_of_module.erase(fb);
  std::erase_if(a.kernel_of, [&](const auto& kv) { return a.kernels[size_t(kv.second)].fatbin == image; });
}

void before_context_destroyed(CUcontext ctx) {
  Agent& a = agent();
  if (!ctx || !driver().loaded) return;
  std::lock_guard lock(a.mu);
  for (ContextState& cs : a.contexts)
    if (cs.ctx == ctx) retire(a, cs);
}

void before_primary_context_released(int device) {
  Agent& a = agent();
  const DriverApi& d = driver();
  if (!d.loaded) return;
  CUdevice dev = device;
  if (device < 0 && d.ctx_get_device(&dev) != CUDA_SUCCESS) return;
  std::lock_guard lock(a.mu);
  for (ContextState& cs : a.contexts)
    if (cs.primary && cs.device == dev && cs.ctx) retire(a, cs);
}

void count_uninstrumented(const char* reason) {
  if (g_paused.load(std::memory_order_relaxed)) return;
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  ++a.uninstrumented[reason];
}

namespace {

// What an instrumented launch or graph node needs, decided under the lock.
struct Instrumented {
  CUfunction fn = nullptr;
  int params = 0;
  uint64_t seq = 0;
  uint64_t word = 0;  // the launch word the probes get (device_record.h)
  CUdeviceptr control = 0;
};

// Finds (or makes) the instrumented kernel and takes a launch number; a graph node (one
// added by hand, or a launch into a capturing `stream`) also takes a counter slot. false:
// counted with its reason; the caller runs the original.
bool take_launch(const LaunchRequest& r, bool added_node, CUstream stream, Instrumented& out) {
  if (g_paused.load(std::memory_order_relaxed)) return false;
  Agent& a = agent();
  const DriverApi& d = driver();
  const CUcontext ctx = d.loaded ? current_context() : nullptr;
  std::lock_guard lock(a.mu);
  const auto it = a.kernel_of.find(r.kernel);
  if (it == a.kernel_of.end()) {
    ++a.uninstrumented[r.driver_api ? "a CUfunction from no module the agent saw loaded"
                                    : "a kernel not registered through libcudart.so's __cudaRegisterFunction"];
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
  int context_index;
  ContextState& cs = context_state(a, ctx, context_index);
  if (!cs.error.empty()) {
    ++a.uninstrumented["the ring could not be set up: " + cs.error];
    return false;
  }
  out.fn = k.why_not.empty() ? instrumented_function(a, cs, it->second) : nullptr;
  if (!out.fn) {
    ++a.uninstrumented["kernel " + k.name + ": " + k.why_not];
    return false;
  }
  // Captured, the launch becomes a graph node that may run many times. Asked only here, of
  // a launch that will run instrumented.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  const bool graph_node = added_node || (d.stream_is_capturing(stream, &capture) == CUDA_SUCCESS &&
                                         capture == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  if (graph_node && cs.tickets_used == kTicketSlots) {
    ++a.uninstrumented["a graph kernel node beyond the " + std::to_string(kTicketSlots) +
                       " per context whose executions the agent numbers"];
    return false;
  }
  ++k.instrumented;
  out.params = k.params;
  out.control = cs.control;
  out.seq = a.launches.size();
  LaunchRow row{it->second, {r.grid[0], r.grid[1], r.grid[2]}, {r.block[0], r.block[1], r.block[2]}, context_index, {}};
  out.word = out.seq;
  if (graph_node) {
    row.ticket = int64_t(cs.tickets_used++);
    out.word = graph_node_word(out.seq, uint64_t(row.ticket));
  }
  a.launches.push_back(row);
  return true;
}

// The reason counted for this thread's last instrumented launch that failed, until the
// caller says how the original did (original_result).
thread_local std::string t_pending_failure;

// The instrumented launch or node failed: the original runs instead, counted.
void undo_launch(const Instrumented& in, const char* what, CUresult res) {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  a.launches[in.seq].failed = error_name(res);
  --a.kernels[a.launches[in.seq].kernel].instrumented;
  t_pending_failure = std::string("the instrumented ") + what + " failed (" + error_name(res) + "): the original ran";
  ++a.uninstrumented[t_pending_failure];
}

// The program's arguments, then the two the probes read.
struct Arguments {
  void* small[32];
  std::vector<void*> large;
  void** data = small;
  Arguments(void** program, const Instrumented& in) {
    if (in.params + 2 > 32) {
      large.resize(size_t(in.params) + 2);
      data = large.data();
    }
    for (int i = 0; i < in.params; ++i) data[i] = program[i];
    data[in.params] = const_cast<CUdeviceptr*>(&in.control);
    data[in.params + 1] = const_cast<uint64_t*>(&in.word);
  }
};

}  // namespace

void original_result(bool succeeded) {
  if (t_pending_failure.empty()) return;
  const std::string reason = std::move(t_pending_failure);
  t_pending_failure.clear();
  if (succeeded) return;
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  if (auto it = a.uninstrumented.find(reason); it != a.uninstrumented.end() && it->second > 0) {
    if (--it->second == 0) a.uninstrumented.erase(it);
    ++a.failed;
  }
}

bool launch_instrumented(const LaunchRequest& r) {
  t_pending_failure.clear();
  const DriverApi& d = driver();
  CUstream stream = r.config ? r.config->hStream : r.stream;
  if (!stream && r.per_thread_default_stream) stream = CU_STREAM_PER_THREAD;
  Instrumented in;
  if (!take_launch(r, false, stream, in)) return false;
  if (!r.args && in.params > 0) {  // no arguments for a kernel that takes some: the original says why
    undo_launch(in, "launch", CUDA_ERROR_INVALID_VALUE);
    return false;
  }
  Arguments args(r.args, in);
  CUresult res;
  if (r.config) {
    CUlaunchConfig c = *r.config;  // its attributes apply to the instrumented kernel as well
    c.hStream = stream;
    res = d.launch_kernel_ex(&c, in.fn, args.data, nullptr);
  } else {
    res = d.launch_kernel(in.fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2],
                          unsigned(r.shared_mem), stream, args.data, nullptr);
  }
  if (res == CUDA_SUCCESS) return true;
  // The original launch gives the program cudart's own error (and its sticky state) when
  // the configuration is bad; when only the instrumented copy fails, the original runs.
  undo_launch(in, "launch", res);
  return false;
}

bool add_kernel_node_instrumented(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t ndeps,
                                  const LaunchRequest& r) {
  t_pending_failure.clear();
  Instrumented in;
  if (!take_launch(r, true, nullptr, in)) return false;
  if (!r.args && in.params > 0) {
    undo_launch(in, "graph kernel node", CUDA_ERROR_INVALID_VALUE);
    return false;
  }
  Arguments args(r.args, in);
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = in.fn;
  p.gridDimX = r.grid[0], p.gridDimY = r.grid[1], p.gridDimZ = r.grid[2];
  p.blockDimX = r.block[0], p.blockDimY = r.block[1], p.blockDimZ = r.block[2];
  p.sharedMemBytes = unsigned(r.shared_mem);
  p.kernelParams = args.data;  // copied into the node by the driver
  const CUresult res = driver().graph_add_kernel_node(node, graph, deps, ndeps, &p);
  if (res == CUDA_SUCCESS) return true;
  undo_launch(in, "graph kernel node", res);
  return false;
}

bool set_paused(bool paused) { return g_paused.exchange(paused); }

}  // namespace cudatrace::devhook
