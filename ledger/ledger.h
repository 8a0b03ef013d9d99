#pragma once
// The ground truth: every workload records each CUDA call it makes (name, key arguments,
// return code, begin/end on CLOCK_MONOTONIC, thread) into per-thread buffers, and writes
// them as event records when it finishes: layer "runtime" for cuda* calls, "driver" for
// the cu* calls a workload makes itself (driverapi), and "execution" for kernel runs that
// no launch call of the program stands for one to one (a CUDA graph's replays).
//
// Each process writes its own file: the first one to finish takes the path named by
// CUDATRACE_LEDGER, every other (forked children, exec'd programs) takes PATH.<pid>.
//
// Recording is on when CUDATRACE_LEDGER names an output file, and costs the same under
// every tracing method: two clock reads and an append to a thread-local vector.
// This header is compiled by nvcc as well as by the host compiler: no heavy includes.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/clock.h"

namespace ledger {

inline constexpr const char* kEnvVar = "CUDATRACE_LEDGER";
// The name the harness gives the ledger (the event store's format, common/event_store.h); a
// process that finds it taken (a forked child) writes <name>.<pid>. Ledgers of older runs
// are JSON lines, ledger.jsonl[.<pid>], and are still read.
inline constexpr const char* kFileName = "ledger.msgpack.zst";
inline constexpr const char* kOldFileName = "ledger.jsonl";
// Records per zstd frame of the ledger: a frame is a decoder's share at a time in the harness
// (EventReadAhead::kHeld batches of 2,048), and each new frame costs some compression
// (docs/measured-history.md, "The ledger in frames").
inline constexpr uint64_t kFrameRecords = uint64_t(1) << 14;

struct Arg {
  enum class Kind : uint8_t { Int, Ptr, Str, Dim3 };
  const char* key;
  Kind kind;
  union {
    int64_t i;
    uint64_t p;
    const char* s;  // must be a string literal or outlive the process
    uint32_t d[3];
  };
  static Arg Int(const char* k, int64_t v) { Arg a{k, Kind::Int, {}}; a.i = v; return a; }
  static Arg Ptr(const char* k, const void* v) { Arg a{k, Kind::Ptr, {}}; a.p = uint64_t(v); return a; }
  static Arg Str(const char* k, const char* v) { Arg a{k, Kind::Str, {}}; a.s = v; return a; }
  static Arg Dim3(const char* k, uint32_t x, uint32_t y, uint32_t z) {
    Arg a{k, Kind::Dim3, {}}; a.d[0] = x; a.d[1] = y; a.d[2] = z; return a;
  }
};

inline int64_t now() { return cudatrace::monotonic_ns(); }

// Reads CUDATRACE_LEDGER; call first thing in main (and again first thing in a forked
// child that records calls of its own: it starts that process's ledger afresh).
// `cudart` is "static" or "shared".
void start(const char* workload, const char* cudart, int argc, char** argv);
bool enabled();

inline constexpr int kNoRet = INT32_MIN;  // the call returns nothing we can see (<<<>>>)
// `by`: the library that made the call, when not the program itself (a library with its
// own static cudart, like cuBLAS): written as args.by.
void record(const char* name, int64_t begin, int64_t end, int ret, std::initializer_list<Arg> args,
            const char* by = nullptr);
void record_driver(const char* name, int64_t begin, int64_t end, int ret, std::initializer_list<Arg> args);
// `times` executions of `kernel` with this grid and block that no recorded launch call
// stands for (a graph replay): what the gpu-activity and device layers must see of them.
void executed(const char* kernel, const uint32_t grid[3], const uint32_t block[3], int64_t times);

// The device each call is on: the calling thread's current device, as CUDA keeps it (the
// last device set on this thread, else 0), written as the record's "device". Calls of no
// device (versions, the device count, the thread's last error) carry none, and driver calls
// (record_driver) none either: a program that drives contexts itself says nothing of them.
// rt::SetDevice calls this once the device is set.
void set_current_device(int device);
int current_device();
// A device's PCI bus id as the workload asked the runtime for it (a recorded call): from
// then on every record of that device carries it as "device_id", the identity every
// process of the host shares.
void device_identity(int device, const char* pci_bus_id);

// What the workload means to call, computed from its parameters rather than from what
// was recorded: the harness checks the ledger against it.
void intend(const char* name, int64_t count);
// An injected failure: the call, and the codes it may return (the errors workload).
void expect(const char* step, const char* name, std::vector<int> codes);
void info(const char* key, int64_t value);
void info(const char* key, const std::string& value);

// Writes the ledger file (no-op when disabled). Returns false and prints why on failure.
bool finish();

}  // namespace ledger
