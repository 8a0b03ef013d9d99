#pragma once
// The CUDA runtime calls the workloads make, each one recorded in the ledger with its
// key arguments and return code. Workloads call rt::X instead of cudaX, and call no
// CUDA function outside this file, so the ledger is the complete list of what they did.
#include <cuda_runtime.h>

#include <utility>

#include "ledger/ledger.h"

namespace rt {

using ledger::Arg;

// A library that includes this header to make calls of its own (privatert) defines
// CUDATRACE_LEDGER_BY as its name, so the ledger says who made each call.
#ifdef CUDATRACE_LEDGER_BY
inline constexpr const char* kBy = CUDATRACE_LEDGER_BY;
#else
inline constexpr const char* kBy = nullptr;
#endif

inline const char* kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "HtoH";
    case cudaMemcpyHostToDevice: return "HtoD";
    case cudaMemcpyDeviceToHost: return "DtoH";
    case cudaMemcpyDeviceToDevice: return "DtoD";
    case cudaMemcpyDefault: return "Default";
  }
  return "invalid";
}

// Times `call`, then records it with the arguments `args_of(ret)` builds (outputs such as
// an allocated pointer are only meaningful once the call returned).
template <class Call, class Args>
inline cudaError_t recorded(const char* name, Call&& call, Args&& args_of) {
  int64_t t0 = ledger::now();
  cudaError_t r = call();
  int64_t t1 = ledger::now();
  args_of(r, [&](std::initializer_list<Arg> a) { ledger::record(name, t0, t1, int(r), a, kBy); });
  return r;
}
#define RT_RECORD(NAME, CALL, ...) \
  recorded(NAME, [&] { return CALL; }, [&](cudaError_t r, auto rec) { (void)r; rec({__VA_ARGS__}); })

