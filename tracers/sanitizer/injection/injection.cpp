// The sanitizer method's injection library: the CUDA driver loads it into the program when
// CUDA_INJECTION64_PATH names it and calls InitializeInjection at cuInit. Through the
// Compute Sanitizer API it is told of every context, module and launch:
//   - a context: a slot array of counters in device memory (zeroed before the program can
//     use the context) and the patch image loaded into it;
//   - a module: a call to the block-entry counter inserted into the SASS of every kernel
//     (no PTX needed, so cubin-only libraries and JIT output are patched alike);
//   - a launch, direct or a graph's kernel node: the next slot becomes that launch's data.
// The counters are read back once, when the context goes or the process ends, and every
// launch is written with its blocks counted (sanitizer_format.h).
//
// Rules learned on real programs (JAX, NCCL over two GPUs): no lock of ours is held across
// a call into the sanitizer or the driver (their callbacks come back on other threads
// holding the driver's locks), and no work goes onto the program's streams after set-up,
// so that a capture is never joined and no kernel ever waits for another.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracers/sanitizer/injection/sanitizer_api.h"
#include "tracers/sanitizer/sanitizer_format.h"

extern "C" const unsigned char cudatrace_sanitizer_patch_image[];  // patch_image.S

namespace cudatrace::sanitizer {
namespace {

using json = nlohmann::json;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct ContextState {
  CUcontext handle = nullptr;
  uint32_t index = 0;
  int device = -1;
  std::string pci_bus_id;
  unsigned long long* counters = nullptr;  // device memory: slots x kSlotWords
  uint64_t slots = 0;
  std::atomic<uint64_t> next{0};
  bool patches_loaded = false;
  std::string error;              // set-up that failed: its launches run uncounted
  std::vector<uint64_t> readback;  // the counters, once read
  std::string read_error;
  std::atomic<bool> read{false};
  const char* read_at = "";
};

struct Process {
  pid_t pid = 0;
  SanitizerApi api;
  bool count_threads = false;
  enum class GraphData { kShared, kNode, kFunction } graph_data = GraphData::kShared;
  uint64_t slots_per_context = kDefaultSlots;
  std::string out_dir;
  std::string library;
  std::string library_error;  // the sanitizer library could not be loaded: nothing is counted

  // Guards the tables below; held only to look up or append, never across a sanitizer or
  // driver call.
  std::mutex mu;
  std::vector<std::unique_ptr<ContextState>> contexts;
  std::unordered_map<CUcontext, ContextState*> by_handle;
  std::vector<LaunchRecord> launches;
  std::vector<uint64_t> launch_slot;  // per launch: its counter slot in its context, or UINT64_MAX
  std::vector<std::string> kernels;
  std::unordered_map<std::string, uint32_t> kernel_ids;
  std::unordered_map<const void*, uint32_t> stream_ids;
  std::unordered_set<CUmodule> unpatched_modules;
  std::unordered_map<CUmodule, uint32_t> module_ids;  // modules reported loaded, and those first met in a launch
  std::unordered_set<CUmodule> announced_modules;     // reported loaded (MODULE_LOADED)
  std::vector<std::string> errors;  // the first few, for the report

  std::atomic<int64_t> modules_patched{0}, modules_failed{0}, modules_unpatched_no_context{0};
  std::atomic<int64_t> patch_ns_total{0}, patch_ns_max{0};
  std::atomic<int64_t> graph_node_launches{0}, graph_uploads_skipped{0}, device_graph_execs{0};
  std::atomic<int64_t> launch_data_failed{0};
  std::atomic<uint64_t> graph_launches{0};
  std::atomic<int64_t> patch_lock_waits{0}, patch_lock_timeouts{0};
  std::atomic<bool> written{false};
  // Callbacks received, by domain and id: what the driver told us, for the report.
  std::atomic<int64_t> callbacks[SANITIZER_CB_DOMAIN_SIZE][32] = {};
};

Process* g = nullptr;

// The sanitizer asks its users to serialise adding patches, marking instructions and
// patching a module: XLA's autotuner loads modules from several threads, and without it
// some of them ran unpatched (their launches counted 0 blocks). But a lock held across a
// sanitizer call can deadlock against the driver's own (a first version hung JAX that
// way): so the wait is bounded, and a thread that waited that long patches anyway,
// counted in the report.
std::timed_mutex g_patch_mu;
constexpr auto kPatchLockWait = std::chrono::milliseconds(200);

class PatchLock {
 public:
  PatchLock();
  ~PatchLock() {
    if (held_) g_patch_mu.unlock();
  }

