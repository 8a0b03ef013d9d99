#pragma once
// Full thread buffers written by a writer thread, so that the thread that made the calls
// does not wait for the disk. Measured on the build machine (tests/bench/
// preload_call_cost.cpp, fake CUDA libraries): writing a full buffer into the page cache
// cost the calling thread about 30 ns a record, half of what a record cost; the copy and
// the page cache's bookkeeping are the same wherever they run, but another core now does
// them while the program goes on.
//
// The protocol, per thread buffer (ThreadBuffer's `spare` and `in_flight`): a full buffer
// is sealed (its calibration point appended) and swapped with the spare one, which the
// writer has finished with; the writer writes it to the thread's file and sets in_flight
// back to 0. A thread's file is written by one side at a time, in order: every write made
// elsewhere (a flush at exit, exec, a fatal signal, a thread's end) first waits for the
// buffer in flight (wait_written()). Where there is no writer (it could not be started,
// or the exit flush has begun) the full buffer is written by the calling thread, as
// before. Records are the same either way, and a failed write is counted as dropped.
#include <cstddef>
#include <cstdint>

namespace cudatrace::preload {

struct ThreadBuffer;

// Writes `bytes` to `fd` (recorder.cpp); returns how many records it could not write.
uint64_t write_records(int fd, const void* data, size_t bytes);

// Hands b->spare, holding `records` records, to the writer thread. False when there is no
// writer: the caller writes them itself.
bool hand_off(ThreadBuffer* b, uint32_t records);

// Returns once nothing of b is in flight (at once in the writer thread itself, which
// cannot wait for its own write: a fatal signal there).
void wait_written(ThreadBuffer* b);

// From now on hand_off() refuses: the exit flush writes everything itself, and nothing
// handed off later could be lost when the process ends under a writer still writing.
void stop_handing_off();

// In a forked child: no writer runs here (the parent's writes its own buffers); the first
// hand-off starts one.
void writer_after_fork();

}  // namespace cudatrace::preload
