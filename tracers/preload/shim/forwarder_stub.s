# The code every generic slot is entered through: the shim's export of each GENERIC
# function (generic_exports.cpp) and each slot handed out at run time (generic_hooks.cpp,
# 128 bytes apart). An assembler macro, expanded once per slot and included by both files
# (`.include`, the folder is on the assembler's path: tracers/preload/CMakeLists.txt).
#
# Why one copy per slot: the common call must cost no more than a listed hook
# (bench/record_cost, generic_minus_listed). With the slot an immediate, a stub reads its
# real function and frame flags at fixed addresses, and for a function that needs no stack
# copy, no xmm registers and returns in rax only (most of CUDA's: generic_hooks.h) it
# times the call and calls right here: no jump into shared code and no table indexing
# before the call. After it, the stub jumps to cudatrace_generic_slim_tail
# (generic_hooks.cpp) with the slot in ebx, which appends the record and returns to the
# caller. On the H100 host (Release builds, five interleaved rounds) the live cost over a
# listed hook went from +1.88 ns (median; one shared forwarder) to +1.50 ns; writing the
# append into every stub too (230 bytes a slot) measured no better, so the tail is shared.
#
# The other cases leave before anything is pushed, with the caller's frame untouched:
# paused (recording off) jumps to the real function; an unresolved slot (the first call)
# or a function that needs the full frame goes to cudatrace_generic_entry with the slot
# in r11 (not an argument register). Both of those read null from
# cudatrace_generic_slim_real (generic_hooks.cpp, publish_real), so one load and test
# stand for "resolved, and slim".
#
# Across the call: r13 the entry time; rbx (the slot after) and r12 (the result, in the
# tail) pushed for the tail, three pushes that also align the stack for the call. rdtsc
# writes rdx, the third argument: kept in r13 meanwhile. rax is free: a slim function is
# declared, so not variadic.
#
# The result is recorded whatever the function returns; the converter keeps it only for
# functions that return an error code (slot_flags(), kReturnsCode).
  .macro cudatrace_forwarder_stub slot
  .cfi_startproc
  endbr64
  mov cudatrace_generic_slim_real+8*(\slot)(%rip), %r10
  test %r10, %r10
  jz 2f
  cmpb $0, cudatrace_preload_shim(%rip)
  je 1f
  .cfi_remember_state
  push %rbx
  .cfi_def_cfa_offset 16
  .cfi_offset %rbx, -16
  push %r12
  .cfi_def_cfa_offset 24
  .cfi_offset %r12, -24
  push %r13
  .cfi_def_cfa_offset 32
  .cfi_offset %r13, -32
  mov %rdx, %r13
  rdtsc
  shl $32, %rdx
  or %rdx, %rax
  mov %r13, %rdx
  mov %rax, %r13
  call *%r10
  mov $(\slot), %ebx
  jmp cudatrace_generic_slim_tail
  .cfi_restore_state
1:
  jmp *%r10
2:
  movl $(\slot), %r11d
  jmp cudatrace_generic_entry
  .cfi_endproc
  .endm
