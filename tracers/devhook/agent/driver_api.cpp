#include "tracers/devhook/agent/driver_api.h"

#include <dlfcn.h>

#include <string>

namespace cudatrace::devhook {

namespace {

template <class Fn>
bool find(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  return out != nullptr;
}

void* libcuda() {
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  return lib;
}

DriverApi load() {
  DriverApi d{};
  void* lib = libcuda();
  if (!lib) {
    d.error = "libcuda.so.1 could not be loaded (no NVIDIA driver)";
    return d;
  }
  // The versioned names are the ones cuda.h's macros select for these calls.
  const bool all = find(lib, "cuCtxGetCurrent", d.ctx_get_current) && find(lib, "cuCtxSetCurrent", d.ctx_set_current) &&
                   find(lib, "cuCtxGetDevice", d.ctx_get_device) && find(lib, "cuCtxSynchronize", d.ctx_synchronize) &&
                   find(lib, "cuDeviceGetAttribute", d.device_get_attribute) &&
                   find(lib, "cuModuleLoadDataEx", d.module_load_data_ex) &&
                   find(lib, "cuModuleGetFunction", d.module_get_function) &&
                   find(lib, "cuLaunchKernel", d.launch_kernel) && find(lib, "cuMemAlloc_v2", d.mem_alloc) &&
                   find(lib, "cuMemcpyDtoH_v2", d.memcpy_dtoh) &&
                   find(lib, "cuMemHostAlloc", d.mem_host_alloc) &&
                   find(lib, "cuMemHostRegister_v2", d.mem_host_register) &&
                   find(lib, "cuMemHostGetDevicePointer_v2", d.mem_host_get_device_pointer) &&
                   find(lib, "cuStreamCreate", d.stream_create) &&

                   find(lib, "cuStreamSynchronize", d.stream_synchronize) &&
                   find(lib, "cuGetErrorName", d.get_error_name) &&
                   find(lib, "cuStreamIsCapturing", d.stream_is_capturing) &&
                   find(lib, "cuMemcpyHtoDAsync_v2", d.memcpy_htod_async) &&
                   find(lib, "cuMemsetD8Async", d.memset_d8_async) &&
                   find(lib, "cuMemcpyDtoHAsync_v2", d.memcpy_dtoh_async) &&
                   find(lib, "cuMemcpy2DAsync_v2", d.memcpy_2d_async) &&
                   find(lib, "cuThreadExchangeStreamCaptureMode", d.exchange_capture_mode) &&
                   find(lib, "cuGraphAddKernelNode_v2", d.graph_add_kernel_node) &&
                   find(lib, "cuLaunchKernelEx", d.launch_kernel_ex) &&
                   find(lib, "cuDevicePrimaryCtxRetain", d.primary_retain) &&
                   find(lib, "cuCtxCreate_v4", d.ctx_create) && find(lib, "cuCtxPopCurrent_v2", d.ctx_pop_current) &&
                   find(lib, "cuMemGetAllocationGranularity", d.mem_get_granularity) &&
                   find(lib, "cuMemCreate", d.mem_create) && find(lib, "cuMemAddressReserve", d.mem_address_reserve) &&
                   find(lib, "cuMemMap", d.mem_map) && find(lib, "cuMemSetAccess", d.mem_set_access) &&
                   find(lib, "cuDevicePrimaryCtxRelease_v2", d.primary_release);
  find(lib, "cuDeviceGetPCIBusId", d.device_get_pci_bus_id);
  if (!all) {
    d.error = "libcuda.so.1 lacks a driver function the agent needs (driver older than CUDA 12?)";
    return d;
  }
  d.loaded = true;
  return d;
}

}  // namespace

const DriverApi& driver() {
  static const DriverApi d = load();
  return d;
}

void* real_driver_symbol(const char* name) {
  // A handle's lookup searches libcuda and what it depends on, never the preloaded agent.
  void* lib = libcuda();
  return lib ? dlsym(lib, name) : nullptr;
}

RelaxedCapture::RelaxedCapture() {
  if (driver().loaded) exchanged_ = driver().exchange_capture_mode(&mode_) == CUDA_SUCCESS;
}

RelaxedCapture::~RelaxedCapture() {
  if (exchanged_) driver().exchange_capture_mode(&mode_);
}

const char* error_name(CUresult r) {
  const char* name = nullptr;
  if (driver().loaded && driver().get_error_name(r, &name) == CUDA_SUCCESS && name) return name;
  static thread_local std::string number;
  number = "CUresult " + std::to_string(int(r));
  return number.c_str();
}

}  // namespace cudatrace::devhook
