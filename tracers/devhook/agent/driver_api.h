#pragma once
// The driver functions the agent calls, looked up in libcuda.so.1 when first needed: the
// agent is preloaded into programs that may not have loaded the driver yet, and must not
// pull it in (or fail to load) on a machine without one.
#include <cuda.h>

namespace cudatrace::devhook {

struct DriverApi {
  bool loaded = false;
  const char* error = nullptr;  // why not, when !loaded
  decltype(&::cuCtxGetCurrent) ctx_get_current;
  decltype(&::cuCtxSetCurrent) ctx_set_current;
  decltype(&::cuCtxGetDevice) ctx_get_device;
  decltype(&::cuCtxSynchronize) ctx_synchronize;
  decltype(&::cuDeviceGetAttribute) device_get_attribute;
  decltype(&::cuModuleLoadDataEx) module_load_data_ex;
  decltype(&::cuModuleGetFunction) module_get_function;
  decltype(&::cuLaunchKernel) launch_kernel;
  decltype(&::cuMemAlloc) mem_alloc;
  decltype(&::cuMemcpyHtoD) memcpy_htod;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh;
  decltype(&::cuMemHostAlloc) mem_host_alloc;
  decltype(&::cuMemHostGetDevicePointer) mem_host_get_device_pointer;
  decltype(&::cuStreamCreate) stream_create;
  decltype(&::cuStreamSynchronize) stream_synchronize;
  decltype(&::cuGetErrorName) get_error_name;
};

// Loaded once; check .loaded.
const DriverApi& driver();

// "CUDA_ERROR_INVALID_VALUE" (or the number, when the driver cannot name it).
const char* error_name(CUresult r);

}  // namespace cudatrace::devhook
