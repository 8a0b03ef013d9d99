#include "tracers/cupti/cupti_method.h"

#include "common/event.h"
#include "tracers/cupti/cupti_event.h"
#include "tracers/ebpf/ring_option.h"
#ifdef CUDATRACE_HAVE_CUPTI
#include "tracers/cupti/cupti_injection.h"
#endif
#if defined(CUDATRACE_HAVE_CUPTI) && defined(CUDATRACE_HAVE_BPF)
#include "tracers/cupti/cupti_tracer.h"
#endif

namespace cudatrace {

std::vector<Method> cupti_methods() {
  // The cupti method and its two cost references: the same library injected with no
  // collector, and a bare CUPTI subscriber whose callback does nothing.
  Method cupti{.name = "cupti",
               .summary = "CUPTI callbacks and kernel activity re-emitted as USDT probes, collected by eBPF",
               .kind = MethodKind::kMethod,
               .issue = 5,
               .needs_root = true,
               .needs_gpu = true,
               .options = {{"ring_mb", kRingOptionHelp},
                           {"per_call", "1: a probe hit per API call instead of per batch of " +
                                            std::to_string(CUPTI_BATCH) + " (default 0)"}},
               .layers = {layer::kRuntime, layer::kDriver, layer::kGpuActivity},
               .limits = {{layer::kRuntime, "calls over before CUPTI starts (at cuInit) are not reported to it"},
                          {layer::kDriver, "calls over before CUPTI starts (at cuInit) are not reported to it"},
                          {layer::kGpuActivity,
                           "kernel records CUPTI had not flushed when the process ended are lost with it"}}};
  const std::string bus_id = "; the bus id asked of the driver (cuDeviceGetPCIBusId) the first time a process uses "
                             "the device, sent with the status probe";
  cupti.devices = {{layer::kRuntime, {true, "the context CUPTI hands the callback at the call's exit "
                                            "(cuptiGetDeviceId)" + bus_id}},
                   {layer::kDriver, {true, "the context CUPTI hands the callback at the call's exit "
                                           "(cuptiGetDeviceId)" + bus_id}},
                   {layer::kGpuActivity, {true, "the kernel record's deviceId" + bus_id}}};
  // With no collector the library's callback returns at once: cupti-inject is the
  // subscription with kernel activity on, and what cupti adds over it is the recording.
  cupti.cost_split = CostSplit{
      .paused = {.name = "paused",
                 .what = "CUPTI loaded and subscribed, callback domains and kernel activity off; on launches, "
                         "what its kernel activity still costs the batches paused right after live ones"},
      .live = {.name = "recording", .what = "the library's stamps and records, and the batches' probe hits the "
                                            "collector takes"},
      .nested = {{.reference = "cupti-bare", .name = "CUPTI's dispatch",
                  .what = "an empty callback on both domains, which any CUPTI tool pays"},
                 {.reference = "cupti-inject", .name = "kernel activity",
                  .what = "the subscription with CUPTI's kernel records on (no collector: the callback returns "
                          "at once)"}},
      .floor_reference = "cupti-bare",
      .floor_what = "the empty CUPTI subscriber's whole difference to none"};
  // #52's bars. Nsight Systems by default skips some CUDA APIs (cudaGetDevice among them)
  // that cupti records: nsys-all (every API) is the like for like where it ran. Off launches
  // and copies CUPTI's own dispatch is the floor, and records are all cupti adds.
  cupti.cost_bars = {
      {.against = {"nsys-all", "nsys"},
       .why = "Nsight Systems recording as much: a tracer recording what it records should cost no more"},
      {.against = {"cupti-bare"},
       .plus_ns = 100,
       .not_on_kinds = {"launch", "copy"},
       .why = "the empty CUPTI subscriber + 100 ns: its dispatch is the floor, and records are all cupti adds"}};
  Method inject{.name = "cupti-inject",
                .summary = "the cupti method's library injected, no collector attached: its cost reference",
                .kind = MethodKind::kCostReference,
                .issue = 5,
                .needs_gpu = true};
  Method bare{.name = "cupti-bare",
              .summary = "a bare CUPTI subscriber with an empty callback: the floor of any CUPTI tracer",
              .kind = MethodKind::kCostReference,
              .issue = 5,
              .needs_gpu = true};
  [[maybe_unused]] const char* const no_bpf =
      "built without clang/bpftool/libbpf (ci/install-deps.sh installs them; rebuild)";
#ifdef CUDATRACE_HAVE_CUPTI
  inject.built = bare.built = true;
  inject.make = [](const HostFacts& host, const MethodOptions&) {
    return std::make_unique<CuptiInjectionTracer>(cupti_injection_path(host.prefix), false);
  };
  bare.make = [](const HostFacts& host, const MethodOptions&) {
    return std::make_unique<CuptiInjectionTracer>(cupti_injection_path(host.prefix), true);
  };
#ifdef CUDATRACE_HAVE_BPF
  cupti.built = true;
  cupti.make = [](const HostFacts& host, const MethodOptions& o) {
    const CuptiOptions options = cupti_options(o);
    return std::make_unique<CuptiTracer>(cupti_injection_path(host.prefix), options.ring_bytes, options.per_call,
                                         host.max_trace_bytes);
  };
#else
  cupti.not_built_reason = no_bpf;
#endif
#else
  cupti.not_built_reason = inject.not_built_reason = bare.not_built_reason =
      "built without CUPTI headers or sys/sdt.h (the CUDA toolkit's CUPTI; apt-get install systemtap-sdt-dev; rebuild)";
#endif
  return {std::move(cupti), std::move(inject), std::move(bare)};
}

}  // namespace cudatrace
