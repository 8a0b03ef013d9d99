#pragma once
// The one convention by which a tracer living inside the traced process lets the per-call
// benchmark (bench/percall.cu) pause it for its in-process A/B: it exports
//   extern "C" int cudatrace_pause(int paused);
// nonzero pauses (the hooks only forward), zero resumes; it returns whether the tracer was
// paused before (1) or live (0), or -1 when it cannot pause. The benchmark looks the name
// up in the process's global scope (a preloaded library) and then in the library named by
// CUDA_INJECTION64_PATH (loaded by the driver, outside that scope), so a new in-process
// method needs no line in the benchmark. A method outside the process pauses through
// tracers/pause_channel.h instead.
#define CUDATRACE_PAUSE_SYMBOL "cudatrace_pause"

extern "C" int cudatrace_pause(int paused);

// Optional, beside it: how many records the tracer has made for the calling thread so far
//   extern "C" unsigned long long cudatrace_records(void);
// (the records its hot path appended for this thread, whatever became of them later; the
// preload shim's rare records written alone, at a thread's end or without a buffer, are not
// among them, nor are other threads' records: a call whose library records on threads of
// its own, NCCL's proxies, reads fewer records than it causes). The benchmark reads it around its
// live batches, so that a cost can be given per record as well as per call: one runtime
// call makes several records where the driver calls it makes inside it are recorded too,
// and how many is the real libraries' to say, not ours (#52's bar is per record).
#define CUDATRACE_RECORDS_SYMBOL "cudatrace_records"

extern "C" unsigned long long cudatrace_records(void);
