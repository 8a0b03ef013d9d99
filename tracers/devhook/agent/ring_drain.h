#pragma once
// The agent's side of the ring protocol (device_record.h): a host thread that copies each
// context's records out of device memory while its kernels run, takes them in claim order
// per sub-ring, and appends them to the process's records file (devhook.<pid>.records,
// every context's records interleaved: a record names its launch, and the launch its
// context).
#include <cuda.h>

#include <cstdint>
#include <string>

#include "tracers/devhook/device_record.h"

namespace cudatrace::devhook {

struct DrainedRing;

// A context's ring as set_up made it: `subrings` control blocks at `control` and as many
// record arrays of `sub_capacity` slots (a power of two) each, one after the other from
// `records`, zeroed, all in device memory; `staging`, pinned host memory of the same size
// the drain copies them into; `controls` and `limits`, pinned room for a copy of the
// control blocks and for the limits the drain raises; `stream`, non-blocking, the drain's
// own in `ctx`.
struct RingMemory {
  CUcontext ctx;
  CUstream stream;
  uint32_t subrings;
  uint64_t sub_capacity;
  CUdeviceptr control, records;
  DeviceRecord* staging;
  RingControl* controls;
  uint64_t* limits;
};

// What a ring gave, when it was finished.
struct DrainTotals {
  uint64_t taken = 0;    // records taken from it, in the records file
  uint64_t claimed = 0;  // claims and drops, as last read from its control blocks
  uint64_t dropped = 0;
  bool read = false;     // claimed and dropped were read at least once
  std::string error;     // the first CUDA call that failed while draining it
};

// Opens the records file (created, never an existing file or a link) the first time in
// this process, and starts the thread unless `background` is false. False with the
// reason in *error when the file cannot be created.
bool drain_open(const std::string& path, bool background, std::string* error);
// Drained from now on.
DrainedRing* drain_add(const RingMemory& ring);
// After the context's work has finished (or the context is gone: the ring is the drain's):
// takes what is left, out of claim order too, past a slot a dropped record left empty, and
// stops draining the ring. Works in the drain's context; the caller's is current again
// after.
DrainTotals drain_finish(DrainedRing* ring);
// Stops the thread and writes out what is buffered. Returns the records that could not
// be written (the file system refused them): they are lost, and counted.
uint64_t drain_close();

}  // namespace cudatrace::devhook
