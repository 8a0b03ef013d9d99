// The shim's export of every GENERIC function of libcudart.so and libcuda (the list:
// tracers/preload/exports.cmake): a forwarder stub (forwarder_stub.s) under the function's
// own name, for its static slot. A program linked with -lcudart or -lcuda binds to these
// first, as it binds to the listed hooks.
asm(".include \"forwarder_stub.s\"");

#define EXPORT_GENERIC(name, slot)                                                               \
  asm(".pushsection .text\n\t.p2align 4\n\t.globl " #name "\n\t.type " #name ", @function\n" #name \
      ":\n\tcudatrace_forwarder_stub " #slot "\n\t.size " #name ", .-" #name "\n\t.popsection");
#define EXPORT_LISTED(name, slot)
#define EXPORT_WATCHED(name, slot)
#define EXPORT_PLUMBING(name, slot)
#define EXPORT(kind, layer, name, base, slot) EXPORT_##kind(name, slot)
#include "preload_exports.inc"
