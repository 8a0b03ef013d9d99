// The doors to CUDA that do not go through the dynamic linker's binding of the shim's
// exports: dlsym (on a handle of libcuda or of a cudart, RTLD_LOCAL included) and
// cuGetProcAddress (how cudart, static or shared, gets every driver entry point). The
// real lookup runs, and the caller gets the shim's forwarder for what it found:
//   a libcuda function   the shim's export at the same real address (a hook with its
//                        arguments, or a generic stub): matching by address pairs
//                        cuGetProcAddress("cuMemAlloc") with cuMemAlloc_v2's hook, and
//                        every variant (_v2, _ptsz, _ptds) with its own; an address no
//                        export has (an entry point only cuGetProcAddress knows) gets a
//                        run-time generic slot under the name asked for
//   a cudart function    of the cudart behind the shim: the shim's export of that name;
//                        of another copy (a private libcudart.so dlopen'ed RTLD_LOCAL):
//                        a run-time generic slot
//   anything else        (CUPTI, cuBLAS, the program's own) untouched.
// Known limit: a dlsym(RTLD_NEXT) made by the program resolves relative to the shim.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tracers/preload/shim/generic_hooks.h"
#include "tracers/preload/shim/real_symbols.h"
#include "tracers/preload/shim/recorder.h"

#undef cuGetProcAddress

using namespace cudatrace::preload;

namespace {

// For the run's notes: every entry point handed out, and how (a coverage check), and
// which objects asked cuGetProcAddress themselves (a cudart linked into them).
enum class Coverage { None = 0, Decoded = 1, Generic = 2 };
std::mutex g_mu;
std::unordered_map<std::string, Coverage>* g_resolved = new std::unordered_map<std::string, Coverage>;
std::unordered_map<const void*, std::string>* g_caller_object = new std::unordered_map<const void*, std::string>;
std::unordered_map<std::string, int64_t>* g_caller_lookups = new std::unordered_map<std::string, int64_t>;

const void* self_base() {
  static const void* base = [] {
    Dl_info i{};
    return dladdr(reinterpret_cast<void*>(&self_base), &i) ? i.dli_fbase : nullptr;
  }();
  return base;
}

// The shim's own export of `name` (a hook or a generic stub), or null.
void* shim_export(const char* name) {
  static void* self = [] {
    Dl_info i{};
    return dladdr(reinterpret_cast<void*>(&self_base), &i) && i.dli_fname ? dlopen(i.dli_fname, RTLD_LAZY | RTLD_NOLOAD)
                                                                         : nullptr;
  }();
  return self ? real_dlsym()(self, name) : nullptr;
}

struct Wrapper {
  void* fn;
  Coverage how;
};

// libcuda's address of every driver function the shim exports -> the shim's export.
const std::unordered_map<void*, Wrapper>& driver_wrappers() {
  static const auto table = [] {
    std::unordered_map<void*, Wrapper> t;
    int n = 0;
    const ExportInfo* e = export_table(&n);
    for (int i = 0; i < n; ++i) {
      if (e[i].runtime || (e[i].kind != ExportKind::Listed && e[i].kind != ExportKind::Generic)) continue;
      void* real = driver_symbol(e[i].name);
      void* ours = real ? shim_export(e[i].name) : nullptr;
      if (ours) t.emplace(real, Wrapper{ours, e[i].kind == ExportKind::Listed ? Coverage::Decoded : Coverage::Generic});
    }
    return t;
  }();
  return table;
}

void note_resolved(const char* name, Coverage how) {
  std::lock_guard lk(g_mu);
  (*g_resolved)[name] = how;
}

// `real` came from cuGetProcAddress (driver) or from dlsym (whatever it is).
void* swap_for_wrapper(const char* name, void* real, bool from_driver) {
  if (!recording() || !name || !real) return real;
  bool runtime = false;
  if (!from_driver) {
    Dl_info info{};
    if (!dladdr(real, &info) || !info.dli_fname || info.dli_fbase == self_base()) return real;
    const char* file = file_name_of(info.dli_fname);
    if (std::strncmp(file, "libcudart.so", 12) == 0)
      runtime = true;
    else if (std::strncmp(file, "libcuda.so", 10) != 0)
      return real;
  }
  Wrapper w{nullptr, Coverage::None};
  if (!runtime) {
    const auto& table = driver_wrappers();
    if (auto it = table.find(real); it != table.end()) w = it->second;
  } else if (real == real_dlsym()(RTLD_NEXT, name)) {
    const ExportInfo* e = find_export(name);
    if (e && (e->kind == ExportKind::Listed || e->kind == ExportKind::Generic))
      w = {shim_export(name), e->kind == ExportKind::Listed ? Coverage::Decoded : Coverage::Generic};
  }
  if (!w.fn) {
    w.fn = generic_wrapper_for(name, runtime, real);
    w.how = w.fn ? Coverage::Generic : Coverage::None;
  }
  note_resolved(name, w.how);
  return w.fn ? w.fn : real;
}

// The object that called cuGetProcAddress: cudart's own library, or one that carries a
// cudart (or resolves driver entry points itself).
void note_caller(const void* return_address) {
  if (!recording()) return;
  std::lock_guard lk(g_mu);
  auto it = g_caller_object->find(return_address);
  if (it == g_caller_object->end()) {
    Dl_info info{};
    std::string path = dladdr(return_address, &info) && info.dli_fname ? info.dli_fname : "?";
    it = g_caller_object->emplace(return_address, path).first;
  }
  ++(*g_caller_lookups)[it->second];
}

// Next to the records: the entry points handed out, hooked (1), generic (2) or not (0),
// and who asked cuGetProcAddress.
__attribute__((destructor)) void write_lookup_notes() {
  const char* dir = std::getenv(kDirEnv);
  if (!dir || !recording()) return;
  std::lock_guard lk(g_mu);
  const std::string prefix = std::string(dir) + "/preload." + std::to_string(getpid());
  if (!g_resolved->empty())
    if (FILE* f = std::fopen((prefix + ".resolved").c_str(), "w")) {
      for (const auto& [name, how] : *g_resolved) std::fprintf(f, "%d %s\n", int(how), name.c_str());
      std::fclose(f);
    }
  if (!g_caller_lookups->empty())
    if (FILE* f = std::fopen((prefix + ".callers").c_str(), "w")) {
      for (const auto& [path, n] : *g_caller_lookups) std::fprintf(f, "%lld %s\n", static_cast<long long>(n), path.c_str());
      std::fclose(f);
    }
}

}  // namespace

