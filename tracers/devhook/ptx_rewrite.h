#pragma once
// Instruments PTX the way bpftime does, without its eBPF-to-PTX step: every kernel
// (.entry) gets two extra parameters (the ring's control block and the launch word: the
// launch's sequence number, and for a graph kernel node its counter slot), an entry probe
// at the top of its body and an exit probe in front of every return. A probe calls
// __devhook_emit, which claims a slot in its SM's sub-ring with an atomic (one per warp in
// thread mode) and writes a DeviceRecord into device memory, or counts a drop when the
// sub-ring is full.
//
// The module also gains __devhook_clock, a one-thread kernel that stores %globaltimer, so
// the agent can put GPU timestamps on the host's CLOCK_MONOTONIC.
//
// The rewriter works on PTX as nvcc writes it (one statement per line); what it cannot
// place a probe in, it leaves alone and says why.
#include <string>
#include <vector>

#include "tracers/devhook/device_record.h"

namespace cudatrace::devhook {

inline constexpr const char* kClockKernel = "__devhook_clock";

struct PtxKernel {
  std::string name;         // the .entry's name as in the PTX (mangled for C++ kernels)
  int params = 0;           // the kernel's own parameters; the two added ones follow them
  int exits = 0;            // return points that got an exit probe
  bool instrumented = false;
  std::string why_not;      // when !instrumented
};

struct RewrittenPtx {
  std::string ptx;
  std::vector<PtxKernel> kernels;
};

// Throws std::runtime_error when the text is not PTX it can read at all (no .version), and
// std::invalid_argument when `subrings` is not a power of two up to kMaxSubrings.
RewrittenPtx rewrite_ptx(const std::string& ptx, ProbeMode mode, uint32_t subrings = kDefaultSubrings);

}  // namespace cudatrace::devhook
