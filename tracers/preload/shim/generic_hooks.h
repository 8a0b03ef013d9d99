#pragma once
// Recording for every CUDA entry point that hooks.def does not describe: name, entry time,
// duration and result, no arguments.
//
// A generic forwarder knows nothing of the signature it forwards. It is written in
// assembly (generic_hooks.cpp): it saves every argument register the x86-64 System V
// convention can use (rdi..r9, rax for varargs, xmm0..xmm7), calls the recorder, copies
// kMaxStackArgWords words of the caller's stack arguments into its own frame, restores
// the registers, calls the real function and hands back rax, rdx, xmm0 and xmm1 as they
// came. So floating-point arguments, structs passed by value (in registers or on the
// stack) and any return type pass through untouched, provided the stack arguments fit in
// 16 words: export_table.cpp checks that for every function the CUDA headers declare.
// When recording is paused the forwarder restores everything and jumps: no copy at all.
//
// Two kinds of slot: one per GENERIC export of libcudart.so / libcuda (numbered at build
// time, tracers/preload/exports.cmake; the shim exports a stub of that name), and slots
// handed out at run time for a function pointer that dlsym or cuGetProcAddress returned
// (a driver entry point that is not exported, a second copy of cudart).
#include <cstdint>
#include <string_view>

namespace cudatrace::preload {

// A generic record's HookId is kGenericBase + slot.
inline constexpr uint16_t kGenericBase = 0x1000;
inline constexpr int kMaxStaticSlots = 2048;
inline constexpr int kDynamicSlots = 1024;
inline constexpr int kMaxStackArgWords = 16;

// How the shim treats one export of the toolkit's libcudart.so or libcuda.
enum class ExportKind : uint8_t {
  Listed,    // hooks.def: a hook with its argument table
  Watched,   // wrapped for the shim's bookkeeping, not recorded
  Plumbing,  // cudart's registration and <<<>>> configuration calls: not exported by the shim
  Generic,   // a generic forwarder
};

// What a generic forwarder must keep for a function, from its declared parameters
// (an undeclared function gets both): its stack arguments copied (more integer words
// than registers, more than 8 floating-point ones, or a struct over 16 bytes), and the
// xmm argument registers saved (a floating-point parameter, or a small struct that may
// travel in them). Most CUDA functions need neither, and their forwarder skips both.
// A third flag, kWideReturn: the result may come back in more than rax (a float, or a
// struct of 16 bytes or less), so rdx, xmm0 and xmm1 are kept across the recording too.
// A function with none of the three takes the forwarder's slim path.
inline constexpr uint8_t kCopyStack = 1;
inline constexpr uint8_t kSaveXmm = 2;
inline constexpr uint8_t kWideReturn = 4;
inline constexpr uint8_t kFullFrame = kCopyStack | kSaveXmm | kWideReturn;
// Not a frame flag: the result is an error code (the forwarders record rax whatever the
// function returns; the converter keeps it only where this is set).
inline constexpr uint8_t kReturnsCode = 8;
// Nor these: after the call, the calling thread's current context may be another one
// (kChangesThreadContext), or any thread's may be gone (kChangesContexts: a context
// destroyed or reset). The device each thread keeps for its records is then asked again
// (recorder.h, device_tag()). Such a function never takes the slim path, which has no
// room for that: it is called rarely, and the full frame's exit does it.
inline constexpr uint8_t kChangesThreadContext = 16;
inline constexpr uint8_t kChangesContexts = 32;

// Which of the two a function is, by its name (a version suffix, _v2 and on, and
// _ptsz/_ptds are the same function): those that set, push, pop or create a context or
// set the runtime's device; and those that destroy, release or reset one. cudaSetDevice
// and cuInit are listed hooks (recorder.h, changes_context()).
constexpr uint8_t context_flags(std::string_view name) {
  for (std::string_view suffix : {"_ptsz", "_ptds"})
    if (name.ends_with(suffix)) name.remove_suffix(suffix.size());
  if (name.size() > 3 && name[name.size() - 3] == '_' && name[name.size() - 2] == 'v' && name.back() >= '2' &&
      name.back() <= '9')
    name.remove_suffix(3);
  for (std::string_view f : {"cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxCreate", "cuCtxAttach",
                             "cuDevicePrimaryCtxRetain", "cuInit", "cudaSetDevice", "cudaInitDevice",
                             "cudaSetDeviceFlags", "cudaSetValidDevices", "cudaGLSetGLDevice",
                             "cudaVDPAUSetVDPAUDevice", "cudaD3D9SetDirect3DDevice", "cudaD3D10SetDirect3DDevice",
                             "cudaD3D11SetDirect3DDevice"})
    if (name == f) return kChangesThreadContext;
  for (std::string_view f : {"cuCtxDestroy", "cuCtxDetach", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
                             "cuGreenCtxDestroy", "cudaDeviceReset", "cudaThreadExit"})
    if (name == f) return kChangesContexts;
  return 0;
}

struct ExportInfo {
  const char* name;
  bool runtime;       // libcudart.so (else libcuda)
  ExportKind kind;
  int slot;           // Generic: its static slot, else -1
  bool declared;      // the CUDA headers declare it (or its non-_ptsz/_ptds base)
  int arg_words;      // declared: its parameters' size in 8-byte words
  bool returns_code;  // returns cudaError_t / CUresult (undeclared: assumed)
  uint8_t frame;      // kCopyStack | kSaveXmm | kWideReturn
};

// What a slot of `e` (null: a function the shim knows nothing of) reads from
// cudatrace_generic_frames: its frame flags, and kReturnsCode. Unknown and undeclared
// functions get the full frame and are taken to return a code. The context flags go with
// the name (context_flags()).
constexpr uint8_t slot_flags(const ExportInfo* e) {
  if (!e) return kFullFrame | kReturnsCode;
  if (!e->declared) return uint8_t(kFullFrame | kReturnsCode | context_flags(e->name));
  return uint8_t(e->frame | (e->returns_code ? kReturnsCode : 0) | context_flags(e->name));
}

// Every export of the toolkit the shim was built against, sorted by layer then name.
const ExportInfo* export_table(int* count);
const ExportInfo* find_export(std::string_view name);
// The GENERIC export with static slot `slot`, or null.
const ExportInfo* export_of_slot(int slot);

// Per generic slot: slot_flags(), what the forwarder reads (static slots from the table,
// constant-initialized; run-time slots set when handed out).
struct GenericFrames {
  uint8_t of[kMaxStaticSlots + kDynamicSlots];
};

// A forwarder for `real` (a function pointer that dlsym or cuGetProcAddress returned),
// recorded as `name` in `layer` ("runtime"/"driver"); null when the slots are used up.
// Same `real`, same forwarder.
void* generic_wrapper_for(const char* name, bool runtime, void* real);

// preload.<pid>.generic: "slot layer name" per run-time slot in use, for the converter.
void write_generic_table();

}  // namespace cudatrace::preload

extern "C" __attribute__((visibility("hidden"))) cudatrace::preload::GenericFrames cudatrace_generic_frames;
