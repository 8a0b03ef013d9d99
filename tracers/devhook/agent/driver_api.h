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
  decltype(&::cuMemcpyDtoH) memcpy_dtoh;
  decltype(&::cuMemHostAlloc) mem_host_alloc;
  decltype(&::cuMemHostRegister) mem_host_register;
  decltype(&::cuMemHostGetDevicePointer) mem_host_get_device_pointer;
  decltype(&::cuStreamCreate) stream_create;
  decltype(&::cuStreamSynchronize) stream_synchronize;
  decltype(&::cuGetErrorName) get_error_name;
  decltype(&::cuStreamIsCapturing) stream_is_capturing;
  decltype(&::cuMemcpyHtoDAsync_v2) memcpy_htod_async;
  decltype(&::cuMemsetD8Async) memset_d8_async;
  decltype(&::cuMemcpyDtoHAsync_v2) memcpy_dtoh_async;
  decltype(&::cuMemcpy2DAsync_v2) memcpy_2d_async;
  decltype(&::cuThreadExchangeStreamCaptureMode) exchange_capture_mode;
  decltype(&::cuGraphAddKernelNode_v2) graph_add_kernel_node;
  decltype(&::cuLaunchKernelEx) launch_kernel_ex;
  decltype(&::cuDevicePrimaryCtxRetain) primary_retain;
  decltype(&::cuCtxCreate_v4) ctx_create;
  decltype(&::cuCtxPopCurrent_v2) ctx_pop_current;
  decltype(&::cuMemGetAllocationGranularity) mem_get_granularity;
  decltype(&::cuMemCreate) mem_create;
  decltype(&::cuMemAddressReserve) mem_address_reserve;
  decltype(&::cuMemMap) mem_map;
  decltype(&::cuMemSetAccess) mem_set_access;
  decltype(&::cuDevicePrimaryCtxRelease_v2) primary_release;
  decltype(&::cuDeviceGetPCIBusId) device_get_pci_bus_id;  // optional: null where absent
};

// Loaded once; check .loaded.
const DriverApi& driver();

// libcuda's own definition of `name` (never the agent's export of it), or null.
void* real_driver_symbol(const char* name);

// Set-up calls made while a stream of the program may be capturing a graph: the agent's
// allocations, module loads and its clock kernel are legal in relaxed capture mode only,
// and none of them is a stream operation that could join the capture.
class RelaxedCapture {
 public:
  RelaxedCapture();
  ~RelaxedCapture();
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool exchanged_ = false;
};

// "CUDA_ERROR_INVALID_VALUE" (or the number, when the driver cannot name it).
const char* error_name(CUresult r);

}  // namespace cudatrace::devhook