 private:
  bool held_;
};
thread_local bool t_loading_patches = false;  // the module the sanitizer loads for our patches
// The graph launch whose node callbacks this thread is in (they come between its
// GRAPHS_LAUNCH_BEGIN and _END, on the launching thread): its number and shared slot.
thread_local uint64_t t_graph_launch = 0;
thread_local uint64_t t_graph_slot = UINT64_MAX;
thread_local CUcontext t_graph_context = nullptr;

void note_error(const std::string& what) {
  std::lock_guard<std::mutex> lock(g->mu);
  if (g->errors.size() < 16) g->errors.push_back(what);
}

PatchLock::PatchLock() {
  held_ = g_patch_mu.try_lock();
  if (held_) return;
  ++g->patch_lock_waits;
  held_ = g_patch_mu.try_lock_for(kPatchLockWait);
  if (!held_) ++g->patch_lock_timeouts;
}

std::string pci_bus_id(CUdevice device) {
  // Looked up in the driver the process has loaded: the library links no libcuda, and a
  // framework that dlopened it RTLD_LOCAL hides it from RTLD_DEFAULT (the bus id came back
  // empty under PyTorch), so the loaded libcuda.so.1 is asked for by name first.
  using Fn = CUresult (*)(char*, int, CUdevice);
  static Fn fn = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void* f = driver ? dlsym(driver, "cuDeviceGetPCIBusId") : nullptr;
    return reinterpret_cast<Fn>(f ? f : dlsym(RTLD_DEFAULT, "cuDeviceGetPCIBusId"));
  }();
  char id[64] = {0};
  if (!fn || fn(id, sizeof id, device) != CUDA_SUCCESS) return "";
  return id;
}

ContextState* find_context(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g->mu);
  auto it = g->by_handle.find(ctx);
  return it == g->by_handle.end() ? nullptr : it->second;
}

void set_up_context(ContextState& s) {
  const SanitizerApi& api = g->api;
  const size_t bytes = g->slots_per_context * kSlotWords * sizeof(unsigned long long);
  void* memory = nullptr;
  Sanitizer_StreamHandle null_stream = nullptr;
  SanitizerResult r = api.alloc(s.handle, &memory, bytes);
  if (r != SANITIZER_SUCCESS) {
    s.error = "counters: sanitizerAlloc of " + std::to_string(bytes) + " bytes: " + describe(api, r);
  } else if ((r = api.stream_handle(s.handle, nullptr, &null_stream)) != SANITIZER_SUCCESS ||
             (r = api.memset(memory, 0, bytes, null_stream)) != SANITIZER_SUCCESS ||
             (r = api.stream_synchronize(null_stream)) != SANITIZER_SUCCESS) {
    s.error = "counters: zeroing: " + describe(api, r);
    api.free(s.handle, memory);
  } else {
    s.counters = static_cast<unsigned long long*>(memory);
    s.slots = g->slots_per_context;
  }
  {
    PatchLock serialised;
    t_loading_patches = true;
    r = api.add_patches(cudatrace_sanitizer_patch_image, s.handle);
    t_loading_patches = false;
  }
  if (r == SANITIZER_SUCCESS) s.patches_loaded = true;
  else s.error += (s.error.empty() ? "" : "; ") + std::string("patch image: sanitizerAddPatches: ") + describe(api, r);
  if (!s.error.empty()) note_error("context on device " + std::to_string(s.device) + ": " + s.error);
}

