// The shim's export of every GENERIC function of libcudart.so and libcuda (the list:
// tracers/preload/exports.cmake): a stub of the function's own name that loads its slot
// and jumps to the generic forwarder (generic_hooks.cpp). A program linked with -lcudart
// or -lcuda binds to these first, as it binds to the listed hooks.
#define EXPORT_GENERIC(name, slot)                                                                \
  asm(".pushsection .text\n\t.p2align 4\n\t.globl " #name "\n\t.type " #name ", @function\n" #name \
      ":\n\tendbr64\n\tmovl $" #slot ", %r11d\n\tjmp cudatrace_generic_entry\n\t.size " #name ", .-" #name  \
      "\n\t.popsection");
#define EXPORT_LISTED(name, slot)
#define EXPORT_WATCHED(name, slot)
#define EXPORT_PLUMBING(name, slot)
#define EXPORT(kind, layer, name, base, slot) EXPORT_##kind(name, slot)
#include "preload_exports.inc"
