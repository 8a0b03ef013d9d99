#include "tracers/uprobe/uprobe_method.h"

#include "common/event.h"
#include "tracers/ebpf/ring_option.h"
#include "tracers/uprobe/uprobe_event.h"
#ifdef CUDATRACE_HAVE_BPF
#include "tracers/uprobe/uprobe_tracer.h"
#endif

namespace cudatrace {

std::vector<Method> uprobe_methods() {
  // The uprobe method and its two cost references for the per-call benchmark: the same
  // probes with entry-only programs, and with programs that return at once.
  struct Variant {
    const char* name;
    const char* summary;
    MethodKind kind;
    uprobe_mode mode;
    std::vector<std::string> layers;
  };
  const std::vector<Variant> variants{
      {"uprobe", "eBPF uprobes+uretprobes (libbpf) on libcudart or the executable's cudart, and libcuda",
       MethodKind::kMethod, UPROBE_MODE_FULL, {layer::kRuntime, layer::kDriver}},
      {"uprobe-enter", "the uprobe method with entry probes only (no return codes): its cost reference",
       MethodKind::kCostReference, UPROBE_MODE_ENTER, {layer::kRuntime, layer::kDriver}},
      {"uprobe-empty", "the uprobe method's probes running empty BPF programs: the cost floor, sees nothing",
       MethodKind::kCostReference, UPROBE_MODE_EMPTY, {}}};
  std::vector<Method> out;
  for (const Variant& v : variants) {
    Method m{.name = v.name,
             .summary = v.summary,
             .kind = v.kind,
             .issue = 4,
             .needs_root = true,
             .options = {{"ring_mb", kRingOptionHelp}},
             .layers = v.layers};
    for (const auto& l : v.layers)
      m.limits[l] = l == layer::kRuntime
                        ? "a cudart without symbols (stripped, linked into a library) has no function to put a probe on"
                        : "libcuda functions outside the probe plan (probe_specs.def), and calls in a library loaded "
                          "before its probes were attached, are not seen";
    for (const auto& l : v.layers)
      m.devices[l] = {false,
                      "a uprobe reads a call's arguments and return value, not the context current on the calling "
                      "thread: a call's device is the driver's thread-local state, which the probes do not read"};
    if (v.kind == MethodKind::kMethod)
      m.cost_split = CostSplit{
          .paused = {.name = "paused", .what = "its probes detached (nothing traps)"},
          .live = {.name = "return probes", .what = "the return trap, and pairing entry with exit, the record "
                                                    "written at exit instead of at entry"},
          .nested = {{.reference = "uprobe-enter", .name = "entry probes",
                      .what = "a trap at each call's entry and its record"}},
          .floor_reference = "uprobe-empty",
          .floor_what = "both probes' traps running empty BPF programs"};
#ifdef CUDATRACE_HAVE_BPF
    m.built = true;
    m.make = [mode = v.mode, name = std::string(v.name)](const HostFacts& host, const MethodOptions& o) {
      return std::make_unique<UprobeTracer>(mode, ring_bytes_option(o, name), host.max_trace_bytes);
    };
#else
    m.not_built_reason = "built without clang/bpftool/libbpf (ci/install-deps.sh installs them; rebuild)";
#endif
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace cudatrace
