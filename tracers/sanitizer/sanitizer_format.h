#pragma once
// What the sanitizer injection library writes and the harness reads back, shared by both
// halves of the method. Nothing here needs the Compute Sanitizer headers: the decoder and
// its tests build where the toolkit has no compute-sanitizer folder (CI).
//
// Per process that initialised the CUDA driver, in the folder CUDATRACE_SANITIZER_DIR names:
//   sanitizer.<pid>.json      what the library did: contexts, kernel names, modules patched
//                             (and how long patching took), launches and what it could not count
//   sanitizer.<pid>.launches  one LaunchRecord per kernel launch it saw, in launch order
#include <cstdint>

namespace cudatrace::sanitizer {

// One launch: what the launch callback said, and the blocks its block-entry patch counted
// on the GPU (read back when the context went or the process ended).
struct LaunchRecord {
  uint64_t host_ns;          // CLOCK_MONOTONIC at the launch callback (the launch's host time)
  uint64_t blocks;           // blocks counted as they entered (thread 0 of each block adds 1)
  uint64_t threads;          // threads counted as they entered (option threads=on), else 0
  uint32_t kernel;           // index into the report's "kernels"
  uint32_t context;          // index into the report's "contexts"
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t stream;           // the process's n-th stream seen in a launch (0 = the first)
  uint32_t flags;            // LaunchFlag bits
  uint64_t graph_launch;     // kernel nodes of one graph launch share this number (0: not a graph node)
  uint32_t module;           // the process's n-th module seen (loaded, or first met in a launch)
  uint32_t reserved;
};
static_assert(sizeof(LaunchRecord) == 80);

enum LaunchFlag : uint32_t {
  kGraphNode = 1u << 0,   // a kernel node of a CUDA graph, replayed: one record per execution
  kNoSlot = 1u << 1,      // the context's counters were all taken: this launch ran uncounted
  kUnread = 1u << 2,      // its context's counters could not be read back
  kUnpatched = 1u << 3,   // its module could not be patched: nothing in it counts
  kModuleUnseen = 1u << 4,  // its module was never reported loaded to the library, so never patched
};

// Counter words per launch slot in device memory: blocks, then threads.
inline constexpr int kSlotWords = 2;
inline constexpr uint64_t kDefaultSlots = uint64_t(1) << 20;  // per context: 16 MiB of device memory
inline constexpr uint64_t kMaxSlots = uint64_t(1) << 26;      // 1 GiB of device memory per context

// Environment the tracer hands the library.
inline constexpr const char* kOutDirEnv = "CUDATRACE_SANITIZER_DIR";
inline constexpr const char* kLibraryEnv = "CUDATRACE_SANITIZER_LIB";      // libsanitizer-public.so
inline constexpr const char* kThreadsEnv = "CUDATRACE_SANITIZER_THREADS";  // "on": count threads too
inline constexpr const char* kSlotsEnv = "CUDATRACE_SANITIZER_SLOTS";      // launch slots per context
// How a graph's kernel nodes get their counter: "shared" (default: one slot per graph
// launch, its nodes' blocks counted together), "node" (a slot per node launch),
// "function" (per node through the kernel's callback data).
inline constexpr const char* kGraphDataEnv = "CUDATRACE_SANITIZER_GRAPH_DATA";

// The patch functions inside the library's patch image (block_counter_patch.cu).
inline constexpr const char* kBlockEnterPatch = "cudatrace_count_block";
inline constexpr const char* kBlockEnterThreadsPatch = "cudatrace_count_block_and_threads";

}  // namespace cudatrace::sanitizer
