#pragma once
// The agent's side of the ring protocol (device_record.h): a host thread that takes each
// context's records while its kernels run, in claim order, and appends them to the
// process's records file (devhook.<pid>.records, every context's records interleaved:
// a record names its launch, and the launch its context).
#include <cstdint>
#include <string>

#include "tracers/devhook/device_record.h"

namespace cudatrace::devhook {

struct DrainedRing;

// Opens the records file (created, never an existing file or a link) the first time in
// this process, and starts the thread unless `background` is false. False with the
// reason in *error when the file cannot be created.
bool drain_open(const std::string& path, bool background, std::string* error);
// A context's ring: `capacity` slots (a power of two), zeroed, and the drain's count
// that the probes read. Drained from now on.
DrainedRing* drain_add(DeviceRecord* slots, uint64_t capacity, volatile uint64_t* consumed);
// After the context's work has finished: takes what is left (out of claim order too,
// past a slot a dropped record left empty), stops draining the ring, and returns how
// many records it took from it in all.
uint64_t drain_finish(DrainedRing* ring);
// Stops the thread and writes out what is buffered. Returns the records that could not
// be written (the file system refused them): they are lost, and counted.
uint64_t drain_close();

}  // namespace cudatrace::devhook
