#include "tracers/preload/shim/generic_hooks.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tracers/preload/shim/real_symbols.h"
#include "tracers/preload/shim/recorder.h"

#if !defined(__x86_64__)
#error "the generic forwarders rely on the x86-64 System V calling convention"
#endif

namespace cudatrace::preload {

constexpr int kSlots = kMaxStaticSlots + kDynamicSlots;

// What the forwarders read: the real function (null until resolved). Its flags (frame,
// error code) are in cudatrace_generic_frames, written before the pointer is published.
// Not in the anonymous namespace: the static exports' stubs (generic_exports.cpp) read it.
std::atomic<void*> g_real[kSlots] __asm__("cudatrace_generic_real") __attribute__((visibility("hidden")));
// The stubs' first and only test: the real function of a slot that takes the slim path
// (no frame flags), null for one that is unresolved or needs the full frame. One load
// decides both; the full frame and the first call read g_real in cudatrace_generic_entry.
std::atomic<void*> g_slim_real[kSlots] __asm__("cudatrace_generic_slim_real") __attribute__((visibility("hidden")));

// A slot's function found: published for the full frame and, where it may, the slim path.
// Its flags are in cudatrace_generic_frames before this.
void publish_real(int slot, void* p) {
  g_real[slot].store(p, std::memory_order_release);
  if (!(cudatrace_generic_frames.of[slot] & (kFullFrame | kChangesThreadContext | kChangesContexts)))
    g_slim_real[slot].store(p, std::memory_order_release);
}

namespace {

// The run-time slots' names, for the converter.
std::mutex g_mu;
char g_dynamic_names[kDynamicSlots][64];
bool g_dynamic_runtime[kDynamicSlots];
int g_dynamic_used = 0;
std::unordered_map<void*, int>* g_slot_of = new std::unordered_map<void*, int>;

// A static slot's function, found the first time it is called: cudart's behind the shim
// (RTLD_NEXT), libcuda's through its handle.
[[gnu::noinline, gnu::cold]] void* resolve_static(uint32_t slot, const void* caller) {
  const ExportInfo* e = export_of_slot(int(slot));
  void* p = nullptr;
  if (e) p = e->runtime ? next_definition(e->name, caller) : driver_symbol(e->name);
  if (!p) {
    std::fprintf(stderr, "cudatrace preload: no definition of %s behind the shim\n", e ? e->name : "(unknown slot)");
    std::abort();
  }
  publish_real(int(slot), p);
  return p;
}

}  // namespace

}  // namespace cudatrace::preload

using namespace cudatrace::preload;

// Called by the assembly below with every argument register saved. Returns the function
// to forward to; *t0 is the entry time, or -1 when the call is not to be recorded.
// `caller` (the return address) only matters the first time: see next_definition().
extern "C" __attribute__((visibility("hidden"))) void* cudatrace_generic_enter(uint32_t slot, int64_t* t0,
                                                                              const void* caller) {
  void* real = g_real[slot].load(std::memory_order_acquire);
  if (__builtin_expect(!real, 0)) real = resolve_static(slot, caller);
  *t0 = hooks_live() ? now_ns() : -1;
  return real;
}

// The result is recorded whatever it is: the converter keeps it where it is a code.
extern "C" __attribute__((visibility("hidden"))) void cudatrace_generic_exit(uint32_t slot, int64_t t0,
                                                                             uint64_t result) {
  // Before the record: its device is the one current after the call.
  if (const uint8_t f = cudatrace_generic_frames.of[slot]; __builtin_expect(f & (kChangesThreadContext | kChangesContexts), 0)) {
    if (f & kChangesContexts) contexts_may_have_changed();
    context_may_have_changed();
  }
  emit(HookId(kGenericBase + slot), int32_t(result), t0, now_ns());
}

