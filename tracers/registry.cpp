// The registry: every method the harness knows, what it needs, and how to make one.
// Adding a method = a folder under tracers/ and one entry here.
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "tracers/none/none_tracer.h"
#include "tracers/preload/preload_tracer.h"
#include "tracers/strace/strace_tracer.h"
#include "tracers/cupti/cupti_event.h"
#include "tracers/uprobe/uprobe_event.h"
#include "common/event.h"
#include "tracers/tracer.h"
#include "tracers/ebpf/ring_option.h"
#ifdef CUDATRACE_HAVE_BPF
#include "tracers/uprobe/uprobe_tracer.h"
#endif
#ifdef CUDATRACE_HAVE_CUPTI
#include "tracers/cupti/cupti_injection.h"
#endif
#ifdef CUDATRACE_HAVE_DEVHOOK
#include "tracers/devhook/devhook_tracer.h"
#endif
#ifdef CUDATRACE_HAVE_NSYS
#include "tracers/nsys/nsys_tracer.h"
#endif
#if defined(CUDATRACE_HAVE_CUPTI) && defined(CUDATRACE_HAVE_BPF)
#include "tracers/cupti/cupti_tracer.h"
#endif

namespace cudatrace {

namespace fs = std::filesystem;

const std::vector<Method>& methods() {
  static const std::vector<Method> all = [] {
    std::vector<Method> m;
    m.push_back({.name = "none",
                 .summary = "no tracing: the baseline every overhead is measured against",
                 .built = true,
                 .make = [](const HostFacts&, const MethodOptions&) { return std::make_unique<NoneTracer>(); }});
    m.push_back({.name = "preload",
                 .summary = "LD_PRELOAD shim on the CUDA runtime and driver APIs",
                 .built = true,
                 .issue = 3,
                 .make = [](const HostFacts& host, const MethodOptions&) {
                   return std::make_unique<PreloadTracer>(preload_shim_path(host.prefix));
                 }});
    // The uprobe method and its two cost references for the per-call benchmark: the same
    // probes with entry-only programs, and with programs that return at once.
    const std::map<std::string, std::string> ring_option{{"ring_mb", kRingOptionHelp}};
    const char* const no_bpf = "built without clang/bpftool/libbpf (ci/install-deps.sh installs them; rebuild)";
    const char* const no_cupti =
        "built without CUPTI headers or sys/sdt.h (the CUDA toolkit's CUPTI; apt-get install systemtap-sdt-dev; rebuild)";
    struct UprobeVariant {
      const char* name;
      const char* summary;
      uprobe_mode mode;
    };
    for (const UprobeVariant& v : std::initializer_list<UprobeVariant>{
             {"uprobe", "eBPF uprobes+uretprobes (libbpf) on libcudart or the executable's cudart, and libcuda",
              UPROBE_MODE_FULL},
             {"uprobe-enter", "the uprobe method with entry probes only (no return codes): its cost reference",
              UPROBE_MODE_ENTER},
             {"uprobe-empty", "the uprobe method's probes running empty BPF programs: the cost floor, sees nothing",
              UPROBE_MODE_EMPTY}}) {
      Method m_{.name = v.name, .summary = v.summary, .issue = 4, .needs_root = true, .options = ring_option};
#ifdef CUDATRACE_HAVE_BPF
      m_.built = true;
      const uprobe_mode mode = v.mode;
      const std::string name = v.name;
      m_.make = [mode, name](const HostFacts&, const MethodOptions& o) {
        return std::make_unique<UprobeTracer>(mode, ring_bytes_option(o, name));
      };
#else
      (void)v.mode;
      m_.not_built_reason = no_bpf;
#endif
      m.push_back(std::move(m_));
    }
    // The cupti method and its two cost references: the same library injected with no
    // collector, and a bare CUPTI subscriber whose callback does nothing.
    Method cupti{.name = "cupti",
                 .summary = "CUPTI callbacks and kernel activity re-emitted as USDT probes, collected by eBPF",
                 .issue = 5,
                 .needs_root = true,
                 .needs_gpu = true,
                 .options = {{"ring_mb", kRingOptionHelp},
                             {"per_call", "1: a probe hit per API call instead of per batch of " +
                                              std::to_string(CUPTI_BATCH) + " (default 0)"}}};
    Method cupti_inject{.name = "cupti-inject",
                        .summary = "the cupti method's library injected, no collector attached: its cost reference",
                        .issue = 5,
                        .needs_gpu = true};
    Method cupti_bare{.name = "cupti-bare",
                      .summary = "a bare CUPTI subscriber with an empty callback: the floor of any CUPTI tracer",
                      .issue = 5,
                      .needs_gpu = true};
#ifdef CUDATRACE_HAVE_CUPTI
    cupti_inject.built = cupti_bare.built = true;
    cupti_inject.make = [](const HostFacts& host, const MethodOptions&) {
      return std::make_unique<CuptiInjectionTracer>(cupti_injection_path(host.prefix), false);
    };
    cupti_bare.make = [](const HostFacts& host, const MethodOptions&) {
      return std::make_unique<CuptiInjectionTracer>(cupti_injection_path(host.prefix), true);
    };
#ifdef CUDATRACE_HAVE_BPF
    cupti.built = true;
    cupti.make = [](const HostFacts& host, const MethodOptions& o) {
      const CuptiOptions options = cupti_options(o);
      return std::make_unique<CuptiTracer>(cupti_injection_path(host.prefix), options.ring_bytes, options.per_call);
    };
#else
    cupti.not_built_reason = no_bpf;
#endif
#else
    cupti.not_built_reason = cupti_inject.not_built_reason = cupti_bare.not_built_reason = no_cupti;
#endif
    m.push_back(std::move(cupti));
    m.push_back(std::move(cupti_inject));
    m.push_back(std::move(cupti_bare));
    // The devhook method, and the same with a probe in every thread (its heavy end), so
    // that both modes can be compared with `none` in one run.
    for (const bool per_thread : {false, true}) {
      Method devhook{.name = per_thread ? "devhook-thread" : "devhook",
                     .summary = per_thread ? "the devhook method with mode=thread: a record per thread, not per block"
                                           : "bpftime-style device hooks: probes injected into kernel PTX, a ring in "
                                             "device memory drained while kernels run",
                     .issue = 6,
                     .needs_gpu = true};
#ifdef CUDATRACE_HAVE_DEVHOOK
      devhook.built = true;
      devhook.options = kDevhookOptionHelp;
      if (per_thread) devhook.options.erase("mode");
      devhook.make = [per_thread](const HostFacts& host, const MethodOptions& o) {
        DevhookOptions options = devhook_options(o);
        if (per_thread) {
          if (o.count("mode")) throw std::invalid_argument("devhook-thread is mode=thread; it takes no mode option");
          options.mode = devhook::ProbeMode::kThread;
        }
        return std::make_unique<DevhookTracer>(devhook_agent_path(host.prefix), options);
      };
#else
      devhook.not_built_reason = "built without libzstd.a (apt-get install libzstd-dev; rebuild)";
#endif
      m.push_back(std::move(devhook));
    }
    // Real bpftime beside devhook, when a user has it: it has no package to install from.
    Method bpftime{.name = "bpftime",
                   .summary = "eunomia-bpf's bpftime with a kernel-entry probe, beside devhook (when installed)",
                   .built = true,
                   .issue = 6,
                   .needs_gpu = true};
    bpftime.unavailable_because = [] {
      const char* root = std::getenv("BPFTIME_ROOT");
      const fs::path found = root && *root ? fs::path(root) / "bin" / "bpftime" : find_on_path("bpftime");
      if (found.empty() || access(found.c_str(), X_OK) != 0)
        return std::string("bpftime is not installed (BPFTIME_ROOT unset or without bin/bpftime, none on PATH); it has ") +
               "no Debian package: build it from github.com/eunomia-bpf/bpftime";
      return "bpftime found at " + found.string() + ", but running it is not implemented yet (issue #6): use devhook";
    };
    bpftime.make = [](const HostFacts&, const MethodOptions&) -> std::unique_ptr<Tracer> {
      throw std::runtime_error("the bpftime method is not implemented yet (issue #6)");
    };
    m.push_back(std::move(bpftime));
    m.push_back({.name = "strace",
                 .summary = "the system's strace: syscalls (NVIDIA ioctls decoded) during each call",
                 .built = true,
                 .issue = 7,
                 .tools = {"strace"},
                 .tool_packages = {{"strace", "strace"}},
                 .make = [](const HostFacts&, const MethodOptions&) { return std::make_unique<StraceTracer>(find_on_path("strace")); }});
    // Nsight Systems beside our methods: the tool users already have, found where it is
    // usually installed; its events when its install can export them (nsys_tracer.h).
    Method nsys{.name = "nsys",
                .summary = "NVIDIA Nsight Systems (nsys profile --trace=cuda), when installed: the reference",
                .issue = 19,
                .needs_gpu = true};
#ifdef CUDATRACE_HAVE_NSYS
    nsys.built = true;
    nsys.unavailable_because = [] {
      const NsysLocation where = locate_nsys();
      return where.nsys.empty() ? where.how : std::string();
    };
    nsys.make = [](const HostFacts&, const MethodOptions&) -> std::unique_ptr<Tracer> {
      const NsysLocation where = locate_nsys();
      if (where.nsys.empty()) throw std::runtime_error(where.how);
      return std::make_unique<NsysTracer>(where.nsys);
    };
#else
    nsys.not_built_reason = "built without libsqlite3.a (apt-get install libsqlite3-dev; rebuild)";
#endif
    m.push_back(std::move(nsys));
    // What each method exists to observe; the cost references (none, *-empty, cupti-inject,
    // cupti-bare) observe nothing, so nothing of theirs can be missing.
    const std::map<std::string, std::vector<std::string>> observes{
        {"preload", {layer::kRuntime, layer::kDriver}},
        {"uprobe", {layer::kRuntime, layer::kDriver}},
        {"uprobe-enter", {layer::kRuntime, layer::kDriver}},
        {"cupti", {layer::kRuntime, layer::kDriver, layer::kGpuActivity}},
        {"devhook", {layer::kDevice}},
        {"devhook-thread", {layer::kDevice}},
        {"strace", {layer::kSyscall}},
        {"nsys", {layer::kRuntime, layer::kDriver, layer::kGpuActivity}}};
    for (auto& method : m)
      if (auto it = observes.find(method.name); it != observes.end()) method.layers = it->second;
    return m;
  }();
  return all;
}

const Method* find_method(const std::string& name) {
  for (const auto& m : methods())
    if (m.name == name) return &m;
  return nullptr;
}

std::filesystem::path find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    auto candidate = dir / program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

void preload_first(Launch& launch, const fs::path& library, const std::string& what) {
  if (!fs::exists(library)) throw std::runtime_error(what + " not found at " + library.string());
  const char* existing = std::getenv("LD_PRELOAD");
  launch.env["LD_PRELOAD"] = library.string() + (existing && *existing ? std::string(":") + existing : "");
}

Availability availability(const Method& m, const HostFacts& host) {
  if (!m.built && !m.not_built_reason.empty()) return {false, "not built: " + m.not_built_reason};
  if (!m.built) return {false, "not built yet (issue #" + std::to_string(m.issue) + ")"};
  if (m.needs_root && !host.root)
    return {false, "needs root or CAP_BPF+CAP_PERFMON (run the harness with sudo)"};
  if (m.needs_gpu && !host.gpu) return {false, "needs a GPU: " + host.gpu_reason};
  for (const auto& tool : m.tools) {
    if (find_on_path(tool).empty()) {
      auto pkg = m.tool_packages.find(tool);
      return {false, tool + " not found on PATH" +
                         (pkg != m.tool_packages.end() ? " (apt-get install " + pkg->second + ")" : "")};
    }
  }
  if (m.unavailable_because)
    if (std::string why = m.unavailable_because(); !why.empty()) return {false, why};
  return {true, ""};
}

}  // namespace cudatrace
