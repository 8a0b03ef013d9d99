#pragma once
// CUDA entry points come in families: cudaMemcpy and cudaMemcpy_ptds, cuMemAlloc and
// cuMemAlloc_v2, __cudaLaunchKernel (what <<<>>> calls in CUDA 13) and cudaLaunchKernel.
// Matching compares families, so every tracer may report the symbol it actually hooked.
#include <string>
#include <string_view>

namespace cudatrace {

// "cuMemAlloc_v2" -> "cuMemAlloc", "cudaMemcpyAsync_ptsz" -> "cudaMemcpyAsync",
// "__cudaLaunchKernel" -> "cudaLaunchKernel", "cuLaunchKernel_ptsz" -> "cuLaunchKernel".
std::string canonical_name(std::string_view name);

// "cudaMalloc_v3020" -> "cudaMalloc": the version CUPTI (and Nsight Systems, which is
// built on it) appends to runtime entry points, four or five digits of the toolkit that
// added them. For runtime names only: a driver's _v2 is the symbol's own.
std::string without_runtime_version(std::string name);

// cudart's own plumbing that a program never calls by name (fatbin registration, the
// <<<>>> call configuration): seen by symbol-level tracers, never in a ledger, never phantom.
bool is_runtime_internal(std::string_view name);

// Kernel launches, by family, in each API layer.
bool is_runtime_launch(std::string_view canonical);
bool is_driver_launch(std::string_view canonical);

// "vecadd_kernel" for "vecadd_kernel"; "scale" for "_Z5scalePfi" (the name without its
// parameter list, as a person writes it in a ledger). Device-layer methods name kernels so.
std::string kernel_display_name(const std::string& device_function);

}  // namespace cudatrace