// The shared part of the generic forwarders: the per-slot stubs are in forwarder_stub.s.
//
// cudatrace_generic_slim_tail: a stub's slim path after the real function returned, with
// the result in rax, the slot in ebx, the entry time in r13, and rbx/r12/r13 pushed.
// emit()'s append (recorder.h), written out: the common case only, a new generation or a
// full buffer goes through cudatrace_generic_exit. Offsets are checked against
// ThreadBuffer and Record below the block.
//
// cudatrace_generic_entry: the full frame, for a function whose flags ask for it, and for
// every slot's first call (which resolves it). Entered from a stub with the slot in r11
// and the caller's frame untouched.
// Frame, from rsp (16-byte aligned):
//     0..127  the caller's stack arguments, copied     256..303  rdi rsi rdx rcx r8 r9
//   128..255  xmm0..xmm7                                304  rax    312  slot
//                                                       320  t0     328  real function
//                                                       336  frame flags (generic_hooks.h)
// The copy and the xmm registers are skipped for functions whose flags say they need
// neither (export_table.cpp). cudatrace_generic_enter is called only the first time, to
// resolve. xmm8 (caller-saved, never an argument) carries the copy; r10 the flags.
asm(".include \"forwarder_stub.s\"");
asm(R"(
  # xmm0..xmm7 <-> 128..255(%rsp): `to` saves, `from` restores.
  .macro cudatrace_xmm_to_frame
  .irp n, 0, 1, 2, 3, 4, 5, 6, 7
  movaps %xmm\n, 128+16*\n(%rsp)
  .endr
  .endm
  .macro cudatrace_xmm_from_frame
  .irp n, 0, 1, 2, 3, 4, 5, 6, 7
  movaps 128+16*\n(%rsp), %xmm\n
  .endr
  .endm
  # The integer argument registers and rax from 256..311(%rsp).
  .macro cudatrace_gprs_from_frame
  mov 256(%rsp), %rdi
  mov 264(%rsp), %rsi
  mov 272(%rsp), %rdx
  mov 280(%rsp), %rcx
  mov 288(%rsp), %r8
  mov 296(%rsp), %r9
  mov 304(%rsp), %rax
  .endm
  # One 16-byte piece of the caller's stack arguments into the outgoing area.
  .macro cudatrace_copy_stack_args offset
  movdqu 16+\offset(%rbp), %xmm8
  movdqa %xmm8, \offset(%rsp)
  .endm

  .pushsection .text
  .p2align 4
  .globl cudatrace_generic_slim_tail
  .hidden cudatrace_generic_slim_tail
  .type cudatrace_generic_slim_tail, @function
cudatrace_generic_slim_tail:
  .cfi_startproc
  .cfi_def_cfa_offset 32
  .cfi_offset %rbx, -16
  .cfi_offset %r12, -24
  .cfi_offset %r13, -32
  mov %rax, %r12
  rdtsc
  shl $32, %rdx
  or %rax, %rdx
  mov _ZN9cudatrace7preload8t_bufferE@gottpoff(%rip), %r10
  movl %fs:12(%r10), %eax
  cmpl 4+cudatrace_preload_shim(%rip), %eax
  jne 2f
  movl %fs:8(%r10), %ecx
  cmpl $8192, %ecx
  jae 2f
  mov %ecx, %eax
  shl $6, %rax
  add %fs:0(%r10), %rax
  sub %r13, %rdx
  lea 0x1000(%rbx), %esi
  movl %esi, (%rax)
  movl %r12d, 4(%rax)
  mov %r13, 8(%rax)
  mov %rdx, 16(%rax)
  xor %esi, %esi
  mov %rsi, 24(%rax)
  mov %rsi, 32(%rax)
  mov %rsi, 40(%rax)
  mov %rsi, 48(%rax)
  mov %rsi, 56(%rax)
  inc %ecx
  movl %ecx, %fs:8(%r10)
  prefetchw 64(%rax)
  prefetchw 128(%rax)
1:
  mov %r12, %rax
  .cfi_remember_state
  pop %r13
  .cfi_def_cfa_offset 24
  pop %r12
  .cfi_def_cfa_offset 16
  pop %rbx
  .cfi_def_cfa_offset 8
  ret
  .cfi_restore_state
2:
  mov %ebx, %edi
  mov %r13, %rsi
  mov %r12, %rdx
  call cudatrace_generic_exit
  jmp 1b
  .cfi_endproc
  .size cudatrace_generic_slim_tail, .-cudatrace_generic_slim_tail

  .p2align 4
  .globl cudatrace_generic_entry
  .hidden cudatrace_generic_entry
  .type cudatrace_generic_entry, @function
cudatrace_generic_entry:
  .cfi_startproc
  endbr64
  lea cudatrace_generic_real(%rip), %r10
  mov (%r10,%r11,8), %r10
  test %r10, %r10
  jz 8f
  cmpb $0, cudatrace_preload_shim(%rip)
  jne 8f
  jmp *%r10
8:
  push %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp
  .cfi_def_cfa_register %rbp
  sub $352, %rsp
  and $-16, %rsp
  mov %rdi, 256(%rsp)
  mov %rsi, 264(%rsp)
  mov %rdx, 272(%rsp)
  mov %rcx, 280(%rsp)
  mov %r8, 288(%rsp)
  mov %r9, 296(%rsp)
  mov %rax, 304(%rsp)
  mov %r11, 312(%rsp)
  lea cudatrace_generic_frames(%rip), %r10
  movzbl (%r10,%r11), %r10d
  mov %r10, 336(%rsp)
  test $2, %r10b
  jz 2f
  cudatrace_xmm_to_frame
2:
  lea cudatrace_generic_real(%rip), %r10
  mov (%r10,%r11,8), %r10
  test %r10, %r10
  jz 6f
  mov %r10, 328(%rsp)
  mov 336(%rsp), %r10
  cmpb $0, cudatrace_preload_shim(%rip)
  je 1f
  rdtsc
  shl $32, %rdx
  or %rdx, %rax
  mov %rax, 320(%rsp)
  jmp 7f
6:
  mov %r11d, %edi
  lea 320(%rsp), %rsi
  mov 8(%rbp), %rdx
  call cudatrace_generic_enter
  mov %rax, 328(%rsp)
  mov 336(%rsp), %r10
  cmpq $0, 320(%rsp)
  jl 1f
7:
  test $1, %r10b
  jz 3f
  .irp offset, 0, 16, 32, 48, 64, 80, 96, 112
  cudatrace_copy_stack_args \offset
  .endr
3:
  test $2, %r10b
  jz 4f
  cudatrace_xmm_from_frame
4:
  cudatrace_gprs_from_frame
  call *328(%rsp)
  mov %rax, 256(%rsp)
  mov %rdx, 264(%rsp)
  movaps %xmm0, 128(%rsp)
  movaps %xmm1, 144(%rsp)
  mov 312(%rsp), %edi
  mov 320(%rsp), %rsi
  mov %rax, %rdx
  call cudatrace_generic_exit
  mov 256(%rsp), %rax
  mov 264(%rsp), %rdx
  movaps 128(%rsp), %xmm0
  movaps 144(%rsp), %xmm1
  .cfi_remember_state
  leave
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_restore_state
1:
  mov 328(%rsp), %r11
  test $2, %r10b
  jz 5f
  cudatrace_xmm_from_frame
5:
  cudatrace_gprs_from_frame
  leave
  .cfi_def_cfa %rsp, 8
  jmp *%r11
  .cfi_endproc
  .size cudatrace_generic_entry, .-cudatrace_generic_entry

  .p2align 7
  .globl cudatrace_dynamic_stubs
  .hidden cudatrace_dynamic_stubs
cudatrace_dynamic_stubs:
  .set cudatrace_dynamic_slot, 2048
  .rept 1024
  .p2align 7
  cudatrace_forwarder_stub cudatrace_dynamic_slot
  .set cudatrace_dynamic_slot, cudatrace_dynamic_slot + 1
  .endr
  .p2align 7
  .globl cudatrace_dynamic_stubs_end
  .hidden cudatrace_dynamic_stubs_end
cudatrace_dynamic_stubs_end:
  .popsection
)");

