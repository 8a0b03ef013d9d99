#pragma once
// Names of CUDA return codes, from the toolkit the harness was built against
// (cmake/cuda_error_names.cmake reads driver_types.h and cuda.h): the harness links no
// CUDA library, and results must name a failed call's code even on a host without one.
#include <cstdint>
#include <string>

namespace cudatrace {

// "cudaErrorMemoryAllocation" for a runtime code, "CUDA_ERROR_OUT_OF_MEMORY" for a driver
// code; "" when this toolkit has no name for it (a newer driver's code).
std::string cuda_runtime_error_name(int64_t code);
std::string cuda_driver_error_name(int64_t code);

}  // namespace cudatrace
