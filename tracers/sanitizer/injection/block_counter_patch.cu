// The device half of the sanitizer method: functions the Compute Sanitizer inserts a call
// to at every block's entry (SANITIZER_INSTRUCTION_BLOCK_ENTER) of every patched kernel.
// Built with --compile-as-tools-patch into a fatbin that the library carries inside itself.
//
// `userdata` is the launch's counter slot in device memory, set per launch by the library
// (sanitizerSetLaunchCallbackData). A launch the library never saw (a kernel started from
// the device) gets none: it returns at once rather than write through a pointer it does
// not own.
#include <sanitizer_patching.h>

#include <cstdint>

namespace {

__device__ __forceinline__ bool first_thread_of_block() {
  return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}

}  // namespace

// One atomic per block, from its first thread: the count is exact whatever the block does
// afterwards (exits early, waits at a barrier), since every thread runs the entry.
extern "C" __device__ __noinline__ SanitizerPatchResult cudatrace_count_block(void* userdata, uint64_t pc) {
  (void)pc;
  if (userdata && first_thread_of_block()) atomicAdd(static_cast<unsigned long long*>(userdata), 1ull);
  return SANITIZER_PATCH_SUCCESS;
}

// The same, and the threads that entered: one atomic per warp, by its first active lane.
extern "C" __device__ __noinline__ SanitizerPatchResult cudatrace_count_block_and_threads(void* userdata, uint64_t pc) {
  (void)pc;
  if (!userdata) return SANITIZER_PATCH_SUCCESS;
  unsigned long long* slot = static_cast<unsigned long long*>(userdata);
  if (first_thread_of_block()) atomicAdd(slot, 1ull);
  const unsigned active = __activemask();
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane == unsigned(__ffs(active) - 1)) atomicAdd(slot + 1, static_cast<unsigned long long>(__popc(active)));
  return SANITIZER_PATCH_SUCCESS;
}