// Counters and patches for a new context (`set_up`), when the driver has just made it and
// the program cannot have launched anything there: zeroing on its NULL stream waits for
// nothing and joins no capture. Without `set_up` (a context the library was not told of
// when it was made) only its record: its launches run uncounted, said so.
ContextState* add_context(CUcontext ctx, CUdevice device, bool set_up) {
  if (ContextState* known = find_context(ctx)) return known;
  auto s = std::make_unique<ContextState>();
  s->handle = ctx;
  s->device = int(device);
  s->pci_bus_id = pci_bus_id(device);
  if (set_up) set_up_context(*s);
  std::unique_lock<std::mutex> lock(g->mu);
  if (auto it = g->by_handle.find(ctx); it != g->by_handle.end()) {  // another thread was first
    ContextState* winner = it->second;
    lock.unlock();
    if (s->counters) g->api.free(ctx, s->counters);
    return winner;
  }
  s->index = uint32_t(g->contexts.size());
  ContextState* raw = s.get();
  g->by_handle[ctx] = raw;
  g->contexts.push_back(std::move(s));
  return raw;
}

void on_module_loaded(const Sanitizer_ResourceModuleData& m) {
  if (t_loading_patches) return;  // our own patch image
  ContextState* c = find_context(m.context);
  if (!c || !c->patches_loaded) {
    std::lock_guard<std::mutex> lock(g->mu);
    g->unpatched_modules.insert(m.module);
    ++g->modules_unpatched_no_context;
    return;
  }
  const int64_t t0 = now_ns();
  SanitizerResult r;
  {
    PatchLock serialised;
    r = g->api.patch_instructions(SANITIZER_INSTRUCTION_BLOCK_ENTER, m.module,
                                  g->count_threads ? kBlockEnterThreadsPatch : kBlockEnterPatch);
    if (r == SANITIZER_SUCCESS) r = g->api.patch_module(m.module);
  }
  const int64_t dt = now_ns() - t0;
  g->patch_ns_total += dt;
  for (int64_t seen = g->patch_ns_max.load(); dt > seen && !g->patch_ns_max.compare_exchange_weak(seen, dt);) {
  }
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->announced_modules.insert(m.module);
    g->module_ids.emplace(m.module, uint32_t(g->module_ids.size()));
  }
  if (r == SANITIZER_SUCCESS) {
    ++g->modules_patched;
  } else {
    ++g->modules_failed;
    note_error("module of " + std::to_string(m.cubinSize) + " bytes: " + describe(g->api, r));
    std::lock_guard<std::mutex> lock(g->mu);
    g->unpatched_modules.insert(m.module);
  }
}

uint32_t id_of(std::unordered_map<std::string, uint32_t>& ids, std::vector<std::string>& names, const char* name) {
  const std::string key = name ? name : "(unnamed)";
  auto [it, fresh] = ids.emplace(key, uint32_t(names.size()));
  if (fresh) names.push_back(key);
  return it->second;
}

