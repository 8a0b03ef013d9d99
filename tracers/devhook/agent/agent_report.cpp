// What the agent saw, written at exit (or when the harness asks) as devhook.<pid>.json
// beside its ring's records: per context, fatbin and kernel, every launch, and what it
// could not instrument and why.
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/elf_file.h"
#include "tracers/devhook/agent/agent_state.h"
#include "tracers/devhook/agent/instrumenter.h"
#include "tracers/devhook/agent/ring_drain.h"
#include "tracers/devhook/device_record.h"

namespace cudatrace::devhook {

namespace {

using nlohmann::json;

// The loaded libraries that carry kernels and a cudart of their own (linked in statically:
// its error names and the libcuda.so.1 it opens are in their .rodata, with or without
// symbols, as the uprobe method tells them). Kernels they register and launch never reach
// the agent, so the report names them: what the device layer misses there is not counted.
std::vector<std::string> objects_with_a_cudart_inside() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        // The program itself (no name) is left out: the harness knows how it links cudart
        // and says so when it is static.
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        if (path.empty()) return 0;
        const std::string base = path.substr(path.rfind('/') + 1);
        if (base.rfind("libcudart.so", 0) == 0 || base.rfind("libcuda.so", 0) == 0 ||
            base.rfind("libcudatrace_", 0) == 0 || base.rfind("linux-vdso", 0) == 0)
          return 0;
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return 0;
        // Only one that has kernels (a .nv_fatbin) hides launches from the agent.
        if (cudatrace::has_section(fd, ".nv_fatbin") &&
            cudatrace::section_contains(fd, ".rodata", {"cudaErrorMissingConfiguration", "libcuda.so.1"}))
          static_cast<std::vector<std::string>*>(out)->push_back(path);
        close(fd);
        return 0;
      },
      &paths);
  return paths;
}

}  // namespace

void save_output() {
  Agent& a = agent();
  std::lock_guard lock(a.mu);
  if (a.saved) return;
  a.saved = true;
  const std::string base = a.out_dir + "/devhook." + std::to_string(getpid());
  json report = {{"pid", getpid()},
                 {"mode", a.mode == ProbeMode::kThread ? "thread" : "block"},
                 {"ring_records", a.capacity},
                 {"subrings", a.subrings},
                 {"record_bytes", sizeof(DeviceRecord)}};
  json contexts = json::array();
  for (ContextState& cs : a.contexts) {
    json c = {{"arch", cs.arch}, {"device", int(cs.device)}, {"pci_bus_id", cs.pci_bus_id}};
    collect(a, cs);
    if (!cs.error.empty()) {
      c["error"] = cs.error;
    } else if (cs.drained.taken == 0 && !cs.drained.read && !cs.drained.error.empty()) {
      c["error"] = "reading the ring: " + cs.drained.error;
    } else {
      // Claims and drops as last read: when the ring could not be read to the end, the
      // claims it still held count as unfilled.
      c["records"] = cs.drained.taken;
      if (cs.drained.read) c.update({{"claimed", cs.drained.claimed}, {"dropped", cs.drained.dropped}});
      if (!cs.drained.error.empty()) c["control_error"] = "reading the ring: " + cs.drained.error;
      if (!cs.counters_error.empty()) c["tickets_error"] = cs.counters_error;
    }
    c["clock_offset_ns"] = cs.clock_offset_ns;
    c["clock_uncertainty_ns"] = cs.calibrated ? json(cs.clock_uncertainty_ns) : json(nullptr);
    contexts.push_back(c);
  }
  // The records file holds every context's records, interleaved, in the order drained.
  report["records_unwritten"] = drain_close();
  report["drained_while_running"] = a.drain;
  json fatbins = json::array();
  for (const FatbinState& fb : a.fatbins)
    fatbins.push_back({{"prepared", fb.prepared}, {"source", fb.source}, {"error", fb.error}, {"via", fb.via}});
  json kernels = json::array();
  for (const KernelState& k : a.kernels)
    kernels.push_back({{"name", k.name},
                       {"fatbin", k.fatbin},
                       {"launches", k.launches},
                       {"instrumented", k.instrumented},
                       {"why_not", k.why_not}});
  json launches = json::array();
  // [kernel, context, grid x y z, block x y z, failed, graph node executions or null]
  for (const LaunchRow& l : a.launches)
    launches.push_back({l.kernel, l.context, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                        l.failed, l.ticket < 0 ? json(nullptr) : json(l.executions)});
  report.update({{"contexts", contexts},
                 {"fatbins", fatbins},
                 {"kernels", kernels},
                 {"launches", launches},
                 {"uninstrumented", a.uninstrumented},
                 {"private_cudart", objects_with_a_cudart_inside()},
                 {"launches_failed", a.failed}});
  // Written under a temporary name and renamed, so a reader never sees half a report.
  {
    std::ofstream out(base + ".json.tmp");
    out << report.dump() << "\n";
  }
  std::rename((base + ".json.tmp").c_str(), (base + ".json").c_str());
}

}  // namespace cudatrace::devhook