extern "C" char cudatrace_dynamic_stubs[], cudatrace_dynamic_stubs_end[];
static_assert(kMaxStaticSlots == 2048 && kDynamicSlots == 1024, "the stubs above are numbered from 2048, 1024 of them");
// The run-time stubs are 128 bytes apart (.p2align 7): one that outgrew that would push
// the rest out of place, which generic_wrapper_for() checks before handing one out.
constexpr long kDynamicStubBytes = 128;
static_assert(offsetof(ThreadBuffer, records) == 0 && offsetof(ThreadBuffer, count) == 8 &&
                  offsetof(ThreadBuffer, generation) == 12 && kBufferRecords == 8192,
              "the slim tail's append reads the thread buffer at these offsets");
static_assert(offsetof(ShimState, generation) == 4, "the slim tail compares g_shim.generation at offset 4");
static_assert(sizeof(Record) == 64 && offsetof(Record, hook) == 0 && offsetof(Record, flags) == 2 &&
                  offsetof(Record, ret) == 4 && offsetof(Record, ts) == 8 && offsetof(Record, dur) == 16 &&
                  offsetof(Record, a) == 24 && kGenericBase == 0x1000,
              "the slim tail's append writes a record at these offsets");
static_assert(kMaxStackArgWords == 16, "the forwarder above copies 16 words");
static_assert(kFullFrame == 7, "forwarder_stub.s takes the slim path when flags & 7 == 0");