void on_launch(const Sanitizer_LaunchData& l, bool graph_node) {
  ContextState* c = find_context(l.context);
  if (!c) c = add_context(l.context, l.device, false);
  LaunchRecord rec{};
  rec.host_ns = uint64_t(now_ns());
  rec.context = c->index;
  rec.grid[0] = l.gridDim_x, rec.grid[1] = l.gridDim_y, rec.grid[2] = l.gridDim_z;
  rec.block[0] = l.blockDim_x, rec.block[1] = l.blockDim_y, rec.block[2] = l.blockDim_z;
  rec.flags = graph_node ? kGraphNode : 0;
  // Kernel nodes of one graph launch see one callback data pointer (measured: a slot set per
  // node counted every node's blocks in the last one), so by default they share a slot.
  const bool shared = graph_node && g->graph_data == Process::GraphData::kShared;
  uint64_t slot = UINT64_MAX;
  if (shared && t_graph_slot != UINT64_MAX && t_graph_context == l.context) {
    slot = t_graph_slot;
  } else if (c->counters) {
    const uint64_t n = c->next.fetch_add(1);
    if (n < c->slots) slot = n;
    if (shared) t_graph_slot = slot, t_graph_context = l.context;
  }
  if (graph_node) rec.graph_launch = t_graph_launch;
  SanitizerResult set = SANITIZER_SUCCESS;
  if (slot != UINT64_MAX) {
    void* data = c->counters + slot * kSlotWords;
    set = graph_node && g->graph_data == Process::GraphData::kFunction ? g->api.set_function_data(l.function, data)
                                                                         : g->api.set_launch_data(l.hLaunch, l.function, l.hStream, data);
  }
  if (slot == UINT64_MAX) {
    rec.flags |= kNoSlot;
  } else if (set != SANITIZER_SUCCESS) {
    ++g->launch_data_failed;
    rec.flags |= kNoSlot;
    slot = UINT64_MAX;
  }
  std::lock_guard<std::mutex> lock(g->mu);
  if (g->unpatched_modules.count(l.module)) rec.flags |= kUnpatched;
  if (!g->announced_modules.count(l.module)) rec.flags |= kModuleUnseen;
  rec.module = g->module_ids.emplace(l.module, uint32_t(g->module_ids.size())).first->second;
  rec.kernel = id_of(g->kernel_ids, g->kernels, l.functionName);
  auto [it, fresh] = g->stream_ids.emplace(static_cast<const void*>(l.hStream), uint32_t(g->stream_ids.size()));
  (void)fresh;
  rec.stream = it->second;
  g->launches.push_back(rec);
  g->launch_slot.push_back(slot);
}

// Reads a context's counters into host memory, once. Its NULL stream waits for the
// context's work on blocking streams; a kernel still running on another stream reads as
// counted so far, which the decoder reports as a short launch.
void read_counters(ContextState& c, const char* when) {
  if (c.read.exchange(true)) return;
  c.read_at = when;
  const uint64_t used = std::min(c.next.load(), c.slots);
  if (!c.counters || used == 0) return;
  c.readback.assign(used * kSlotWords, 0);
  Sanitizer_StreamHandle null_stream = nullptr;
  SanitizerResult r = g->api.stream_handle(c.handle, nullptr, &null_stream);
  if (r == SANITIZER_SUCCESS)
    r = g->api.copy_to_host(c.readback.data(), c.counters, c.readback.size() * sizeof(uint64_t), null_stream);
  if (r != SANITIZER_SUCCESS) {
    c.read_error = std::string("reading the counters ") + when + ": " + describe(g->api, r);
    c.readback.clear();
  }
}

void SANITIZERAPI on_callback(void*, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void* data) {
  if (!g || g->pid != getpid()) return;  // a forked child of a CUDA process cannot use its parent's contexts
  if (unsigned(domain) < SANITIZER_CB_DOMAIN_SIZE && cbid < 32) ++g->callbacks[domain][cbid];
  if (domain == SANITIZER_CB_DOMAIN_RESOURCE) {
    if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_CREATION_FINISHED) {
      const auto* c = static_cast<const Sanitizer_ResourceContextData*>(data);
      add_context(c->context, c->device, true);
    } else if (cbid == SANITIZER_CBID_RESOURCE_MODULE_LOADED) {
      on_module_loaded(*static_cast<const Sanitizer_ResourceModuleData*>(data));
    } else if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
      const auto* c = static_cast<const Sanitizer_ResourceContextData*>(data);
      if (ContextState* s = find_context(c->context)) read_counters(*s, "as the context was destroyed");
    }
  } else if (domain == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_BEGIN) {
    on_launch(*static_cast<const Sanitizer_LaunchData*>(data), false);
  } else if (domain == SANITIZER_CB_DOMAIN_GRAPHS) {
    if (cbid == SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) {
      const auto* n = static_cast<const Sanitizer_GraphNodeLaunchData*>(data);
      if (n->nodeType != CU_GRAPH_NODE_TYPE_KERNEL) return;
      if (n->isGraphUpload) {  // the graph is uploaded, not run
        ++g->graph_uploads_skipped;
        return;
      }
      ++g->graph_node_launches;
      on_launch(n->launchData, true);
    } else if (cbid == SANITIZER_CBID_GRAPHS_LAUNCH_BEGIN) {
      t_graph_launch = ++g->graph_launches;
      t_graph_slot = UINT64_MAX;
      t_graph_context = nullptr;
    } else if (cbid == SANITIZER_CBID_GRAPHS_LAUNCH_END) {
      t_graph_slot = UINT64_MAX;
    } else if (cbid == SANITIZER_CBID_GRAPHS_GRAPHEXEC_CREATED) {
      const auto* e = static_cast<const Sanitizer_GraphExecData*>(data);
      if (e->containsDeviceGraphLaunches || e->isDeviceLaunch) ++g->device_graph_execs;
    }
  }
}

