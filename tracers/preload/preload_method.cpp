#include "tracers/preload/preload_method.h"

#include <stdexcept>

#include "common/event.h"
#include "tracers/preload/preload_tracer.h"

namespace cudatrace {

namespace {
constexpr const char* kPreloadDevices =
    "the device of the context current on the calling thread when the call returned (cuCtxGetCurrent and "
    "cuCtxGetDevice, asked once per thread and again after a call that may change its context), its bus id asked "
    "once per device and process; calls forwarded on the generic fast path (functions hooks.def does not list) "
    "name none; --set preload.devices=off names none";
}  // namespace

std::vector<Method> preload_methods() {
  return {{.name = "preload",
           .summary = "LD_PRELOAD shim on the CUDA runtime and driver APIs",
           .kind = MethodKind::kMethod,
           .built = true,
           .issue = 3,
           .options = {{"devices", "on (default): each record names the device of the context current when the "
                                   "call returned (asked again only after a call that may change it); off: records name no device"}},
           .layers = {layer::kRuntime, layer::kDriver},
           .limits = {{layer::kRuntime,
                       "calls into a cudart linked statically (into the executable or a library) never reach the "
                       "libcudart.so exports the shim replaces"},
                      {layer::kDriver,
                       "driver calls through entry points resolved before the shim was loaded, or kept in a table of "
                       "the caller's own (neither the dynamic linker nor cuGetProcAddress), bypass the shim"}},
           .devices = {{layer::kRuntime, {true, kPreloadDevices}}, {layer::kDriver, {true, kPreloadDevices}}},
           .cost_split = CostSplit{
               .paused = {.name = "interposition",
                          .what = "the shim's export forwarding the call, paused (LD_PRELOAD's floor)"},
               .live = {.name = "recording", .what = "two TSC reads and the record's append"},
               .floor_what = "the interposition: the shim's exports, nothing recorded",
               .per_record_bar_ns = 50},
           .make = [](const HostFacts& host, const MethodOptions& o) {
             bool devices = true;
             if (auto it = o.find("devices"); it != o.end()) {
               if (it->second != "on" && it->second != "off")
                 throw std::invalid_argument("preload.devices takes on or off, not '" + it->second + "'");
               devices = it->second == "on";
             }
             return std::make_unique<PreloadTracer>(preload_shim_path(host.prefix), devices, host.max_trace_bytes);
           }}};
}

}  // namespace cudatrace