inline cudaError_t RuntimeGetVersion(int* v) {
  return RT_RECORD("cudaRuntimeGetVersion", cudaRuntimeGetVersion(v), Arg::Int("version", r == cudaSuccess ? *v : 0));
}
inline cudaError_t GetDeviceCount(int* n) {
  return RT_RECORD("cudaGetDeviceCount", cudaGetDeviceCount(n), Arg::Int("count", r == cudaSuccess ? *n : 0));
}
// The ledger follows the thread's current device as CUDA does, so that every later record
// says which GPU it was on (ledger::set_current_device). Recorded once the device is set:
// its context is current when the call returns.
inline cudaError_t SetDevice(int d) {
  const int64_t t0 = ledger::now();
  const cudaError_t r = cudaSetDevice(d);
  const int64_t t1 = ledger::now();
  if (r == cudaSuccess) ledger::set_current_device(d);
  ledger::record("cudaSetDevice", t0, t1, int(r), {Arg::Int("device", d)}, kBy);
  return r;
}
inline cudaError_t GetDevice(int* d) {
  return RT_RECORD("cudaGetDevice", cudaGetDevice(d), Arg::Int("device", r == cudaSuccess ? *d : -1));
}
inline cudaError_t Malloc(void** p, size_t bytes) {
  return RT_RECORD("cudaMalloc", cudaMalloc(p, bytes), Arg::Int("bytes", int64_t(bytes)),
                   Arg::Ptr("ptr", r == cudaSuccess && p ? *p : nullptr));
}
inline cudaError_t Free(void* p) { return RT_RECORD("cudaFree", cudaFree(p), Arg::Ptr("ptr", p)); }
inline cudaError_t MallocHost(void** p, size_t bytes) {
  return RT_RECORD("cudaMallocHost", cudaMallocHost(p, bytes), Arg::Int("bytes", int64_t(bytes)),
                   Arg::Ptr("ptr", r == cudaSuccess ? *p : nullptr));
}
inline cudaError_t FreeHost(void* p) { return RT_RECORD("cudaFreeHost", cudaFreeHost(p), Arg::Ptr("ptr", p)); }
inline cudaError_t Memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind k) {
  return RT_RECORD("cudaMemcpy", cudaMemcpy(dst, src, bytes, k), Arg::Ptr("dst", dst), Arg::Ptr("src", src),
                   Arg::Int("bytes", int64_t(bytes)), Arg::Str("kind", kind_name(k)));
}
inline cudaError_t MemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind k, cudaStream_t s) {
  return RT_RECORD("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, bytes, k, s), Arg::Ptr("dst", dst),
                   Arg::Ptr("src", src), Arg::Int("bytes", int64_t(bytes)), Arg::Str("kind", kind_name(k)),
                   Arg::Ptr("stream", s));
}
inline cudaError_t Memset(void* p, int value, size_t bytes) {
  return RT_RECORD("cudaMemset", cudaMemset(p, value, bytes), Arg::Ptr("ptr", p), Arg::Int("value", value),
                   Arg::Int("bytes", int64_t(bytes)));
}
inline cudaError_t MemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  return RT_RECORD("cudaMemsetAsync", cudaMemsetAsync(p, value, bytes, s), Arg::Ptr("ptr", p),
                   Arg::Int("value", value), Arg::Int("bytes", int64_t(bytes)), Arg::Ptr("stream", s));
}
inline cudaError_t StreamCreate(cudaStream_t* s) {
  return RT_RECORD("cudaStreamCreate", cudaStreamCreate(s), Arg::Ptr("stream", r == cudaSuccess ? *s : nullptr));
}
inline cudaError_t StreamDestroy(cudaStream_t s) {
  return RT_RECORD("cudaStreamDestroy", cudaStreamDestroy(s), Arg::Ptr("stream", s));
}
inline cudaError_t StreamSynchronize(cudaStream_t s) {
  return RT_RECORD("cudaStreamSynchronize", cudaStreamSynchronize(s), Arg::Ptr("stream", s));
}
inline cudaError_t StreamWaitEvent(cudaStream_t s, cudaEvent_t e) {
  return RT_RECORD("cudaStreamWaitEvent", cudaStreamWaitEvent(s, e, 0), Arg::Ptr("stream", s), Arg::Ptr("event", e));
}
inline cudaError_t EventCreate(cudaEvent_t* e) {
  return RT_RECORD("cudaEventCreate", cudaEventCreate(e), Arg::Ptr("event", r == cudaSuccess ? *e : nullptr));
}
inline cudaError_t EventRecord(cudaEvent_t e, cudaStream_t s) {
  return RT_RECORD("cudaEventRecord", cudaEventRecord(e, s), Arg::Ptr("event", e), Arg::Ptr("stream", s));
}
inline cudaError_t EventSynchronize(cudaEvent_t e) {
  return RT_RECORD("cudaEventSynchronize", cudaEventSynchronize(e), Arg::Ptr("event", e));
}
inline cudaError_t EventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  return RT_RECORD("cudaEventElapsedTime", cudaEventElapsedTime(ms, a, b), Arg::Ptr("start", a), Arg::Ptr("end", b));
}
inline cudaError_t EventDestroy(cudaEvent_t e) {
  return RT_RECORD("cudaEventDestroy", cudaEventDestroy(e), Arg::Ptr("event", e));
}
// Several GPUs: identities, peer access and peer copies, and memory shared between
// processes (CUDA IPC).
inline cudaError_t DeviceGetPCIBusId(char* id, int len, int d) {
  return RT_RECORD("cudaDeviceGetPCIBusId", cudaDeviceGetPCIBusId(id, len, d), Arg::Int("device", d));
}
inline cudaError_t DeviceCanAccessPeer(int* can, int d, int peer) {
  return RT_RECORD("cudaDeviceCanAccessPeer", cudaDeviceCanAccessPeer(can, d, peer), Arg::Int("device", d),
                   Arg::Int("peer", peer), Arg::Int("can", r == cudaSuccess ? *can : -1));
}
inline cudaError_t DeviceEnablePeerAccess(int peer) {
  return RT_RECORD("cudaDeviceEnablePeerAccess", cudaDeviceEnablePeerAccess(peer, 0), Arg::Int("peer", peer));
}
inline cudaError_t MemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                   cudaStream_t s) {
  return RT_RECORD("cudaMemcpyPeerAsync", cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s),
                   Arg::Ptr("dst", dst), Arg::Int("dst_device", dst_device), Arg::Ptr("src", src),
                   Arg::Int("src_device", src_device), Arg::Int("bytes", int64_t(bytes)), Arg::Ptr("stream", s));
}
inline cudaError_t IpcGetMemHandle(cudaIpcMemHandle_t* h, void* p) {
  return RT_RECORD("cudaIpcGetMemHandle", cudaIpcGetMemHandle(h, p), Arg::Ptr("ptr", p));
}
inline cudaError_t IpcOpenMemHandle(void** p, cudaIpcMemHandle_t h) {
  return RT_RECORD("cudaIpcOpenMemHandle", cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess),
                   Arg::Ptr("ptr", r == cudaSuccess ? *p : nullptr));
}
inline cudaError_t IpcCloseMemHandle(void* p) {
  return RT_RECORD("cudaIpcCloseMemHandle", cudaIpcCloseMemHandle(p), Arg::Ptr("ptr", p));
}
inline cudaError_t DeviceSynchronize() { return RT_RECORD("cudaDeviceSynchronize", cudaDeviceSynchronize()); }
inline cudaError_t GetLastError() { return RT_RECORD("cudaGetLastError", cudaGetLastError()); }
inline cudaError_t PeekAtLastError() { return RT_RECORD("cudaPeekAtLastError", cudaPeekAtLastError()); }