// cuGetProcAddress is a driver call like any other (recorded), and the door cudart uses
// for all the others (what it hands back is swapped).
#define GET_PROC_ADDRESS_HOOK(NAME, PARAMS, ARGS)                                               \
  static std::atomic<void*> real_##NAME{nullptr};                                              \
  extern "C" CUresult CUDAAPI NAME PARAMS {                                                    \
    note_caller(__builtin_return_address(0));                                                  \
    const auto real = real_driver<CUresult(*) PARAMS>(real_##NAME, #NAME);                     \
    const bool live = hooks_live();                                                            \
    const int64_t t0 = live ? now_ns() : 0;                                                    \
    const CUresult r = real ARGS;                                                              \
    if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = swap_for_wrapper(symbol, *pfn, true);         \
    if (live) emit(k_##NAME, int32_t(r), t0, now_ns(), uint64_t(version), uint64_t(flags));    \
    return r;                                                                                  \
  }

GET_PROC_ADDRESS_HOOK(cuGetProcAddress, (const char* symbol, void** pfn, int version, cuuint64_t flags),
                      (symbol, pfn, version, flags))
GET_PROC_ADDRESS_HOOK(cuGetProcAddress_v2,
                      (const char* symbol, void** pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult* status),
                      (symbol, pfn, version, flags, status))

// A lookup of a CUDA function by name gets the shim's forwarder.
extern "C" void* dlsym(void* handle, const char* name) {
  void* p = real_dlsym()(handle, name);
  if (p && name && name[0] == 'c' && name[1] == 'u') p = swap_for_wrapper(name, p, false);
  return p;
}