namespace cudatrace::preload {

void* generic_wrapper_for(const char* name, bool runtime, void* real) {
  if (!real || !name || std::strncmp(name, "cuGetProcAddress", 16) == 0) return nullptr;
  std::lock_guard lk(g_mu);
  static const bool stubs_in_place = [] {
    const bool ok = cudatrace_dynamic_stubs_end - cudatrace_dynamic_stubs == kDynamicSlots * kDynamicStubBytes;
    if (!ok) std::fprintf(stderr, "cudatrace preload: the run-time forwarders are misplaced; dlsym'd functions are not recorded\n");
    return ok;
  }();
  if (!stubs_in_place) return nullptr;
  auto stub = [](int j) { return static_cast<void*>(cudatrace_dynamic_stubs + kDynamicStubBytes * j); };
  if (auto it = g_slot_of->find(real); it != g_slot_of->end()) return stub(it->second);
  if (g_dynamic_used == kDynamicSlots) return nullptr;
  const int j = g_dynamic_used++;
  std::strncpy(g_dynamic_names[j], name, sizeof g_dynamic_names[j] - 1);
  g_dynamic_runtime[j] = runtime;
  const ExportInfo* e = find_export(name);
  cudatrace_generic_frames.of[kMaxStaticSlots + j] = uint8_t(slot_flags(e) | context_flags(name));
  publish_real(kMaxStaticSlots + j, real);
  (*g_slot_of)[real] = j;
  return stub(j);
}

void write_generic_table() {
  std::lock_guard lk(g_mu);
  if (!g_dynamic_used) return;
  const char* dir = std::getenv(kDirEnv);
  if (!dir) return;
  std::string path = std::string(dir) + "/preload." + std::to_string(getpid()) + ".generic";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    for (int j = 0; j < g_dynamic_used; ++j)
      std::fprintf(f, "%d %s %s\n", kMaxStaticSlots + j, g_dynamic_runtime[j] ? "runtime" : "driver",
                   g_dynamic_names[j]);
    std::fclose(f);
  }
}

}  // namespace cudatrace::preload