void write_report() {
  if (!g || g->pid != getpid() || g->written.exchange(true)) return;
  std::vector<ContextState*> contexts;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    for (auto& c : g->contexts) contexts.push_back(c.get());
  }
  for (ContextState* c : contexts) read_counters(*c, "at exit");

  std::lock_guard<std::mutex> lock(g->mu);
  const std::string base = g->out_dir + "/sanitizer." + std::to_string(g->pid);
  int64_t unread = 0;
  for (size_t i = 0; i < g->launches.size(); ++i) {
    LaunchRecord& r = g->launches[i];
    const uint64_t slot = g->launch_slot[i];
    if (slot == UINT64_MAX) continue;
    const ContextState& c = *g->contexts[r.context];
    if (slot * kSlotWords + 1 < c.readback.size()) {
      r.blocks = c.readback[slot * kSlotWords];
      r.threads = c.readback[slot * kSlotWords + 1];
    } else {
      r.flags |= kUnread;
      ++unread;
    }
  }
  std::string write_error;
  if (FILE* f = std::fopen((base + ".launches").c_str(), "wbx")) {
    if (!g->launches.empty() && std::fwrite(g->launches.data(), sizeof(LaunchRecord), g->launches.size(), f) != g->launches.size())
      write_error = std::string("writing the launches: ") + std::strerror(errno);
    if (std::fclose(f) != 0 && write_error.empty()) write_error = std::string("closing the launches: ") + std::strerror(errno);
  } else {
    write_error = std::string("creating ") + base + ".launches: " + std::strerror(errno);
  }

  json report = {{"v", 1},
                 {"pid", g->pid},
                 {"library", g->library},
                 {"library_error", g->library_error},
                 {"mode", g->count_threads ? "threads" : "blocks"},
                 {"graph_data", g->graph_data == Process::GraphData::kShared ? "shared"
                                : g->graph_data == Process::GraphData::kNode ? "node" : "function"},
                 {"slots_per_context", g->slots_per_context},
                 {"launches", g->launches.size()},
                 {"launches_unread", unread},
                 {"graph_node_launches", g->graph_node_launches.load()},
                 {"graph_uploads_skipped", g->graph_uploads_skipped.load()},
                 {"device_graph_execs", g->device_graph_execs.load()},
                 {"launch_data_failed", g->launch_data_failed.load()},
                 {"modules", {{"patched", g->modules_patched.load()},
                              {"failed", g->modules_failed.load()},
                              {"without_patches", g->modules_unpatched_no_context.load()},
                              {"patch_ns_total", g->patch_ns_total.load()},
                              {"patch_ns_max", g->patch_ns_max.load()},
                              {"lock_waits", g->patch_lock_waits.load()},
                              {"lock_timeouts", g->patch_lock_timeouts.load()}}},
                 {"kernels", g->kernels},
                 {"errors", g->errors},
                 {"write_error", write_error}};
  json contexts_json = json::array();
  for (const auto& c : g->contexts)
    contexts_json.push_back({{"device", c->device},
                             {"pci_bus_id", c->pci_bus_id},
                             {"slots_used", c->next.load()},
                             {"slots", c->slots},
                             {"error", c->error},
                             {"read_at", c->read_at},
                             {"read_error", c->read_error}});
  report["contexts"] = contexts_json;
  json callbacks = json::object();
  for (int d = 0; d < SANITIZER_CB_DOMAIN_SIZE; ++d)
    for (int id = 0; id < 32; ++id)
      if (const int64_t n = g->callbacks[d][id].load())
        callbacks[std::to_string(d) + "." + std::to_string(id)] = n;
  report["callbacks"] = callbacks;
  // Written last, so that a report on disk means the launches file beside it is whole.
  if (FILE* f = std::fopen((base + ".json").c_str(), "wx")) {
    const std::string text = report.dump(1, ' ', false, json::error_handler_t::replace);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  } else {
    std::fprintf(stderr, "cudatrace-sanitizer: cannot create %s.json: %s\n", base.c_str(), std::strerror(errno));
  }
}

