#pragma once
// The agent's state, shared by its files: instrumenter.cpp decides each launch,
// module_images.cpp reads and rewrites a module's code, agent_report.cpp writes what the
// agent saw at exit. What is here is read and changed under Agent::mu.
#include <cuda.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracers/devhook/agent/ring_drain.h"
#include "tracers/devhook/device_record.h"
#include "tracers/devhook/ptx_rewrite.h"

namespace cudatrace::devhook {

// A module's code: a fatbin cudart registered (read at its first launch), or an image
// loaded through the driver API (read when loaded).
struct FatbinState {
  const void* image = nullptr;
  std::string via = "__cudaRegisterFatBinary";
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
  CUdeviceptr control = 0;                 // the sub-rings' control blocks
  DrainedRing* ring = nullptr;             // drained by ring_drain.cpp's thread
  std::map<int, CUmodule> modules;         // fatbin -> its instrumented module
  std::map<int, CUfunction> functions;     // kernel -> instrumented function
  bool calibrated = false;
  int64_t clock_offset_ns = 0;             // globaltimer - CLOCK_MONOTONIC
  int64_t clock_uncertainty_ns = -1;
  CUdeviceptr tickets = 0;                 // graph nodes' execution counters
  uint64_t tickets_used = 0;
  CUstream stream = nullptr;               // the agent's own, non-blocking: set-up and the clock kernel
  CUdevice device = -1;
  std::string pci_bus_id;                  // the device's, for the device layer's records
  bool primary = false;                    // the device's primary context (cudart's)
  // Read once, before the context goes or at exit (collect()).
  bool collected = false;
  DrainTotals drained;                     // records taken, claims and drops; error: the ring's
  std::string counters_error;              // the graph nodes' counters could not be read
};

struct LaunchRow {
  int kernel;
  unsigned grid[3], block[3];
  int context;
  std::string failed;     // the instrumented launch failed; the original ran instead
  int64_t ticket = -1;    // a graph kernel node: its counter slot in the context
  uint64_t executions = 0;  // read from the counter at exit
};

struct Agent {
  std::mutex mu;
  ProbeMode mode = ProbeMode::kBlock;
  uint64_t capacity = kDefaultRingRecords;  // a power of two
  uint32_t subrings = kDefaultSubrings;      // a power of two, at most capacity
  bool drain = true;                         // a thread takes records while kernels run
  std::string out_dir;
  std::vector<FatbinState> fatbins;
  std::unordered_map<const void*, int> fatbin_of_handle;
  std::vector<KernelState> kernels;
  std::unordered_map<const void*, int> kernel_of;  // host stub, cudaKernel_t, CUfunction, CUkernel -> kernel
  std::unordered_map<const void*, int> fatbin_of_module;  // CUmodule or CUlibrary -> its image
  std::deque<ContextState> contexts;
  std::vector<LaunchRow> launches;
  std::map<std::string, uint64_t> uninstrumented;  // reason -> launches
  uint64_t failed = 0;  // launches whose instrumented copy and original both failed: nothing ran
  bool exit_hook = false, saved = false;
};

// The process's agent, set up from the environment at its first use; never destroyed.
Agent& agent();

// "<what> failed: CUDA_ERROR_..."
std::string with_error(const char* what, CUresult r);

// Reads a context's ring, control block and graph counters into cs, once. Under the lock.
void collect(Agent& a, ContextState& cs);

// Parses a fatbin and rewrites the PTX it holds for `arch`, once.
void prepare_fatbin(FatbinState& fb, const void* image, int arch, ProbeMode mode);

// What a driver-API image is, read and rewritten now: the program may free it once loaded.
// A fatbin is read for the current context's GPU.
FatbinState prepare_image(const void* image, const char* via, ProbeMode mode);

}  // namespace cudatrace::devhook
