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
