#pragma once
// Kernel families: one name for a kernel whichever way a method writes it (mangled, demangled,
// cut at CUPTI's 63 bytes), and the join of names one side cut where the other did not.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace cudatrace {

// "_Z6kernelPfi" and "kernel(float*, int)" -> "kernel": methods name kernels differently.
// Names are compared on their first kFamilyChars characters (see kernel_families.cpp).
inline constexpr size_t kFamilyChars = 63;
std::string kernel_family(const std::string& name);

// Kernel families one side cut where the other did not. CUPTI keeps 63 bytes of a kernel's
// mangled name, and an anonymous namespace's id (nvcc's _GLOBAL__N__<hash>_<file>) takes
// most of them: torch's softmax kernel reaches the reference as "{anonymous}::softmax_warp_"
// and, demangled by the PyTorch profiler, as "{anonymous}::softmax_warp_forward". A family
// the reference has more of than `seen`, and one only `seen` has that begins with it (or
// that it begins with; both at least 8 characters), are one family: up to the shortfall
// moves onto the reference's name, the longest reference names served first (the most
// particular family a kernel begins with is its own). Where a whole name begins two cut ones,
// which of the two it belonged to is not in the names: the longer takes it, and the shortfall
// shows on the shorter; the total shortfall is the same either way. Returns how many kernels
// were joined so.
int64_t join_cut_kernel_families(const std::map<std::string, int64_t>& reference, std::map<std::string, int64_t>& seen);

}  // namespace cudatrace
