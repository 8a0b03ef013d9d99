#pragma once
// Recording for the driver entry points that hooks.def does not describe: name, entry
// time, duration and CUresult, no arguments. Every driver API function returns CUresult
// and takes integers and pointers only (no floats, no structs by value) -- the texture
// and surface *reference* calls are the exception and are left alone -- so on x86-64 a
// forwarder that passes 16 integer slots along (6 registers, 10 stack words) calls any
// of them correctly whatever its real arity.
#include <cstdint>

namespace cudatrace::preload {

inline constexpr uint16_t kGenericBase = 0x1000;
inline constexpr int kGenericSlots = 1024;

// The forwarder for `real`, or null when it must not be wrapped (floats by value) or the
// slots are used up. Same `real`, same forwarder.
void* generic_wrapper_for(const char* name, void* real);

// preload.<pid>.generic: "slot name" per forwarder in use, for the converter.
void write_generic_table();

}  // namespace cudatrace::preload