// CUDA graphs: captured from a stream, or built node by node, then replayed.
inline cudaError_t StreamBeginCapture(cudaStream_t s) {
  return RT_RECORD("cudaStreamBeginCapture", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
                   Arg::Ptr("stream", s));
}
inline cudaError_t StreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  return RT_RECORD("cudaStreamEndCapture", cudaStreamEndCapture(s, g), Arg::Ptr("stream", s),
                   Arg::Ptr("graph", r == cudaSuccess ? *g : nullptr));
}
inline cudaError_t GraphCreate(cudaGraph_t* g) {
  return RT_RECORD("cudaGraphCreate", cudaGraphCreate(g, 0), Arg::Ptr("graph", r == cudaSuccess ? *g : nullptr));
}
inline cudaError_t GraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                      const cudaKernelNodeParams* p, const char* kernel) {
  return RT_RECORD("cudaGraphAddKernelNode", cudaGraphAddKernelNode(node, g, deps, ndeps, p), Arg::Ptr("graph", g),
                   Arg::Str("kernel", kernel), Arg::Dim3("grid", p->gridDim.x, p->gridDim.y, p->gridDim.z),
                   Arg::Dim3("block", p->blockDim.x, p->blockDim.y, p->blockDim.z));
}
inline cudaError_t GraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g) {
  return RT_RECORD("cudaGraphInstantiate", cudaGraphInstantiate(e, g, 0), Arg::Ptr("graph", g),
                   Arg::Ptr("exec", r == cudaSuccess ? *e : nullptr));
}
inline cudaError_t GraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
  return RT_RECORD("cudaGraphLaunch", cudaGraphLaunch(e, s), Arg::Ptr("exec", e), Arg::Ptr("stream", s));
}
inline cudaError_t GraphExecDestroy(cudaGraphExec_t e) {
  return RT_RECORD("cudaGraphExecDestroy", cudaGraphExecDestroy(e), Arg::Ptr("exec", e));
}
inline cudaError_t GraphDestroy(cudaGraph_t g) {
  return RT_RECORD("cudaGraphDestroy", cudaGraphDestroy(g), Arg::Ptr("graph", g));
}

#undef RT_RECORD

// A <<<>>> launch, recorded as cudaLaunchKernel (the family CUDA 13's __cudaLaunchKernel
// belongs to). <<<>>> hands back no error code: it has to be read with GetLastError,
// which is then a call of its own in the ledger. Kernels are extern "C" so that `name` is
// the symbol a tracer resolves.
namespace detail {
inline void record_launch(const char* name, int64_t t0, int64_t t1, dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, const char* expect) {
  const Arg kernel = Arg::Str("kernel", name), g = Arg::Dim3("grid", grid.x, grid.y, grid.z),
            b = Arg::Dim3("block", block.x, block.y, block.z), sm = Arg::Int("smem", int64_t(smem)),
            st = Arg::Ptr("stream", stream), via = Arg::Str("via", "<<<>>>");
  if (expect)
    ledger::record("cudaLaunchKernel", t0, t1, ledger::kNoRet, {kernel, g, b, sm, st, via, Arg::Str("expect", expect)},
                   kBy);
  else
    ledger::record("cudaLaunchKernel", t0, t1, ledger::kNoRet, {kernel, g, b, sm, st, via}, kBy);
}
}  // namespace detail

template <class... Params, class... Args>
inline void Launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args&&... args) {
  int64_t t0 = ledger::now();
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  detail::record_launch(name, t0, ledger::now(), grid, block, smem, stream, nullptr);
}

// A <<<>>> launch while its stream is being captured: it adds a node to the graph and
// runs nothing now; the graph's replays run it (ledger::executed records those).
template <class... Params, class... Args>
inline void LaunchCaptured(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                           Args&&... args) {
  int64_t t0 = ledger::now();
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
  detail::record_launch(name, t0, ledger::now(), grid, block, 0, stream, "captured");
}

// A launch the workload makes to fail (a bad configuration): no kernel runs, so the
// device and GPU-activity layers expect nothing of it; the ledger says so ("expect").
inline void LaunchThatFails(const char* name, void (*kernel)(), dim3 grid, dim3 block) {
  int64_t t0 = ledger::now();
  kernel<<<grid, block>>>();
  detail::record_launch(name, t0, ledger::now(), grid, block, 0, nullptr, "launch error");
}

}  // namespace rt