void forget_parent_in_child() {
  // The child cannot use the parent's contexts; it writes nothing unless it starts CUDA
  // anew, which it cannot after fork either. Its exit must not write the parent's report.
  if (g) g->written = true;
}

}  // namespace
}  // namespace cudatrace::sanitizer

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace cudatrace::sanitizer;
  if (g) return 1;
  auto* p = new Process;  // never freed: callbacks may come while the process ends
  p->pid = getpid();
  const char* dir = std::getenv(kOutDirEnv);
  p->out_dir = dir && *dir ? dir : ".";
  const char* lib = std::getenv(kLibraryEnv);
  p->library = lib ? lib : "";
  p->count_threads = [] {
    const char* v = std::getenv(kThreadsEnv);
    return v && std::strcmp(v, "on") == 0;
  }();
  if (const char* m = std::getenv(kGraphDataEnv); m && *m) {
    if (std::strcmp(m, "node") == 0) p->graph_data = Process::GraphData::kNode;
    if (std::strcmp(m, "function") == 0) p->graph_data = Process::GraphData::kFunction;
  }
  if (const char* s = std::getenv(kSlotsEnv); s && *s) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(s, &end, 10);
    if (*end == 0 && n > 0 && n <= kMaxSlots) p->slots_per_context = n;
  }
  // The driver loads this library at cuInit: a marker now says this process initialised
  // CUDA, so that a process without a report can be told from one that owes none (it never
  // used CUDA: a launcher, a rank's parent).
  if (FILE* f = std::fopen((p->out_dir + "/sanitizer." + std::to_string(p->pid) + ".started").c_str(), "wx"))
    std::fclose(f);
  std::string why;
  if (!load_sanitizer_api(p->library.c_str(), p->api, why)) {
    std::fprintf(stderr, "cudatrace-sanitizer: %s; the device layer is not observed\n", why.c_str());
    // A report that says so, so that the harness names the reason.
    p->library_error = why;
    g = p;
    std::atexit(write_report);
    return 1;
  }
  Sanitizer_SubscriberHandle subscriber = nullptr;
  SanitizerResult r = p->api.subscribe(&subscriber, on_callback, nullptr);
  const SanitizerApi& api = p->api;
  auto enable = [&](Sanitizer_CallbackDomain d, Sanitizer_CallbackId id) {
    if (r == SANITIZER_SUCCESS) r = api.enable_callback(1, subscriber, d, id);
  };
  enable(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_CREATION_FINISHED);
  enable(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  enable(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_LOADED);
  enable(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  enable(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_FUNCTIONS_LAZY_LOADED);
  enable(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_FUNCTIONS_LAZY_PATCHED);
  enable(SANITIZER_CB_DOMAIN_LAUNCH, SANITIZER_CBID_LAUNCH_BEGIN);
  enable(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN);
  enable(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_GRAPHEXEC_CREATED);
  enable(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_LAUNCH_BEGIN);
  enable(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_LAUNCH_END);
  if (r != SANITIZER_SUCCESS) p->errors.push_back("subscribing to the sanitizer's callbacks: " + describe(api, r));
  g = p;
  pthread_atfork(nullptr, nullptr, forget_parent_in_child);
  // Registered at cuInit, after cudart's own exit handler: it runs first, while the
  // contexts still exist.
  std::atexit(write_report);
  return 1;
}
